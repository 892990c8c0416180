/* Completion channels (ibv_create_comp_channel(3), ibv_get_cq_event(3)):
 * a real pipe, so its fd works with poll, epoll and O_NONBLOCK. Each event
 * is the address of the CQ that fired. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include "verbs_ops.h"
#include "wire.h"

URO_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct uro_channel *c = calloc(1, sizeof(*c));
	int fds[2];

	if (!c)
		return uro_fail_null(ENOMEM);
	if (pipe2(fds, O_CLOEXEC)) {
		int err = errno;

		free(c);
		return uro_fail_null(err);
	}
	(void)fcntl(fds[1], F_SETFL, O_NONBLOCK);
	c->ch.context = context;
	c->ch.fd = fds[0];
	c->ch.refcnt = 0;
	c->wfd = fds[1];
	return &c->ch;
}

URO_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct uro_channel *c = to_uchannel(channel);

	if (c->users)
		return EBUSY;
	close(c->ch.fd);
	close(c->wfd);
	free(c);
	return 0;
}

/* While requests wait behind RNR NAKs, a blocked waiter keeps them going
 * itself: it wakes for their retry timers, as the progress thread would,
 * without a wake-up of that thread's. */
static int wait_readable(struct ibv_comp_channel *channel)
{
	struct uro_context *ctx = to_uctx(channel->context);
	struct pollfd pfd = {.fd = channel->fd, .events = POLLIN};
	uint64_t next;

	while ((next = uro_progress(ctx)) != 0) {
		int ms = (int)((next + 999999) / 1000000);
		int n = poll(&pfd, 1, ms > 0 ? ms : 1);

		if (n != 0)
			return n < 0 ? -1 : 0;
	}
	/* The program stops polling: its packets are the thread's now. */
	uro_wire_idle(ctx);
	return 0;
}

URO_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
				void **cq_context)
{
	struct uro_cq *ucq;

	if (wait_readable(channel) || read(channel->fd, &ucq, sizeof(ucq)) != (ssize_t)sizeof(ucq))
		return -1;
	*cq = uro_cq_base(ucq);
	*cq_context = ucq->cqx.cq_context;
	pthread_mutex_lock(&ucq->cqx.mutex);
	ucq->comp_events++;
	pthread_mutex_unlock(&ucq->cqx.mutex);
	return 0;
}

URO_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_broadcast(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

/* Default versions beside the IBVERBS_1.0 compat ones (compat_1_0.c). */
URO_DEFAULT_VERSION(ibv_ack_cq_events);
URO_DEFAULT_VERSION(ibv_get_cq_event);
