/* The responder of a connected QP on the wire (IBTA 9.7.5.1, 9.8.3): the
 * packet with the expected PSN is executed against this process's own
 * tables with the rules the shared-memory path applies (keys, access,
 * receives; segment_ops.h), and acknowledged when it asks; an earlier PSN
 * is a duplicate, answered without executing it twice; a later one is a
 * sequence error, NAKed once. A fault moves the QP to ERR and is NAKed
 * with the code the requester turns into the same completion status the
 * shared-memory path gives. UC sends no acknowledgement: a message with a
 * missing packet is dropped (IBTA 9.8.3). */
#include <arpa/inet.h>
#include <string.h>

#include "memory_window.h"
#include "opcode.h"
#include "remote_copy.h"
#include "segment_ops.h"
#include "user_memory.h"
#include "wire.h"
#include "xrc_srq.h"

/* What a packet came to: done, or the NAK it earns (IBTA 9.7.5.2.4). */
enum result {
	R_OK = -1,
	R_RNR = -2,
	R_DROP = -3,
	R_NAK_INV = 1,	  /* invalid request */
	R_NAK_ACCESS = 2, /* remote access error */
	R_NAK_OP = 3,	  /* remote operational error */
};

#define SYNDROME_ACK	 0x1f /* ACK, no credits: end-to-end credits unused */
#define SYNDROME_RNR(t)	 (0x20 | ((t)&31))
#define SYNDROME_NAK(c)	 (0x60 | (c))
#define NAK_PSN_SEQUENCE 0

_Static_assert(URO_WIRE_RUN <= URO_MAX_SGE + 1, "a run is one uro_remote_copy's list");

/* Places the QP's waiting WRITE run with one system call: 0, or -1 when
 * its memory was not there, a remote access error that moves the QP to
 * ERR, as a packet placed alone would. */
static int place_run(struct uro_context *ctx, struct uro_qp *qp)
{
	struct uro_wire_run *run = &qp->wire->rq.run;
	struct iovec dst = {run->dst, run->len};
	int err;

	if (!run->n)
		return 0;
	err = uro_remote_copy(run->peer, 1, run->src, (int)run->n, &dst, 1, run->len, &run->h);
	uro_release(&run->h);
	run->n = 0;
	if (!err)
		return 0;
	uro_qp_error(&ctx->self, qp->pub);
	return -1;
}

static int same_key(const struct uro_holds *a, const struct uro_holds *b)
{
	return a->n == 1 && b->n == 1 && a->entry[0] == b->entry[0] && a->key[0] == b->key[0];
}

/* Adds a WRITE packet's payload, bound for dst under the key h holds (or,
 * with nothing in h, under the run's own: run_holds_next), to the QP's
 * run: the run keeps its first packet's hold on the key. 0, or -1 when a
 * run it could not join failed to be placed. */
static int add_to_run(struct uro_context *ctx, struct uro_qp *qp, const struct uro_roce_packet *pkt,
		      struct iovec dst, struct uro_holds *h)
{
	struct uro_wire_endpoint *w = ctx->wire;
	struct uro_wire_run *run = &qp->wire->rq.run;
	/* A run is one copy: into one process's memory, at consecutive
	 * addresses, under one key, the one its hold keeps from being revoked
	 * until the copy is made. Bytes under another key joined to it would
	 * be copied under no hold of theirs: their region could be
	 * deregistered between the packet's check and the copy. */
	int joins = run->n && (uint8_t *)dst.iov_base == run->dst + run->len &&
		    run->peer == qp->wire->rq.side.peer && (!h->n || same_key(&run->h, h));

	if (run->n && !joins && place_run(ctx, qp)) {
		uro_release(h);
		return -1;
	}
	if (run->n) {
		uro_release(h);
	} else {
		if (w->nruns == URO_WIRE_BATCH) /* more QPs with a run than the list holds */
			uro_wire_place_runs(ctx);
		run->dst = dst.iov_base;
		run->peer = qp->wire->rq.side.peer;
		run->len = 0;
		run->h = *h;
		w->runs[w->nruns++] = qp;
	}
	run->src[run->n].iov_base = (void *)pkt->payload;
	run->src[run->n++].iov_len = pkt->payload_len;
	run->len += pkt->payload_len;
	run->psn = pkt->psn;
	return 0;
}

static void transmit(struct uro_context *ctx, struct uro_qp *qp, int code, uint32_t psn,
		     uint8_t syndrome, uint64_t atomic_ack)
{
	struct uro_wire_endpoint *w = ctx->wire;
	struct uro_roce_packet pkt;
	size_t tlen;

	uro_wire_header(&pkt, code, qp->attr.dest_qp_num, psn);
	pkt.atomic_ack = atomic_ack;
	pkt.aeth.syndrome = syndrome;
	pkt.aeth.msn = qp->wire->rq.msn;
	tlen = uro_roce_build(&pkt, w->burst[0] + URO_WIRE_HEAD);
	uro_wire_send(w, &qp->wire->peer, w->burst[0], tlen);
}

/* The ACK the batch left due, now: an answer never overtakes it. */
static void send_due_ack(struct uro_context *ctx, struct uro_qp *qp)
{
	struct uro_wire_rq *rq = &qp->wire->rq;

	if (!rq->ack_due)
		return;
	rq->ack_due = 0;
	transmit(ctx, qp, uro_wire_code(WIRE_ACK, uro_wire_transport(qp), WIRE_ONLY, 0),
		 rq->ack_psn, SYNDROME_ACK, 0);
}

/* An ACK, NAK or atomic ACK (with the original value) from this QP. */
static void reply(struct uro_context *ctx, struct uro_qp *qp, int code, uint32_t psn,
		  uint8_t syndrome, uint64_t atomic_ack)
{
	struct uro_wire_rq *rq = &qp->wire->rq;
	uint32_t run_psn = rq->run.psn;
	int ack = code == uro_wire_code(WIRE_ACK, uro_wire_transport(qp), WIRE_ONLY, 0);

	/* Nothing is acknowledged before it is placed; what could not be is
	 * NAKed instead. */
	if (place_run(ctx, qp)) {
		ack = 1;
		code = uro_wire_code(WIRE_ACK, uro_wire_transport(qp), WIRE_ONLY, 0);
		psn = run_psn;
		syndrome = SYNDROME_NAK(R_NAK_ACCESS);
	}
	/* An ACK of a later PSN says what the due one would (IBTA 9.7.5.1.2:
	 * coalesced acknowledgements). */
	if (ack && syndrome == SYNDROME_ACK && uro_psn_diff(psn, rq->ack_psn) >= 0)
		rq->ack_due = 0;
	send_due_ack(ctx, qp);
	transmit(ctx, qp, code, psn, syndrome, atomic_ack);
}

static void send_ack(struct uro_context *ctx, struct uro_qp *qp, uint32_t psn, uint8_t syndrome)
{
	reply(ctx, qp, uro_wire_code(WIRE_ACK, uro_wire_transport(qp), WIRE_ONLY, 0), psn, syndrome,
	      0);
}

/* A packet that asked for an ACK gets it when the batch it came in ends,
 * with every other of the batch's that asked (IBTA 9.7.5.1.2: one ACK
 * acknowledges every PSN up to its own), so that a stream of small
 * messages costs the responder one datagram a batch, not one a message. */
static void ack_later(struct uro_context *ctx, struct uro_qp *qp, uint32_t psn)
{
	struct uro_wire_endpoint *w = ctx->wire;
	struct uro_wire_rq *rq = &qp->wire->rq;

	if (!rq->ack_due) {
		if (w->nacks == URO_WIRE_ACKS) {
			send_ack(ctx, qp, psn, SYNDROME_ACK);
			return;
		}
		w->acks[w->nacks++] = qp;
	}
	rq->ack_due = 1;
	rq->ack_psn = psn;
}

/* Completes the receive the message took; pkt (its last packet) gives the
 * immediate data or the invalidated key, when it carries them. A message
 * received whole completes it once its PSN is accepted (complete_recv);
 * one cut short (pkt NULL), at once. */
static void finish_recv(struct uro_qp *qp, enum ibv_wc_status status, enum ibv_wc_opcode opcode,
			uint32_t byte_len, const struct uro_roce_packet *pkt)
{
	struct uro_wire_rq *rq = &qp->wire->rq;
	struct uro_cqe e;

	memset(&e, 0, sizeof(e));
	e.wr_id = rq->recv.wr_id;
	e.status = status;
	e.opcode = opcode;
	e.byte_len = byte_len;
	e.qp_num = qp->qpx.qp_base.qp_num;
	e.src_qp = qp->attr.dest_qp_num;
	if (pkt && (pkt->op->hdrs & HDR_IMMDT)) {
		e.imm_data = htonl(pkt->imm);
		e.wc_flags |= IBV_WC_WITH_IMM;
	}
	if (pkt && (pkt->op->hdrs & HDR_IETH)) {
		e.imm_data = pkt->inv_rkey; /* the union's invalidated_rkey */
		e.wc_flags |= IBV_WC_WITH_INV;
	}
	rq->has_recv = 0;
	if (pkt) {
		rq->done = e;
		rq->done_se = pkt->se;
		rq->has_done = 1;
		return;
	}
	/* Errors complete whether solicited or not. */
	uro_deliver(rq->recv_side.peer, rq->recv_side.cq, &e, 1);
}

/* The completion a message's last packet pkt left waiting, delivered:
 * after the message's ACK when it wakes a program sleeping on the CQ's
 * channel. A NIC acknowledges on receipt (IBTA 9.7.5.1), before its
 * program can answer; sent when the batch ends, the ACK could leave after
 * the answer of a program the completion woke, and its peer, sleeping on
 * events too, then saw the answer first (ib_send_lat -e on both sides:
 * after the event that follows a signalled SEND it polls the send CQ
 * once, and its next post failed "Couldn't post send" in 5 of 5 runs of
 * 20,000 iterations; the capture showed the answer ahead of the ACK).
 * Whether the message was acknowledged so. */
static int complete_recv(struct uro_context *ctx, struct uro_qp *qp,
			 const struct uro_roce_packet *pkt)
{
	struct uro_wire_rq *rq = &qp->wire->rq;
	struct uro_seg_cq *cq;
	int ack = 0;

	if (!rq->has_done)
		return 0;
	rq->has_done = 0;
	cq = uro_peer_cq(rq->recv_side.peer, rq->recv_side.cq);
	if (uro_wire_is_rc(qp) && pkt->ack_req && cq && uro_cq_would_wake(cq, rq->done_se)) {
		send_ack(ctx, qp, pkt->psn, SYNDROME_ACK);
		ack = 1;
	}
	uro_deliver(rq->recv_side.peer, rq->recv_side.cq, &rq->done, rq->done_se);
	return ack;
}

/* The receive's completion in error; the QP enters ERR (IBTA 9.9.3.1.2). */
static enum result recv_error(struct uro_context *ctx, struct uro_qp *qp, enum ibv_wc_status status,
			      enum result nak)
{
	finish_recv(qp, status, IBV_WC_RECV, 0, NULL);
	qp->wire->rq.in_send = 0;
	uro_qp_error(&ctx->self, qp->pub);
	return nak;
}

/* What a NAK's receiver sees, as the responder's own receive status. */
static enum ibv_wc_status nak_status(enum result nak)
{
	return nak == R_NAK_ACCESS ? IBV_WC_REM_ACCESS_ERR
	       : nak == R_NAK_OP   ? IBV_WC_REM_OP_ERR
				   : IBV_WC_REM_INV_REQ_ERR;
}

static enum result take_recv(struct uro_context *ctx, struct uro_qp *qp)
{
	struct uro_wire_rq *rq = &qp->wire->rq;

	if (rq->has_recv)
		return R_OK; /* kept from a message UC dropped, or an RNR retry */
	if ((uro_wire_is_rc(qp) && uro_wire_faults_rnr(ctx->wire)) ||
	    (qp->qpx.qp_base.qp_type == IBV_QPT_XRC_RECV
		 ? uro_take_srq_recv(rq->side.peer, rq->side.srq, &rq->recv)
		 : uro_take_recv(&ctx->self, qp->pub, &rq->recv))) {
		ctx->wire->n->rnr_naks_sent++;
		return R_RNR;
	}
	rq->has_recv = 1;
	rq->recv_side = rq->side;
	return R_OK;
}

/* A SEND's payload at offset off of its receive, the receive's keys held
 * for the copy (key_hold.h). */
static enum result place(struct uro_context *ctx, struct uro_qp *qp,
			 const struct uro_roce_packet *pkt)
{
	struct uro_wire_rq *rq = &qp->wire->rq;
	struct iovec riov[URO_MAX_SGE], dst[URO_MAX_SGE],
	    src = {(void *)pkt->payload, pkt->payload_len};
	struct uro_holds h;
	uint64_t cap;
	int nr, nd, err;

	if (!pkt->payload_len)
		return R_OK;
	uro_holds_init(&h, 0);
	if (uro_hold_sges(rq->recv_side.peer, rq->recv.sge, rq->recv.num_sge, &h) ||
	    uro_sge_iov(rq->recv_side.peer,
			uro_recv_pd(rq->recv_side.peer, rq->recv_side.srq, rq->recv_side.pd),
			rq->recv.sge, rq->recv.num_sge, 1, riov, &nr, &cap)) {
		uro_release(&h);
		/* As the shared-memory path's copy: a key gone before the first
		 * byte is a protection error, one gone mid-message an operation
		 * error. */
		return recv_error(ctx, qp, rq->off ? IBV_WC_LOC_QP_OP_ERR : IBV_WC_LOC_PROT_ERR,
				  R_NAK_OP);
	}
	if (rq->off + pkt->payload_len > cap) {
		uro_release(&h);
		return recv_error(ctx, qp, IBV_WC_LOC_LEN_ERR, R_NAK_INV);
	}
	nd = uro_iov_slice(riov, nr, rq->off, pkt->payload_len, dst);
	err = uro_remote_copy(rq->recv_side.peer, 1, &src, 1, dst, nd, pkt->payload_len, &h);
	uro_release(&h);
	/* Registered but no longer mapped: the shared-memory path's status. */
	if (err)
		return recv_error(ctx, qp, IBV_WC_LOC_QP_OP_ERR, R_NAK_OP);
	rq->off += pkt->payload_len;
	return R_OK;
}

static enum result send_packet(struct uro_context *ctx, struct uro_qp *qp,
			       const struct uro_roce_packet *pkt)
{
	struct uro_wire_rq *rq = &qp->wire->rq;
	enum result r;

	if ((!(pkt->op->pos & WIRE_FIRST)) != rq->in_send)
		return uro_wire_is_rc(qp) ? R_NAK_INV : R_DROP; /* out-of-sequence opcode */
	if (pkt->op->pos & WIRE_FIRST) {
		if ((r = take_recv(ctx, qp)) != R_OK)
			return r;
		rq->in_send = 1;
		rq->off = 0;
	}
	if ((r = place(ctx, qp, pkt)) != R_OK)
		return r;
	if (!(pkt->op->pos & WIRE_LAST))
		return R_OK;
	/* The responder invalidates the window first (IBTA 10.6.7.2.3). */
	if ((pkt->op->hdrs & HDR_IETH) &&
	    uro_mw_invalidate(rq->recv_side.peer, rq->recv_side.pd, qp->pub->qpn, pkt->inv_rkey))
		return recv_error(ctx, qp, IBV_WC_LOC_PROT_ERR, R_NAK_OP);
	rq->in_send = 0;
	finish_recv(qp, IBV_WC_SUCCESS, IBV_WC_RECV, (uint32_t)rq->off, pkt);
	return R_OK;
}

/* [va, va+len) under rkey, for access, in the process of the request's
 * receive side (this one, or an XRC SRQ's): held in h (hold), or under a
 * hold the caller already has (run_holds_next). A zero-length transfer
 * names no memory (IBTA C9-88). */
static enum result checked_range(struct uro_context *ctx, struct uro_qp *qp, uint32_t rkey,
				 uint64_t va, uint64_t len, unsigned access, struct iovec *out,
				 struct uro_holds *h, int hold)
{
	const struct uro_wire_side *side = &qp->wire->rq.side;
	uint64_t addr = 0;

	uro_holds_init(h, 1);
	if (hold && len && uro_hold(side->peer, rkey, h))
		return R_DROP; /* too busy to answer: the requester retries */
	if (!(qp->pub->access & access) ||
	    (len &&
	     uro_rkey_check(side->peer, side->pd, qp->pub->qpn, rkey, va, len, access, &addr))) {
		uro_release(h);
		uro_qp_error(&ctx->self, qp->pub);
		return R_NAK_ACCESS;
	}
	out->iov_base = (void *)(uintptr_t)addr;
	out->iov_len = len;
	return R_OK;
}

static enum result local_range(struct uro_context *ctx, struct uro_qp *qp, uint32_t rkey,
			       uint64_t va, uint64_t len, unsigned access, struct iovec *out,
			       struct uro_holds *h)
{
	return checked_range(ctx, qp, rkey, va, len, access, out, h, 1);
}

/* A WRITE's packet that continues the run its message's previous packet
 * ended (the PSN before it was the run's last): same key, next bytes, so
 * the run's hold covers it, and it takes none of its own: a hold and a
 * release (two locked instructions) a packet fewer. */
static int run_holds_next(const struct uro_wire_rq *rq, const struct uro_roce_packet *pkt)
{
	const struct uro_wire_run *run = &rq->run;

	return run->n && !(pkt->op->pos & WIRE_FIRST) &&
	       ((run->psn + 1) & URO_PSN_MASK) == pkt->psn && run->h.n == 1 &&
	       run->h.key[0] == rq->rkey && run->peer == rq->side.peer;
}

static enum result write_packet(struct uro_context *ctx, struct uro_qp *qp,
				const struct uro_roce_packet *pkt)
{
	struct uro_wire_rq *rq = &qp->wire->rq;
	struct iovec dst;
	struct uro_holds h;
	enum result r;

	if ((!(pkt->op->pos & WIRE_FIRST)) != rq->in_write)
		return uro_wire_is_rc(qp) ? R_NAK_INV : R_DROP;
	if (pkt->op->pos & WIRE_FIRST) {
		rq->rkey = pkt->reth.rkey;
		rq->va = pkt->reth.va;
		rq->left = pkt->reth.len;
		rq->off = 0;
	}
	if (pkt->payload_len > rq->left)
		return R_NAK_INV;
	/* With immediate data the message consumes a receive (IBTA 9.4.3). */
	if ((pkt->op->hdrs & HDR_IMMDT) && (r = take_recv(ctx, qp)) != R_OK)
		return r;
	r = checked_range(ctx, qp, rq->rkey, rq->va + rq->off, pkt->payload_len,
			  IBV_ACCESS_REMOTE_WRITE, &dst, &h, !run_holds_next(rq, pkt));
	if (r != R_OK)
		return r;
	if (!pkt->payload_len)
		uro_release(&h);
	else if (add_to_run(ctx, qp, pkt, dst, &h))
		return R_NAK_ACCESS;
	/* Placed before an ACK can say so, and before the message ends. */
	if ((pkt->ack_req || (pkt->op->pos & WIRE_LAST) || rq->run.n == URO_WIRE_RUN) &&
	    place_run(ctx, qp))
		return R_NAK_ACCESS;
	rq->in_write = !(pkt->op->pos & WIRE_LAST);
	rq->off += pkt->payload_len;
	rq->left -= pkt->payload_len;
	if (pkt->op->pos & WIRE_LAST) {
		if (rq->left)
			return R_NAK_INV; /* shorter than its RETH said */
		if (pkt->op->hdrs & HDR_IMMDT)
			finish_recv(qp, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
				    (uint32_t)rq->off, pkt);
	}
	return R_OK;
}

/* READ responses first .. first+n-1 of a READ of len bytes, built in the
 * endpoint's burst buffers, their payload copied from whole with one
 * system call (they carry consecutive bytes) and sent together. */
static int send_responses(struct uro_context *ctx, struct uro_qp *qp,
			  const struct uro_roce_packet *pkt, const struct iovec *whole,
			  struct uro_holds *h, uint32_t first, uint32_t n, uint32_t total)
{
	struct uro_wire_endpoint *w = ctx->wire;
	uint32_t mtu = qp->wire->mtu, len = pkt->reth.len, bytes = 0;
	struct iovec dst[URO_WIRE_BURST], src;
	size_t tlen[URO_WIRE_BURST];

	for (uint32_t k = 0; k < n; k++) {
		uint32_t off = (first + k) * mtu, plen = len - off < mtu ? len - off : mtu;
		struct uro_roce_packet resp;

		uro_wire_header(&resp,
				uro_wire_code(WIRE_READ_RESP, uro_wire_transport(qp),
					      uro_wire_place(first + k, total), 0),
				qp->attr.dest_qp_num, pkt->psn + first + k);
		resp.aeth.syndrome = SYNDROME_ACK;
		resp.aeth.msn = qp->wire->rq.msn;
		resp.payload_len = plen;
		tlen[k] = uro_roce_build(&resp, w->burst[k] + URO_WIRE_HEAD);
		dst[k].iov_base = uro_wire_payload(w->burst[k], &resp);
		dst[k].iov_len = plen;
		bytes += plen;
	}
	/* A zero-length READ names no memory (C9-88): no address to offset,
	 * not even NULL's. */
	src.iov_base = bytes ? (char *)whole->iov_base + (uint64_t)first * mtu : NULL;
	src.iov_len = bytes;
	if (bytes && uro_wire_gather(qp->wire->rq.side.peer, dst, n, &src, 1, h))
		return -1;
	uro_wire_send_burst(w, &qp->wire->peer, w->burst, tlen, n);
	return 0;
}

/* READ responses for [va, va+len) from psn on (IBTA 9.7.5.1.4): executed
 * again for a duplicate request, as the spec allows. */
static enum result read_request(struct uro_context *ctx, struct uro_qp *qp,
				const struct uro_roce_packet *pkt, uint32_t *npsn)
{
	uint32_t mtu = qp->wire->mtu, len = pkt->reth.len;
	uint32_t n = len ? (len + mtu - 1) / mtu : 1;
	struct uro_holds h;
	struct iovec whole;
	enum result r = local_range(ctx, qp, pkt->reth.rkey, pkt->reth.va, len,
				    IBV_ACCESS_REMOTE_READ, &whole, &h);

	if (r != R_OK)
		return r;
	send_due_ack(ctx, qp);
	for (uint32_t i = 0; i < n; i += URO_WIRE_BURST) {
		uint32_t k = n - i < URO_WIRE_BURST ? n - i : URO_WIRE_BURST;

		if (send_responses(ctx, qp, pkt, &whole, &h, i, k, n)) {
			uro_release(&h);
			uro_qp_error(&ctx->self, qp->pub);
			return R_NAK_ACCESS;
		}
	}
	uro_release(&h);
	*npsn = n;
	return R_OK;
}

static void atomic_reply(struct uro_context *ctx, struct uro_qp *qp, uint32_t psn, uint64_t v)
{
	reply(ctx, qp, uro_wire_code(WIRE_ATOMIC_ACK, uro_wire_transport(qp), WIRE_ONLY, 0), psn,
	      SYNDROME_ACK, v);
}

/* One CPU atomic on this process's memory, as its atomic server executes
 * the atomics of the host's other processes (atomic_table.h), so atomics
 * from both paths are atomic together (IBV_ATOMIC_HCA). */
static enum result atomic_request(struct uro_context *ctx, struct uro_qp *qp,
				  const struct uro_roce_packet *pkt)
{
	struct uro_wire_rq *rq = &qp->wire->rq;
	struct uro_user_atomic op = {.operand = pkt->atomic.swap_add,
				     .compare = pkt->atomic.compare};
	struct iovec dst;
	struct uro_holds h;
	enum result r;
	int err;

	if (pkt->atomic.va & 7) {
		uro_qp_error(&ctx->self, qp->pub);
		return R_NAK_INV;
	}
	/* A CPU atomic reaches this process's memory only: one for an XRC SRQ
	 * of another process is refused (docs/architecture.md, XRC). */
	if (qp->wire->rq.side.peer != &ctx->self) {
		uro_qp_error(&ctx->self, qp->pub);
		return R_NAK_OP;
	}
	r = local_range(ctx, qp, pkt->atomic.rkey, pkt->atomic.va, 8, IBV_ACCESS_REMOTE_ATOMIC,
			&dst, &h);
	if (r != R_OK)
		return r;
	op.kind = pkt->op->op == WIRE_FETCH_ADD ? URO_ATOMIC_FETCH_ADD : URO_ATOMIC_CMP_SWAP;
	err = uro_user_atomic(dst.iov_base, &op);
	uro_release(&h);
	if (err) {
		uro_qp_error(&ctx->self, qp->pub);
		return R_NAK_ACCESS;
	}
	rq->replay[rq->replay_next].psn = pkt->psn;
	rq->replay[rq->replay_next].value = op.old;
	rq->replay[rq->replay_next].valid = 1;
	rq->replay_next = (rq->replay_next + 1) % (URO_MAX_RD_ATOMIC + 1);
	rq->msn = (rq->msn + 1) & URO_PSN_MASK;
	atomic_reply(ctx, qp, pkt->psn, op.old);
	return R_OK;
}

/* ATOMIC WRITE (IBTA 1.5, 9.4.7): 8 aligned bytes stored at once, as the
 * shared-memory path's atomic server stores them; a duplicate is
 * acknowledged again, as a WRITE's. */
static enum result atomic_write(struct uro_context *ctx, struct uro_qp *qp,
				const struct uro_roce_packet *pkt)
{
	struct uro_user_atomic op = {.kind = URO_ATOMIC_WRITE};
	struct iovec dst;
	struct uro_holds h;
	enum result r;
	int err;

	if ((pkt->reth.va & 7) || pkt->reth.len != 8 || pkt->payload_len != 8)
		return R_NAK_INV;
	r = local_range(ctx, qp, pkt->reth.rkey, pkt->reth.va, 8, IBV_ACCESS_REMOTE_WRITE, &dst,
			&h);
	if (r != R_OK)
		return r;
	memcpy(&op.operand, pkt->payload, 8);
	err = uro_user_atomic(dst.iov_base, &op);
	uro_release(&h);
	if (err) {
		uro_qp_error(&ctx->self, qp->pub);
		return R_NAK_ACCESS;
	}
	return R_OK;
}

/* Where a request lands: a QP's own receive queue or SRQ, PD and CQ; for
 * an XRC target, the XRC SRQ its XRCETH names, in any process of this host
 * (xrc_srq.h), else the request is an invalid one. */
static enum result receive_side(struct uro_context *ctx, struct uro_qp *qp,
				const struct uro_roce_packet *pkt)
{
	struct uro_wire_side *side = &qp->wire->rq.side;
	const struct uro_seg_srq *srq;
	struct uro_peer *p;
	uint32_t index;

	if (qp->qpx.qp_base.qp_type != IBV_QPT_XRC_RECV) {
		*side = (struct uro_wire_side){.peer = &ctx->self,
					       .srq = qp->pub->srq,
					       .pd = qp->pub->pd,
					       .cq = qp->pub->recv_cq};
		return R_OK;
	}
	srq = uro_xrc_srq(ctx, pkt->xrc_srqn, qp->pub, &p, &index);
	if (!srq)
		return R_NAK_INV;
	*side = (struct uro_wire_side){.peer = p, .srq = index, .pd = srq->pd, .cq = srq->cq};
	return R_OK;
}

/* An XRC message's packets name the SRQ its first named: its receive was
 * taken there. */
static enum result same_srq(struct uro_qp *qp, const struct uro_roce_packet *pkt)
{
	struct uro_wire_rq *rq = &qp->wire->rq;

	if (qp->qpx.qp_base.qp_type != IBV_QPT_XRC_RECV)
		return R_OK;
	if (pkt->op->pos & WIRE_FIRST)
		rq->xrc_srqn = pkt->xrc_srqn;
	return pkt->xrc_srqn == rq->xrc_srqn ? R_OK : R_NAK_INV;
}

/* IBTA 9.7.5.1.1: a duplicate SEND or WRITE is acknowledged again, not
 * executed; a READ is executed again; an atomic is answered from the
 * saved result. */
static void duplicate(struct uro_context *ctx, struct uro_qp *qp, const struct uro_roce_packet *pkt)
{
	struct uro_wire_rq *rq = &qp->wire->rq;
	enum result r;
	uint32_t n;

	ctx->wire->n->duplicates++;
	switch (pkt->op->op) {
	case WIRE_READ_REQ:
		/* The region may be gone since: the retry learns it too. */
		r = receive_side(ctx, qp, pkt);
		if (r == R_OK)
			r = read_request(ctx, qp, pkt, &n);
		if (r > 0)
			send_ack(ctx, qp, pkt->psn, SYNDROME_NAK(r));
		return;
	case WIRE_CMP_SWAP:
	case WIRE_FETCH_ADD:
		for (unsigned i = 0; i <= URO_MAX_RD_ATOMIC; i++)
			if (rq->replay[i].valid && rq->replay[i].psn == pkt->psn)
				atomic_reply(ctx, qp, pkt->psn, rq->replay[i].value);
		return;
	default:
		if (pkt->ack_req)
			send_ack(ctx, qp, rq->epsn - 1, SYNDROME_ACK);
	}
}

static enum result execute(struct uro_context *ctx, struct uro_qp *qp,
			   const struct uro_roce_packet *pkt, uint32_t *npsn)
{
	enum result r;

	*npsn = 1;
	if ((r = same_srq(qp, pkt)) != R_OK || (r = receive_side(ctx, qp, pkt)) != R_OK)
		return r;
	switch (pkt->op->op) {
	case WIRE_SEND:
		r = send_packet(ctx, qp, pkt);
		break;
	case WIRE_WRITE:
		r = write_packet(ctx, qp, pkt);
		break;
	case WIRE_ATOMIC_WRITE:
		r = atomic_write(ctx, qp, pkt);
		break;
	case WIRE_READ_REQ:
		return read_request(ctx, qp, pkt, npsn);
	default:
		return atomic_request(ctx, qp, pkt);
	}
	if (r == R_OK && (pkt->op->pos & WIRE_LAST))
		qp->wire->rq.msn = (qp->wire->rq.msn + 1) & URO_PSN_MASK;
	return r;
}

/* UC: a packet out of sequence ends the message being received, which
 * is dropped; the next message starts afresh (IBTA 9.8.3). */
static void uc_packet(struct uro_context *ctx, struct uro_qp *qp, const struct uro_roce_packet *pkt)
{
	struct uro_wire_rq *rq = &qp->wire->rq;
	uint32_t npsn;

	if (pkt->psn != rq->epsn) {
		ctx->wire->n->out_of_sequence++;
		rq->in_send = rq->in_write = 0;
	}
	rq->epsn = (pkt->psn + 1) & URO_PSN_MASK;
	__atomic_store_n(&qp->pub->rq_psn, rq->epsn, __ATOMIC_RELAXED);
	if (execute(ctx, qp, pkt, &npsn) != R_OK)
		rq->in_send = rq->in_write = 0;
	complete_recv(ctx, qp, pkt);
}

void uro_wire_place_runs(struct uro_context *ctx)
{
	struct uro_wire_endpoint *w = ctx->wire;
	unsigned n = w->nruns;

	w->nruns = 0;
	for (unsigned i = 0; i < n; i++) {
		struct uro_qp *qp = w->runs[i];
		uint32_t psn = qp->wire->rq.run.psn;

		if (place_run(ctx, qp) && uro_wire_is_rc(qp))
			send_ack(ctx, qp, psn, SYNDROME_NAK(R_NAK_ACCESS));
	}
}

void uro_wire_batch_end(struct uro_context *ctx)
{
	struct uro_wire_endpoint *w = ctx->wire;
	unsigned n;

	uro_wire_place_runs(ctx);
	n = w->nacks;
	w->nacks = 0;
	for (unsigned i = 0; i < n; i++)
		send_due_ack(ctx, w->acks[i]);
}

void uro_wire_respond(struct uro_context *ctx, struct uro_qp *qp, const struct uro_roce_packet *pkt)
{
	struct uro_wire_rq *rq = &qp->wire->rq;
	uint32_t state = uro_qp_state(qp->pub), npsn;
	int32_t d;
	enum result r;

	if (state != IBV_QPS_RTR && state != IBV_QPS_RTS && state != IBV_QPS_SQD)
		return; /* not accepting packets: the requester's timer runs out */
	if (!uro_wire_is_rc(qp)) {
		uc_packet(ctx, qp, pkt);
		return;
	}
	d = uro_psn_diff(pkt->psn, rq->epsn);
	if (d < 0) {
		duplicate(ctx, qp, pkt);
		return;
	}
	if (d > 0) {
		ctx->wire->n->out_of_sequence++;
		if (!rq->nak_sent) {
			ctx->wire->n->seq_naks_sent++;
			send_ack(ctx, qp, rq->epsn, SYNDROME_NAK(NAK_PSN_SEQUENCE));
			rq->nak_sent = 1;
		}
		return;
	}
	rq->nak_sent = 0;
	uro_wire_request_came(ctx, qp);
	r = execute(ctx, qp, pkt, &npsn);
	if (r == R_OK) {
		rq->epsn = (rq->epsn + npsn) & URO_PSN_MASK;
		/* The expected PSN, where `uroce stat qp` reads it. */
		__atomic_store_n(&qp->pub->rq_psn, rq->epsn, __ATOMIC_RELAXED);
		/* READs and atomics were answered with their data. */
		if (!complete_recv(ctx, qp, pkt) && pkt->ack_req &&
		    (pkt->op->op == WIRE_SEND || pkt->op->op == WIRE_WRITE ||
		     pkt->op->op == WIRE_ATOMIC_WRITE))
			ack_later(ctx, qp, pkt->psn);
		return;
	}
	if (r == R_DROP)
		return;
	rq->nak_sent = 1;
	/* The receive a message cut short took completes with the responder's
	 * error, before the QP's others are flushed, as Linux rxe completes it
	 * (rxe_resp.c: a class C error, then the completion): off its queue,
	 * no flush would find it. */
	if (r != R_RNR && rq->has_recv) {
		rq->in_send = 0;
		finish_recv(qp, nak_status(r), IBV_WC_RECV, 0, NULL);
	}
	if (r != R_RNR && uro_qp_state(qp->pub) != IBV_QPS_ERR)
		uro_qp_error(&ctx->self, qp->pub); /* an out-of-sequence opcode, a bad length */
	if (r == R_RNR)
		send_ack(ctx, qp, pkt->psn, SYNDROME_RNR(qp->attr.min_rnr_timer));
	else
		send_ack(ctx, qp, pkt->psn, SYNDROME_NAK(r));
}
