/* The requester of a connected QP on the wire (IBTA 9.7.4, 9.8.3): each
 * WQE is cut into packets by the path MTU and numbered with PSNs, sent
 * at once (READs and atomics as far as max_rd_atomic allows), and kept
 * until acknowledged. Silence past the local ACK timeout sends everything
 * unacknowledged again from the oldest (go-back-N, IBTA 9.7.6.1.3), until
 * retry_cnt is spent; an RNR NAK waits for the responder's timer first,
 * until rnr_retry is spent (7: for ever). Completions leave in order. UC
 * has no acknowledgements: a WQE is complete once sent (IBTA 9.8.3). */
#include <arpa/inet.h>
#include <string.h>

#include "log.h"
#include "opcode.h"
#include "port_counters.h"
#include "remote_copy.h"
#include "socket_buffer.h"
#include "wire.h"

#define RNR_FOREVER 7

/* Packets in flight unacknowledged: as many bytes as the peer's socket
 * buffer takes the way this endpoint sends them (uro_wire_window_bytes).
 * A long message asks for an ACK every half window, so that it keeps
 * flowing. */
static uint32_t window(const struct uro_context *ctx, const struct uro_qp *qp)
{
	uint32_t n = uro_wire_window_bytes(ctx->wire) / qp->wire->mtu;

	return n < 8 ? 8 : n;
}

/* Whether the packet with this PSN may leave now. */
static int in_window(const struct uro_context *ctx, const struct uro_qp *qp, uint32_t psn)
{
	return uro_psn_diff(psn, qp->wire->acked) <= (int32_t)window(ctx, qp);
}

static void arm(struct uro_qp *qp)
{
	qp->wire->deadline = uro_now_ns() + uro_ack_timeout_ns(qp->attr.timeout);
	qp->wire->rnr_wait = 0;
}

/* A request's headers: an XRC request names the SRQ it is for in each of
 * its packets (Annex A14). */
static void header_for(struct uro_roce_packet *pkt, const struct uro_qp *qp,
		       const struct uro_wire_wqe *q, enum uro_wire_op op, uint8_t pos,
		       uint8_t extra, uint32_t psn)
{
	uro_wire_header(pkt, uro_wire_code(op, uro_wire_transport(qp), pos, extra),
			qp->attr.dest_qp_num, psn);
	pkt->xrc_srqn = q->p.wr.qp_type.xrc.remote_srqn & 0xffffff; /* 24 bits */
}

/* Sends a request that carries no payload (a READ request, an atomic)
 * from the QP's first burst buffer: the requester's, under its send lock. */
static void send_request(struct uro_context *ctx, struct uro_qp *qp, struct uro_roce_packet *pkt)
{
	struct uro_qp_wire *wq = qp->wire;
	size_t tlen = uro_roce_build(pkt, wq->burst[0] + URO_WIRE_HEAD);

	uro_wire_send(ctx->wire, &wq->peer, wq->burst[0], tlen);
}

/* Packets built in a QP's burst buffers, of one message or of several
 * that follow each other, waiting for their send: one system call for a
 * stream of small messages as for a long one's packets. */
struct burst {
	unsigned n;
	unsigned first;	   /* the current message's first packet */
	uint64_t off, len; /* the current message's bytes its packets carry */
	size_t tlen[URO_WIRE_BURST];
	struct iovec dst[URO_WIRE_BURST];
};

/* Copies the current message's payload into its packets from the
 * request's buffers, with as few copies as uro_wire_gather can (they carry
 * consecutive bytes of the message). A buffer the program unmapped under
 * its key is the local protection error a NIC reports, and none of the
 * message's packets leave. */
static enum ibv_wc_status fill(struct uro_context *ctx, struct burst *b, const struct iovec *liov,
			       int nl)
{
	struct iovec src[URO_MAX_SGE];
	unsigned first = b->first;
	int ns;

	b->first = b->n;
	if (!b->len)
		return IBV_WC_SUCCESS;
	ns = uro_iov_slice(liov, nl, b->off, b->len, src);
	if (!uro_wire_gather(&ctx->self, b->dst + first, b->n - first, src, ns, NULL))
		return IBV_WC_SUCCESS;
	b->n = b->first = first;
	return IBV_WC_LOC_PROT_ERR;
}

static void send_burst(struct uro_context *ctx, struct uro_qp *qp, struct burst *b)
{
	if (b->n)
		uro_wire_send_burst(ctx->wire, &qp->wire->peer, qp->wire->burst, b->tlen, b->n);
	b->n = b->first = 0;
}

/* Builds a packet of the current message into the next burst buffer. */
static void add_packet(struct uro_qp *qp, struct burst *b, struct uro_roce_packet *pkt,
		       uint64_t off)
{
	uint8_t *buf = qp->wire->burst[b->n];

	if (b->n == b->first) {
		b->off = off;
		b->len = 0;
	}
	b->tlen[b->n] = uro_roce_build(pkt, buf + URO_WIRE_HEAD);
	b->dst[b->n].iov_base = uro_wire_payload(buf, pkt);
	b->dst[b->n].iov_len = pkt->payload_len;
	b->len += pkt->payload_len;
	b->n++;
}

/* Sends the message's packets from q->tx on, as far as the window goes,
 * a burst at a time. */
static enum ibv_wc_status send_message(struct uro_context *ctx, struct uro_qp *qp,
				       struct uro_wire_wqe *q, struct burst *b,
				       const struct iovec *liov, int nl, uint64_t len)
{
	const struct ibv_send_wr *wr = &q->p.wr;
	const struct uro_opcode *op = uro_opcode(wr->opcode);
	enum uro_wire_op wop = q->kind == URO_OP_SEND		? WIRE_SEND
			       : q->kind == URO_OP_ATOMIC_WRITE ? WIRE_ATOMIC_WRITE
								: WIRE_WRITE;
	uint32_t mtu = qp->wire->mtu, half = window(ctx, qp) / 2;

	for (uint32_t i = q->tx; i < q->npsn; i = ++q->tx) {
		uint8_t pos = uro_wire_place(i, q->npsn);
		uint8_t extra = (pos & WIRE_LAST) ? (op->imm   ? HDR_IMMDT
						     : op->inv ? HDR_IETH
							       : 0)
						  : 0;
		uint64_t off = (uint64_t)i * mtu;
		struct uro_roce_packet pkt;

		header_for(&pkt, qp, q, wop, pos, extra, q->psn + i);
		if (uro_wire_is_rc(qp) && !in_window(ctx, qp, q->psn + i))
			break; /* the rest when ACKs open the window */
		pkt.ack_req = (pos & WIRE_LAST) || i % half == half - 1;
		pkt.se = (pos & WIRE_LAST) && (wr->send_flags & IBV_SEND_SOLICITED);
		pkt.reth.va = wr->wr.rdma.remote_addr;
		pkt.reth.rkey = wr->wr.rdma.rkey;
		pkt.reth.len = (uint32_t)len;
		pkt.imm = ntohl(wr->imm_data);
		pkt.inv_rkey = wr->invalidate_rkey;
		pkt.payload_len = (uint32_t)(len - off < mtu ? len - off : mtu);
		add_packet(qp, b, &pkt, off);
		if (b->n == URO_WIRE_BURST) {
			if (fill(ctx, b, liov, nl) != IBV_WC_SUCCESS)
				return IBV_WC_LOC_PROT_ERR;
			send_burst(ctx, qp, b);
		}
	}
	return fill(ctx, b, liov, nl);
}

/* A READ asks for at most a window of responses at a time: the rest in
 * further READ requests for the rest of the range, with the PSNs that
 * follow, as a retried READ asks for part of its range (IBTA 9.7.5.1.4);
 * all the responses at once would overflow this side's socket buffer.
 * Asked again, a READ starts at its first missing response and ends where
 * the request that response belonged to ended: the responder's expected
 * PSN moved by whole requests, and each asked again is a duplicate to it.
 * Asked again from the request's start, the 48 responses of a window at
 * path MTU 1024 under 10% loss came whole once in about 160 tries. */
static void send_read(struct uro_context *ctx, struct uro_qp *qp, struct uro_wire_wqe *q,
		      uint64_t len)
{
	const struct ibv_send_wr *wr = &q->p.wr;
	uint32_t mtu = qp->wire->mtu;

	while (q->tx < q->npsn) {
		uint32_t w = window(ctx, qp), to_end = w - q->tx % w;
		uint32_t n = q->npsn - q->tx < to_end ? q->npsn - q->tx : to_end;
		uint64_t off = (uint64_t)q->tx * mtu;
		struct uro_roce_packet pkt;

		if (!in_window(ctx, qp, q->psn + q->tx + n - 1))
			return;
		header_for(&pkt, qp, q, WIRE_READ_REQ, WIRE_ONLY, 0, q->psn + q->tx);
		pkt.ack_req = 1;
		pkt.reth.va = wr->wr.rdma.remote_addr + off;
		pkt.reth.rkey = wr->wr.rdma.rkey;
		pkt.reth.len =
		    (uint32_t)(len - off < (uint64_t)n * mtu ? len - off : (uint64_t)n * mtu);
		send_request(ctx, qp, &pkt);
		q->tx += n;
	}
}

/* AtomicETH (IBTA 9.3.5): swap or add data, then compare data. */
static void send_atomic(struct uro_context *ctx, struct uro_qp *qp, struct uro_wire_wqe *q)
{
	const struct ibv_send_wr *wr = &q->p.wr;
	int cas = wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP;
	struct uro_roce_packet pkt;

	header_for(&pkt, qp, q, cas ? WIRE_CMP_SWAP : WIRE_FETCH_ADD, WIRE_ONLY, 0, q->psn);
	pkt.ack_req = 1;
	pkt.atomic.va = wr->wr.atomic.remote_addr;
	pkt.atomic.rkey = wr->wr.atomic.rkey;
	pkt.atomic.swap_add = cas ? wr->wr.atomic.swap : wr->wr.atomic.compare_add;
	pkt.atomic.compare = cas ? wr->wr.atomic.compare_add : 0;
	send_request(ctx, qp, &pkt);
	q->tx = 1;
}

/* PSNs a WQE takes: one per packet, one per READ response (IBTA 9.7.1). */
static uint32_t psns_of(uint8_t kind, uint64_t len, uint32_t mtu)
{
	if (kind == URO_OP_ATOMIC)
		return 1;
	return len ? (uint32_t)((len + mtu - 1) / mtu) : 1;
}

/* Sends (or sends again) one WQE; its PSNs are given the first time. A
 * SEND's or WRITE's packets join the burst, which the caller sends. */
static void transmit(struct uro_context *ctx, struct uro_qp *qp, struct uro_wire_wqe *q,
		     struct burst *b)
{
	const struct ibv_send_wr *wr = &q->p.wr;
	struct iovec liov[URO_MAX_SGE];
	enum ibv_wc_status st;
	uint64_t len;
	int nl;

	if (q->kind == URO_OP_BIND_MW || q->kind == URO_OP_LOCAL_INV) {
		q->status = (uint8_t)uro_mw_execute(ctx, qp, wr); /* no packet leaves */
		q->done = q->sent = 1;
		return;
	}
	st = uro_send_gather(ctx, qp, wr, uro_wire_reads_back(q->kind), liov, &nl, &len);
	if (st == IBV_WC_SUCCESS && (q->kind == URO_OP_ATOMIC || q->kind == URO_OP_ATOMIC_WRITE) &&
	    len != 8)
		st = IBV_WC_LOC_LEN_ERR;
	if (st != IBV_WC_SUCCESS) {
		q->status = (uint8_t)st;
		q->done = q->sent = 1;
		return;
	}
	if (!q->sent) {
		q->npsn = psns_of(q->kind, len, qp->wire->mtu);
		q->psn = qp->wire->psn;
		qp->wire->psn = (qp->wire->psn + q->npsn) & URO_PSN_MASK;
		/* The next PSN, where `uroce stat qp` reads it. */
		__atomic_store_n(&qp->pub->sq_psn, qp->wire->psn, __ATOMIC_RELAXED);
		q->byte_len = (uint32_t)len;
		q->sent = 1;
		q->tx = 0;
	}
	/* A READ or atomic request is built in the first burst buffer, and
	 * follows the packets before it. */
	if (q->kind == URO_OP_READ || q->kind == URO_OP_ATOMIC)
		send_burst(ctx, qp, b);
	if (q->kind == URO_OP_READ)
		send_read(ctx, qp, q, len);
	else if (q->kind == URO_OP_ATOMIC)
		send_atomic(ctx, qp, q);
	else if ((st = send_message(ctx, qp, q, b, liov, nl, len)) != IBV_WC_SUCCESS) {
		q->status = (uint8_t)st;
		q->done = 1;
	}
	/* UC: nothing comes back (IBTA 9.8.3). */
	if (!uro_wire_is_rc(qp))
		q->done = 1;
}

void uro_wire_push(struct uro_context *ctx, struct uro_qp *qp)
{
	struct uro_qp_wire *wq = qp->wire;
	unsigned rd_max = qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1;
	struct burst b = {0};

	wq->held = 0;
	/* An RNR wait holds everything back until its timer (IBTA 9.7.5.2.8). */
	if (wq->rnr_wait)
		return;
	if (wq->partial) {
		struct uro_wire_wqe *q = uro_wire_at(wq, wq->next - 1);

		transmit(ctx, qp, q, &b);
		wq->partial = !q->done && q->tx < q->npsn;
	}
	while (!wq->partial && wq->next != wq->tail) {
		struct uro_wire_wqe *q = uro_wire_at(wq, wq->next);

		if (uro_wire_reads_back(q->kind) && wq->rd_out >= rd_max)
			break;
		transmit(ctx, qp, q, &b);
		if (!q->done && !q->tx)
			break; /* not a packet fits the window yet */
		wq->next++;
		if (uro_wire_reads_back(q->kind) && !q->done)
			wq->rd_out++;
		if (!q->done && !wq->deadline)
			arm(qp);
		/* The rest when ACKs open the window. */
		wq->partial = !q->done && q->tx < q->npsn;
	}
	send_burst(ctx, qp, &b);
	uro_wire_retire(ctx, qp);
}

/* Every WQE from head to tail completes with WR_FLUSH_ERR (IBTA 10.8.3.1). */
static void flush(struct uro_context *ctx, struct uro_qp *qp)
{
	struct uro_qp_wire *wq = qp->wire;

	for (; wq->head != wq->tail; wq->head++) {
		struct uro_wire_wqe *q = uro_wire_at(wq, wq->head);

		uro_send_complete(ctx, qp, &q->p.wr, q->p.seq, IBV_WC_WR_FLUSH_ERR, 0);
	}
	wq->next = wq->tail;
	wq->deadline = 0;
	wq->rnr_wait = 0;
	wq->rd_out = 0;
	wq->partial = 0;
}

void uro_wire_retire(struct uro_context *ctx, struct uro_qp *qp)
{
	struct uro_qp_wire *wq = qp->wire;

	while (wq->head != wq->next && uro_wire_at(wq, wq->head)->done) {
		struct uro_wire_wqe *q = uro_wire_at(wq, wq->head++);

		uro_send_complete(ctx, qp, &q->p.wr, q->p.seq, (enum ibv_wc_status)q->status,
				  q->byte_len);
		if (q->status != IBV_WC_SUCCESS) {
			uro_requester_error(ctx, qp);
			flush(ctx, qp);
			return;
		}
	}
	if (wq->head == wq->next)
		wq->deadline = 0;
}

void uro_wire_fail(struct uro_context *ctx, struct uro_qp *qp, enum ibv_wc_status status)
{
	struct uro_qp_wire *wq = qp->wire;
	struct uro_wire_wqe *q;

	uro_wire_retire(ctx, qp);
	if (wq->head == wq->next)
		return;
	q = uro_wire_at(wq, wq->head);
	q->status = (uint8_t)status;
	q->done = 1;
	uro_wire_retire(ctx, qp);
}

/* Where a message is sent again from: its first packet the responder has
 * not acknowledged (IBTA 9.7: the PSN a NAK names, or the oldest
 * unacknowledged one on a timeout); the responder keeps its place in the
 * message meanwhile. From the start, a 64-packet WRITE under 10% loss
 * sent its acknowledged packets again each round. */
static uint32_t resume_at(const struct uro_qp_wire *wq, const struct uro_wire_wqe *q)
{
	int32_t d = uro_psn_diff((wq->acked + 1) & URO_PSN_MASK, q->psn);

	if (d <= 0)
		return 0;
	return (uint32_t)d < q->npsn ? (uint32_t)d : q->npsn - 1;
}

void uro_wire_go_back(struct uro_context *ctx, struct uro_qp *qp)
{
	struct uro_qp_wire *wq = qp->wire;

	uro_wire_retire(ctx, qp);
	wq->next = wq->head;
	while (wq->next != wq->tail && uro_wire_at(wq, wq->next)->done)
		wq->next++;
	for (uint32_t i = wq->next; i != wq->tail; i++) {
		struct uro_wire_wqe *q = uro_wire_at(wq, i);

		q->tx = q->kind == URO_OP_READ ? q->got : resume_at(wq, q);
	}
	wq->rd_out = 0;
	wq->deadline = 0;
	wq->rnr_wait = 0;
	wq->partial = 0;
	ctx->wire->n->retransmits++;
	uro_count(&qp->pub->counters.retransmits, 1);
	uro_wire_push(ctx, qp);
}

uint64_t uro_wire_qp_tick(struct uro_context *ctx, struct uro_qp *qp)
{
	struct uro_qp_wire *wq = qp->wire;
	int locked = uro_mt_lock(&qp->sq_lock);
	uint32_t state = uro_qp_state(qp->pub);
	uint64_t now = uro_now_ns(), left = 0;
	int forever;

	if ((state == IBV_QPS_ERR || state == IBV_QPS_SQE) && wq->head != wq->tail) {
		uro_wire_retire(ctx, qp);
		flush(ctx, qp);
	} else if (wq->deadline && now >= wq->deadline) {
		if (wq->rnr_wait) {
			uro_wire_go_back(ctx, qp);
		} else {
			/* timeout 0 waits for ever (IBTA 9.7.6.1.3). */
			forever = qp->attr.timeout == 0;
			ctx->wire->n->ack_timeouts++;
			if (!forever && wq->retry_left == 0) {
				uro_wire_fail(ctx, qp, IBV_WC_RETRY_EXC_ERR);
			} else {
				if (!forever)
					wq->retry_left--;
				uro_wire_go_back(ctx, qp);
			}
		}
	}
	if (wq->deadline)
		left = wq->deadline > now ? wq->deadline - now : 1;
	uro_mt_unlock(&qp->sq_lock, locked);
	return left;
}

/* An RNR NAK for the WQE at head: wait, or give up (IBTA 9.7.5.2.8). */
void uro_wire_rnr(struct uro_context *ctx, struct uro_qp *qp, uint8_t timer)
{
	struct uro_qp_wire *wq = qp->wire;

	ctx->wire->n->rnr_naks_received++;
	uro_count(&qp->pub->counters.rnr_waits, 1);
	if (qp->attr.rnr_retry != RNR_FOREVER) {
		if (wq->rnr_left == 0) {
			uro_wire_fail(ctx, qp, IBV_WC_RNR_RETRY_EXC_ERR);
			return;
		}
		wq->rnr_left--;
	}
	wq->deadline = uro_now_ns() + uro_rnr_timer_ns(timer);
	wq->rnr_wait = 1;
}

static int post_one(struct uro_context *ctx, struct uro_qp *qp, struct ibv_send_wr *wr)
{
	struct uro_qp_wire *wq = qp->wire;
	const struct uro_opcode *op;
	struct uro_wire_wqe *q;
	int err = uro_send_validate(qp, wr);

	if (err)
		return err;
	op = uro_opcode(wr->opcode);
	q = uro_wire_at(wq, wq->tail);
	memset(q, 0, sizeof(*q));
	uro_pending_copy(&q->p, wr, qp->sq_posted++);
	q->kind = (uint8_t)op->kind;
	/* In ERR a request is flushed at once (IBTA 10.8.3.1). */
	if (uro_qp_state(qp->pub) == IBV_QPS_ERR) {
		uro_send_complete(ctx, qp, &q->p.wr, q->p.seq, IBV_WC_WR_FLUSH_ERR, 0);
		return 0;
	}
	wq->tail++;
	return 0;
}

/* A SEND or WRITE of at most a packet: one that may wait to leave with
 * others. */
static int small(const struct uro_qp *qp, const struct ibv_send_wr *wr)
{
	uint64_t len = 0;

	if (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_SEND_WITH_IMM &&
	    wr->opcode != IBV_WR_SEND_WITH_INV && wr->opcode != IBV_WR_RDMA_WRITE &&
	    wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM)
		return 0;
	for (int i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	return len <= qp->wire->mtu;
}

/* Small WQEs posted while others are in flight wait, as TCP's Nagle
 * algorithm holds small segments (RFC 896), so that a stream of them
 * leaves in bursts: a datagram and a pass through the kernel's UDP path
 * each cost as much as a burst of 64. They go with the next push: when an
 * ACK comes (the ones in flight are answered within a round trip), when
 * the program polls a CQ or waits on a channel (uro_wire_push_held) or
 * modifies the QP (uro_wire_send_held), or once a burst's worth waits. A QP with nothing in flight
 * sends at once: a lone request, and so latency, is not delayed. */
static int hold_back(struct uro_context *ctx, struct uro_qp *qp)
{
	struct uro_qp_wire *wq = qp->wire;

	if (!uro_wire_is_rc(qp) || wq->head == wq->next || wq->tail - wq->next >= URO_WIRE_BURST)
		return 0;
	wq->held = 1;
	__atomic_store_n(&ctx->wire->held, 1, __ATOMIC_RELEASE);
	return 1;
}

void uro_wire_send_held(struct uro_context *ctx, struct uro_qp *qp)
{
	int locked = uro_mt_lock(&qp->sq_lock);

	if (qp->wire->held && uro_qp_state(qp->pub) != IBV_QPS_SQD)
		uro_wire_push(ctx, qp);
	uro_mt_unlock(&qp->sq_lock, locked);
}

void uro_wire_push_held(struct uro_context *ctx)
{
	struct uro_wire_endpoint *w = ctx->wire;
	uint32_t limit;

	if (!__atomic_load_n(&w->held, __ATOMIC_ACQUIRE) ||
	    !__atomic_exchange_n(&w->held, 0, __ATOMIC_ACQ_REL))
		return;
	limit = __atomic_load_n(&w->qp_limit, __ATOMIC_ACQUIRE);
	for (unsigned i = 0; i < limit; i++) {
		struct uro_qp *qp = ctx->qps[i];

		if (qp && qp->wire && qp->qpx.qp_base.qp_type != IBV_QPT_UD)
			uro_wire_send_held(ctx, qp);
	}
}

int uro_wire_post_send(struct uro_context *ctx, struct uro_qp *qp, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad)
{
	int locked = uro_mt_lock(&qp->sq_lock);
	int err = 0, all_small = 1;

	for (; wr; wr = wr->next) {
		if ((err = post_one(ctx, qp, wr)))
			break;
		all_small &= small(qp, wr);
	}
	/* A drained send queue (SQD) starts nothing new (IBTA 10.3.1). */
	if (uro_qp_state(qp->pub) != IBV_QPS_SQD && !(all_small && hold_back(ctx, qp)))
		uro_wire_push(ctx, qp);
	uro_mt_unlock(&qp->sq_lock, locked);
	if (err)
		*bad = wr;
	return err;
}
