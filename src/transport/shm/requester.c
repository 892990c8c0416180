/* The shared-memory requester: ibv_post_send(3) on a QP whose peer is a
 * process of this host. A request is checked as hardware checks it at
 * post time (errno and bad_wr), then executed at once against the
 * target's published tables, moving the bytes with cross-memory attach
 * (docs/design.md, Intra-host: the initiator is the NIC): the target
 * process runs no code, except for atomics, which it executes itself
 * (atomic_table.h). A request waits only when a NIC's would: behind an
 * RNR NAK (no receive posted), retried on the responder's RNR timer
 * (IBTA 9.7.5.2.8), or unacknowledged (the target QP is not ready for it),
 * retried on the local ACK timeout (IBTA 9.7.6.1.3). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "cq_ring.h"
#include "memory_window.h"
#include "opcode.h"
#include "port_counters.h"
#include "remote_copy.h"
#include "requester.h"
#include "shm.h"
#include "segment_ops.h"
#include "staged_payload.h"
#include "user_memory.h"
#include "send_wr.h"
#include "xrc_srq.h"

#define RNR_RETRY_FOREVER 7
/* How soon a QP passed over because another thread held its send queue is
 * looked at again (retry_all). */
#define BUSY_QUEUE_NS (50 * 1000ull)

static int waits(int result)
{
	return result == RESULT_RNR || result == RESULT_NO_ACK || result == RESULT_UNANSWERED;
}

/* How often an atomic the target holds is looked at for its answer. */
#define ANSWER_LOOK_NS (200 * 1000ull)

static int pending_alloc(struct uro_qp *qp)
{
	if (qp->pending)
		return 0;
	qp->pending = calloc(qp->cap.max_send_wr ? qp->cap.max_send_wr : 1, sizeof(*qp->pending));
	return qp->pending ? 0 : ENOMEM;
}

/* ... and present: on shared memory a buffer the program unmapped or
 * protected after registering it is the requester's local protection
 * error, found before the responder gives up a receive for it, as a
 * pinning NIC's DMA would never miss it (user_memory.h). Only a request
 * the responder acts on before the local copy is probed first: a SEND or
 * a WRITE with immediate data (a receive). A plain WRITE or READ finds a
 * bad local buffer from its own copy (uro_remote_move): probing it first
 * cost each small WRITE a guarded access. An atomic probes its result
 * buffer itself (atomic_requester.c). The wire needs no probe: its copies
 * of the program's memory report a fault themselves, before a packet
 * leaves or as a response lands. A SEND small enough to travel in its
 * completion (staged_payload.h) is copied into bounce instead, the copy
 * standing for the probe: staging it then reads only this process's own
 * bytes, one guarded access (a sigsetjmp) fewer per small SEND. */
static enum ibv_wc_status local_buffers(struct uro_context *ctx, struct uro_qp *qp,
					const struct ibv_send_wr *wr, const struct uro_opcode *op,
					int need_write, struct iovec *iov, int *n, uint64_t *len,
					uint8_t bounce[URO_STAGED_MAX])
{
	enum ibv_wc_status st = uro_send_gather(ctx, qp, wr, need_write, iov, n, len);
	int copy_tells = (op->kind == URO_OP_WRITE && !op->imm) || op->kind == URO_OP_READ ||
			 op->kind == URO_OP_ATOMIC;

	if (st != IBV_WC_SUCCESS || copy_tells)
		return st;
	if (bounce && op->kind == URO_OP_SEND && *len <= URO_STAGED_MAX) {
		if (uro_user_gather(bounce, iov, *n))
			return IBV_WC_LOC_PROT_ERR;
		iov[0].iov_base = bounce;
		iov[0].iov_len = *len;
		*n = 1;
		return IBV_WC_SUCCESS;
	}
	return uro_user_probe(iov, *n, need_write) ? IBV_WC_LOC_PROT_ERR : IBV_WC_SUCCESS;
}

/* Cross-memory attach; a peer that has gone is marked so, and every later
 * request to it fails at once. Returns 0 or an errno. */
static int move(struct uro_peer *p, int to_peer, const struct iovec *l, int nl,
		const struct iovec *r, int nr, uint64_t len, const struct uro_holds *h)
{
	return len ? uro_remote_copy(p, to_peer, l, nl, r, nr, len, h) : 0;
}

/* What a failed copy looks like to the requester: a vanished process
 * never acknowledges (RESULT_NO_ACK); memory the owner unmapped under a
 * valid key, or a key it revoked mid-copy, is the responder's access
 * violation (fault_status). */
static int move_status(struct uro_peer *p, int err, enum ibv_wc_status fault_status)
{
	if (!err)
		return IBV_WC_SUCCESS;
	if (p->dead || err == ESRCH || err == EPERM)
		return RESULT_NO_ACK;
	return (int)fault_status;
}

/* The QP this one is connected to, if it is there and accepting packets
 * (RTR, RTS or SQD, connected back to us): 0. Otherwise RESULT_NO_ACK:
 * whether the QP is not ready yet, destroyed or its process gone, its
 * packets are lost, and the requester retries on its ACK timeout until
 * retry_cnt runs out, as a NIC does (IBTA 9.7.6.1.3). */
static int target_ready(const struct uro_qp *qp, const struct target *t, uint32_t dest)
{
	uint32_t state = uro_qp_state(t->qp);
	uint32_t type = qp->qpx.qp_base.qp_type == IBV_QPT_XRC_SEND ? IBV_QPT_XRC_RECV
								    : qp->qpx.qp_base.qp_type;

	return __atomic_load_n(&t->qp->in_use, __ATOMIC_ACQUIRE) && t->qp->qpn == dest &&
	       t->qp->type == type && t->qp->dest_qpn == qp->qpx.qp_base.qp_num &&
	       (state == IBV_QPS_RTR || state == IBV_QPS_RTS || state == IBV_QPS_SQD);
}

/* An XRC request's SRQ (xrc_srq.h): any other than one of the target's
 * domain is an invalid request, which moves the target to ERR as other
 * invalid requests do. */
static int xrc_receive_side(struct uro_context *ctx, const struct ibv_send_wr *wr, struct target *t)
{
	const struct uro_seg_srq *srq =
	    uro_xrc_srq(ctx, wr->qp_type.xrc.remote_srqn, t->qp, &t->peer, &t->srq);

	if (!srq) {
		uro_qp_error(t->qp_peer, t->qp);
		return IBV_WC_REM_INV_REQ_ERR;
	}
	t->key_pd = srq->pd;
	t->recv_cq = srq->cq;
	return 0;
}

static int receive_side(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
			struct target *t)
{
	t->peer = t->qp_peer;
	if (qp->qpx.qp_base.qp_type == IBV_QPT_XRC_SEND)
		return xrc_receive_side(ctx, wr, t);
	t->srq = t->qp->srq;
	t->key_pd = t->qp->pd;
	t->recv_cq = t->qp->recv_cq;
	return 0;
}

static int connected_target(struct uro_context *ctx, struct uro_qp *qp, struct target *t)
{
	uint32_t dest = qp->attr.dest_qp_num;
	int err;

	t->qp_peer = uro_peer_of(ctx, dest, &err);
	if (!t->qp_peer)
		return RESULT_NO_ACK;
	t->qp = &t->qp_peer->qp[dest & (URO_MAX_QP - 1)];
	if (target_ready(qp, t, dest))
		return 0;
	/* The cached process may be a previous owner of the slot: a new one
	 * is looked up (in the registry: this path runs only when the QP is
	 * not found, never per request). */
	t->qp_peer = uro_peer_refresh(ctx, dest, &err);
	if (!t->qp_peer)
		return RESULT_NO_ACK;
	t->qp = &t->qp_peer->qp[dest & (URO_MAX_QP - 1)];
	return target_ready(qp, t, dest) ? 0 : RESULT_NO_ACK;
}

static int take_recv(struct target *t, struct uro_recv *r)
{
	return t->srq ? uro_take_srq_recv(t->peer, t->srq, r) : uro_take_recv(t->peer, t->qp, r);
}

static void target_cqe(struct uro_cqe *e, const struct target *t, uint32_t src_qpn,
		       const struct ibv_send_wr *wr, const struct uro_opcode *op)
{
	memset(e, 0, sizeof(*e));
	e->opcode = op->recv_wc;
	e->qp_num = t->qp->qpn;
	e->src_qp = src_qpn;
	if (op->imm) {
		e->imm_data = wr->imm_data;
		e->wc_flags |= IBV_WC_WITH_IMM;
	}
}

/* A responder-side error: the responder completes the receive in error and
 * its QP enters ERR (IBTA 9.9.3.1.2); the requester sees rstatus. */
static enum ibv_wc_status responder_error(struct target *t, struct uro_cqe *e,
					  enum ibv_wc_status local, enum ibv_wc_status rstatus)
{
	e->status = local;
	uro_deliver(t->peer, t->recv_cq, e, 1);
	uro_qp_error(t->qp_peer, t->qp);
	return rstatus;
}

/* Copies a SEND's payload into the receive's buffers, held while the
 * bytes land (key_hold.h) and looked up again under the hold: the first
 * lookup may predate a deregistration. */
static int copy_held(struct target *t, struct uro_recv *r, const struct iovec *liov, int nl,
		     uint64_t len)
{
	struct iovec riov[URO_MAX_SGE];
	struct uro_holds h;
	uint64_t cap;
	int nr, st;

	uro_holds_init(&h, 0);
	if (uro_hold_sges(t->peer, r->sge, r->num_sge, &h))
		st = IBV_WC_LOC_QP_OP_ERR;
	else if (uro_sge_iov(t->peer, uro_recv_pd(t->peer, t->srq, t->qp->pd), r->sge, r->num_sge,
			     1, riov, &nr, &cap) ||
		 len > cap)
		st = IBV_WC_LOC_PROT_ERR;
	else
		st = move_status(t->peer, move(t->peer, 1, liov, nl, riov, nr, len, &h),
				 IBV_WC_LOC_QP_OP_ERR);
	uro_release(&h);
	return st;
}

/* Places a SEND's payload in the receive r: IBV_WC_SUCCESS, the
 * responder's local error for a receive that cannot take it, or the
 * requester's view of a peer gone (move_status). A staged payload needs no
 * hold: the owner's poll places it only if the region is still there. */
static int place(struct target *t, struct uro_recv *r, const struct iovec *liov, int nl,
		 uint64_t len, struct uro_cqe *e)
{
	struct iovec riov[URO_MAX_SGE];
	uint64_t cap;
	int nr;

	if (uro_sge_iov(t->peer, uro_recv_pd(t->peer, t->srq, t->qp->pd), r->sge, r->num_sge, 1,
			riov, &nr, &cap))
		return IBV_WC_LOC_PROT_ERR;
	if (len > cap)
		return IBV_WC_LOC_LEN_ERR;
	if (uro_stage_payload(t->peer, r, liov, nl, len, e))
		return IBV_WC_SUCCESS;
	return copy_held(t, r, liov, nl, len);
}

static int send_message(struct uro_qp *qp, const struct ibv_send_wr *wr,
			const struct uro_opcode *op, struct target *t, const struct iovec *liov,
			int nl, uint64_t len)
{
	struct uro_recv r;
	struct uro_cqe e;
	int st;

	if (take_recv(t, &r))
		return RESULT_RNR;
	target_cqe(&e, t, qp->qpx.qp_base.qp_num, wr, op);
	e.wr_id = r.wr_id;
	if (op->inv) {
		/* The responder invalidates the window first (IBTA 10.6.7.2.3). */
		if (uro_mw_invalidate(t->peer, t->key_pd, t->qp->qpn, wr->invalidate_rkey))
			return responder_error(t, &e, IBV_WC_LOC_PROT_ERR, IBV_WC_REM_OP_ERR);
		e.wc_flags |= IBV_WC_WITH_INV;
		e.imm_data = wr->invalidate_rkey; /* the union's invalidated_rkey */
	}
	/* A receive that cannot take the message is the responder's malformed
	 * WQE: it completes in error and its QP enters ERR (IBTA 9.9.3.1.2),
	 * as Soft-RoCE reports it. */
	st = place(t, &r, liov, nl, len, &e);
	if (st == IBV_WC_LOC_LEN_ERR)
		return responder_error(t, &e, IBV_WC_LOC_LEN_ERR, IBV_WC_REM_INV_REQ_ERR);
	if (st == IBV_WC_LOC_PROT_ERR || st == IBV_WC_LOC_QP_OP_ERR)
		return responder_error(t, &e, (enum ibv_wc_status)st, IBV_WC_REM_OP_ERR);
	if (st != IBV_WC_SUCCESS)
		return st;
	e.byte_len = (uint32_t)len;
	uro_deliver(t->peer, t->recv_cq, &e, (wr->send_flags & IBV_SEND_SOLICITED) != 0);
	return IBV_WC_SUCCESS;
}

/* The target's bytes [va, va+len) under rkey, for an access that both the
 * responder QP and the key must grant (IBTA 9.7.5.1.3, 10.6.3), held in h
 * until uro_release (key_hold.h); a violation moves the responder QP to
 * ERR. */
int uro_remote_range(struct target *t, uint32_t rkey, uint64_t va, uint64_t len, unsigned access,
		     struct iovec *riov, struct uro_holds *h)
{
	uint64_t addr = 0;

	uro_holds_init(h, 1);
	/* A zero-length transfer names no memory: its R_Key and VA are not
	 * checked (IBTA C9-88), the QP's access is. */
	if (len && uro_hold(t->peer, rkey, h))
		return RESULT_NO_ACK;
	if (!(t->qp->access & access) ||
	    (len && uro_rkey_check(t->peer, t->key_pd, t->qp->qpn, rkey, va, len, access, &addr))) {
		uro_release(h);
		uro_qp_error(t->qp_peer, t->qp);
		return IBV_WC_REM_ACCESS_ERR;
	}
	riov->iov_base = (void *)(uintptr_t)addr;
	riov->iov_len = len;
	return IBV_WC_SUCCESS;
}

/* Moves the bytes of a WRITE or READ under the held key and lets it go. A
 * key revoked mid-copy, or memory gone under it, is the responder's access
 * violation, which moves its QP to ERR as a checked key's would; a fault
 * on the requester's own buffer (local_buffers did not probe it) is its
 * local protection error, and the responder is left alone. */
int uro_remote_move(struct target *t, int to_peer, const struct iovec *liov, int nl,
		    const struct iovec *riov, uint64_t len, struct uro_holds *h)
{
	int err = move(t->peer, to_peer, liov, nl, riov, 1, len, h);
	int st = move_status(t->peer, err, IBV_WC_REM_ACCESS_ERR);

	uro_release(h);
	if (err == EFAULT && uro_user_probe(liov, nl, !to_peer))
		return IBV_WC_LOC_PROT_ERR;
	if (st == IBV_WC_REM_ACCESS_ERR)
		uro_qp_error(t->qp_peer, t->qp);
	return st;
}

static int rdma_write(struct uro_qp *qp, const struct ibv_send_wr *wr, const struct uro_opcode *op,
		      struct target *t, const struct iovec *liov, int nl, uint64_t len)
{
	struct uro_holds h;
	struct iovec riov;
	struct uro_recv r;
	struct uro_cqe e;
	int st = uro_remote_range(t, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, len,
				  IBV_ACCESS_REMOTE_WRITE, &riov, &h);

	if (st != IBV_WC_SUCCESS)
		return st;
	/* With immediate data the message consumes a receive (IBTA 9.4.3). */
	if (op->imm && take_recv(t, &r)) {
		uro_release(&h);
		return RESULT_RNR;
	}
	st = uro_remote_move(t, 1, liov, nl, &riov, len, &h);
	if (st != IBV_WC_SUCCESS)
		return st;
	if (op->imm) {
		target_cqe(&e, t, qp->qpx.qp_base.qp_num, wr, op);
		e.wr_id = r.wr_id;
		e.byte_len = (uint32_t)len;
		uro_deliver(t->peer, t->recv_cq, &e, (wr->send_flags & IBV_SEND_SOLICITED) != 0);
	}
	return IBV_WC_SUCCESS;
}

static int rdma_read(const struct ibv_send_wr *wr, struct target *t, const struct iovec *liov,
		     int nl, uint64_t len)
{
	struct uro_holds h;
	struct iovec riov;
	int st = uro_remote_range(t, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, len,
				  IBV_ACCESS_REMOTE_READ, &riov, &h);

	if (st != IBV_WC_SUCCESS)
		return st;
	return uro_remote_move(t, 0, liov, nl, &riov, len, &h);
}

/* RC and UC. A UC responder drops what it cannot take, silently: the
 * requester has no acknowledgements to learn of it (IBTA 9.8.3). */
static int execute_connected(struct uro_context *ctx, struct uro_qp *qp,
			     const struct ibv_send_wr *wr, uint32_t *byte_len)
{
	const struct uro_opcode *op = uro_opcode(wr->opcode);
	/* XRC is reliable as RC is (IBTA A14). */
	int rc_qp =
	    qp->qpx.qp_base.qp_type == IBV_QPT_RC || qp->qpx.qp_base.qp_type == IBV_QPT_XRC_SEND;
	int writes_local = op->kind == URO_OP_READ || op->kind == URO_OP_ATOMIC;
	struct iovec liov[URO_MAX_SGE];
	uint8_t bounce[URO_STAGED_MAX];
	struct target t;
	uint64_t len;
	int nl, st;

	if (op->kind == URO_OP_BIND_MW || op->kind == URO_OP_LOCAL_INV)
		return uro_mw_execute(ctx, qp, wr); /* local: no packet leaves */
	st = local_buffers(ctx, qp, wr, op, writes_local, liov, &nl, &len, bounce);
	if (st != IBV_WC_SUCCESS)
		return st;
	*byte_len = (uint32_t)len;
	st = connected_target(ctx, qp, &t);
	if (!st)
		st = receive_side(ctx, qp, wr, &t);
	if (st)
		return rc_qp ? st : IBV_WC_SUCCESS;
	switch (op->kind) {
	case URO_OP_SEND:
		st = send_message(qp, wr, op, &t, liov, nl, len);
		break;
	case URO_OP_WRITE:
		st = rdma_write(qp, wr, op, &t, liov, nl, len);
		break;
	case URO_OP_READ:
		st = rdma_read(wr, &t, liov, nl, len);
		break;
	case URO_OP_ATOMIC_WRITE:
		st = uro_atomic_write(qp, wr, &t, liov, nl, len);
		break;
	default:
		st = uro_atomic_op(qp, wr, &t, liov, nl, len);
		break;
	}
	return rc_qp ? st : IBV_WC_SUCCESS;
}

static int execute(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
		   uint32_t *byte_len)
{
	struct iovec liov[URO_MAX_SGE];
	uint64_t len;
	int nl, st;

	*byte_len = 0;
	if (qp->qpx.qp_base.qp_type != IBV_QPT_UD)
		return execute_connected(ctx, qp, wr, byte_len);
	st = local_buffers(ctx, qp, wr, uro_opcode(wr->opcode), 0, liov, &nl, &len, NULL);
	if (st != IBV_WC_SUCCESS)
		return st;
	*byte_len = (uint32_t)len;
	return ctx->ud_send(ctx, qp, wr, liov, nl, len);
}

/* Runs one request; a result that waits() leaves it to be retried. */
static int run(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
	       uint32_t seq)
{
	uint32_t state = uro_qp_state(qp->pub);
	uint32_t byte_len;
	int st;

	if (state == IBV_QPS_ERR || state == IBV_QPS_SQE) {
		uro_send_complete(ctx, qp, wr, seq, IBV_WC_WR_FLUSH_ERR, 0);
		return IBV_WC_WR_FLUSH_ERR;
	}
	st = execute(ctx, qp, wr, &byte_len);
	if (waits(st))
		return st;
	uro_send_complete(ctx, qp, wr, seq, (enum ibv_wc_status)st, byte_len);
	if (st != IBV_WC_SUCCESS)
		uro_requester_error(ctx, qp);
	return st;
}

static uint64_t sooner_of(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* An RNR NAK, as a NIC's responder would have sent it and its requester
 * received it: counted, and the responder's RNR timer returned. */
static uint64_t rnr_nak(struct uro_context *ctx, struct uro_qp *qp)
{
	struct target t;
	int no_target = connected_target(ctx, qp, &t);

	uro_count(&qp->pub->counters.rnr_waits, 1);
	uro_count(&ctx->self.hdr->counters.rnr_naks_received, 1);
	if (!no_target)
		uro_count(&t.qp_peer->hdr->counters.rnr_naks_sent, 1);
	return uro_rnr_timer_ns(no_target ? 0 : t.qp->min_rnr_timer);
}

/* One retry of *left spent: 0 when none was left. */
static int spend(unsigned *left)
{
	if (!*left)
		return 0;
	(*left)--;
	return 1;
}

/* After an attempt that must wait: 1 with the head's next attempt timed,
 * 0 when it has run out of retries. As a NIC's requester spends them
 * (IBTA 9.7.5.2.8, 9.7.6.1.3; rxe_comp.c, COMPST_RNR_RETRY and
 * COMPST_ERROR_RETRY): an RNR NAK spends one as it comes, before the RNR
 * timer (rnr_retry 0: none, the request fails at once; 7: never runs
 * out); silence spends one when the ACK timeout runs out, before the
 * request is sent again (retry_due); an atomic the target holds is looked
 * at again until its ACK timeout runs out, and then spends one. So a
 * request is sent at most 1 + rnr_retry times into RNR NAKs, and 1 +
 * retry_cnt times into silence. */
static int may_retry(struct uro_context *ctx, struct uro_qp *qp, int why)
{
	uint64_t now = uro_now_ns(), timeout = uro_ack_timeout_ns(qp->attr.timeout);

	qp->head_waits = why;
	if (why == RESULT_RNR) {
		uint64_t wait = rnr_nak(ctx, qp);

		if (qp->attr.rnr_retry != RNR_RETRY_FOREVER && !spend(&qp->rnr_left))
			return 0;
		qp->rnr_deadline_ns = now + wait;
		return 1;
	}
	if (why == RESULT_UNANSWERED) {
		if (!qp->ack_deadline_ns)
			qp->ack_deadline_ns = now + timeout;
		if (now >= qp->ack_deadline_ns) { /* its ACK timeout ran out */
			if (qp->attr.timeout && !spend(&qp->retry_left))
				return 0;
			qp->ack_deadline_ns = now + timeout;
		}
		qp->rnr_deadline_ns = sooner_of(now + ANSWER_LOOK_NS, qp->ack_deadline_ns);
		return 1;
	}
	qp->rnr_deadline_ns = now + timeout;
	return 1;
}

/* The head's ACK timeout ran out with no answer: 1 when a retry is left
 * to send it again (timeout 0 waits for as long as its target lives). */
static int retry_due(struct uro_qp *qp)
{
	if (qp->head_waits != RESULT_NO_ACK || !qp->attr.timeout)
		return 1;
	return spend(&qp->retry_left);
}

/* Out of retries (IBTA 10.7.3.1): the head completes in error, and the QP
 * with it. */
static void give_up(struct uro_context *ctx, struct uro_qp *qp, int why)
{
	struct uro_pending *p = &qp->pending[qp->pending_head];

	uro_send_complete(ctx, qp, &p->wr, p->seq,
			  why == RESULT_RNR ? IBV_WC_RNR_RETRY_EXC_ERR : IBV_WC_RETRY_EXC_ERR, 0);
	uro_requester_error(ctx, qp);
}

static void pop_pending(struct uro_context *ctx, struct uro_qp *qp)
{
	uint32_t cap = qp->cap.max_send_wr ? qp->cap.max_send_wr : 1;

	uro_atomic_forget(qp);
	qp->ack_deadline_ns = 0;
	qp->head_waits = 0;
	qp->pending_head = (qp->pending_head + 1) % cap;
	if (--qp->pending_n == 0)
		__atomic_sub_fetch(&ctx->pending_qps, 1, __ATOMIC_RELEASE);
	/* A new head, new counts. */
	qp->rnr_left = qp->attr.rnr_retry;
	qp->retry_left = qp->attr.retry_cnt;
}

/* Queues a request behind the waiting ones, or as the head that waits
 * after its first attempt (why), which may already have spent its last
 * retry. */
static void defer(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
		  uint32_t seq, int why)
{
	uint32_t cap = qp->cap.max_send_wr ? qp->cap.max_send_wr : 1;

	uro_pending_copy(&qp->pending[(qp->pending_head + qp->pending_n) % cap], wr, seq);
	if (qp->pending_n++)
		return;
	__atomic_add_fetch(&ctx->pending_qps, 1, __ATOMIC_RELEASE);
	qp->rnr_left = qp->attr.rnr_retry;
	qp->retry_left = qp->attr.retry_cnt;
	qp->rnr_deadline_ns = 0;
	if (why && !may_retry(ctx, qp, why)) {
		give_up(ctx, qp, why);
		pop_pending(ctx, qp);
	}
}

/* Retries the head of a QP's pending queue once its timer is due; what
 * follows it runs in order. Caller holds sq_lock. */
static void retry_pending(struct uro_context *ctx, struct uro_qp *qp)
{
	/* A drained send queue (SQD) starts nothing new (IBTA 10.3.1). */
	while (qp->pending_n && uro_qp_state(qp->pub) != IBV_QPS_SQD &&
	       uro_now_ns() >= qp->rnr_deadline_ns) {
		struct uro_pending *p = &qp->pending[qp->pending_head];
		int st = RESULT_NO_ACK;

		if (retry_due(qp)) {
			st = run(ctx, qp, &p->wr, p->seq);
			if (waits(st) && may_retry(ctx, qp, st))
				return;
		}
		if (waits(st))
			give_up(ctx, qp, st);
		pop_pending(ctx, qp);
	}
}

static uint64_t sooner(uint64_t next, uint64_t wait)
{
	return !next || wait < next ? wait : next;
}

/* A QP whose send queue another thread holds is passed over: that thread
 * is posting, and a post retries what waits first. Spinning for it would
 * burn the core the holder may need: the progress thread shares the
 * program's (pinned, one core each), and there it spun for whole time
 * slices while the program, holding the lock, waited to run again
 * (ib_send_bw 8 B on shared memory, after its first RNR wait: 17% of the
 * program's core). */
static uint64_t retry_all(struct uro_context *ctx, uint64_t next)
{
	if (!__atomic_load_n(&ctx->pending_qps, __ATOMIC_ACQUIRE))
		return next;
	for (unsigned i = 0; i < URO_MAX_QP; i++) {
		struct uro_qp *qp = ctx->qps[i];
		uint64_t now;

		if (!qp || !__atomic_load_n(&qp->pending_n, __ATOMIC_ACQUIRE))
			continue;
		if (pthread_spin_trylock(&qp->sq_lock)) {
			next = sooner(next, BUSY_QUEUE_NS);
			continue;
		}
		retry_pending(ctx, qp);
		now = uro_now_ns();
		if (qp->pending_n)
			next =
			    sooner(next, qp->rnr_deadline_ns > now ? qp->rnr_deadline_ns - now : 1);
		pthread_spin_unlock(&qp->sq_lock);
	}
	return next;
}

uint64_t uro_shm_progress(struct uro_context *ctx, uint64_t next)
{
	return retry_all(ctx, next);
}

/* Destroying or resetting a QP drops what waits (IBTA 10.3.1). */
void uro_qp_drop_pending(struct uro_qp *qp)
{
	struct uro_context *ctx = to_uctx(qp->qpx.qp_base.context);

	uro_spin_lock(&qp->sq_lock);
	uro_atomic_forget(qp);
	if (qp->pending_n)
		__atomic_sub_fetch(&ctx->pending_qps, 1, __ATOMIC_RELEASE);
	qp->pending_n = 0;
	qp->pending_head = 0;
	pthread_spin_unlock(&qp->sq_lock);
}

int uro_shm_post_send(struct uro_context *ctx, struct uro_qp *qp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad)
{
	int err = 0, newly_waiting;
	int locked = uro_mt_lock(&qp->sq_lock);
	int was_waiting = qp->pending_n != 0;

	if (qp->pending_n)
		retry_pending(ctx, qp);
	for (; wr; wr = wr->next) {
		uint32_t seq;
		int st;

		err = uro_send_validate(qp, wr);
		if (err)
			break;
		seq = qp->sq_posted++;
		/* Behind waiting requests, or in SQD, a request waits too:
		 * a QP's requests execute in order (IBTA 9.5). */
		if (qp->pending_n || uro_qp_state(qp->pub) == IBV_QPS_SQD) {
			if ((err = pending_alloc(qp)))
				break;
			defer(ctx, qp, wr, seq, 0);
			continue;
		}
		st = run(ctx, qp, wr, seq);
		if (waits(st)) {
			if ((err = pending_alloc(qp))) {
				uro_atomic_forget(qp); /* not kept: its slot goes back */
				break;
			}
			defer(ctx, qp, wr, seq, st);
		}
	}
	/* The progress thread hears of a queue that starts waiting; one that
	 * waited already is on its timers. */
	newly_waiting = !was_waiting && qp->pending_n != 0;
	uro_mt_unlock(&qp->sq_lock, locked);
	if (newly_waiting)
		uro_progress_kick(ctx);
	if (err)
		*bad = wr;
	return err;
}
