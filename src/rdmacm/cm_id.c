/* Connection identifiers: rdma_create_id(3), rdma_destroy_id(3),
 * rdma_migrate_id(3), rdma_set_option(3) and the address getters. */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "cm_mad.h"
#include "cq_ring.h"

/* A connection's first PSN, random as the kernel's rdma_cm draws it
 * (cma.c, __rdma_create_id: get_random_u32() & 0x00ffffff), from
 * getrandom(2) and never from random(3): that one draws from the
 * program's own sequence, which srandom(3) lets a program repeat, under a
 * process-wide lock that a child forked while another thread held it
 * waited on for ever (test_rsocket's fork while the CM is busy, over
 * RoCEv2: 1 run in 960 under load, the child in __random). */
static uint32_t random_psn(void)
{
	uint32_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v))
		v = (uint32_t)uro_now_ns() ^ (uint32_t)getpid() << 8;
	return v & 0xffffff;
}

struct uro_cm_id *uro_cm_id_new(struct rdma_event_channel *ch, void *context,
				enum rdma_port_space ps, enum ibv_qp_type qpt)
{
	struct uro_cm_id *id = calloc(1, sizeof(*id));

	if (!id)
		return NULL;
	/* Without a channel the id is synchronous: it has one of its own. */
	if (!ch) {
		ch = rdma_create_event_channel();
		if (!ch) {
			free(id);
			return NULL;
		}
		id->sync = 1;
	}
	id->chan = (struct uro_cm_channel *)ch;
	id->id.channel = ch;
	id->id.context = context;
	id->id.ps = ps;
	id->id.qp_type = qpt;
	id->sock = id->svc_fd[0] = id->svc_fd[1] = -1;
	id->afonly = id->ack_timeout = -1;
	id->psn = random_psn();
	pthread_mutex_init(&id->lock, NULL);
	pthread_cond_init(&id->cond, NULL);
	return id;
}

void uro_cm_id_free(struct uro_cm_id *id)
{
	if (id->sync)
		rdma_destroy_event_channel(&id->chan->ch);
	pthread_mutex_destroy(&id->lock);
	pthread_cond_destroy(&id->cond);
	free(id);
}

static int qp_type_of(enum rdma_port_space ps, enum ibv_qp_type *qpt)
{
	switch (ps) {
	case RDMA_PS_TCP:
	case RDMA_PS_IB:
		*qpt = IBV_QPT_RC;
		return 0;
	case RDMA_PS_UDP:
	case RDMA_PS_IPOIB:
		*qpt = IBV_QPT_UD;
		return 0;
	default:
		return -1;
	}
}

URO_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
			      void *context, enum rdma_port_space ps)
{
	enum ibv_qp_type qpt;
	struct uro_cm_id *cm;

	if (!id || qp_type_of(ps, &qpt))
		return uro_cm_err(EINVAL);
	cm = uro_cm_id_new(channel, context, ps, qpt);
	if (!cm)
		return uro_cm_err(ENOMEM);
	*id = &cm->id;
	return 0;
}

URO_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct uro_cm_id *cm = to_cm(id);

	uro_cm_lock();
	uro_cm_unwatch(cm);
	uro_cm_mad_unlisten(cm);
	uro_cm_mad_goodbye(cm);
	uro_cm_mad_forget(cm);
	if (cm->sock >= 0)
		close(cm->sock);
	cm->sock = -1;
	cm->state = CM_DISCONNECTED;
	uro_cm_unlock();
	uro_cm_leave_all(cm);
	if (id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	/* Events retrieved must be acknowledged first (rdma_destroy_id(3)
	 * waits for them); those not retrieved yet are dropped. */
	uro_cm_forget(cm);
	pthread_mutex_lock(&cm->lock);
	while (cm->pending_events && !cm->sync)
		pthread_cond_wait(&cm->cond, &cm->lock);
	pthread_mutex_unlock(&cm->lock);
	uro_cm_id_free(cm);
	return 0;
}

URO_EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	struct uro_cm_id *cm = to_cm(id);
	struct uro_cm_channel *old = cm->chan;
	int was_sync = cm->sync;

	if (!channel) {
		channel = rdma_create_event_channel();
		if (!channel)
			return -1;
		cm->sync = 1;
	} else {
		cm->sync = 0;
	}
	uro_cm_lock();
	cm->chan = (struct uro_cm_channel *)channel;
	id->channel = channel;
	uro_cm_unlock();
	if (was_sync)
		rdma_destroy_event_channel(&old->ch);
	return 0;
}

/* RDMA_OPTION_ID_AFONLY: an IPv6 id that takes IPv6 only (or IPv4 too),
 * so that 0.0.0.0 and :: can be bound on one port; like the kernel CM,
 * only before the id is bound. */
static int set_afonly(struct uro_cm_id *cm, const void *optval, size_t optlen)
{
	if (optlen != sizeof(int) || cm->state != CM_IDLE || cm->sock >= 0)
		return uro_cm_err(EINVAL);
	cm->afonly = *(const int *)optval != 0;
	return 0;
}

/* RDMA_OPTION_ID_ACK_TIMEOUT: the QP's local ACK timeout, 4.096 us *
 * 2^value, set when the CM moves it to RTS (IBTA 9.7.6.1.3). */
static int set_ack_timeout(struct uro_cm_id *cm, const void *optval, size_t optlen)
{
	uint8_t t;

	if (optlen != sizeof(uint8_t))
		return uro_cm_err(EINVAL);
	t = *(const uint8_t *)optval;
	if (t > 31)
		return uro_cm_err(EINVAL);
	cm->ack_timeout = t;
	return 0;
}

/* rdma_set_option(3): the id options a uroce port honours or has no use
 * for (TOS: no wire; REUSEADDR: always on); anything else is unknown. */
URO_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval,
			       size_t optlen)
{
	if (!optval || !optlen)
		return uro_cm_err(EINVAL);
	if (level == RDMA_OPTION_ID && optname == RDMA_OPTION_ID_AFONLY)
		return set_afonly(to_cm(id), optval, optlen);
	if (level == RDMA_OPTION_ID && optname == RDMA_OPTION_ID_ACK_TIMEOUT)
		return set_ack_timeout(to_cm(id), optval, optlen);
	if (level == RDMA_OPTION_ID &&
	    (optname == RDMA_OPTION_ID_TOS || optname == RDMA_OPTION_ID_REUSEADDR))
		return 0;
	if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH)
		return 0;
	return uro_cm_err(ENOSYS);
}

URO_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return uro_cm_port_of(&id->route.addr.src_addr);
}

URO_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return uro_cm_port_of(&id->route.addr.dst_addr);
}
