/* ibv_post_send(3) and the progress of waiting requests, over whichever
 * transport carries a QP: an RC or UC QP whose peer is on the wire (as
 * wire_qp.c decided at RTR) posts to the RoCEv2 requester, every other
 * QP to the shared-memory requester, which also runs a UD QP's datagrams
 * through their route (ud_route.c), per address handle. */
#include <errno.h>

#include "port_counters.h"
#include "segment_ops.h"
#include "verbs_ops.h"
#include "wire.h"

/* Counts the work requests of a list that were posted: those before stop
 * (NULL: all of them). */
static void count_posted(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
			 const struct ibv_send_wr *stop)
{
	uint64_t n = 0, sends = 0;

	for (; wr && wr != stop; wr = wr->next, n++)
		sends += wr->opcode == IBV_WR_SEND || wr->opcode == IBV_WR_SEND_WITH_IMM ||
			 wr->opcode == IBV_WR_SEND_WITH_INV;
	uro_count(&qp->pub->counters.posted_sends, n);
	uro_count(&ctx->self.hdr->counters.rdma_sends, sends);
}

static int post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct uro_qp *qp = to_uqp(ibqp);
	struct uro_context *ctx = to_uctx(ibqp->context);
	uint32_t state = uro_qp_state(qp->pub);

	/* Only RTS and SQD queues take work; in ERR (or SQE) it is flushed
	 * (IBTA 10.8.2, 10.8.3). */
	if (state == IBV_QPS_RESET || state == IBV_QPS_INIT || state == IBV_QPS_RTR) {
		*bad = wr;
		return EINVAL;
	}
	if (qp->wire) {
		uro_wire_busy(ctx);
		if (qp->qpx.qp_base.qp_type != IBV_QPT_UD)
			return uro_wire_post_send(ctx, qp, wr, bad);
	}
	return uro_shm_post_send(ctx, qp, wr, bad);
}

int uro_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	int err = post_send(ibqp, wr, bad);

	count_posted(to_uctx(ibqp->context), to_uqp(ibqp), wr, err ? *bad : NULL);
	return err;
}

uint64_t uro_progress(struct uro_context *ctx)
{
	/* Every poll comes here, an empty one too (the loop a program waits
	 * in): a context with no wire endpoint and no waiting request skips
	 * the two transports' calls. */
	if (!__atomic_load_n(&ctx->wire, __ATOMIC_RELAXED) &&
	    !__atomic_load_n(&ctx->pending_qps, __ATOMIC_RELAXED))
		return 0;
	return uro_shm_progress(ctx, uro_wire_progress(ctx, 0));
}

uint64_t uro_progress_pass(struct uro_context *ctx)
{
	return uro_shm_progress(ctx, uro_wire_progress(ctx, 1));
}
