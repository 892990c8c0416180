/* Asynchronous events (ibv_get_async_event(3)). Each event is one record
 * (struct uro_event_record) on a pipe; port events come from the netdev
 * (port_watch.c). context->async_fd is an epoll set of both, so it polls
 * ready when either has something, and honours O_NONBLOCK like the
 * kernel's. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "verbs_ops.h"
#include "segment_ops.h"

enum event_object { OBJ_NONE, OBJ_QP, OBJ_CQ, OBJ_SRQ };

/* Which object each event is affiliated with (ibv_get_async_event(3)). */
static const enum event_object affiliation[] = {
    [IBV_EVENT_CQ_ERR] = OBJ_CQ,
    [IBV_EVENT_QP_FATAL] = OBJ_QP,
    [IBV_EVENT_QP_REQ_ERR] = OBJ_QP,
    [IBV_EVENT_QP_ACCESS_ERR] = OBJ_QP,
    [IBV_EVENT_COMM_EST] = OBJ_QP,
    [IBV_EVENT_SQ_DRAINED] = OBJ_QP,
    [IBV_EVENT_PATH_MIG] = OBJ_QP,
    [IBV_EVENT_PATH_MIG_ERR] = OBJ_QP,
    [IBV_EVENT_QP_LAST_WQE_REACHED] = OBJ_QP,
    [IBV_EVENT_SRQ_ERR] = OBJ_SRQ,
    [IBV_EVENT_SRQ_LIMIT_REACHED] = OBJ_SRQ,
};

static enum event_object object_of(enum ibv_event_type t)
{
	return (size_t)t < sizeof(affiliation) / sizeof(affiliation[0]) ? affiliation[t] : OBJ_NONE;
}

/* The lock, condition and acknowledgement count rdma-core's ABI structs
 * carry for the object, and uroce's count of events reported on it. */
struct event_counts {
	pthread_mutex_t *mutex;
	pthread_cond_t *cond;
	uint32_t *acked;
	uint32_t *reported;
};

static int counts_of(const struct ibv_async_event *ev, struct event_counts *c)
{
	switch (object_of(ev->event_type)) {
	case OBJ_QP: {
		struct ibv_qp *q = ev->element.qp;

		*c = (struct event_counts){&q->mutex, &q->cond, &q->events_completed,
					   &to_uqp(q)->events};
		return 1;
	}
	case OBJ_CQ: {
		struct ibv_cq *q = ev->element.cq;

		*c = (struct event_counts){&q->mutex, &q->cond, &q->async_events_completed,
					   &to_ucq(q)->async_events};
		return 1;
	}
	case OBJ_SRQ: {
		struct ibv_srq *s = ev->element.srq;

		*c = (struct event_counts){&s->mutex, &s->cond, &s->events_completed,
					   &to_usrq(s)->events};
		return 1;
	}
	default:
		return 0;
	}
}

/* The serial now in the table entry the record names; 0 when the entry
 * is free, or the index is not a table's. */
static uint32_t serial_now(struct uro_context *ctx, enum event_object kind, uint32_t index)
{
	const uint32_t *serial = NULL;

	if (kind == OBJ_QP && index < URO_MAX_QP)
		serial = &ctx->self.qp[index].serial;
	else if (kind == OBJ_CQ && index < URO_MAX_CQ)
		serial = &ctx->self.cq[index].serial;
	else if (kind == OBJ_SRQ && index < URO_MAX_SRQ)
		serial = &ctx->self.srq[index].serial;
	return serial ? __atomic_load_n(serial, __ATOMIC_ACQUIRE) : 0;
}

/* Counts the event as reported, if its object still exists: under the
 * context lock, so that a destroy (uro_forget_events) either comes first
 * and the event is dropped, or comes after and waits for its ack. */
static int report(struct uro_context *ctx, const struct uro_event_record *r,
		  struct ibv_async_event *event)
{
	enum event_object kind = object_of((enum ibv_event_type)r->type);
	struct event_counts c;
	int live;

	memset(event, 0, sizeof(*event));
	event->event_type = (enum ibv_event_type)r->type;
	event->element.qp = (struct ibv_qp *)(uintptr_t)r->token; /* our own pointer */
	if (event->event_type == IBV_EVENT_DEVICE_FATAL)
		return uro_port_gone(ctx);
	if (kind == OBJ_NONE)
		return 1;
	uro_lock(ctx);
	live = r->serial && serial_now(ctx, kind, r->index) == r->serial;
	if (live && counts_of(event, &c)) {
		pthread_mutex_lock(c.mutex);
		(*c.reported)++;
		pthread_mutex_unlock(c.mutex);
	}
	uro_unlock(ctx);
	return live;
}

/* Events are written by whichever process raised them (this one, or a peer
 * acting as the NIC), so an event counts as reported when it is read. */
URO_EXPORT int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	struct uro_context *ctx = to_uctx(context);
	struct uro_event_record r;
	struct epoll_event ready;

	for (;;) {
		ssize_t n = read(ctx->async_rfd, &r, sizeof(r));

		if (n == (ssize_t)sizeof(r)) {
			if (report(ctx, &r, event))
				return 0;
			continue;
		}
		if (n < 0 && errno != EAGAIN)
			return -1;
		if (uro_port_watch_event(ctx, event))
			return 0;
		if (fcntl(context->async_fd, F_GETFL) & O_NONBLOCK) {
			errno = EAGAIN;
			return -1;
		}
		if (epoll_wait(context->async_fd, &ready, 1, -1) < 0 && errno != EINTR)
			return -1;
	}
}

URO_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	struct event_counts c;

	if (!counts_of(event, &c))
		return;
	pthread_mutex_lock(c.mutex);
	(*c.acked)++;
	pthread_cond_broadcast(c.cond);
	pthread_mutex_unlock(c.mutex);
}

/* Default versions beside the IBVERBS_1.0 compat ones (compat_1_0.c). */
URO_DEFAULT_VERSION(ibv_ack_async_event);
URO_DEFAULT_VERSION(ibv_get_async_event);
