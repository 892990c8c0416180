/* Where a UD datagram goes (ibv_post_send(3) on a UD QP): to this host's
 * processes over shared memory, or on the wire, chosen per address handle
 * and per receiver, since one UD QP reaches both. The shared-memory
 * requester runs each datagram through here (the context's ud_send). */
#include "verbs_ops.h"
#include "wire.h"

/* A receiver told to take the wire (its trace, its faults) hears its
 * datagrams there, as a connected peer does (wire_qp.c uro_wire_connects):
 * otherwise its trace would lack what this host's processes sent it. The
 * AH must name an IPv4 address the wire can reach. */
static int hears_wire(const struct uro_peer *p, const struct uro_ah *ah)
{
	return __atomic_load_n(&p->hdr->wire_forced, __ATOMIC_ACQUIRE) && ah->own;
}

int uro_ud_route(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
		 const struct iovec *liov, int nl, uint64_t len)
{
	struct uro_ah *ah = to_uah(wr->wr.ud.ah);
	struct uro_peer *p = NULL;
	struct uro_seg_qp *t;

	/* A datagram is one packet: no larger than the path MTU. */
	if (len > uro_mtu_bytes(ctx->model.port.active_mtu))
		return IBV_WC_LOC_LEN_ERR;
	if (ah->wire && !ah->own) /* another host's */
		return uro_wire_ud_send(ctx, qp, wr, &ah->attr, liov, nl, len);
	/* A group's datagram reaches this host's members, and once on the
	 * wire its members on other hosts: lost there as any datagram may
	 * be, never failing the send. */
	if (wr->wr.ud.remote_qpn == URO_MCAST_QPN) {
		if (uro_shm_ud_multicast(ctx, qp, wr, liov, nl, len) && uro_wire_mcast_carried(ctx))
			uro_wire_ud_send(ctx, qp, wr, &ah->attr, liov, nl, len);
		return IBV_WC_SUCCESS;
	}
	t = uro_shm_ud_target(ctx, wr->wr.ud.remote_qpn, &p);
	if (t ? hears_wire(p, ah) : ah->wire)
		return uro_wire_ud_send(ctx, qp, wr, &ah->attr, liov, nl, len);
	if (!t)
		return IBV_WC_SUCCESS;
	uro_shm_ud_deliver(ctx, qp, wr, liov, nl, len, p, t);
	/* This process takes the wire and its peer does not listen there: the
	 * datagram went over shared memory, and this process's trace says so. */
	if (ah->wire)
		uro_wire_ud_trace(ctx, qp, wr, &ah->attr, liov, nl, len);
	return IBV_WC_SUCCESS;
}
