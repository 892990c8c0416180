/* Event channels (rdma_create_event_channel(3), rdma_get_cm_event(3)): a
 * queue of events counted by an eventfd in semaphore mode, so the channel's
 * fd polls and honours O_NONBLOCK like the kernel's, and a reader blocked
 * in another thread is not woken with an error when it is destroyed. */
#include <fcntl.h>
#include <sys/eventfd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm.h"

URO_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct uro_cm_channel *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (c->ch.fd < 0) {
		free(c);
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	return &c->ch;
}

URO_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct uro_cm_channel *c = (struct uro_cm_channel *)channel;

	/* Under the lock: a program may still have a thread in
	 * rdma_get_cm_event (rping's CM thread is never joined), which must
	 * then find the queue empty, not half freed. */
	pthread_mutex_lock(&c->lock);
	while (c->head) {
		struct uro_cm_event *e = c->head;

		c->head = e->next;
		free(e);
	}
	c->tail = NULL;
	pthread_mutex_unlock(&c->lock);
	close(c->ch.fd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

struct uro_cm_event *uro_cm_event_new(struct uro_cm_id *id, enum rdma_cm_event_type type,
				      int status, const void *pdata, uint8_t pdata_len)
{
	struct uro_cm_event *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->ev.id = &id->id;
	e->ev.event = type;
	e->ev.status = status;
	if (pdata_len) {
		memcpy(e->pdata, pdata, pdata_len);
		/* conn and ud both begin with private_data and its length. */
		e->ev.param.conn.private_data = e->pdata;
		e->ev.param.conn.private_data_len = pdata_len;
	}
	return e;
}

void uro_cm_queue(struct uro_cm_channel *c, struct uro_cm_event *e)
{
	uint64_t one = 1;

	pthread_mutex_lock(&c->lock);
	if (c->tail)
		c->tail->next = e;
	else
		c->head = e;
	c->tail = e;
	pthread_mutex_unlock(&c->lock);
	if (write(c->ch.fd, &one, sizeof(one)) != sizeof(one))
		abort(); /* an eventfd counter does not fill before 2^64 - 1 */
}

void uro_cm_post(struct uro_cm_id *id, enum rdma_cm_event_type type, int status, const void *pdata,
		 uint8_t pdata_len, struct rdma_cm_id *listen_id)
{
	struct uro_cm_event *e = uro_cm_event_new(id, type, status, pdata, pdata_len);

	if (!e)
		return;
	e->ev.listen_id = listen_id;
	uro_cm_queue(id->chan, e);
}

void uro_cm_forget(struct uro_cm_id *id)
{
	struct uro_cm_channel *c = id->chan;

	pthread_mutex_lock(&c->lock);
	for (struct uro_cm_event *e = c->head; e; e = e->next)
		if (e->ev.id == &id->id)
			e->dead = 1;
	pthread_mutex_unlock(&c->lock);
}

/* Retrieving an event makes it count against its id until acknowledged;
 * events of ids destroyed meanwhile are skipped. */
URO_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct uro_cm_channel *c = (struct uro_cm_channel *)channel;
	struct uro_cm_event *e;
	uint64_t one;

	if (!event)
		return uro_cm_err(EINVAL);
	for (;;) {
		if (read(c->ch.fd, &one, sizeof(one)) != sizeof(one))
			return -1; /* errno from read: EAGAIN on a non-blocking fd */
		pthread_mutex_lock(&c->lock);
		e = c->head;
		if (!e) { /* the channel is being destroyed under us */
			pthread_mutex_unlock(&c->lock);
			return uro_cm_err(ENODEV);
		}
		c->head = e->next;
		if (!c->head)
			c->tail = NULL;
		pthread_mutex_unlock(&c->lock);
		if (!e->dead)
			break;
		free(e);
	}
	pthread_mutex_lock(&to_cm(e->ev.id)->lock);
	to_cm(e->ev.id)->pending_events++;
	pthread_mutex_unlock(&to_cm(e->ev.id)->lock);
	*event = &e->ev;
	return 0;
}

URO_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	struct uro_cm_event *e = (struct uro_cm_event *)event;
	struct uro_cm_id *id = to_cm(event->id);

	if (!event)
		return uro_cm_err(EINVAL);
	pthread_mutex_lock(&id->lock);
	id->pending_events--;
	pthread_cond_broadcast(&id->cond);
	pthread_mutex_unlock(&id->lock);
	free(e);
	return 0;
}

/* A synchronous id (created without a channel) makes its verbs wait for
 * the event they lead to, and fail with the event's status otherwise
 * (rdma_create_id(3)). The event stays readable through id->event until
 * the id's next one, as librdmacm keeps it. */
int uro_cm_wait_for(struct uro_cm_id *id, enum rdma_cm_event_type want, struct rdma_cm_event **out)
{
	struct rdma_cm_event *ev;
	struct rdma_cm_id *owner;

	if (!id->sync)
		return 0;
	if (rdma_get_cm_event(&id->chan->ch, &ev))
		return -1;
	owner = ev->id;
	if (owner->event)
		rdma_ack_cm_event(owner->event);
	owner->event = ev;
	if (out)
		*out = ev;
	if (ev->event == want)
		return 0;
	return uro_cm_err(ev->status < 0 ? -ev->status : ev->status ? ECONNREFUSED : EINVAL);
}

int uro_cm_wait(struct uro_cm_id *id, enum rdma_cm_event_type want)
{
	return uro_cm_wait_for(id, want, NULL);
}

URO_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const names[] = {
	    [RDMA_CM_EVENT_ADDR_RESOLVED] = "RDMA_CM_EVENT_ADDR_RESOLVED",
	    [RDMA_CM_EVENT_ADDR_ERROR] = "RDMA_CM_EVENT_ADDR_ERROR",
	    [RDMA_CM_EVENT_ROUTE_RESOLVED] = "RDMA_CM_EVENT_ROUTE_RESOLVED",
	    [RDMA_CM_EVENT_ROUTE_ERROR] = "RDMA_CM_EVENT_ROUTE_ERROR",
	    [RDMA_CM_EVENT_CONNECT_REQUEST] = "RDMA_CM_EVENT_CONNECT_REQUEST",
	    [RDMA_CM_EVENT_CONNECT_RESPONSE] = "RDMA_CM_EVENT_CONNECT_RESPONSE",
	    [RDMA_CM_EVENT_CONNECT_ERROR] = "RDMA_CM_EVENT_CONNECT_ERROR",
	    [RDMA_CM_EVENT_UNREACHABLE] = "RDMA_CM_EVENT_UNREACHABLE",
	    [RDMA_CM_EVENT_REJECTED] = "RDMA_CM_EVENT_REJECTED",
	    [RDMA_CM_EVENT_ESTABLISHED] = "RDMA_CM_EVENT_ESTABLISHED",
	    [RDMA_CM_EVENT_DISCONNECTED] = "RDMA_CM_EVENT_DISCONNECTED",
	    [RDMA_CM_EVENT_DEVICE_REMOVAL] = "RDMA_CM_EVENT_DEVICE_REMOVAL",
	    [RDMA_CM_EVENT_MULTICAST_JOIN] = "RDMA_CM_EVENT_MULTICAST_JOIN",
	    [RDMA_CM_EVENT_MULTICAST_ERROR] = "RDMA_CM_EVENT_MULTICAST_ERROR",
	    [RDMA_CM_EVENT_ADDR_CHANGE] = "RDMA_CM_EVENT_ADDR_CHANGE",
	    [RDMA_CM_EVENT_TIMEWAIT_EXIT] = "RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};

	return (unsigned)event < sizeof(names) / sizeof(names[0]) && names[event] ? names[event]
										  : "UNKNOWN EVENT";
}
