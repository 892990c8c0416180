/* The XRC SRQ a request names (IBTA Annex A14): an SRQ number is a slot and
 * an index, as a QPN is, so it names an SRQ of any process of the host.
 * Both transports find it here: the shared-memory initiator, and the wire's
 * target, whose process received the packet. */
#include "xrc_srq.h"

static const struct uro_seg_srq *of_domain(const struct uro_peer *p, uint32_t index,
					   const struct uro_seg_qp *tgt)
{
	const struct uro_seg_srq *srq = p ? uro_peer_srq(p, index) : NULL;

	return srq && __atomic_load_n(&srq->in_use, __ATOMIC_ACQUIRE) &&
		       uro_xrcd_id_same(&srq->xrcd, &tgt->xrcd)
		   ? srq
		   : NULL;
}

const struct uro_seg_srq *uro_xrc_srq(struct uro_context *ctx, uint32_t srqn,
				      const struct uro_seg_qp *tgt, struct uro_peer **peer,
				      uint32_t *one_based)
{
	const struct uro_seg_srq *srq;
	int err;

	*one_based = (srqn & (URO_MAX_QP - 1)) + 1;
	*peer = uro_peer_of(ctx, srqn, &err);
	srq = of_domain(*peer, *one_based, tgt);
	if (!srq) { /* the cached process may be a previous owner of the slot */
		*peer = uro_peer_refresh(ctx, srqn, &err);
		srq = of_domain(*peer, *one_based, tgt);
	}
	return srq;
}
