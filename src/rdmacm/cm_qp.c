/* QPs on an id: rdma_create_qp(3), rdma_destroy_qp(3), rdma_create_srq(3),
 * rdma_init_qp_attr(3). The CM moves a connected QP through its states as
 * librdmacm does: INIT when created, RTR and RTS when the connection is
 * made, ERR when it ends. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm.h"
#include "peer.h"
#include "segment_ops.h"

int uro_cm_gid_index(struct ibv_context *verbs, const union ibv_gid *gid)
{
	union ibv_gid g;

	for (int i = 0; i < URO_GID_TBL_MAX && !ibv_query_gid(verbs, 1, i, &g); i++)
		if (!memcmp(&g, gid, sizeof(g)))
			return i;
	return 0;
}

static void init_attr(struct uro_cm_id *cm, struct ibv_qp_attr *a, int *mask)
{
	a->pkey_index = 0;
	a->port_num = cm->id.port_num;
	*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (cm->id.qp_type == IBV_QPT_UD) {
		a->qkey = URO_UDP_QKEY;
		*mask |= IBV_QP_QKEY;
	} else {
		a->qp_access_flags =
		    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		*mask |= IBV_QP_ACCESS_FLAGS;
	}
}

/* The READs and atomics a side answers at once and may have out: the
 * passive side's are its rdma_accept's; the active side's the REP's, the
 * other way round (the REP's initiator depth is what its sender sends at
 * once: Linux's cm_rep_handler). */
static uint8_t reads_in(const struct uro_cm_id *cm)
{
	return cm->listener ? cm->param.responder_resources : cm->peer.initiator_depth;
}

static uint8_t reads_out(const struct uro_cm_id *cm)
{
	return cm->listener ? cm->param.initiator_depth : cm->peer.responder_resources;
}

static int rtr_attr(struct uro_cm_id *cm, struct ibv_qp_attr *a, int *mask)
{
	struct rdma_cm_id *id = &cm->id;
	struct ibv_port_attr port;

	*mask = IBV_QP_STATE;
	if (id->qp_type == IBV_QPT_UD)
		return 0;
	if (ibv_query_port(id->verbs, id->port_num, &port))
		return -1;
	/* The passive side takes the REQ's path MTU where it is smaller. */
	a->path_mtu =
	    cm->peer.mtu && cm->peer.mtu < port.active_mtu ? cm->peer.mtu : port.active_mtu;
	a->dest_qp_num = cm->peer.qpn;
	/* A REQ's or REP's starting PSN is the one its sender receives first
	 * (IBTA 12.7.22 and 12.7.30; Linux's cm_rep_handler takes a REP's as
	 * its sq_psn): ours is our rq_psn. */
	a->rq_psn = cm->psn;
	a->max_dest_rd_atomic = reads_in(cm) ? reads_in(cm) : 1;
	a->min_rnr_timer = 12;
	a->ah_attr.port_num = id->port_num;
	a->ah_attr.dlid = cm->peer.lid;
	a->ah_attr.is_global = port.link_layer == IBV_LINK_LAYER_ETHERNET || !cm->peer.lid;
	a->ah_attr.grh.dgid = cm->peer.gid;
	a->ah_attr.grh.sgid_index = (uint8_t)uro_cm_gid_index(id->verbs, &cm->path.sgid);
	a->ah_attr.grh.hop_limit = 64;
	*mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	/* An XRC initiator has no responder side (IBTA A14). */
	if (id->qp_type != IBV_QPT_XRC_SEND)
		*mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	return 0;
}

static void rts_attr(struct uro_cm_id *cm, struct ibv_qp_attr *a, int *mask)
{
	uint8_t retry;

	a->sq_psn = cm->psn;
	*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (cm->id.qp_type == IBV_QPT_UD)
		return;
	a->sq_psn = cm->peer.psn;
	a->timeout = cm->ack_timeout >= 0 ? (uint8_t)cm->ack_timeout : 14;
	*mask |= IBV_QP_TIMEOUT;
	/* An XRC target has no requester side (IBTA A14). */
	if (cm->id.qp_type == IBV_QPT_XRC_RECV)
		return;
	/* The REQ's retry count serves both sides (a REP has none); each
	 * side's RNR retry count is the one its peer asked for (IBTA
	 * 12.7.17 and 12.7.38; as Linux's cm.c and cma.c set them). */
	retry = cm->listener ? cm->peer.retry_count : cm->param.retry_count;
	a->retry_cnt = retry ? retry : 7;
	a->rnr_retry = cm->peer.rnr_retry;
	a->max_rd_atomic = reads_out(cm) ? reads_out(cm) : 1;
	*mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
}

/* The attributes for a->qp_state (rdma_init_qp_attr(3)). */
int uro_cm_qp_attr(struct uro_cm_id *cm, struct ibv_qp_attr *a, int *mask)
{
	enum ibv_qp_state want = a->qp_state;

	memset(a, 0, sizeof(*a));
	a->qp_state = want;
	switch (want) {
	case IBV_QPS_INIT:
		init_attr(cm, a, mask);
		return 0;
	case IBV_QPS_RTR:
		return rtr_attr(cm, a, mask);
	case IBV_QPS_RTS:
		rts_attr(cm, a, mask);
		return 0;
	default:
		*mask = IBV_QP_STATE;
		return 0;
	}
}

static int move(struct uro_cm_id *cm, enum ibv_qp_state state)
{
	struct ibv_qp_attr a = {.qp_state = state};
	int mask, err;

	if (uro_cm_qp_attr(cm, &a, &mask))
		return -1;
	err = ibv_modify_qp(cm->id.qp, &a, mask);
	return err ? uro_cm_err(err) : 0;
}

int uro_cm_qp_to_rtr_rts(struct uro_cm_id *cm)
{
	return move(cm, IBV_QPS_RTR) || move(cm, IBV_QPS_RTS) ? -1 : 0;
}

int uro_cm_qp_to_error(struct uro_cm_id *cm)
{
	return move(cm, IBV_QPS_ERR);
}

/* This process's segments, seen as any peer sees them (a QP moved to ERR
 * there is flushed as when a responder errors it). Called with the CM
 * lock held. */
static struct uro_peer *own_segments[URO_MAX_SLOTS];

void uro_cm_qp_error_by_num(uint32_t qpn)
{
	unsigned slot = (qpn & 0xffffff) >> URO_QPN_INDEX_BITS;
	struct uro_peer *p;
	struct uro_seg_qp *q;

	if (slot == 0 || slot >= URO_MAX_SLOTS)
		return;
	p = own_segments[slot];
	if (p && (p->pid != getpid() || __atomic_load_n(&p->hdr->closed, __ATOMIC_ACQUIRE))) {
		uro_peer_detach(p);
		free(p);
		p = own_segments[slot] = NULL;
	}
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p || uro_peer_attach(p, NULL, slot) || p->pid != getpid()) {
			if (p && p->base)
				uro_peer_detach(p);
			free(p);
			return;
		}
		own_segments[slot] = p;
	}
	q = &p->qp[qpn & (URO_MAX_QP - 1)];
	if (__atomic_load_n(&q->in_use, __ATOMIC_ACQUIRE) && q->qpn == qpn)
		uro_qp_error(p, q);
}

URO_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
				 int *qp_attr_mask)
{
	if (!id->verbs || !qp_attr || !qp_attr_mask)
		return uro_cm_err(EINVAL);
	return uro_cm_qp_attr(to_cm(id), qp_attr, qp_attr_mask) ? uro_cm_err(EINVAL) : 0;
}

/* A CQ with its own channel, for n requests. */
static struct ibv_cq *own_cq(struct rdma_cm_id *id, struct ibv_comp_channel **ch, uint32_t n)
{
	*ch = ibv_create_comp_channel(id->verbs);
	return *ch ? ibv_create_cq(id->verbs, (int)n + 1, id, *ch, 0) : NULL;
}

static void drop_cq(struct ibv_cq **cq, struct ibv_comp_channel **ch)
{
	if (*cq)
		ibv_destroy_cq(*cq);
	if (*ch)
		ibv_destroy_comp_channel(*ch);
	*cq = NULL;
	*ch = NULL;
}

/* The CQs and channels librdmacm makes when the caller gives none; the
 * rdma_verbs.h helpers wait on them. */
static int make_cqs(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *a)
{
	struct uro_cm_id *cm = to_cm(id);

	if (!a->send_cq) {
		cm->own_cqs |= 1;
		a->send_cq = id->send_cq = own_cq(id, &id->send_cq_channel, a->cap.max_send_wr);
		if (!a->send_cq)
			return -1;
	}
	if (!a->recv_cq) {
		cm->own_cqs |= 2;
		a->recv_cq = id->recv_cq = own_cq(id, &id->recv_cq_channel, a->cap.max_recv_wr);
		if (!a->recv_cq)
			return -1;
	}
	return 0;
}

static void free_cqs(struct rdma_cm_id *id)
{
	struct uro_cm_id *cm = to_cm(id);

	if (cm->own_cqs & 1)
		drop_cq(&id->send_cq, &id->send_cq_channel);
	if (cm->own_cqs & 2)
		drop_cq(&id->recv_cq, &id->recv_cq_channel);
	cm->own_cqs = 0;
}

URO_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	struct uro_cm_id *cm = to_cm(id);
	struct ibv_qp *qp;

	if (!id->verbs || !attr || id->qp)
		return uro_cm_err(EINVAL);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd ? id->pd : uro_cm_default_pd(id->verbs);
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
	}
	if (!attr->pd || attr->pd->context != id->verbs)
		return uro_cm_err(EINVAL);
	if (!attr->srq)
		attr->srq = id->srq;
	/* The type asked for, else the port space's. An XRC target belongs to
	 * the device's XRC domain, as librdmacm's do; its CQs serve the XRC
	 * SRQ the caller makes next (rdma_create_srq). */
	if (!attr->qp_type)
		attr->qp_type = id->qp_type;
	id->qp_type = attr->qp_type;
	if (attr->qp_type == IBV_QPT_XRC_RECV && !(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD)) {
		attr->xrcd = uro_cm_default_xrcd(id->verbs);
		attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
	}
	if (make_cqs(id, attr)) {
		free_cqs(id);
		return uro_cm_err(ENOMEM);
	}
	qp = ibv_create_qp_ex(id->verbs, attr);
	if (!qp) {
		int err = errno;

		free_cqs(id);
		return uro_cm_err(err);
	}
	id->qp = qp;
	id->pd = attr->pd;
	cm->qpn = qp->qp_num;
	/* INIT now; a UD QP needs no peer to be ready for traffic. */
	if (move(cm, IBV_QPS_INIT) ||
	    (id->qp_type == IBV_QPT_UD && (move(cm, IBV_QPS_RTR) || move(cm, IBV_QPS_RTS)))) {
		int err = errno;

		ibv_destroy_qp(qp);
		id->qp = NULL;
		free_cqs(id);
		return uro_cm_err(err);
	}
	return 0;
}

URO_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
			      struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex ax;
	int rc;

	if (!qp_init_attr)
		return uro_cm_err(EINVAL);
	memset(&ax, 0, sizeof(ax));
	memcpy(&ax, qp_init_attr, sizeof(*qp_init_attr));
	ax.comp_mask = IBV_QP_INIT_ATTR_PD;
	ax.pd = pd ? pd : id->pd;
	rc = rdma_create_qp_ex(id, &ax);
	if (!rc) {
		qp_init_attr->send_cq = ax.send_cq;
		qp_init_attr->recv_cq = ax.recv_cq;
		qp_init_attr->srq = ax.srq;
		qp_init_attr->cap = ax.cap;
	}
	return rc;
}

URO_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (!id->qp)
		return;
	ibv_destroy_qp(id->qp);
	id->qp = NULL;
	free_cqs(id);
}

URO_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq *srq;

	if (!id->verbs || !attr)
		return uro_cm_err(EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd ? id->pd : uro_cm_default_pd(id->verbs);
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	/* An XRC SRQ gets the device's domain and the id's receive CQ, where
	 * rdma_get_recv_comp looks, unless the caller names its own. */
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type == IBV_SRQT_XRC) {
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd)
			attr->xrcd = uro_cm_default_xrcd(id->verbs);
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
			if (!id->recv_cq) {
				to_cm(id)->own_cqs |= 2;
				id->recv_cq = own_cq(id, &id->recv_cq_channel, attr->attr.max_wr);
			}
			attr->cq = id->recv_cq;
		}
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	}
	srq = attr->pd ? ibv_create_srq_ex(id->verbs, attr) : NULL;
	if (!srq)
		return attr->pd ? -1 : uro_cm_err(EINVAL);
	id->srq = srq;
	id->pd = attr->pd;
	return 0;
}

URO_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
			       struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ax;
	int rc;

	memset(&ax, 0, sizeof(ax));
	ax.srq_context = attr->srq_context;
	ax.attr = attr->attr;
	ax.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE;
	/* An XRC target's id gets an XRC SRQ, as librdmacm makes it. */
	ax.srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
	ax.pd = pd ? pd : id->pd;
	rc = rdma_create_srq_ex(id, &ax);
	if (!rc)
		attr->attr = ax.attr;
	return rc;
}

URO_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	if (id->srq)
		ibv_destroy_srq(id->srq);
	id->srq = NULL;
}
