/* The shared-memory requester's atomics: checked here as every request
 * is, then handed to the target process, which executes them
 * (atomic_table.h says why the target, and not the initiator). */
#include "atomic_table.h"
#include "direct_map.h"
#include "requester.h"
#include "segment_ops.h"
#include "user_memory.h"

/* How long an atomic waits for its target's answer before it is left to
 * the ACK timer, as a request with no answer is. A target whose thread is
 * awake answers in a microsecond, one asleep in tens of them. */
#define ATOMIC_WAIT_NS (1000ull * 1000)

/* Hands the atomic to the target process, which executes it
 * (atomic_table.h), and waits for the answer; or, for the head of the
 * pending queue, waits again for the one it already handed over: a retry
 * never executes an atomic twice (IBTA 9.7.5.1.1: a duplicate atomic is
 * answered, not executed). IBV_WC_SUCCESS with *old, the responder's
 * error, RESULT_UNANSWERED: not answered yet, or RESULT_NO_ACK: the
 * target answered that it could not take the request now. */
static int atomic_answer(struct uro_qp *qp, struct target *t, const struct uro_atomic_request *rq,
			 uint64_t *old)
{
	struct uro_atomic_answer a;
	int r;

	uint64_t wait = qp->atomic_peer ? 0 : ATOMIC_WAIT_NS;

	if (!qp->atomic_peer) {
		if (uro_atomic_post(t->peer, rq, &qp->atomic_ticket))
			return RESULT_NO_ACK; /* every slot held: a busy responder */
		qp->atomic_peer = t->peer;
	}
	/* Posted: waited for here once, then looked at again on a timer
	 * (requester.c), so that a late answer completes when it comes, as a
	 * NIC completes on the response, not at the ACK timeout. */
	r = uro_atomic_wait(qp->atomic_peer, &qp->atomic_ticket, wait, &a);
	if (r == 0)
		return RESULT_UNANSWERED;
	qp->atomic_peer = NULL;
	if (r < 0 || a.status == URO_ATOMIC_UNANSWERED)
		return RESULT_NO_ACK;
	if (a.status != IBV_WC_SUCCESS) {
		uro_qp_error(t->qp_peer, t->qp);
		return (int)a.status;
	}
	*old = a.old;
	return IBV_WC_SUCCESS;
}

/* The head's atomic ends without its answer (out of retries, flushed,
 * dropped with its QP): its slot goes back to the target's table. */
void uro_atomic_forget(struct uro_qp *qp)
{
	if (!qp->atomic_peer)
		return;
	uro_atomic_abandon(qp->atomic_peer, &qp->atomic_ticket);
	qp->atomic_peer = NULL;
}

/* The responder's checks of an atomic, made here as for every request so
 * that each failure has the status a NIC's responder gives it: 8-byte
 * alignment, then the key, PD, bounds and access. */
static int atomic_check(struct target *t, uint32_t rkey, uint64_t va, unsigned access)
{
	struct uro_holds h;
	struct iovec riov;
	int st;

	if (va & 7) {
		uro_qp_error(t->qp_peer, t->qp);
		return IBV_WC_REM_INV_REQ_ERR;
	}
	st = uro_remote_range(t, rkey, va, 8, access, &riov, &h);
	if (st == IBV_WC_SUCCESS)
		uro_release(&h); /* the target holds the key while it executes */
	return st;
}

/* Not executed on a mapping: the target executes it. */
#define RESULT_NOT_MAPPED (-100)

/* An atomic on memory this process maps (direct_map.h), executed here,
 * under the key's hold and after the same checks: IBV_WC_SUCCESS with the
 * original value in result (unless NULL), the responder's error, the
 * requester's IBV_WC_LOC_PROT_ERR, or RESULT_NOT_MAPPED. The result buffer
 * is probed and written in the atomic's own guarded access: a guarded
 * access of its own before and after cost a sigsetjmp each, and the probe
 * a locked instruction (127 of a direct FETCH_AND_ADD's 1,077
 * instructions in uroce, callgrind). Lock-free: no
 * process, stopped or not, holds anything another's atomic waits for. */
static int direct_atomic(struct target *t, const struct uro_atomic_request *rq, unsigned access,
			 void *result)
{
	struct uro_user_atomic a = {
	    .kind = rq->kind, .operand = rq->operand, .compare = rq->compare, .result = result};
	struct uro_holds h;
	struct iovec riov;
	int st, err;

	if (!uro_direct_shared(t->peer, rq->rkey))
		return RESULT_NOT_MAPPED;
	if (rq->va & 7) {
		uro_qp_error(t->qp_peer, t->qp);
		return IBV_WC_REM_INV_REQ_ERR;
	}
	st = uro_remote_range(t, rq->rkey, rq->va, 8, access, &riov, &h);
	if (st != IBV_WC_SUCCESS)
		return st;
	err = uro_direct_atomic(t->peer, &h, (uintptr_t)riov.iov_base, &a);
	uro_release(&h);
	if (err < 0)
		return RESULT_NOT_MAPPED;
	if (err && a.result_fault)
		return IBV_WC_LOC_PROT_ERR;
	if (err) { /* the owner's memory went from under a valid key */
		uro_qp_error(t->qp_peer, t->qp);
		return IBV_WC_REM_ACCESS_ERR;
	}
	return IBV_WC_SUCCESS;
}

/* An atomic the target executes: checked here first, unless it is the
 * head's, handed over already and waited for again. */
static int served_atomic(struct uro_qp *qp, struct target *t, const struct uro_atomic_request *rq,
			 unsigned access, uint64_t *old)
{
	int st;

	if (!qp->atomic_peer) {
		st = atomic_check(t, rq->rkey, rq->va, access);
		if (st != IBV_WC_SUCCESS)
			return st;
	}
	return atomic_answer(qp, t, rq, old);
}

static void atomic_request(const struct ibv_send_wr *wr, const struct target *t,
			   struct uro_atomic_request *rq)
{
	int cas = wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP;

	rq->kind = cas ? URO_ATOMIC_CMP_SWAP : URO_ATOMIC_FETCH_ADD;
	rq->rkey = wr->wr.atomic.rkey;
	rq->pd = t->key_pd;
	rq->qpn = t->qp->qpn;
	rq->va = wr->wr.atomic.remote_addr;
	rq->operand = cas ? wr->wr.atomic.swap : wr->wr.atomic.compare_add;
	rq->compare = wr->wr.atomic.compare_add;
}

/* FETCH_AND_ADD and CMP_AND_SWP, executed by the target process with one
 * CPU atomic on its memory: atomic with respect to every other atomic on
 * it, from this host or the wire (IBV_ATOMIC_HCA), and no initiator holds
 * anything another waits for (atomic_table.h). */
int uro_atomic_op(struct uro_qp *qp, const struct ibv_send_wr *wr, struct target *t,
		  const struct iovec *liov, int nl, uint64_t len)
{
	struct uro_atomic_request rq;
	uint64_t old;
	int st;

	if (len != 8 || nl != 1)
		return IBV_WC_LOC_LEN_ERR;
	atomic_request(wr, t, &rq);
	if (!qp->atomic_peer) {
		st = direct_atomic(t, &rq, IBV_ACCESS_REMOTE_ATOMIC, liov[0].iov_base);
		if (st != RESULT_NOT_MAPPED)
			return st;
		/* Probed before the target executes it; a retry waits for the
		 * answer to an atomic already handed over. */
		if (uro_user_probe(liov, nl, 1))
			return IBV_WC_LOC_PROT_ERR;
	}
	st = served_atomic(qp, t, &rq, IBV_ACCESS_REMOTE_ATOMIC, &old);
	if (st != IBV_WC_SUCCESS)
		return st;
	/* The original value, to the requester: its buffer may have gone since
	 * the probe. */
	return uro_user_copy(liov[0].iov_base, &old, 8) ? IBV_WC_LOC_PROT_ERR : IBV_WC_SUCCESS;
}

/* ATOMIC WRITE: 8 bytes land as one (IBTA 1.5, 9.4.7). Alignment and access
 * are an RDMA WRITE's plus an atomic's alignment. Where the target runs its
 * atomic server, the target stores them, atomic with respect to its other
 * atomics. A target without one takes no FETCH_AND_ADD or CMP_AND_SWP at
 * all (atomic_server.c starts with the first region or QP that could take
 * them): there the 8 bytes are one cross-memory write, as a WRITE's. */
int uro_atomic_write(struct uro_qp *qp, const struct ibv_send_wr *wr, struct target *t,
		     const struct iovec *liov, int nl, uint64_t len)
{
	struct uro_atomic_request rq = {.kind = URO_ATOMIC_WRITE,
					.rkey = wr->wr.rdma.rkey,
					.pd = t->key_pd,
					.qpn = t->qp->qpn,
					.va = wr->wr.rdma.remote_addr};
	struct uro_holds h;
	struct iovec riov;
	uint64_t old;
	int st;

	if (len != 8)
		return IBV_WC_LOC_LEN_ERR;
	if (!qp->atomic_peer && uro_direct_shared(t->peer, rq.rkey)) {
		if (uro_user_gather(&rq.operand, liov, nl))
			return IBV_WC_LOC_PROT_ERR;
		st = direct_atomic(t, &rq, IBV_ACCESS_REMOTE_WRITE, NULL);
		if (st != RESULT_NOT_MAPPED)
			return st;
	}
	if (!qp->atomic_peer && !uro_atomic_served(t->peer)) {
		if (wr->wr.rdma.remote_addr & 7) {
			uro_qp_error(t->qp_peer, t->qp);
			return IBV_WC_REM_INV_REQ_ERR;
		}
		st = uro_remote_range(t, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, 8,
				      IBV_ACCESS_REMOTE_WRITE, &riov, &h);
		return st == IBV_WC_SUCCESS ? uro_remote_move(t, 1, liov, nl, &riov, 8, &h) : st;
	}
	if (!qp->atomic_peer && uro_user_gather(&rq.operand, liov, nl))
		return IBV_WC_LOC_PROT_ERR;
	return served_atomic(qp, t, &rq, IBV_ACCESS_REMOTE_WRITE, &old);
}
