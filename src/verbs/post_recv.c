/* Posting receives (ibv_post_recv(3), ibv_post_srq_recv(3)): into the
 * queue in the segment, where a sender's library takes them. The queue has
 * one producer, so threads that post to it take turns (uro_mt_lock). */
#include <errno.h>

#include "verbs_ops.h"
#include "port_counters.h"
#include "recv_queue.h"
#include "segment_ops.h"

/* Returns an errno; adds what it took to *posted (NULL: not counted),
 * under the queue's lock, so the count is exact (port_counters.h). */
static int post(pthread_spinlock_t *lock, struct uro_seg_rq *rq, uint8_t *ring,
		struct ibv_recv_wr *wr, struct ibv_recv_wr **bad, uint64_t *posted)
{
	int locked = uro_mt_lock(lock), err = 0;
	uint64_t n = 0;

	for (; wr; wr = wr->next, n++) {
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > rq->max_sge)
			err = EINVAL;
		else if (uro_rq_post(rq, ring, wr))
			err = ENOMEM;
		if (err) {
			*bad = wr;
			break;
		}
	}
	if (posted)
		uro_count(posted, n);
	uro_mt_unlock(lock, locked);
	return err;
}

int uro_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct uro_qp *qp = to_uqp(ibqp);
	struct uro_context *ctx = to_uctx(ibqp->context);
	struct uro_seg_qp *pub = qp->pub;
	int err;

	/* A QP on an SRQ has no receive queue of its own, nor has either half
	 * of XRC (its receives are its SRQs'); a RESET QP accepts no receives
	 * (IBTA 10.8.2). */
	if (qp->srq || ibqp->qp_type == IBV_QPT_XRC_SEND || ibqp->qp_type == IBV_QPT_XRC_RECV ||
	    uro_qp_state(pub) == IBV_QPS_RESET) {
		*bad = wr;
		return EINVAL;
	}
	err = post(&qp->rq_lock, &pub->rq, uro_seg_ptr(&ctx->seg, pub->rq.ring), wr, bad,
		   &pub->counters.posted_recvs);
	/* Receives posted to a QP in error complete at once, flushed. */
	if (uro_qp_state(pub) == IBV_QPS_ERR)
		uro_flush_rq(&ctx->self, pub);
	return err;
}

int uro_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct uro_srq *srq = to_usrq(ibsrq);
	struct uro_context *ctx = to_uctx(ibsrq->context);

	return post(&srq->rq_lock, &srq->pub->rq, uro_seg_ptr(&ctx->seg, srq->pub->rq.ring), wr,
		    bad, NULL);
}
