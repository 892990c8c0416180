/* The engine's part of a send work request, whichever transport carries
 * it (ibv_post_send(3)): the checks at post time, the local buffers it
 * gathers, the local operations it executes (BIND_MW, LOCAL_INV), its
 * completion, the error that ends its QP, and the timers of its retries. */
#include <errno.h>
#include <string.h>

#include "cq_ring.h"
#include "memory_window.h"
#include "opcode.h"
#include "segment_ops.h"
#include "send_wr.h"
#include "user_memory.h"

/* IBTA 9.7.5.2.8, table 45: the RNR NAK timer field in microseconds. */
uint64_t uro_rnr_timer_ns(uint8_t field)
{
	static const uint32_t us[32] = {
	    655360, 10,	   20,	  30,	 40,	60,	80,	120,	160,	240,	320,
	    480,    640,   960,	  1280,	 1920,	2560,	3840,	5120,	7680,	10240,	15360,
	    20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
	};

	return (uint64_t)us[field & 31] * 1000;
}

/* The local ACK timeout, 4.096 us * 2^timeout; 0 means none at all, and
 * the request waits for as long as its target lives (IBTA 9.7.6.1.3). */
uint64_t uro_ack_timeout_ns(uint8_t timeout)
{
	return timeout ? 4096ull << (timeout > 31 ? 31 : timeout) : 10000000ull;
}

/* The checks ibv_post_send(3) makes before accepting a request. */
int uro_send_validate(struct uro_qp *qp, const struct ibv_send_wr *wr)
{
	const struct uro_opcode *op = uro_opcode(wr->opcode);
	uint64_t inline_len = 0;

	if (!op || !uro_opcode_allowed(op, qp->qpx.qp_base.qp_type))
		return EINVAL;
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge)
		return EINVAL;
	if ((op->kind == URO_OP_BIND_MW || op->kind == URO_OP_LOCAL_INV) &&
	    (wr->send_flags & IBV_SEND_INLINE))
		return EINVAL;
	if (wr->send_flags & IBV_SEND_INLINE) {
		for (int i = 0; i < wr->num_sge; i++)
			inline_len += wr->sg_list[i].length;
		if (inline_len > qp->cap.max_inline_data || op->kind == URO_OP_READ ||
		    op->kind == URO_OP_ATOMIC)
			return EINVAL;
	}
	if (qp->qpx.qp_base.qp_type == IBV_QPT_UD && !wr->wr.ud.ah)
		return EINVAL;
	if (qp->sq_posted - qp->sq_retired >= qp->cap.max_send_wr)
		return ENOMEM;
	return 0;
}

void uro_send_complete(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
		       uint32_t seq, enum ibv_wc_status status, uint32_t byte_len)
{
	const struct uro_opcode *op = uro_opcode(wr->opcode);
	struct uro_cqe e;

	/* Errors complete whether signaled or not (IBTA 10.7.3.1). */
	if (status == IBV_WC_SUCCESS && !(wr->send_flags & IBV_SEND_SIGNALED) && !qp->sq_sig_all)
		return;
	memset(&e, 0, sizeof(e));
	e.wr_id = wr->wr_id;
	e.status = status;
	e.opcode = op ? op->wc : IBV_WC_SEND;
	e.byte_len = byte_len;
	e.qp_num = qp->qpx.qp_base.qp_num;
	e.sq_seq = seq + 1;
	uro_deliver(&ctx->self, qp->send_cq->index, &e, 0);
}

/* The request's local buffers, checked against this process's MRs. Inline
 * data needs no key (ibv_post_send(3)). */
enum ibv_wc_status uro_send_gather(struct uro_context *ctx, struct uro_qp *qp,
				   const struct ibv_send_wr *wr, int need_write, struct iovec *iov,
				   int *n, uint64_t *len)
{
	if (!(wr->send_flags & IBV_SEND_INLINE))
		return uro_sge_iov(&ctx->self, qp->pd->ibpd.handle, wr->sg_list,
				   (uint32_t)wr->num_sge, need_write, iov, n, len);
	*n = 0;
	*len = 0;
	for (int i = 0; i < wr->num_sge; i++) {
		if (!wr->sg_list[i].length)
			continue;
		iov[*n].iov_base = (void *)(uintptr_t)wr->sg_list[i].addr;
		iov[*n].iov_len = wr->sg_list[i].length;
		*len += wr->sg_list[i].length;
		(*n)++;
	}
	return IBV_WC_SUCCESS;
}

void uro_pending_copy(struct uro_pending *p, const struct ibv_send_wr *wr, uint32_t seq)
{
	uint32_t off = 0;

	p->wr = *wr;
	p->wr.next = NULL;
	p->wr.sg_list = p->sge;
	p->seq = seq;
	/* A request without SGEs may carry a NULL list (a zero-length SEND). */
	if (wr->num_sge)
		memcpy(p->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(*p->sge));
	if (!(wr->send_flags & IBV_SEND_INLINE))
		return;
	/* Inline data is the program's until the post returns, and only
	 * then: one it cannot read then names nowhere, so the request fails
	 * when it runs (LOC_PROT_ERR) instead of sending what the program may
	 * map at that address by then. */
	for (int i = 0; i < wr->num_sge; i++) {
		if (uro_user_copy(p->data + off, (void *)(uintptr_t)wr->sg_list[i].addr,
				  wr->sg_list[i].length)) {
			p->sge[i].addr = URO_USER_NOWHERE;
			continue;
		}
		p->sge[i].addr = (uintptr_t)(p->data + off);
		off += wr->sg_list[i].length;
	}
}

/* An error moves the requester's QP to ERR: what follows is flushed
 * (IBTA 10.8.3.1). A UD QP's send errors stop at SQE. */
void uro_requester_error(struct uro_context *ctx, struct uro_qp *qp)
{
	if (qp->qpx.qp_base.qp_type == IBV_QPT_UD) {
		__atomic_store_n(&qp->pub->state, (uint32_t)IBV_QPS_SQE, __ATOMIC_RELEASE);
		qp->qpx.qp_base.state = IBV_QPS_SQE;
		return;
	}
	uro_qp_error(&ctx->self, qp->pub);
	qp->qpx.qp_base.state = IBV_QPS_ERR;
}

/* Executes BIND_MW and LOCAL_INV for QP qp: a work-completion status. */
int uro_mw_execute(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr)
{
	const struct ibv_mw_bind_info *info = &wr->bind_mw.bind_info;
	uint32_t qpn = qp->qpx.qp_base.qp_num;
	struct uro_bind b;

	if (wr->opcode == IBV_WR_LOCAL_INV)
		return uro_mw_invalidate(&ctx->self, qp->pd->ibpd.handle, qpn, wr->invalidate_rkey)
			   ? IBV_WC_MW_BIND_ERR
			   : IBV_WC_SUCCESS;
	if (!wr->bind_mw.mw || wr->bind_mw.mw->context != qp->qpx.qp_base.context)
		return IBV_WC_MW_BIND_ERR;
	b.mw_index = to_umw(wr->bind_mw.mw)->index;
	b.new_rkey = wr->bind_mw.rkey;
	b.mr_lkey = info->mr ? info->mr->lkey : 0;
	b.addr = info->addr;
	b.length = info->mr ? info->length : 0;
	b.access = info->mw_access_flags;
	return uro_mw_bind(&ctx->self, qp->pd->ibpd.handle, qpn, &b);
}
