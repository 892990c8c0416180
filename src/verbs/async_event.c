/* Asynchronous events (ibv_get_async_event(3)). Each event is one record on
 * a pipe whose read end is context->async_fd, so the fd polls, and honours
 * O_NONBLOCK, like the kernel's. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "objects.h"

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

/* Events are written by whichever process raised them (this one, or a peer
 * acting as the NIC), so an event counts as reported when it is read. */
URO_EXPORT int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	struct event_counts c;

	if (read(context->async_fd, event, sizeof(*event)) != (ssize_t)sizeof(*event))
		return -1;
	if (counts_of(event, &c)) {
		pthread_mutex_lock(c.mutex);
		(*c.reported)++;
		pthread_mutex_unlock(c.mutex);
	}
	return 0;
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
