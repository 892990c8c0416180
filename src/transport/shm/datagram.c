/* UD between this host's processes: one datagram at a time (IBTA 9.8.4,
 * 11.4.1.1), each sent here by its route (src/verbs/ud_route.c). Delivery is
 * unreliable as on the wire: a datagram to a missing QP, with the wrong
 * Q_Key or with no receive posted is dropped and counted; the sender still
 * completes successfully. The receiver finds the 40-byte GRH area first in
 * its buffer. */
#include <string.h>

#include "objects.h"
#include "opcode.h"
#include "registry.h"
#include "segment_ops.h"
#include "shm.h"
#include "ud_receive.h"

#define QKEY_USE_QP 0x80000000u /* IBTA 10.2.5: take the Q_Key from the QP */

static struct uro_seg_qp *ud_qp(struct uro_peer *p, uint32_t qpn)
{
	struct uro_seg_qp *t;
	uint32_t state;

	if (!p)
		return NULL;
	t = &p->qp[qpn & (URO_MAX_QP - 1)];
	state = uro_qp_state(t);
	if (!__atomic_load_n(&t->in_use, __ATOMIC_ACQUIRE) || t->qpn != qpn ||
	    t->type != IBV_QPT_UD ||
	    (state != IBV_QPS_RTR && state != IBV_QPS_RTS && state != IBV_QPS_SQD))
		return NULL;
	return t;
}

/* The destination QP, in the cached process of its slot or, when it is not
 * there, in the slot's current owner (the slot may have been reused). */
struct uro_seg_qp *uro_shm_ud_target(struct uro_context *ctx, uint32_t qpn, struct uro_peer **pp)
{
	int err;
	struct uro_peer *p = uro_peer_of(ctx, qpn, &err);
	struct uro_seg_qp *t = ud_qp(p, qpn);

	if (!t && p) {
		p = uro_peer_refresh(ctx, qpn, &err);
		t = ud_qp(p, qpn);
	}
	if (t)
		*pp = p;
	return t;
}

static void drop(struct uro_peer *p, uint64_t *counter)
{
	if (p)
		__atomic_add_fetch(counter, 1, __ATOMIC_RELAXED);
}

/* One datagram into one receiving QP t of process p. */
void uro_shm_ud_deliver(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
			const struct iovec *liov, int nl, uint64_t len, struct uro_peer *p,
			struct uro_seg_qp *t)
{
	const struct uro_opcode *op = uro_opcode(wr->opcode);
	struct uro_ah *ah = to_uah(wr->wr.ud.ah);
	uint32_t qkey = wr->wr.ud.remote_qkey;
	uint8_t grh[URO_GRH_BYTES];
	struct uro_recv r;
	struct uro_cqe e;
	int st;

	if (qkey & QKEY_USE_QP)
		qkey = qp->attr.qkey;
	if (qkey != t->qkey) {
		drop(p, &p->hdr->counters.qkey_violations);
		return;
	}
	if (uro_take_recv(p, t, &r)) {
		drop(p, &p->hdr->counters.rx_dropped);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.wr_id = r.wr_id;
	e.opcode = IBV_WC_RECV;
	e.qp_num = t->qpn;
	e.src_qp = qp->qpx.qp_base.qp_num;
	e.slid = ctx->model.port.lid;
	e.sl = uro_ah_received_sl(ctx, ah);
	e.wc_flags = ah->attr.is_global ? IBV_WC_GRH : 0;
	if (op->imm) {
		e.imm_data = wr->imm_data;
		e.wc_flags |= IBV_WC_WITH_IMM;
	}
	uro_ah_grh(ctx, ah, len, grh);
	st = uro_ud_land(p, t, &r, grh, liov, nl, len);
	if (st < 0)
		return;
	e.status = (uint32_t)st;
	if (st == IBV_WC_SUCCESS)
		e.byte_len = (uint32_t)(URO_GRH_BYTES + len);
	uro_deliver(p, t->recv_cq, &e, (wr->send_flags & IBV_SEND_SOLICITED) != 0);
}

/* A datagram to a multicast group (IBTA 10.5.2.1: DestQP 0xFFFFFF and a
 * multicast DGID) reaches every QP attached to the group in every process
 * on this device (this link of this configuration, not another link of its
 * name), the sender's own QP too, as without
 * IBV_QP_CREATE_BLOCK_SELF_MCAST_LB, and the members on other hosts
 * (wire_mcast.c). Without a multicast DGID it is dropped, as a NIC's
 * responder drops it. */
int uro_shm_ud_multicast(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
			 const struct iovec *liov, int nl, uint64_t len)
{
	const struct ibv_ah_attr *a = &to_uah(wr->wr.ud.ah)->attr;
	struct uro_slot_owner owners[URO_MAX_SLOTS];
	unsigned n;

	if (!a->is_global || !uro_gid_is_multicast(&a->grh.dgid))
		return 0;
	n = uro_registry_owners_of(NULL, ctx->dev->link_id, owners, URO_MAX_SLOTS);
	for (unsigned i = 0; i < n; i++) {
		uint32_t qpn = owners[i].slot << URO_QPN_INDEX_BITS;
		int err;
		struct uro_peer *p = uro_peer_of(ctx, qpn, &err);

		/* The cached process may be a previous owner of the slot. */
		if (p && p->pid != owners[i].pid)
			p = uro_peer_refresh(ctx, qpn, &err);

		for (unsigned k = 0; p && k < URO_MAX_MCAST_ATTACH; k++) {
			const struct uro_seg_mcast *m = &p->mcast[k];
			struct uro_seg_qp *t;

			if (!__atomic_load_n(&m->in_use, __ATOMIC_ACQUIRE) ||
			    memcmp(&m->mgid, &a->grh.dgid, sizeof(m->mgid)))
				continue;
			t = ud_qp(p, m->qpn);
			if (t)
				uro_shm_ud_deliver(ctx, qp, wr, liov, nl, len, p, t);
		}
	}
	return 1;
}
