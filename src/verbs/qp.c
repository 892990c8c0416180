/* Queue pairs: ibv_create_qp(3), ibv_create_qp_ex(3), ibv_modify_qp(3),
 * ibv_query_qp(3), ibv_destroy_qp(3). Transitions follow the table in
 * src/core/qp_state.c; attribute values follow IBTA 11.2.5.2. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "log.h"
#include "verbs_ops.h"
#include "qp_state.h"
#include "recv_queue.h"
#include "segment_ops.h"
#include "wire.h"

#define PSN_MASK 0xffffffu /* PSNs and QPNs are 24 bits (IBTA 9.2) */

static int caps_check(const struct ibv_qp_cap *cap, int has_srq)
{
	if (cap->max_send_wr > URO_MAX_QP_WR || cap->max_send_sge > URO_MAX_SGE ||
	    cap->max_inline_data > URO_MAX_INLINE)
		return EINVAL;
	if (!has_srq && (cap->max_recv_wr > URO_MAX_QP_WR || cap->max_recv_sge > URO_MAX_SGE))
		return EINVAL;
	return 0;
}

static int type_check(enum ibv_qp_type type)
{
	switch (type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_UD:
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		return 0;
	case IBV_QPT_RAW_PACKET:
	case IBV_QPT_DRIVER:
		return EOPNOTSUPP;
	default:
		return EINVAL;
	}
}

/* An XRC target has only its domain: no PD, no CQs, no queues of its own.
 * An XRC initiator has a send queue only (IBTA A14). */
static int init_check(struct ibv_context *c, struct ibv_pd *pd, const struct ibv_qp_init_attr *a,
		      const struct uro_xrcd *xrcd)
{
	int err = type_check(a->qp_type);

	if (err)
		return err;
	if (a->qp_type == IBV_QPT_XRC_RECV)
		return xrcd && xrcd->ibx.context == c ? 0 : EINVAL;
	if (!pd || pd->context != c || !a->send_cq || a->send_cq->context != c)
		return EINVAL;
	if (a->qp_type == IBV_QPT_XRC_SEND)
		return caps_check(&a->cap, 1);
	if (!a->recv_cq || a->recv_cq->context != c || (a->srq && a->srq->context != c))
		return EINVAL;
	return caps_check(&a->cap, a->srq != NULL);
}

static void publish_init(struct uro_context *ctx, struct uro_qp *qp)
{
	struct uro_seg_qp *p = qp->pub;

	memset(p, 0, sizeof(*p));
	p->qpn = qp->qpx.qp_base.qp_num;
	p->type = qp->qpx.qp_base.qp_type;
	p->state = IBV_QPS_RESET;
	/* What a QP lacks is named by an index no table has. */
	p->pd = qp->pd ? qp->pd->ibpd.handle : 0;
	p->srq = qp->srq ? qp->srq->index + 1 : 0;
	p->send_cq = qp->send_cq ? qp->send_cq->index : URO_MAX_CQ;
	p->recv_cq = qp->recv_cq ? qp->recv_cq->index : URO_MAX_CQ;
	if (qp->xrcd)
		p->xrcd = qp->xrcd->id;
	p->token = (uintptr_t)&qp->qpx.qp_base;
	p->serial = uro_next_serial(ctx);
}

static size_t rq_bytes(const struct uro_seg_rq *rq)
{
	return (size_t)rq->size * rq->stride;
}

/* The QP's own receive queue lives in the segment, where senders take from
 * it; a QP on an SRQ has none. */
static int alloc_rq(struct uro_context *ctx, struct uro_qp *qp)
{
	struct uro_seg_rq *rq = &qp->pub->rq;

	if (qp->srq || !qp->cap.max_recv_wr)
		return 0;
	rq->size = qp->cap.max_recv_wr;
	rq->max_sge = qp->cap.max_recv_sge;
	rq->stride = uro_rq_stride(rq->max_sge);
	rq->ring = uro_arena_alloc(&ctx->seg, rq_bytes(rq));
	return rq->ring ? 0 : ENOMEM;
}

static void hold(struct uro_qp *qp, int delta)
{
	if (qp->pd)
		qp->pd->users += (unsigned)delta;
	if (qp->send_cq)
		qp->send_cq->users += (unsigned)delta;
	if (qp->recv_cq)
		qp->recv_cq->users += (unsigned)delta;
	if (qp->srq)
		qp->srq->users += (unsigned)delta;
	if (qp->xrcd)
		qp->xrcd->users += (unsigned)delta;
}

/* send_ops: the ibv_wr_* operations wanted (create_qp_ex), or 0. */
static void *free_early(struct uro_qp *qp, int err)
{
	free(qp->batch);
	free(qp);
	return uro_fail_null(err);
}

/* xrcd: an XRC target's domain, else NULL. */
static struct ibv_qp *qp_create(struct ibv_context *c, struct ibv_pd *pd,
				struct ibv_qp_init_attr *in, uint64_t send_ops,
				struct uro_xrcd *xrcd)
{
	struct uro_context *ctx = to_uctx(c);
	struct ibv_qp_init_attr copy = *in, *a = &copy;
	struct uro_qp *qp;
	struct ibv_qp *q;
	int64_t index;
	int err = init_check(c, pd, a, xrcd);

	if (err)
		return uro_fail_null(err);
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return uro_fail_null(ENOMEM);
	qp->cap = a->cap;
	/* Like hardware drivers, round the inline capacity up and report what
	 * the QP really has (ibv_create_qp(3)): programs send small inline
	 * messages on QPs that asked for none. */
	if (qp->cap.max_inline_data < URO_MIN_INLINE)
		qp->cap.max_inline_data = URO_MIN_INLINE;
	err = send_ops ? uro_qp_ex_init(qp, send_ops) : 0;
	if (err)
		return free_early(qp, err);
	uro_lock(ctx);
	index = uro_index_take(&ctx->seg.qp_ids);
	if (index < 0) {
		uro_unlock(ctx);
		return free_early(qp, ENOMEM);
	}
	q = &qp->qpx.qp_base;
	qp->index = (uint32_t)index;
	qp->pub = &ctx->self.qp[index];
	if (a->qp_type == IBV_QPT_XRC_SEND || a->qp_type == IBV_QPT_XRC_RECV) {
		a->recv_cq = NULL;
		a->srq = NULL;
		qp->cap.max_recv_wr = qp->cap.max_recv_sge = 0;
	}
	if (a->qp_type == IBV_QPT_XRC_RECV) {
		pd = NULL;
		a->send_cq = NULL;
		memset(&qp->cap, 0, sizeof(qp->cap));
		qp->xrcd = xrcd;
	}
	qp->pd = pd ? to_upd(pd) : NULL;
	qp->send_cq = a->send_cq ? to_ucq(a->send_cq) : NULL;
	qp->recv_cq = a->recv_cq ? to_ucq(a->recv_cq) : NULL;
	qp->srq = a->srq ? to_usrq(a->srq) : NULL;
	qp->sq_sig_all = a->sq_sig_all;
	if (qp->srq)
		qp->cap.max_recv_wr = qp->cap.max_recv_sge = 0;
	q->context = c;
	q->qp_context = a->qp_context;
	q->pd = pd;
	q->send_cq = a->send_cq;
	q->recv_cq = a->recv_cq;
	q->srq = a->srq;
	q->handle = qp->index;
	q->qp_num = (ctx->slot.slot << URO_QPN_INDEX_BITS) | qp->index;
	q->state = IBV_QPS_RESET;
	q->qp_type = a->qp_type;
	pthread_mutex_init(&q->mutex, NULL);
	pthread_cond_init(&q->cond, NULL);
	qp->attr.qp_state = qp->attr.cur_qp_state = IBV_QPS_RESET;
	qp->attr.cap = qp->cap;
	publish_init(ctx, qp);
	if (alloc_rq(ctx, qp)) {
		uro_index_give(&ctx->seg.qp_ids, qp->index);
		uro_unlock(ctx);
		return free_early(qp, ENOMEM);
	}
	pthread_spin_init(&qp->sq_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq_lock, PTHREAD_PROCESS_PRIVATE);
	__atomic_store_n(&qp->pub->in_use, 1, __ATOMIC_RELEASE);
	ctx->qps[qp->index] = qp;
	hold(qp, 1);
	uro_unlock(ctx);
	in->cap = qp->cap;
	return q;
}

URO_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	if (!pd)
		return uro_fail_null(EINVAL);
	return qp_create(pd->context, pd, attr, 0, NULL);
}

struct ibv_qp *uro_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *ax)
{
	struct ibv_qp_init_attr a;
	struct ibv_qp *qp;

	const uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |
			       IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	int xrc_target = ax->qp_type == IBV_QPT_XRC_RECV;

	/* An XRC target names its domain instead of a PD. */
	if (!(ax->comp_mask & (xrc_target ? IBV_QP_INIT_ATTR_XRCD : IBV_QP_INIT_ATTR_PD)))
		return uro_fail_null(EINVAL);
	if (ax->comp_mask & ~known)
		return uro_fail_null(EOPNOTSUPP); /* RSS, TSO */
	if ((ax->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && ax->create_flags)
		return uro_fail_null(EOPNOTSUPP);
	memset(&a, 0, sizeof(a));
	a.qp_context = ax->qp_context;
	a.send_cq = ax->send_cq;
	a.recv_cq = ax->recv_cq;
	a.srq = ax->srq;
	a.cap = ax->cap;
	a.qp_type = ax->qp_type;
	a.sq_sig_all = ax->sq_sig_all;
	qp = qp_create(c, xrc_target ? NULL : ax->pd, &a,
		       (ax->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ? ax->send_ops_flags : 0,
		       xrc_target && ax->xrcd ? to_uxrcd(ax->xrcd) : NULL);
	if (qp)
		ax->cap = a.cap;
	return qp;
}

/* ibv_qp_to_qp_ex(3): only a QP created with send_ops_flags has one. */
URO_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct uro_qp *u = to_uqp(qp);

	return u->extended ? &u->qpx : NULL;
}

static int reject(struct ibv_qp *qp, const char *why)
{
	uro_debug("modify QP 0x%06x: %s", qp->qp_num, why);
	return EINVAL;
}

/* Attribute values, checked only for the bits the mask sets. */
static int values_check(struct ibv_qp *qp, const struct ibv_qp_attr *a, int mask)
{
	struct uro_context *ctx = to_uctx(qp->context);

	if ((mask & IBV_QP_PORT) && a->port_num != 1)
		return reject(qp, "port_num must be 1");
	if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index >= URO_PKEY_TBL_LEN)
		return reject(qp, "pkey_index outside the P_Key table");
	if ((mask & IBV_QP_ACCESS_FLAGS) && uro_qp_access_check(a->qp_access_flags))
		return reject(qp, "unknown qp_access_flags");
	if ((mask & IBV_QP_PATH_MTU) &&
	    (a->path_mtu < IBV_MTU_256 || a->path_mtu > ctx->model.port.active_mtu))
		return reject(qp, "path_mtu above the port's active_mtu");
	if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
		return reject(qp, "timeout is 5 bits");
	if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
		return reject(qp, "retry_cnt is 3 bits");
	if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)
		return reject(qp, "rnr_retry is 3 bits");
	if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
		return reject(qp, "min_rnr_timer is 5 bits");
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > URO_MAX_RD_ATOMIC)
		return reject(qp, "max_rd_atomic above max_qp_init_rd_atom");
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > URO_MAX_RD_ATOMIC)
		return reject(qp, "max_dest_rd_atomic above max_qp_rd_atom");
	if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > PSN_MASK)
		return reject(qp, "dest_qp_num is 24 bits");
	if ((mask & IBV_QP_CAP))
		return reject(qp, "resizing a QP is not supported (no IBV_DEVICE_RESIZE_MAX_WR)");
	if ((mask & IBV_QP_AV) && uro_ah_attr_check(ctx, &a->ah_attr))
		return EINVAL;
	return 0;
}

static void apply(struct uro_qp *qp, const struct ibv_qp_attr *a, int mask)
{
	struct ibv_qp_attr *s = &qp->attr;

#define TAKE(bit, field)                                                                           \
	do {                                                                                       \
		if (mask & (bit))                                                                  \
			s->field = a->field;                                                       \
	} while (0)
	TAKE(IBV_QP_EN_SQD_ASYNC_NOTIFY, en_sqd_async_notify);
	TAKE(IBV_QP_ACCESS_FLAGS, qp_access_flags);
	TAKE(IBV_QP_PKEY_INDEX, pkey_index);
	TAKE(IBV_QP_PORT, port_num);
	TAKE(IBV_QP_QKEY, qkey);
	TAKE(IBV_QP_AV, ah_attr);
	TAKE(IBV_QP_PATH_MTU, path_mtu);
	TAKE(IBV_QP_TIMEOUT, timeout);
	TAKE(IBV_QP_RETRY_CNT, retry_cnt);
	TAKE(IBV_QP_RNR_RETRY, rnr_retry);
	TAKE(IBV_QP_MAX_QP_RD_ATOMIC, max_rd_atomic);
	TAKE(IBV_QP_MIN_RNR_TIMER, min_rnr_timer);
	TAKE(IBV_QP_MAX_DEST_RD_ATOMIC, max_dest_rd_atomic);
	TAKE(IBV_QP_DEST_QPN, dest_qp_num);
#undef TAKE
	if (mask & IBV_QP_RQ_PSN)
		s->rq_psn = a->rq_psn & PSN_MASK;
	if (mask & IBV_QP_SQ_PSN)
		s->sq_psn = a->sq_psn & PSN_MASK;
}

static void publish_attr(struct uro_qp *qp)
{
	struct uro_seg_qp *p = qp->pub;
	const struct ibv_qp_attr *s = &qp->attr;

	p->access = s->qp_access_flags;
	p->qkey = s->qkey;
	p->dest_qpn = s->dest_qp_num;
	p->sq_psn = s->sq_psn;
	p->rq_psn = s->rq_psn;
	p->pkey_index = s->pkey_index;
	p->dlid = s->ah_attr.dlid;
	p->dgid = s->ah_attr.grh.dgid;
	p->path_mtu = (uint8_t)s->path_mtu;
	p->timeout = s->timeout;
	p->retry_cnt = s->retry_cnt;
	p->rnr_retry = s->rnr_retry;
	p->min_rnr_timer = s->min_rnr_timer;
	p->max_rd_atomic = s->max_rd_atomic;
	p->max_dest_rd_atomic = s->max_dest_rd_atomic;
	p->port = s->port_num;
}

/* Entering SQD with nothing in flight drains the send queue at once: the
 * Send Queue Drained event follows (IBTA 11.6.3.1). */
static void sqd_event(struct uro_context *ctx, struct uro_qp *qp, enum ibv_qp_state from,
		      enum ibv_qp_state to)
{
	if (to == IBV_QPS_SQD && from == IBV_QPS_RTS && qp->attr.en_sqd_async_notify)
		uro_raise_event(&ctx->self, IBV_EVENT_SQ_DRAINED, qp->index, qp->pub->token,
				qp->pub->serial);
}

/* RESET empties both queues (IBTA 10.3.1). */
/* A QP moved to RESET starts empty, and its completions leave its CQs, as
 * a provider purges them (rdma-core's providers clean both CQs). */
static void reset_queues(struct uro_qp *qp)
{
	uint32_t qpn = qp->qpx.qp_base.qp_num;

	if (qp->send_cq)
		uro_cq_discard_qp(qp->send_cq, qpn);
	if (qp->recv_cq && qp->recv_cq != qp->send_cq)
		uro_cq_discard_qp(qp->recv_cq, qpn);
	uro_qp_drop_pending(qp);
	qp->pub->rq.head = qp->pub->rq.tail = 0;
	qp->sq_posted = qp->sq_retired = 0;
}

/* A connected QP's peer on shared memory must be one cross-memory attach
 * can reach: another user's process is refused now, not at the first send
 * (docs/design.md, Intra-host: the initiator is the NIC). Reached only
 * where the wire is no other path (a type ib link): on a RoCE link such a
 * peer is met on the wire (wire_qp.c uro_wire_connects). The slot's owner is looked up
 * afresh: a process that left without closing may have been cached, and its
 * successor in the slot can have a QP of the same number (test_liveness,
 * test_successor_of_vanished_peer). */
static int peer_check(struct uro_context *ctx, struct ibv_qp *qp, const struct ibv_qp_attr *a,
		      int mask)
{
	int err = 0;

	if (!(mask & IBV_QP_DEST_QPN) || qp->qp_type == IBV_QPT_UD)
		return 0;
	if (uro_peer_refresh(ctx, a->dest_qp_num, &err))
		return 0;
	/* A slot held here that no process of ours holds is another user's
	 * (registry.h); asked here, not on every attach that fails. */
	if (err == ESRCH &&
	    uro_registry_held(NULL, (a->dest_qp_num & 0xffffff) >> URO_QPN_INDEX_BITS))
		err = EACCES;
	if (err == EACCES) {
		uro_warn("QP 0x%06x: the process owning QP 0x%06x belongs to another user; "
			 "cross-memory attach cannot reach it",
			 qp->qp_num, a->dest_qp_num);
		return err;
	}
	if (err == EPERM) {
		uro_warn("QP 0x%06x: the kernel refuses cross-memory attach to the process owning "
			 "QP 0x%06x: it is in a user namespace this one is not in (a program in "
			 "uroce run's device view cannot reach one started outside it; start both "
			 "with uroce run, or both with UROCE_VIEW=0)",
			 qp->qp_num, a->dest_qp_num);
		return err;
	}
	return 0;
}

/* Moves the published state; ERR goes through uro_qp_error so that the
 * flush and the events are the same whoever moves the QP there. */
static void set_state(struct uro_context *ctx, struct uro_qp *qp, enum ibv_qp_state from,
		      enum ibv_qp_state to)
{
	if (to == IBV_QPS_RESET)
		reset_queues(qp);
	if (to == IBV_QPS_ERR)
		uro_qp_error(&ctx->self, qp->pub);
	else
		__atomic_store_n(&qp->pub->state, (uint32_t)to, __ATOMIC_RELEASE);
	qp->attr.qp_state = qp->attr.cur_qp_state = to;
	qp->qpx.qp_base.state = to;
	sqd_event(ctx, qp, from, to);
}

/* Whether the QP goes on the wire at this transition: a connected QP
 * whose destination GID is not this host's (wire_qp.c), or a UD QP of a
 * device other hosts can reach. */
static int goes_on_wire(struct uro_context *ctx, struct ibv_qp *qp, enum ibv_qp_state cur,
			enum ibv_qp_state next, const struct ibv_qp_attr *a, int mask)
{
	if (cur != IBV_QPS_INIT || next != IBV_QPS_RTR)
		return 0;
	if (qp->qp_type == IBV_QPT_UD)
		return uro_wire_ud_listens(ctx);
	if (qp->qp_type != IBV_QPT_RC && qp->qp_type != IBV_QPT_UC &&
	    qp->qp_type != IBV_QPT_XRC_SEND && qp->qp_type != IBV_QPT_XRC_RECV)
		return 0;
	return (mask & IBV_QP_AV) && a->ah_attr.is_global && (mask & IBV_QP_DEST_QPN) &&
	       uro_wire_connects(ctx, &a->ah_attr.grh.dgid, a->dest_qp_num, qp->qp_num);
}

/* The wire's share of a transition. */
static int wire_transition(struct uro_context *ctx, struct uro_qp *qp, int attach,
			   enum ibv_qp_state cur, enum ibv_qp_state next)
{
	if (attach)
		return uro_wire_qp_attach(ctx, qp);
	if (qp->wire && cur == IBV_QPS_RTR && next == IBV_QPS_RTS)
		uro_wire_qp_rts(qp);
	if (qp->wire && next == IBV_QPS_RESET) {
		/* The responder's state is the receiver's: not while a batch
		 * holds a WRITE run's key in it (rc_responder.c). rx_lock
		 * before sq_lock, as the completer takes them. */
		int locked;

		pthread_mutex_lock(&ctx->wire->rx_lock);
		locked = uro_mt_lock(&qp->sq_lock);
		uro_wire_qp_reset(qp);
		uro_mt_unlock(&qp->sq_lock, locked);
		pthread_mutex_unlock(&ctx->wire->rx_lock);
	}
	return 0;
}

URO_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct uro_qp *qp = to_uqp(ibqp);
	struct uro_context *ctx = to_uctx(ibqp->context);
	enum ibv_qp_state cur, next;
	const char *why;
	int err, wire = 0;

	if (mask & (IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE)) {
		uro_debug("modify QP 0x%06x: alternate paths (APM) are not supported",
			  ibqp->qp_num);
		return EOPNOTSUPP;
	}
	if (qp->wire && qp->qpx.qp_base.qp_type != IBV_QPT_UD)
		uro_wire_send_held(ctx, qp);
	uro_lock(ctx);
	cur = (enum ibv_qp_state)uro_qp_state(qp->pub); /* a peer may have set ERR */
	next = uro_qp_next_state(cur, attr, mask);
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur)
		err = reject(ibqp, "cur_qp_state is not the QP's state");
	else if ((err = uro_qp_transition_check(ibqp->qp_type, cur, next, mask, &why)))
		uro_debug("modify QP 0x%06x %s->%s: %s", ibqp->qp_num, uro_qp_state_name(cur),
			  uro_qp_state_name(next), why);
	else
		err = values_check(ibqp, attr, mask);
	if (!err)
		wire = goes_on_wire(ctx, ibqp, cur, next, attr, mask);
	if (!err && !wire)
		err = peer_check(ctx, ibqp, attr, mask);
	if (err) {
		uro_unlock(ctx);
		return err;
	}
	apply(qp, attr, mask);
	publish_attr(qp);
	if ((err = wire_transition(ctx, qp, wire, cur, next))) {
		uro_unlock(ctx);
		return err;
	}
	set_state(ctx, qp, cur, next);
	uro_unlock(ctx);
	/* Atomics from this host's processes are executed here (atomic_server.c),
	 * from the QP's RTR on, and from whichever later transition grants
	 * Remote Atomic access (RTR->RTS and RTS->RTS may, ibv_modify_qp(3)). */
	if (next >= IBV_QPS_RTR && next <= IBV_QPS_SQD && !qp->wire &&
	    (qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC))
		uro_atomic_server_start(ctx);
	return 0;
}

URO_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
			    struct ibv_qp_init_attr *init)
{
	struct uro_qp *qp = to_uqp(ibqp);
	struct uro_context *ctx = to_uctx(ibqp->context);

	(void)mask; /* every attribute is returned, as ibv_query_qp(3) permits */
	uro_lock(ctx);
	qp->attr.qp_state = (enum ibv_qp_state)uro_qp_state(qp->pub);
	ibqp->state = qp->attr.qp_state;
	*attr = qp->attr;
	attr->cur_qp_state = qp->attr.qp_state;
	attr->cap = qp->cap;
	attr->sq_draining = 0;
	memset(init, 0, sizeof(*init));
	init->qp_context = ibqp->qp_context;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->cap = qp->cap;
	init->qp_type = ibqp->qp_type;
	init->sq_sig_all = qp->sq_sig_all;
	uro_unlock(ctx);
	return 0;
}

URO_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct uro_qp *qp = to_uqp(ibqp);
	struct uro_context *ctx = to_uctx(ibqp->context);

	/* A QP still in a multicast group is busy, as the kernel's uverbs
	 * refuses to destroy it: the program detaches it first. */
	uro_lock(ctx);
	if (uro_qp_in_mcast_group(ctx, ibqp->qp_num)) {
		uro_unlock(ctx);
		return EBUSY;
	}
	uro_unlock(ctx);
	uro_forget_events(ctx, &qp->pub->serial);
	uro_wait_acked(&ibqp->mutex, &ibqp->cond, &ibqp->events_completed, &qp->events);
	uro_lock(ctx);
	__atomic_store_n(&qp->pub->state, (uint32_t)IBV_QPS_RESET, __ATOMIC_RELEASE);
	__atomic_store_n(&qp->pub->in_use, 0, __ATOMIC_RELEASE);
	if (qp->pub->rq.ring)
		uro_arena_free(&ctx->seg, qp->pub->rq.ring, rq_bytes(&qp->pub->rq));
	/* Not while the progress thread is retrying on it. */
	pthread_mutex_lock(&ctx->progress.lock);
	if (ctx->wire) /* nor while a poll answers its packets */
		pthread_mutex_lock(&ctx->wire->rx_lock);
	ctx->qps[qp->index] = NULL;
	if (ctx->wire)
		pthread_mutex_unlock(&ctx->wire->rx_lock);
	uro_qp_drop_pending(qp);
	pthread_mutex_unlock(&ctx->progress.lock);
	uro_wire_qp_free(qp);
	hold(qp, -1);
	uro_index_give(&ctx->seg.qp_ids, qp->index);
	uro_unlock(ctx);
	pthread_cond_destroy(&ibqp->cond);
	pthread_mutex_destroy(&ibqp->mutex);
	pthread_spin_destroy(&qp->sq_lock);
	pthread_spin_destroy(&qp->rq_lock);
	free(qp->pending);
	free(qp->batch);
	free(qp);
	return 0;
}

/* Default versions beside the IBVERBS_1.0 compat ones (compat_1_0.c). */
URO_DEFAULT_VERSION(ibv_create_qp);
URO_DEFAULT_VERSION(ibv_destroy_qp);
URO_DEFAULT_VERSION(ibv_modify_qp);
URO_DEFAULT_VERSION(ibv_query_qp);
