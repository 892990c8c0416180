#ifndef URO_XRC_SRQ_H
#define URO_XRC_SRQ_H

#include "objects.h"

/* The XRC SRQ srqn names, in whichever process of the host holds it, when
 * it is of the target QP tgt's domain; NULL otherwise, which the target
 * answers as an invalid request (IBTA Annex A14). *peer is its process
 * (this one's own &ctx->self when it is ours), *one_based its index. */
const struct uro_seg_srq *uro_xrc_srq(struct uro_context *ctx, uint32_t srqn,
				      const struct uro_seg_qp *tgt, struct uro_peer **peer,
				      uint32_t *one_based);

#endif
