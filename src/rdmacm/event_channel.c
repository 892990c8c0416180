/* Event channels (rdma_create_event_channel(3), rdma_get_cm_event(3)): a
 * queue of events and an eventfd that is readable exactly while the queue
 * holds one, kept so under the queue's lock. The channel's fd then polls
 * and honours O_NONBLOCK like the kernel's, and an id destroyed with
 * events queued takes them away with it (rdma_destroy_id(3)): a poll that
 * said readable is never followed by a read that blocks for an event that
 * was dropped (a counting eventfd kept the dropped ones' counts, and
 * rdmacm_cm's test_cycles hung in CI waiting in such a read). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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
	c->ch.fd = eventfd(0, EFD_CLOEXEC);
	if (c->ch.fd < 0) {
		free(c);
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->refs = 1;
	return &c->ch;
}

static void put_channel(struct uro_cm_channel *c)
{
	int last;

	pthread_mutex_lock(&c->lock);
	last = --c->refs == 0;
	pthread_mutex_unlock(&c->lock);
	if (!last)
		return;
	close(c->ch.fd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* The fd's level follows the queue: set by the first event in, cleared by
 * the last one out (its counter is then nonzero, so the read returns at
 * once). Both under c->lock. */
static void signal_level(struct uro_cm_channel *c, int was_empty)
{
	uint64_t v = 1;

	if (was_empty == !c->head)
		return;
	if (c->head ? write(c->ch.fd, &v, sizeof(v)) != sizeof(v)
		    : read(c->ch.fd, &v, sizeof(v)) != sizeof(v))
		abort(); /* an eventfd neither fills at 1 nor is empty while set */
}

/* A program may destroy the channel while one of its threads still waits
 * in rdma_get_cm_event (Debian's rping never joins its CM thread). That
 * thread holds a reference: it goes on waiting on memory that stays its
 * own, even if an event woke it just before, as a read of the kernel's
 * channel waits while its list is empty (ucma.c, ucma_get_event), until a
 * signal ends the wait. Only a call that starts later fails. */
URO_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct uro_cm_channel *c = (struct uro_cm_channel *)channel;
	int was_empty;

	pthread_mutex_lock(&c->lock);
	c->closed = 1;
	was_empty = !c->head;
	while (c->head) {
		struct uro_cm_event *e = c->head;

		c->head = e->next;
		free(e);
	}
	c->tail = NULL;
	signal_level(c, was_empty);
	pthread_mutex_unlock(&c->lock);
	put_channel(c);
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
	int was_empty;

	pthread_mutex_lock(&c->lock);
	was_empty = !c->head;
	if (c->tail)
		c->tail->next = e;
	else
		c->head = e;
	c->tail = e;
	signal_level(c, was_empty);
	pthread_mutex_unlock(&c->lock);
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
	struct uro_cm_event **link, *e;
	int was_empty;

	pthread_mutex_lock(&c->lock);
	was_empty = !c->head;
	c->tail = NULL;
	for (link = &c->head; (e = *link);) {
		if (e->ev.id == &id->id) {
			*link = e->next;
			free(e);
			continue;
		}
		c->tail = e;
		link = &e->next;
	}
	signal_level(c, was_empty);
	pthread_mutex_unlock(&c->lock);
}

/* The head of the queue, or NULL with errno EAGAIN when it is empty. The
 * event counts against its id in the same step that takes it off the
 * queue, as the kernel counts events_reported under the list's lock: an
 * rdma_destroy_id in between either drops it or waits for its ack, never
 * frees the id under the reader. */
static struct uro_cm_event *pop(struct uro_cm_channel *c)
{
	struct uro_cm_event *e;

	pthread_mutex_lock(&c->lock);
	e = c->head;
	if (e) {
		struct uro_cm_id *id = to_cm(e->ev.id);

		c->head = e->next;
		if (!c->head)
			c->tail = NULL;
		signal_level(c, 0);
		pthread_mutex_lock(&id->lock);
		id->pending_events++;
		pthread_mutex_unlock(&id->lock);
	}
	pthread_mutex_unlock(&c->lock);
	if (!e)
		errno = EAGAIN;
	return e;
}

/* Waits, as a read of the kernel's channel does: EAGAIN at once if the
 * program made the fd non-blocking, EINTR when a signal comes. Another
 * thread may take the event first: the wait is then taken up again. */
static struct uro_cm_event *next_event(struct uro_cm_channel *c)
{
	struct pollfd p = {.fd = c->ch.fd, .events = POLLIN};
	struct uro_cm_event *e;

	while (!(e = pop(c))) {
		if (fcntl(c->ch.fd, F_GETFL) & O_NONBLOCK)
			return NULL;
		if (poll(&p, 1, -1) < 0)
			return NULL;
	}
	return e;
}

/* Retrieving an event makes it count against its id until acknowledged. */
URO_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct uro_cm_channel *c = (struct uro_cm_channel *)channel;
	struct uro_cm_event *e;
	int closed;

	if (!event)
		return uro_cm_err(EINVAL);
	pthread_mutex_lock(&c->lock);
	closed = c->closed;
	c->refs += !closed;
	pthread_mutex_unlock(&c->lock);
	if (closed)
		return uro_cm_err(ENODEV);
	e = next_event(c);
	put_channel(c);
	if (!e)
		return -1;
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
