/* A stream rsocket's connection (rsocket.h): its QP and buffers, and the
 * completions that move rdma-core's protocol along (rsocket_wire.h,
 * docs/rsockets.md).
 *
 * Each end has a receive ring and grants the peer its halves, one at a
 * time, by writing {addr, rkey, length} into the peer's grant table; the
 * sender writes the stream into the granted half with RDMA WRITEs with
 * immediate data, each of which takes one posted receive (a credit) and
 * says how long it is. Grants, credits and control codes go back the same
 * way. A grant or an iomap entry is read only once the completion of the
 * write that carried it is seen: the completion comes after the bytes are
 * placed, so a half-written entry is never read. */
#include <arpa/inet.h>
#include <byteswap.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rsocket.h"

enum wr_kind {
	WR_DATA = 1, /* holds the bytes in its id of the send ring */
	WR_CTRL = 2, /* a grant or a control code */
};

static uint64_t wr_id(enum wr_kind kind, uint32_t bytes)
{
	return (uint64_t)kind << 32 | bytes;
}

static int host_is_big_endian(void)
{
	return htonl(1) == 1;
}

uint32_t rs_buf_size(int set)
{
	/* As a kernel socket's, the size set is doubled (socket(7)). */
	uint64_t n = set > 0 ? (uint64_t)set * 2 : RS_BUF_DEF;

	n = n < RS_BUF_MIN ? RS_BUF_MIN : n > RS_BUF_MAX ? RS_BUF_MAX : n;
	return (uint32_t)n & ~63u; /* halves of whole cache lines */
}

static uint32_t qp_size(int set, int dev_max)
{
	uint32_t n = set > 0 ? (uint32_t)set : RS_QP_DEF;
	uint32_t max = dev_max > 0 && (uint32_t)dev_max < RS_QP_MAX ? (uint32_t)dev_max : RS_QP_MAX;

	return n < RS_QP_MIN ? RS_QP_MIN : n > max ? max : n;
}

/* An entry of the peer's tables, in the peer's byte order. */
static struct rs_sge peer_sge(const struct rsock *rs, uint64_t addr, uint32_t key, uint32_t len)
{
	struct rs_sge s = {addr, key, len};

	if (rs->st.swap) {
		s.addr = bswap_64(addr);
		s.key = bswap_32(key);
		s.length = bswap_32(len);
	}
	return s;
}

size_t rs_conn_offset(struct rdma_cm_id *id)
{
	return rdma_get_local_addr(id)->sa_family == AF_IB ? RS_AF_IB_HDR : 0;
}

void rs_conn_data_of(const struct rsock *rs, struct rs_conn_data *c)
{
	const struct rs_stream *st = &rs->st;

	memset(c, 0, sizeof(*c));
	c->version = RS_WIRE_VERSION;
	c->flags = RS_CONN_IOMAP | (host_is_big_endian() ? RS_CONN_NET : 0);
	c->credits = htons((uint16_t)st->rq_size);
	c->iomap_size = rs_iomap_scale(st->niomap);
	c->target_sgl.addr = htobe64((uintptr_t)st->table);
	c->target_sgl.key = htonl(st->tmr->rkey);
	c->target_sgl.length = htonl(RS_SGL_ENTRIES);
	c->data_buf.addr = htobe64((uintptr_t)rs->rbuf);
	c->data_buf.key = htonl(rs->rmr->rkey);
	c->data_buf.length = htonl(st->rbuf_size / 2);
}

/* A peer's connection data, in host order: 0 when it is an rsocket's
 * (version 1, room for its grants). */
int rs_conn_data_valid(const void *pdata, uint8_t len, size_t offset, struct rs_conn_data *c)
{
	if (!pdata || len < offset + sizeof(*c))
		return -1;
	memcpy(c, (const uint8_t *)pdata + offset, sizeof(*c));
	c->credits = ntohs(c->credits);
	c->target_sgl.addr = be64toh(c->target_sgl.addr);
	c->target_sgl.key = ntohl(c->target_sgl.key);
	c->target_sgl.length = ntohl(c->target_sgl.length);
	c->data_buf.addr = be64toh(c->data_buf.addr);
	c->data_buf.key = ntohl(c->data_buf.key);
	c->data_buf.length = ntohl(c->data_buf.length);
	if (c->version != RS_WIRE_VERSION || !c->credits || !c->data_buf.length)
		return -1;
	/* Grants fill the table's entries in turn from the second on
	 * (librdmacm's rs_save_conn_data): one entry leaves no room. */
	return c->target_sgl.length < 2 || c->target_sgl.length > 256 ? -1 : 0;
}

void rs_set_peer(struct rsock *rs, const struct rs_conn_data *peer)
{
	struct rs_stream *st = &rs->st;

	st->swap = !!(peer->flags & RS_CONN_NET) != host_is_big_endian();
	st->sseq_comp = peer->credits;
	st->grant[0] = peer->data_buf;
	st->grant_cur = 0;
	st->grant_next = 1;
	st->peer_sgl = peer->target_sgl;
	st->peer_sge = 1;
	memset(&st->peer_iomap, 0, sizeof(st->peer_iomap));
	if (peer->flags & RS_CONN_IOMAP) {
		st->peer_iomap.addr = peer->target_sgl.addr +
				      (uint64_t)peer->target_sgl.length * sizeof(struct rs_sge);
		st->peer_iomap.key = peer->target_sgl.key;
		st->peer_iomap.length = rs_iomap_size_of(peer->iomap_size);
	}
}

static int post_recv(struct rsock *rs)
{
	struct ibv_recv_wr wr = {.wr_id = 0}, *bad;

	return ibv_post_recv(rs->id->qp, &wr, &bad);
}

static void *alloc_zeroed(size_t n)
{
	void *p = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);

	/* The peer's bytes land here by cross-memory attach, which valgrind
	 * does not see: zeroed, what the program reads is defined to it. */
	if (p)
		memset(p, 0, n);
	return p;
}

static int make_buffers(struct rsock *rs)
{
	struct rs_stream *st = &rs->st;
	size_t tbytes = RS_SGL_ENTRIES * sizeof(struct rs_sge) +
			(size_t)st->niomap * sizeof(struct rs_iomap_entry);
	int remote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

	/* Past the send ring: a grant's entry for each control message. */
	rs->sbuf = alloc_zeroed(st->sbuf_size + RS_CTRL_MAX * sizeof(struct rs_sge));
	rs->rbuf = alloc_zeroed(st->rbuf_size);
	st->table = alloc_zeroed(tbytes);
	st->iomap = calloc(st->niomap ? st->niomap : 1, sizeof(*st->iomap));
	st->rmsg_cap = st->rq_size + RS_CTRL_MAX + 1;
	st->rmsg = calloc(st->rmsg_cap, sizeof(*st->rmsg));
	if (!rs->sbuf || !rs->rbuf || !st->table || !st->iomap || !st->rmsg)
		return -1;
	rs->smr = ibv_reg_mr(rs->pd, rs->sbuf, st->sbuf_size + RS_CTRL_MAX * sizeof(struct rs_sge),
			     IBV_ACCESS_LOCAL_WRITE);
	rs->rmr = ibv_reg_mr(rs->pd, rs->rbuf, st->rbuf_size, remote);
	st->tmr = ibv_reg_mr(rs->pd, st->table, tbytes, remote);
	return rs->smr && rs->rmr && st->tmr ? 0 : -1;
}

int rs_create_resources(struct rsock *rs)
{
	struct rs_stream *st = &rs->st;
	struct ibv_context *verbs = rs->id->verbs;
	struct ibv_device_attr da;
	struct ibv_qp_init_attr a;

	if (ibv_query_device(verbs, &da))
		return -1;
	st->sq_size = qp_size(rs->sqsize, da.max_qp_wr);
	st->rq_size = qp_size(rs->rqsize, da.max_qp_wr - RS_CTRL_MAX);
	st->sbuf_size = rs_buf_size(rs->sndbuf);
	st->rbuf_size = rs_buf_size(rs->rcvbuf);
	st->niomap =
	    rs_iomap_size_of(rs_iomap_scale(rs->iomapsize > 0 ? (unsigned)rs->iomapsize : 0));
	rs->pd = ibv_alloc_pd(verbs);
	rs->cc = rs->pd ? ibv_create_comp_channel(verbs) : NULL;
	if (!rs->cc)
		return -1;
	(void)fcntl(rs->cc->fd, F_SETFL, fcntl(rs->cc->fd, F_GETFL) | O_NONBLOCK);
	rs->cq =
	    ibv_create_cq(verbs, (int)(st->sq_size + st->rq_size + RS_CTRL_MAX), NULL, rs->cc, 0);
	if (!rs->cq || make_buffers(rs))
		return -1;
	memset(&a, 0, sizeof(a));
	a.send_cq = a.recv_cq = rs->cq;
	a.qp_type = IBV_QPT_RC;
	a.sq_sig_all = 1;
	a.cap.max_send_wr = st->sq_size;
	/* Room for the peer's control messages beyond its credits, so that
	 * they rarely meet an RNR NAK (which retries for ever, rnr_retry 7). */
	a.cap.max_recv_wr = st->rq_size + RS_CTRL_MAX;
	a.cap.max_send_sge = 2;
	a.cap.max_recv_sge = 1;
	a.cap.max_inline_data = rs->inline_size > 0 ? (uint32_t)rs->inline_size : 0;
	if (rdma_create_qp(rs->id, rs->pd, &a))
		return -1;
	st->inline_size = a.cap.max_inline_data;
	st->sbuf_avail = st->sbuf_size;
	st->sqe_avail = st->sq_size - RS_CTRL_MAX;
	st->rbuf_avail = st->rbuf_size / 2; /* the second half: granted at once */
	st->rbuf_free = st->rbuf_size / 2;
	st->rseq_comp = (uint16_t)(st->rq_size / 2);
	for (uint32_t i = 0; i < st->rq_size + RS_CTRL_MAX; i++)
		if (post_recv(rs))
			return -1;
	return 0;
}

static void free_maps(struct rs_stream *st)
{
	while (st->maps) {
		struct rs_local_map *m = st->maps;

		st->maps = m->next;
		ibv_dereg_mr(m->mr);
		free(m);
	}
	while (st->unsent) {
		struct rs_map_msg *m = st->unsent;

		st->unsent = m->next;
		free(m);
	}
}

void rs_destroy_resources(struct rsock *rs)
{
	struct rs_stream *st = &rs->st;

	if (rs->id && rs->id->qp)
		rdma_destroy_qp(rs->id);
	free_maps(st);
	if (rs->smr)
		ibv_dereg_mr(rs->smr);
	if (rs->rmr)
		ibv_dereg_mr(rs->rmr);
	if (st->tmr)
		ibv_dereg_mr(st->tmr);
	if (rs->cq)
		ibv_destroy_cq(rs->cq);
	if (rs->cc)
		ibv_destroy_comp_channel(rs->cc);
	if (rs->pd)
		ibv_dealloc_pd(rs->pd);
	free(rs->sbuf);
	free(rs->rbuf);
	free(st->table);
	free(st->iomap);
	free(st->rmsg);
	rs->smr = rs->rmr = NULL;
	rs->cq = NULL;
	rs->cc = NULL;
	rs->pd = NULL;
	rs->sbuf = rs->rbuf = NULL;
	memset(st, 0, sizeof(*st));
}

/* An RDMA WRITE with immediate data (imm: host order), or without
 * (RS_OP_WRITE's riowrite) when with_imm is 0. */
static int post_write(struct rsock *rs, uint64_t id, struct ibv_sge *sge, int nsge,
		      const struct rs_sge *to, int with_imm, uint32_t imm, unsigned flags)
{
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = sge,
				 .num_sge = nsge,
				 .opcode =
				     with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
				 .send_flags = flags},
			   *bad;

	wr.imm_data = htonl(imm);
	wr.wr.rdma.remote_addr = to->addr;
	wr.wr.rdma.rkey = to->key;
	if (!ibv_post_send(rs->id->qp, &wr, &bad))
		return 0;
	rs->disconnected = 1;
	return -1;
}

static int ctrl_free(const struct rsock *rs)
{
	return rs->st.ctrl_sent - rs->st.ctrl_done < RS_CTRL_MAX;
}

/* A grant of the ring's next half, or credits alone when no half is free
 * (librdmacm's rs_send_credits): due once half the ring was read, or half
 * the credits taken. */
static void give_credits(struct rsock *rs)
{
	struct rs_stream *st = &rs->st;
	uint32_t half = st->rbuf_size / 2;
	struct rs_sge to = {0, 0, 0};
	struct ibv_sge sge = {0, 0, 0};
	uint32_t imm;
	int nsge = 0;

	if (rs->disconnected || !st->peer_sgl.length || !ctrl_free(rs) ||
	    !(st->rbuf_avail >= half || (int16_t)(st->rseq_no - st->rseq_comp) >= 0))
		return;
	st->rseq_comp = (uint16_t)(st->rseq_no + st->rq_size / 2);
	imm = rs_imm(RS_OP_SGL, (uint16_t)(st->rseq_no + st->rq_size));
	if (st->rbuf_avail >= half) {
		struct rs_sge *e =
		    (struct rs_sge *)(rs->sbuf + st->sbuf_size) + st->ctrl_sent % RS_CTRL_MAX;

		*e = peer_sge(rs, (uintptr_t)rs->rbuf + st->rbuf_free, rs->rmr->rkey, half);
		sge = (struct ibv_sge){(uintptr_t)e, sizeof(*e), rs->smr->lkey};
		nsge = 1;
		to.addr = st->peer_sgl.addr + (uint64_t)st->peer_sge * sizeof(struct rs_sge);
		to.key = st->peer_sgl.key;
		st->rbuf_avail -= half;
		st->rbuf_free = (st->rbuf_free + half) % st->rbuf_size;
		st->peer_sge = (st->peer_sge + 1) % st->peer_sgl.length;
	}
	if (!post_write(rs, wr_id(WR_CTRL, 0), &sge, nsge, &to, 1, imm, 0))
		st->ctrl_sent++;
}

int rs_send_ctrl(struct rsock *rs, enum rs_ctrl code)
{
	struct rs_sge none = {0, 0, 0};

	if (rs->disconnected || !ctrl_free(rs)) {
		errno = rs->disconnected ? EPIPE : EAGAIN;
		return -1;
	}
	if (post_write(rs, wr_id(WR_CTRL, 0), NULL, 0, &none, 1, rs_imm(RS_OP_CTRL, code), 0))
		return -1;
	rs->st.ctrl_sent++;
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

/* A peer that breaks the protocol: the connection ends as if reset. */
static void misbehaved(struct rsock *rs)
{
	lost(rs, IBV_WC_GENERAL_ERR);
}

static void on_data(struct rsock *rs, uint32_t len, uint32_t byte_len)
{
	struct rs_stream *st = &rs->st;

	if (len != byte_len || st->queued + len > st->rbuf_size ||
	    st->rmsg_tail - st->rmsg_head == st->rmsg_cap) {
		misbehaved(rs);
		return;
	}
	if (!len)
		return;
	st->rmsg[st->rmsg_tail++ % st->rmsg_cap] = len;
	st->queued += len;
}

/* A grant (16 bytes, into the entry it fills next) with credits, or the
 * credits alone. */
static void on_grant(struct rsock *rs, uint32_t limit, uint32_t byte_len)
{
	struct rs_stream *st = &rs->st;
	const struct rs_sge *e = (const struct rs_sge *)st->table + st->grant_next;

	st->sseq_comp = (uint16_t)limit;
	if (!byte_len)
		return;
	if (byte_len != sizeof(*e)) {
		misbehaved(rs);
		return;
	}
	st->grant[st->grant_next] = *e;
	st->grant_next = (st->grant_next + 1) % RS_SGL_ENTRIES;
}

static void on_iomap(struct rsock *rs, uint32_t index, uint32_t byte_len)
{
	struct rs_stream *st = &rs->st;
	const struct rs_iomap_entry *t =
	    (const struct rs_iomap_entry *)(st->table + RS_SGL_ENTRIES * sizeof(struct rs_sge));

	if (byte_len != sizeof(*t) || index >= st->niomap) {
		misbehaved(rs);
		return;
	}
	st->iomap[index] = t[index];
	/* librdmacm counts an entry against the credits and never gives the
	 * credit back; it does come back here, or a peer that maps often
	 * would run out. */
	st->rseq_no++;
}

static void on_ctrl(struct rsock *rs, uint32_t code)
{
	if (code == RS_CTRL_SHUTDOWN)
		rs->peer_fin = 1;
	else if (code == RS_CTRL_DISCONNECT)
		rs->peer_fin = rs->peer_closed = 1;
}

static void on_recv(struct rsock *rs, const struct ibv_wc *wc)
{
	uint32_t imm = ntohl(wc->imm_data), data = imm & RS_IMM_DATA;

	if (post_recv(rs)) {
		lost(rs, IBV_WC_GENERAL_ERR);
		return;
	}
	if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM) {
		misbehaved(rs); /* a SEND: not an rsocket peer on this transport */
		return;
	}
	switch (imm >> 29) {
	case RS_OP_DATA:
		on_data(rs, data, wc->byte_len);
		return;
	case RS_OP_SGL:
		on_grant(rs, data, wc->byte_len);
		return;
	case RS_OP_IOMAP_SGL:
		on_iomap(rs, data & 0xffff, wc->byte_len);
		return;
	case RS_OP_CTRL:
		on_ctrl(rs, data);
		return;
	default:
		return; /* reserved: librdmacm ignores them too */
	}
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
	/* A flushed send gives its room back as a completed one does. */
	if (wc->wr_id >> 32 == WR_CTRL) {
		rs->st.ctrl_done++;
		return;
	}
	rs->st.sqe_avail++;
	rs->st.sbuf_avail += (uint32_t)wc->wr_id;
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

/* Takes what completed and what the CM said, then gives the credits that
 * are due; returns how much came. */
static int progress(struct rsock *rs)
{
	struct ibv_wc wc[16];
	int n, total = 0;

	/* Completions wait until the peer's connection data is taken: a
	 * grant may come before a connect sees ESTABLISHED. */
	if (!rs->cq || rs->state != RS_CONNECTED)
		return 0;
	while ((n = ibv_poll_cq(rs->cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++)
			on_completion(rs, &wc[i]);
		total += n;
	}
	total += cm_events(rs);
	give_credits(rs);
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

/* Room to post: a send WR and send-ring bytes (librdmacm's rs_can_send
 * waits for RS_SNDLOWAT of them, or what is left of a shorter send). */
static int room(const struct rsock *rs, size_t want)
{
	const struct rs_stream *st = &rs->st;

	return st->sqe_avail && st->sbuf_avail >= (want < RS_SNDLOWAT ? want : RS_SNDLOWAT);
}

/* Room, a credit and a granted place: a data message can go. */
static int can_send(const struct rsock *rs, size_t want)
{
	const struct rs_stream *st = &rs->st;

	return room(rs, want) && st->sseq_no != st->sseq_comp && st->grant[st->grant_cur].length;
}

/* What the rsocket holds now, with no progress made: a caller that asks
 * both after one rs_progress cannot take, while asking the second, a
 * message the first answer missed (rpoll then slept with a message
 * queued: rstream -T a -T b stalled). */
int rs_writable(const struct rsock *rs)
{
	return rs->disconnected || rs->fin_sent || rs->peer_closed || can_send(rs, RS_SNDLOWAT);
}

int rs_readable(const struct rsock *rs)
{
	return rs->st.rmsg_head != rs->st.rmsg_tail || rs->peer_fin || rs->disconnected;
}

/* Waits until every send completed (before a disconnect moves the QP to
 * ERR, which would flush what is still going): 0, or -1 at the timeout. */
int rs_drain_sends(struct rsock *rs, int timeout_ms)
{
	const struct rs_stream *st = &rs->st;
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		progress(rs);
		if (rs->disconnected ||
		    (st->sqe_avail == st->sq_size - RS_CTRL_MAX && st->ctrl_sent == st->ctrl_done))
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >=
		    timeout_ms)
			return -1;
		rs_wait(rs, 10);
	}
}

/* Posts len bytes from buf as one write to `to`: inline when short
 * enough, else copied into the send ring (two pieces where it wraps).
 * The ring's room is taken either way, as librdmacm counts it. */
static int post_bytes(struct rsock *rs, const void *buf, uint32_t len, const struct rs_sge *to,
		      int with_imm, uint32_t imm)
{
	struct rs_stream *st = &rs->st;
	struct ibv_sge sge[2];
	int nsge = 1;

	if (len <= st->inline_size) {
		sge[0] = (struct ibv_sge){(uintptr_t)buf, len, 0};
		if (post_write(rs, wr_id(WR_DATA, len), sge, 1, to, with_imm, imm, IBV_SEND_INLINE))
			return -1;
	} else {
		uint32_t first = st->sbuf_size - st->sbuf_head;

		first = len < first ? len : first;
		memcpy(rs->sbuf + st->sbuf_head, buf, first);
		sge[0] =
		    (struct ibv_sge){(uintptr_t)rs->sbuf + st->sbuf_head, first, rs->smr->lkey};
		if (first < len) {
			memcpy(rs->sbuf, (const uint8_t *)buf + first, len - first);
			sge[1] = (struct ibv_sge){(uintptr_t)rs->sbuf, len - first, rs->smr->lkey};
			nsge = 2;
		}
		if (post_write(rs, wr_id(WR_DATA, len), sge, nsge, to, with_imm, imm, 0))
			return -1;
		st->sbuf_head = (st->sbuf_head + len) % st->sbuf_size;
	}
	st->sqe_avail--;
	st->sbuf_avail -= len;
	return 0;
}

/* One data message: as much of the rest as the room, the grant and the
 * message size allow, written at the grant's place. */
static uint32_t send_message(struct rsock *rs, const uint8_t *buf, size_t left, uint32_t most)
{
	struct rs_stream *st = &rs->st;
	struct rs_sge *g = &st->grant[st->grant_cur];
	uint32_t n = left < most ? (uint32_t)left : most;

	n = n < st->sbuf_avail ? n : st->sbuf_avail;
	n = n < g->length ? n : g->length;
	if (post_bytes(rs, buf, n, g, 1, rs_imm(RS_OP_DATA, n)))
		return 0;
	st->sseq_no++;
	g->addr += n;
	g->length -= n;
	if (!g->length)
		st->grant_cur = (st->grant_cur + 1) % RS_SGL_ENTRIES;
	return n;
}

/* Waits for test(rs, want) unless nonblocking: 0 when it holds, -1 when
 * the connection ended or a nonblocking call would wait. */
static int wait_for(struct rsock *rs, int nonblock, size_t want,
		    int (*test)(const struct rsock *, size_t))
{
	for (progress(rs);; progress(rs)) {
		if (rs->disconnected || rs->fin_sent || rs->peer_closed)
			return -1;
		if (test(rs, want))
			return 0;
		if (nonblock)
			return -1;
		rs_wait(rs, -1);
	}
}

static int nonblocking(const struct rsock *rs, int flags)
{
	return rs->nonblock || (flags & MSG_DONTWAIT);
}

static ssize_t sent_or_error(const struct rsock *rs, size_t done, size_t len)
{
	if (done || !len)
		return (ssize_t)done;
	errno = rs->disconnected || rs->fin_sent || rs->peer_closed ? EPIPE : EAGAIN;
	return -1;
}

/* Before any byte goes: a connection, and the iomap entries queued ahead
 * of the bytes sent. */
static int send_start(struct rsock *rs, int flags)
{
	if (rs->state != RS_CONNECTED) {
		errno = ENOTCONN;
		return -1;
	}
	return rs_flush_maps(rs, flags) ? (int)sent_or_error(rs, 0, 1) : 0;
}

/* The iomap entries riomap and riounmap queued, each a write into the
 * peer's table that takes a credit as a data message does. */
int rs_flush_maps(struct rsock *rs, int flags)
{
	struct rs_stream *st = &rs->st;

	while (st->unsent) {
		struct rs_map_msg *m = st->unsent;
		struct rs_sge to = {st->peer_iomap.addr + (uint64_t)m->index * sizeof(m->e),
				    st->peer_iomap.key, 0};

		if (wait_for(rs, nonblocking(rs, flags), sizeof(m->e), can_send) ||
		    post_bytes(rs, &m->e, sizeof(m->e), &to, 1, rs_imm(RS_OP_IOMAP_SGL, m->index)))
			return -1;
		st->sseq_no++;
		st->unsent = m->next;
		free(m);
	}
	return 0;
}

/* Queues the entry of a map at index for the peer's table (len 0: the
 * map is gone), in the peer's byte order. */
int rs_queue_map(struct rsock *rs, uint32_t index, uint64_t offset, uint64_t addr, uint32_t key,
		 uint32_t len)
{
	struct rs_map_msg *m = calloc(1, sizeof(*m)), **tail = &rs->st.unsent;

	if (!m)
		return -1;
	m->index = index;
	m->e.offset = rs->st.swap ? bswap_64(offset) : offset;
	m->e.sge = peer_sge(rs, addr, key, len);
	while (*tail)
		tail = &(*tail)->next;
	*tail = m;
	return 0;
}

/* Blocking, returns once all of it is posted; non-blocking, with what
 * went, or -1 and EAGAIN for nothing. Messages start at RS_OLAP_START
 * bytes and double, so that the first is on the wire while the next is
 * copied (librdmacm's rsend does the same). */
ssize_t rs_send(struct rsock *rs, const void *buf, size_t len, int flags)
{
	int nonblock = nonblocking(rs, flags);
	uint32_t most = RS_OLAP_START;
	size_t done = 0;

	if (send_start(rs, flags))
		return -1;
	while (done < len) {
		uint32_t n;

		if (wait_for(rs, nonblock, len - done, can_send))
			break;
		n = send_message(rs, (const uint8_t *)buf + done, len - done, most);
		if (!n)
			break;
		done += n;
		most = most < RS_MAX_TRANSFER ? most * 2 : most;
	}
	return sent_or_error(rs, done, len);
}

/* The peer's map that holds offset, as its entries said. */
static const struct rs_iomap_entry *peer_map(const struct rsock *rs, uint64_t offset)
{
	for (unsigned i = 0; i < rs->st.niomap; i++) {
		const struct rs_iomap_entry *m = &rs->st.iomap[i];

		if (m->sge.length && offset >= m->offset && offset - m->offset < m->sge.length)
			return m;
	}
	return NULL;
}

/* riowrite: RDMA WRITEs (no immediate, no credit) into the peer's maps
 * from offset on, as far as they reach. */
ssize_t rs_write_direct(struct rsock *rs, const void *buf, size_t len, uint64_t offset, int flags)
{
	int nonblock = nonblocking(rs, flags);
	uint32_t most = RS_OLAP_START;
	size_t done = 0;

	if (send_start(rs, flags))
		return -1;
	progress(rs);
	if (len && !peer_map(rs, offset)) {
		errno = EINVAL;
		return -1;
	}
	while (done < len) {
		const struct rs_iomap_entry *m = peer_map(rs, offset + done);
		uint64_t in_map;
		uint32_t n;
		struct rs_sge to;

		if (!m || wait_for(rs, nonblock, len - done, room))
			break;
		in_map = m->sge.length - (offset + done - m->offset);
		n = len - done < most ? (uint32_t)(len - done) : most;
		n = n < rs->st.sbuf_avail ? n : rs->st.sbuf_avail;
		n = n < in_map ? n : (uint32_t)in_map;
		to = (struct rs_sge){m->sge.addr + (offset + done - m->offset), m->sge.key, 0};
		if (post_bytes(rs, (const uint8_t *)buf + done, n, &to, 0, 0))
			break;
		done += n;
		most = most < RS_MAX_TRANSFER ? most * 2 : most;
	}
	return sent_or_error(rs, done, len);
}

/* Copies what is queued from the first message on; MSG_PEEK leaves it
 * queued. A message read to its end frees its credit; every byte read
 * frees ring room, given back as grants (give_credits). */
static size_t copy_out(struct rsock *rs, uint8_t *buf, size_t len, int peek)
{
	struct rs_stream *st = &rs->st;
	uint32_t head = st->rmsg_head, part = st->rx_part, off = st->rx_off;
	size_t done = 0;

	while (done < len && head != st->rmsg_tail) {
		uint32_t left = st->rmsg[head % st->rmsg_cap] - part;
		uint32_t n = len - done < left ? (uint32_t)(len - done) : left;

		for (uint32_t k = 0; k < n;) {
			uint32_t piece = n - k < st->rbuf_size - off ? n - k : st->rbuf_size - off;

			memcpy(buf + done + k, rs->rbuf + off, piece);
			k += piece;
			off = (off + piece) % st->rbuf_size;
		}
		done += n;
		part += n;
		if (part == st->rmsg[head % st->rmsg_cap]) {
			head++;
			part = 0;
			if (!peek)
				st->rseq_no++;
		}
		if (!peek) {
			st->rbuf_avail += n;
			st->queued -= n;
		}
	}
	if (!peek) {
		st->rmsg_head = head;
		st->rx_part = part;
		st->rx_off = off;
	}
	return done;
}

ssize_t rs_recv(struct rsock *rs, void *buf, size_t len, int flags)
{
	int nonblock = nonblocking(rs, flags);
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
	progress(rs); /* the grants this read freed */
	if (done || !len || rs->peer_fin)
		return (ssize_t)done;
	if (rs->disconnected) {
		/* Gone without a SHUTDOWN or DISCONNECT: the peer died or reset. */
		if (rs->err) {
			errno = rs->err;
			return -1;
		}
		return 0;
	}
	errno = EAGAIN;
	return -1;
}
