/* An rsocket's stream (rsocket.h): its QP, slots and credits, and the
 * completions that move them. Every message is a SEND with immediate data
 * (the kind, and the credits the sender returns); a data message takes
 * one of the peer's data slots, which the peer gives back once the
 * program has read it. Control messages (credits, FIN, an iomap) land in
 * the RS_CTRL receives posted beyond the data slots and are reposted as
 * soon as they are seen, so that returning credits never waits for
 * credits; a burst of them meets an RNR NAK and is retried for ever
 * (rnr_retry 7), never lost. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rsocket.h"

enum { WR_DATA = 0, WR_CTRL = 1 };

static uint64_t wr_id(unsigned kind, uint32_t index)
{
	return (uint64_t)kind << 32 | index;
}

static uint32_t slots_for(int bytes)
{
	uint32_t n = bytes > 0 ? (uint32_t)bytes / RS_SEG : RS_SLOTS_DEF;

	return n < RS_SLOTS_MIN ? RS_SLOTS_MIN : n > RS_SLOTS_MAX ? RS_SLOTS_MAX : n;
}

void rs_hello_of(const struct rsock *rs, struct rs_hello *h)
{
	h->magic = htonl(RS_MAGIC);
	h->slots = htonl(slots_for(rs->rcvbuf));
	h->seg = htonl(RS_SEG);
}

/* A peer's hello: 0 when it is one, with its numbers in host order. */
int rs_hello_valid(const void *pdata, uint8_t len, struct rs_hello *h)
{
	if (!pdata || len < sizeof(*h))
		return -1;
	memcpy(h, pdata, sizeof(*h));
	h->magic = ntohl(h->magic);
	h->slots = ntohl(h->slots);
	h->seg = ntohl(h->seg);
	if (h->magic != RS_MAGIC || h->slots < 1 || h->seg < RS_CTRL_BYTES)
		return -1;
	if (h->slots > RS_SLOTS_MAX)
		h->slots = RS_SLOTS_MAX;
	return 0;
}

static uint8_t *rslot(const struct rsock *rs, uint32_t i)
{
	return rs->rbuf + (size_t)i * RS_SEG;
}

static int repost(struct rsock *rs, uint32_t slot)
{
	struct ibv_sge sge = {(uintptr_t)rslot(rs, slot), RS_SEG, rs->rmr->lkey};
	struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1}, *bad;

	return ibv_post_recv(rs->id->qp, &wr, &bad);
}

static int make_cq_and_buffers(struct rsock *rs)
{
	struct ibv_context *verbs = rs->id->verbs;
	uint32_t nr = rs->nrecv + RS_CTRL;
	size_t sbytes = (size_t)rs->nsend * RS_SEG + RS_CTRL * RS_CTRL_BYTES;

	rs->pd = ibv_alloc_pd(verbs);
	rs->cc = rs->pd ? ibv_create_comp_channel(verbs) : NULL;
	if (!rs->cc)
		return -1;
	(void)fcntl(rs->cc->fd, F_SETFL, fcntl(rs->cc->fd, F_GETFL) | O_NONBLOCK);
	rs->cq = ibv_create_cq(verbs, (int)(rs->nsend + RS_CTRL + nr), NULL, rs->cc, 0);
	rs->sbuf = aligned_alloc(4096, (sbytes + 4095) & ~(size_t)4095);
	rs->rbuf = aligned_alloc(4096, (size_t)nr * RS_SEG);
	rs->rx_slot = calloc(nr, sizeof(*rs->rx_slot));
	rs->rx_len = calloc(nr, sizeof(*rs->rx_len));
	if (!rs->cq || !rs->sbuf || !rs->rbuf || !rs->rx_slot || !rs->rx_len)
		return -1;
	/* The peer's bytes land here by cross-memory attach, which valgrind
	 * does not see: zeroed, what the program reads is defined to it. */
	memset(rs->rbuf, 0, (size_t)nr * RS_SEG);
	rs->smr = ibv_reg_mr(rs->pd, rs->sbuf, sbytes, IBV_ACCESS_LOCAL_WRITE);
	rs->rmr = ibv_reg_mr(rs->pd, rs->rbuf, (size_t)nr * RS_SEG, IBV_ACCESS_LOCAL_WRITE);
	return rs->smr && rs->rmr ? 0 : -1;
}

void rs_set_peer(struct rsock *rs, const struct rs_hello *peer)
{
	rs->seg = peer->seg < RS_SEG ? peer->seg : RS_SEG;
	rs->credits = peer->slots;
}

int rs_create_resources(struct rsock *rs)
{
	struct ibv_qp_init_attr a;

	rs->nsend = slots_for(rs->sndbuf);
	rs->nrecv = slots_for(rs->rcvbuf);
	if (make_cq_and_buffers(rs))
		return -1;
	memset(&a, 0, sizeof(a));
	a.send_cq = a.recv_cq = rs->cq;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 1;
	a.cap.max_send_wr = rs->nsend + RS_CTRL;
	a.cap.max_recv_wr = rs->nrecv + RS_CTRL;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	if (rdma_create_qp(rs->id, rs->pd, &a))
		return -1;
	for (uint32_t i = 0; i < rs->nrecv + RS_CTRL; i++)
		if (repost(rs, i))
			return -1;
	return 0;
}

void rs_destroy_resources(struct rsock *rs)
{
	if (rs->id && rs->id->qp)
		rdma_destroy_qp(rs->id);
	if (rs->smr)
		ibv_dereg_mr(rs->smr);
	if (rs->rmr)
		ibv_dereg_mr(rs->rmr);
	for (struct rs_iomap *m = rs->local_maps; m; m = m->next)
		ibv_dereg_mr(m->mr);
	if (rs->cq)
		ibv_destroy_cq(rs->cq);
	if (rs->cc)
		ibv_destroy_comp_channel(rs->cc);
	if (rs->pd)
		ibv_dealloc_pd(rs->pd);
	free(rs->sbuf);
	free(rs->rbuf);
	free(rs->rx_slot);
	free(rs->rx_len);
	rs->smr = rs->rmr = NULL;
	rs->cq = NULL;
	rs->cc = NULL;
	rs->pd = NULL;
	rs->sbuf = rs->rbuf = NULL;
	rs->rx_slot = rs->rx_len = NULL;
}

/* A SEND with immediate data from our registered buffer; the credits
 * owed go with it. */
static int post(struct rsock *rs, uint64_t id, const void *addr, uint32_t len, enum rs_msg type)
{
	struct ibv_sge sge = {(uintptr_t)addr, len, rs->smr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = len ? 1 : 0,
				 .opcode = IBV_WR_SEND_WITH_IMM,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	wr.imm_data = htonl((uint32_t)type << 24 | (rs->unreturned & 0xffffff));
	if (ibv_post_send(rs->id->qp, &wr, &bad))
		return -1;
	rs->unreturned = 0;
	return 0;
}

int rs_send_ctrl(struct rsock *rs, enum rs_msg type, const void *payload, uint32_t len)
{
	uint32_t i = rs->ctrl_tail % RS_CTRL;
	uint8_t *buf = rs->sbuf + (size_t)rs->nsend * RS_SEG + (size_t)i * RS_CTRL_BYTES;

	if (rs->ctrl_tail - rs->ctrl_head == RS_CTRL || rs->disconnected) {
		errno = rs->disconnected ? EPIPE : EAGAIN;
		return -1;
	}
	if (len)
		memcpy(buf, payload, len);
	if (post(rs, wr_id(WR_CTRL, i), buf, len, type))
		return -1;
	rs->ctrl_tail++;
	return 0;
}

/* A completion in error ends the connection: the peer is gone, or the
 * CM moved the QP to ERR on a disconnect (then the flush says nothing
 * new). */
static void lost(struct rsock *rs, enum ibv_wc_status st)
{
	if (!rs->disconnected && st != IBV_WC_WR_FLUSH_ERR)
		rs->err = st == IBV_WC_RETRY_EXC_ERR ? ETIMEDOUT : ECONNRESET;
	rs->disconnected = 1;
}

/* The peer's map (riomap) or its end (a length of 0, riounmap). */
static void peer_map_message(struct rsock *rs, const uint8_t *buf, uint32_t len)
{
	struct rs_iomap_msg m;
	struct rs_iomap *map, **p;

	if (len < sizeof(m))
		return;
	memcpy(&m, buf, sizeof(m));
	if (!m.len) {
		for (p = &rs->peer_maps; *p; p = &(*p)->next)
			if ((*p)->offset == m.offset) {
				map = *p;
				*p = map->next;
				free(map);
				return;
			}
		return;
	}
	map = calloc(1, sizeof(*map));
	if (!map)
		return;
	map->offset = m.offset;
	map->addr = m.addr;
	map->len = m.len;
	map->rkey = m.rkey;
	map->next = rs->peer_maps;
	rs->peer_maps = map;
}

static void on_recv(struct rsock *rs, const struct ibv_wc *wc)
{
	uint32_t slot = (uint32_t)wc->wr_id, imm = ntohl(wc->imm_data);
	uint32_t nr = rs->nrecv + RS_CTRL;

	if (!(wc->wc_flags & IBV_WC_WITH_IMM) || slot >= nr) {
		lost(rs, IBV_WC_GENERAL_ERR); /* not an rsocket peer */
		return;
	}
	rs->credits += imm & 0xffffff;
	if (rs->credits > RS_SLOTS_MAX)
		rs->credits = RS_SLOTS_MAX;
	switch (imm >> 24) {
	case RS_MSG_DATA:
		if (!wc->byte_len)
			break;
		rs->rx_slot[rs->rx_tail % nr] = slot;
		rs->rx_len[rs->rx_tail % nr] = wc->byte_len;
		rs->rx_tail++;
		return; /* reposted once read */
	case RS_MSG_FIN:
		rs->peer_fin = 1;
		break;
	case RS_MSG_IOMAP:
		peer_map_message(rs, rslot(rs, slot), wc->byte_len);
		break;
	default:
		break;
	}
	if (repost(rs, slot))
		lost(rs, IBV_WC_GENERAL_ERR);
}

static void on_completion(struct rsock *rs, const struct ibv_wc *wc)
{
	if (wc->status != IBV_WC_SUCCESS) {
		lost(rs, wc->status);
		if (wc->opcode & IBV_WC_RECV)
			return;
	} else if (wc->opcode & IBV_WC_RECV) {
		on_recv(rs, wc);
		return;
	}
	/* Sends complete in the order they were posted, each kind too. */
	if (wc->wr_id >> 32 == WR_CTRL)
		rs->ctrl_head++;
	else
		rs->send_head++;
}

static int cm_events(struct rsock *rs)
{
	struct rdma_cm_event *e;
	int n = 0;

	while (rdma_get_cm_event(rs->ch, &e) == 0) {
		if (e->event == RDMA_CM_EVENT_DISCONNECTED ||
		    e->event == RDMA_CM_EVENT_DEVICE_REMOVAL)
			rs->disconnected = 1;
		rdma_ack_cm_event(e);
		n++;
	}
	return n;
}

/* Takes what completed and what the CM said; returns how much that was.
 * Credits owed go back once half the slots wait for them: below that the
 * peer still holds more than half. */
static int progress(struct rsock *rs)
{
	struct ibv_wc wc[16];
	int n, total = 0;

	if (!rs->cq)
		return 0;
	while ((n = ibv_poll_cq(rs->cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++)
			on_completion(rs, &wc[i]);
		total += n;
	}
	/* Before ESTABLISHED, the connect or accept reads the CM's events. */
	if (rs->state == RS_CONNECTED)
		total += cm_events(rs);
	if (rs->unreturned && rs->unreturned * 2 >= rs->nrecv)
		(void)rs_send_ctrl(rs, RS_MSG_CREDIT, NULL, 0);
	return total;
}

void rs_progress(struct rsock *rs)
{
	(void)progress(rs);
}

/* Arms the CQ and looks at it once more, so that nothing that came
 * meanwhile is slept through: 1 when something came. */
int rs_arm(struct rsock *rs)
{
	if (!rs->cq)
		return 0;
	ibv_req_notify_cq(rs->cq, 0);
	return progress(rs) > 0;
}

/* The completion events a sleep on the channel's fd woke for. */
void rs_drain_events(struct rsock *rs)
{
	struct ibv_cq *cq;
	void *ctx;

	while (rs->cc && ibv_get_cq_event(rs->cc, &cq, &ctx) == 0)
		ibv_ack_cq_events(cq, 1);
}

/* Sleeps until a completion or a CM event, or timeout_ms (-1: none),
 * with the lock let go. */
int rs_wait(struct rsock *rs, int timeout_ms)
{
	struct pollfd fds[2] = {{.fd = rs->fd, .events = POLLIN},
				{.fd = rs->cc ? rs->cc->fd : -1, .events = POLLIN}};
	int n;

	if (rs_arm(rs))
		return 0;
	pthread_mutex_unlock(&rs->lock);
	n = poll(fds, 2, timeout_ms);
	pthread_mutex_lock(&rs->lock);
	rs_drain_events(rs);
	return n;
}

static int can_send(const struct rsock *rs)
{
	return rs->credits && rs->send_tail - rs->send_head < rs->nsend;
}

/* What the rsocket holds now, with no progress made: a caller that asks
 * both after one rs_progress cannot take, while asking the second, a
 * message the first answer missed (rpoll then slept with a message
 * queued: rstream -T a -T b stalled). */
int rs_writable(const struct rsock *rs)
{
	return rs->disconnected || rs->fin_sent || can_send(rs);
}

int rs_readable(const struct rsock *rs)
{
	return rs->rx_head != rs->rx_tail || rs->peer_fin || rs->disconnected;
}

/* Waits until every send completed (before a disconnect moves the QP to
 * ERR, which would flush what is still going): 0, or -1 at the timeout. */
int rs_drain_sends(struct rsock *rs, int timeout_ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		progress(rs);
		if (rs->disconnected ||
		    (rs->send_head == rs->send_tail && rs->ctrl_head == rs->ctrl_tail))
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >=
		    timeout_ms)
			return -1;
		rs_wait(rs, 10);
	}
}

/* Where push sends: the stream, or the peer's memory (riowrite). */
struct target {
	uint64_t addr;
	uint32_t rkey;
};

static int post_write(struct rsock *rs, uint64_t id, const void *addr, uint32_t len,
		      const struct target *to)
{
	struct ibv_sge sge = {(uintptr_t)addr, len, rs->smr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	wr.wr.rdma.remote_addr = to->addr;
	wr.wr.rdma.rkey = to->rkey;
	return ibv_post_send(rs->id->qp, &wr, &bad);
}

/* Copies the bytes into send slots and posts them, a slot at a time:
 * a stream message takes a credit too. Blocking, it returns once all
 * went; non-blocking, with what went, or -1 and EAGAIN for nothing. */
static ssize_t push(struct rsock *rs, const uint8_t *buf, size_t len, int flags, struct target *to)
{
	int nonblock = rs->nonblock || (flags & MSG_DONTWAIT);
	size_t done = 0;

	if (rs->state != RS_CONNECTED) {
		errno = ENOTCONN;
		return -1;
	}
	progress(rs);
	while (done < len) {
		uint32_t chunk, slot;
		uint8_t *dst;
		int err;

		if (rs->disconnected || rs->fin_sent)
			break;
		if (!(to ? rs->send_tail - rs->send_head < rs->nsend : can_send(rs))) {
			if (nonblock)
				break;
			rs_wait(rs, -1);
			progress(rs);
			continue;
		}
		chunk = len - done < rs->seg ? (uint32_t)(len - done) : rs->seg;
		slot = rs->send_tail % rs->nsend;
		dst = rs->sbuf + (size_t)slot * RS_SEG;
		memcpy(dst, buf + done, chunk);
		err = to ? post_write(rs, wr_id(WR_DATA, slot), dst, chunk, to)
			 : post(rs, wr_id(WR_DATA, slot), dst, chunk, RS_MSG_DATA);
		if (err) {
			lost(rs, IBV_WC_GENERAL_ERR);
			break;
		}
		rs->send_tail++;
		if (to)
			to->addr += chunk;
		else
			rs->credits--;
		done += chunk;
	}
	if (done || !len)
		return (ssize_t)done;
	errno = rs->disconnected || rs->fin_sent ? EPIPE : EAGAIN;
	return -1;
}

ssize_t rs_send(struct rsock *rs, const void *buf, size_t len, int flags)
{
	return push(rs, buf, len, flags, NULL);
}

ssize_t rs_write_remote(struct rsock *rs, const void *buf, size_t len, uint64_t addr, uint32_t rkey,
			int flags)
{
	struct target to = {addr, rkey};

	return push(rs, buf, len, flags, &to);
}

/* Gives the first queued message's slot back once read to its end. */
static void consume(struct rsock *rs, uint32_t n)
{
	uint32_t nr = rs->nrecv + RS_CTRL, i = rs->rx_head % nr;

	rs->rx_off += n;
	if (rs->rx_off < rs->rx_len[i])
		return;
	rs->rx_off = 0;
	rs->rx_head++;
	if (repost(rs, rs->rx_slot[i]))
		lost(rs, IBV_WC_GENERAL_ERR);
	else
		rs->unreturned++;
}

/* Copies out what is queued, from the first message on; MSG_PEEK leaves
 * it queued. */
static size_t copy_out(struct rsock *rs, uint8_t *buf, size_t len, int peek)
{
	uint32_t nr = rs->nrecv + RS_CTRL, head = rs->rx_head, off = rs->rx_off;
	size_t done = 0;

	while (done < len && head != rs->rx_tail) {
		uint32_t i = head % nr, left = rs->rx_len[i] - off;
		uint32_t n = len - done < left ? (uint32_t)(len - done) : left;

		memcpy(buf + done, rslot(rs, rs->rx_slot[i]) + off, n);
		done += n;
		if (peek) {
			off += n;
			if (off == rs->rx_len[i]) {
				off = 0;
				head++;
			}
			continue;
		}
		consume(rs, n);
		head = rs->rx_head;
		off = rs->rx_off;
	}
	return done;
}

ssize_t rs_recv(struct rsock *rs, void *buf, size_t len, int flags)
{
	int nonblock = rs->nonblock || (flags & MSG_DONTWAIT);
	size_t done = 0;

	if (rs->state != RS_CONNECTED) {
		errno = ENOTCONN;
		return -1;
	}
	progress(rs);
	for (;;) {
		done += copy_out(rs, (uint8_t *)buf + done, len - done, flags & MSG_PEEK);
		if (done == len || (done && !(flags & MSG_WAITALL)) || (flags & MSG_PEEK && done))
			break;
		if (rs->peer_fin || rs->disconnected || nonblock)
			break;
		rs_wait(rs, -1);
		progress(rs);
	}
	progress(rs); /* the credits this read freed */
	if (done || !len || rs->peer_fin)
		return (ssize_t)done;
	if (rs->disconnected) {
		/* Gone without a FIN: the peer died or reset. */
		if (rs->err) {
			errno = rs->err;
			return -1;
		}
		return 0;
	}
	errno = EAGAIN;
	return -1;
}
