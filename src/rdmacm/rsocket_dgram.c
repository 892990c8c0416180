/* Datagram rsockets (rsocket(7): SOCK_DGRAM over UD). Each rsocket has a
 * UD QP, and a kernel UDP socket that is its descriptor: the UDP socket
 * holds the address and port (rbind, rconnect, rgetsockname, as the
 * kernel checks and assigns them), and carries the one thing a UD QP
 * cannot find alone, which QP an address's rsocket has. A first datagram
 * to an address sends it a hello over UDP and waits for the answer; the
 * datagrams themselves travel as UD SENDs (docs/rsockets.md). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm.h"
#include "cq_ring.h"
#include "rsocket.h"

#define RSD_MAGIC      0x55524431u /* "URD1" */
#define RSD_QKEY       0x55524431u
#define RSD_GRH	       40 /* ahead of every UD receive (ibv_post_recv(3)) */
#define RSD_SLOTS_MIN  4
#define RSD_SLOTS_MAX  256
#define RSD_SLOTS_DEF  64
#define RSD_RESOLVE_MS 1000 /* a silent address: its datagram is dropped */
#define RSD_RETRY_MS   100
#define RSD_SEND       (1ull << 32) /* a send's wr_id; a receive's is its slot */
#define RSD_UDP_NS     1000000ull   /* a busy caller looks for hellos this often */

enum { RSD_HELLO = 1, RSD_HELLO_REPLY = 2 };

/* The hello and its answer, over UDP, in network order. */
struct rsd_hello {
	uint32_t magic;
	uint32_t type;
	uint32_t qpn;
	uint32_t qkey;
};

/* An address whose rsocket's QP is known. */
struct rsd_dest {
	struct rsd_dest *next;
	struct sockaddr_storage addr;
	uint32_t qpn, qkey;
	struct ibv_ah *ah;
};

struct rs_dgram {
	struct ibv_context *verbs;
	struct ibv_qp *qp;
	uint8_t sgid_index;
	uint32_t mtu; /* the largest datagram */
	struct rsd_dest *dests;
	struct sockaddr_storage peer; /* rconnect's */
	int connected;
	uint32_t *rx_qpn;     /* each queued datagram's sender */
	uint64_t udp_next_ns; /* when progress next reads the UDP socket */
};

static socklen_t addr_len(const struct sockaddr *a)
{
	return a->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static int same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return 0;
	if (a->sa_family == AF_INET6) {
		const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;

		return x->sin6_port == y->sin6_port &&
		       !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr));
	}
	const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;

	return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
}

static uint8_t *rx_slot(struct rsock *rs, uint32_t i)
{
	return rs->rbuf + (size_t)i * (RSD_GRH + rs->dg->mtu);
}

static uint8_t *tx_slot(struct rsock *rs, uint32_t i)
{
	return rs->sbuf + (size_t)i * rs->dg->mtu;
}

static uint32_t slots_for(int bytes, uint32_t size)
{
	uint32_t n = bytes > 0 ? (uint32_t)bytes / size : RSD_SLOTS_DEF;

	return n < RSD_SLOTS_MIN ? RSD_SLOTS_MIN : n > RSD_SLOTS_MAX ? RSD_SLOTS_MAX : n;
}

/* The address the kernel would send from towards to: what names our
 * device and GID when the UDP socket is bound to any address. */
static int source_for(const struct rsock *rs, const struct sockaddr *to,
		      struct sockaddr_storage *src)
{
	socklen_t len = sizeof(*src);
	int s;

	if (!getsockname(rs->fd, (struct sockaddr *)src, &len) &&
	    ((src->ss_family == AF_INET &&
	      ((struct sockaddr_in *)src)->sin_addr.s_addr != htonl(INADDR_ANY)) ||
	     (src->ss_family == AF_INET6 &&
	      !IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)src)->sin6_addr))))
		return 0;
	s = socket(to->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	len = sizeof(*src);
	if (s < 0 || connect(s, to, addr_len(to)) || getsockname(s, (struct sockaddr *)src, &len)) {
		if (s >= 0)
			close(s);
		return -1;
	}
	close(s);
	return 0;
}

static int post_recv(struct rsock *rs, uint32_t slot)
{
	struct ibv_sge sge = {(uintptr_t)rx_slot(rs, slot), RSD_GRH + rs->dg->mtu, rs->rmr->lkey};
	struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1}, *bad;

	return ibv_post_recv(rs->dg->qp, &wr, &bad);
}

static int qp_to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = RSD_QKEY};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

static int make_buffers(struct rsock *rs)
{
	struct rs_dgram *dg = rs->dg;
	size_t sbytes = (size_t)rs->nsend * dg->mtu,
	       rbytes = (size_t)rs->nrecv * (RSD_GRH + dg->mtu);

	rs->pd = ibv_alloc_pd(dg->verbs);
	rs->cc = rs->pd ? ibv_create_comp_channel(dg->verbs) : NULL;
	if (!rs->cc)
		return -1;
	(void)fcntl(rs->cc->fd, F_SETFL, fcntl(rs->cc->fd, F_GETFL) | O_NONBLOCK);
	rs->cq = ibv_create_cq(dg->verbs, (int)(rs->nsend + rs->nrecv), NULL, rs->cc, 0);
	rs->sbuf = aligned_alloc(4096, (sbytes + 4095) & ~(size_t)4095);
	rs->rbuf = aligned_alloc(4096, (rbytes + 4095) & ~(size_t)4095);
	rs->rx_slot = calloc(rs->nrecv, sizeof(*rs->rx_slot));
	rs->rx_len = calloc(rs->nrecv, sizeof(*rs->rx_len));
	dg->rx_qpn = calloc(rs->nrecv, sizeof(*dg->rx_qpn));
	if (!rs->cq || !rs->sbuf || !rs->rbuf || !rs->rx_slot || !rs->rx_len || !dg->rx_qpn)
		return -1;
	memset(rs->rbuf, 0, rbytes); /* written by cross-memory attach: see make_cq_and_buffers */
	rs->smr = ibv_reg_mr(rs->pd, rs->sbuf, sbytes, IBV_ACCESS_LOCAL_WRITE);
	rs->rmr = ibv_reg_mr(rs->pd, rs->rbuf, rbytes, IBV_ACCESS_LOCAL_WRITE);
	return rs->smr && rs->rmr ? 0 : -1;
}

/* The QP, made once the device is known: the bound address's, or the
 * one the kernel routes towards `toward` through. */
static int resources(struct rsock *rs, const struct sockaddr *toward)
{
	struct rs_dgram *dg = rs->dg;
	struct sockaddr_storage src;
	struct ibv_qp_init_attr a;
	struct ibv_port_attr port;
	union ibv_gid gid;

	if (dg->qp)
		return 0;
	if (source_for(rs, toward, &src) || !(dg->verbs = uro_cm_device_for_addr((void *)&src)))
		return -1;
	if (ibv_query_port(dg->verbs, 1, &port))
		return -1;
	dg->mtu = 128u << port.active_mtu;
	uro_cm_addr_gid((const struct sockaddr *)&src, &gid);
	dg->sgid_index = (uint8_t)uro_cm_gid_index(dg->verbs, &gid);
	rs->nsend = slots_for(rs->sndbuf, dg->mtu);
	rs->nrecv = slots_for(rs->rcvbuf, RSD_GRH + dg->mtu);
	if (make_buffers(rs))
		return -1;
	memset(&a, 0, sizeof(a));
	a.send_cq = a.recv_cq = rs->cq;
	a.qp_type = IBV_QPT_UD;
	a.sq_sig_all = 1;
	a.cap.max_send_wr = rs->nsend;
	a.cap.max_recv_wr = rs->nrecv;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	dg->qp = ibv_create_qp(rs->pd, &a);
	if (!dg->qp || qp_to_rts(dg->qp))
		return -1;
	for (uint32_t i = 0; i < rs->nrecv; i++)
		if (post_recv(rs, i))
			return -1;
	return 0;
}

static struct rsd_dest *dest_by_addr(struct rs_dgram *dg, const struct sockaddr *a)
{
	struct rsd_dest *d = dg->dests;

	while (d && !same_addr((struct sockaddr *)&d->addr, a))
		d = d->next;
	return d;
}

static struct rsd_dest *dest_by_qpn(struct rs_dgram *dg, uint32_t qpn)
{
	struct rsd_dest *d = dg->dests;

	while (d && d->qpn != qpn)
		d = d->next;
	return d;
}

/* What a hello or its answer says of its sender. */
static void learn(struct rsock *rs, const struct sockaddr *from, const struct rsd_hello *h)
{
	struct rs_dgram *dg = rs->dg;
	struct rsd_dest *d = dest_by_addr(dg, from);
	struct ibv_ah_attr ah = {.is_global = 1, .port_num = 1};

	if (d && d->qpn == ntohl(h->qpn) && d->qkey == ntohl(h->qkey))
		return;
	uro_cm_addr_gid(from, &ah.grh.dgid);
	ah.grh.sgid_index = dg->sgid_index;
	ah.grh.hop_limit = 64;
	if (!d) {
		d = calloc(1, sizeof(*d));
		if (!d)
			return;
		memcpy(&d->addr, from, addr_len(from));
		d->next = dg->dests;
		dg->dests = d;
	}
	if (d->ah)
		ibv_destroy_ah(d->ah);
	d->ah = ibv_create_ah(rs->pd, &ah);
	d->qpn = ntohl(h->qpn);
	d->qkey = ntohl(h->qkey);
}

static void say(struct rsock *rs, uint32_t type, const struct sockaddr *to)
{
	struct rsd_hello h = {.magic = htonl(RSD_MAGIC),
			      .type = htonl(type),
			      .qpn = htonl(rs->dg->qp->qp_num),
			      .qkey = htonl(RSD_QKEY)};

	(void)sendto(rs->fd, &h, sizeof(h), MSG_NOSIGNAL, to, addr_len(to));
}

/* The hellos that came over UDP: each is answered (a QP is made for the
 * first), and anything else is dropped, as a datagram nobody expects. */
static int udp_input(struct rsock *rs)
{
	struct sockaddr_storage from;
	struct rsd_hello h;
	int n = 0;

	for (;;) {
		socklen_t len = sizeof(from);
		ssize_t got =
		    recvfrom(rs->fd, &h, sizeof(h), MSG_DONTWAIT, (struct sockaddr *)&from, &len);

		if (got < 0)
			return n;
		if (got != sizeof(h) || ntohl(h.magic) != RSD_MAGIC ||
		    resources(rs, (struct sockaddr *)&from))
			continue;
		learn(rs, (struct sockaddr *)&from, &h);
		if (ntohl(h.type) == RSD_HELLO)
			say(rs, RSD_HELLO_REPLY, (struct sockaddr *)&from);
		n++;
	}
}

/* The UDP socket is read after a sleep that it may have ended, and at
 * most once a millisecond by a caller that never sleeps: a recvfrom per
 * call was half of a small datagram's cost (udpong's 64 B echo took
 * 15 us against the kernel's 8). */
static int hellos(struct rsock *rs, int now)
{
	uint64_t t = uro_now_ns();

	if (!now && t < rs->dg->udp_next_ns)
		return 0;
	rs->dg->udp_next_ns = t + RSD_UDP_NS;
	return udp_input(rs);
}

static int progress(struct rsock *rs)
{
	struct ibv_wc wc[16];
	int n, total = hellos(rs, 0);

	while (rs->cq && (n = ibv_poll_cq(rs->cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++) {
			if (wc[i].wr_id & RSD_SEND) {
				rs->send_head++;
			} else if (wc[i].status != IBV_WC_SUCCESS || wc[i].byte_len < RSD_GRH) {
				(void)post_recv(rs, (uint32_t)wc[i].wr_id);
			} else {
				uint32_t at = rs->rx_tail++ % rs->nrecv;

				rs->rx_slot[at] = (uint32_t)wc[i].wr_id;
				rs->rx_len[at] = wc[i].byte_len - RSD_GRH;
				rs->dg->rx_qpn[at] = wc[i].src_qp;
			}
		}
		total += n;
	}
	return total;
}

/* Before a sleep: the CQ armed, then one more look, the UDP socket's
 * hellos included. */
int rs_dgram_arm(struct rsock *rs)
{
	int news;

	if (rs->cq)
		ibv_req_notify_cq(rs->cq, 0);
	news = hellos(rs, 1);
	return news + progress(rs) > 0;
}

/* Sleeps until a completion or a UDP datagram, or timeout_ms. */
static void wait_for(struct rsock *rs, int timeout_ms)
{
	struct pollfd fds[2] = {{.fd = rs->fd, .events = POLLIN},
				{.fd = rs->cc ? rs->cc->fd : -1, .events = POLLIN}};

	if (rs_dgram_arm(rs))
		return;
	pthread_mutex_unlock(&rs->lock);
	(void)poll(fds, 2, timeout_ms);
	pthread_mutex_lock(&rs->lock);
	rs_drain_events(rs);
	if (fds[0].revents)
		(void)hellos(rs, 1);
}

static int ms_since(uint64_t t0_ns)
{
	return (int)((uro_now_ns() - t0_ns) / 1000000);
}

/* The QP of the rsocket at `to`: asked over UDP the first time. A
 * datagram's send waits for the answer even when non-blocking, at most
 * RSD_RESOLVE_MS. */
static struct rsd_dest *resolve(struct rsock *rs, const struct sockaddr *to)
{
	struct rsd_dest *d = dest_by_addr(rs->dg, to);
	uint64_t t0 = uro_now_ns();

	for (int asked = -RSD_RETRY_MS; !d && ms_since(t0) < RSD_RESOLVE_MS;
	     d = dest_by_addr(rs->dg, to)) {
		if (ms_since(t0) - asked >= RSD_RETRY_MS) {
			say(rs, RSD_HELLO, to);
			asked = ms_since(t0);
		}
		wait_for(rs, RSD_RETRY_MS);
		(void)progress(rs);
	}
	return d;
}

static int wait_for_slot(struct rsock *rs, int nonblock)
{
	for (progress(rs); rs->send_tail - rs->send_head >= rs->nsend; progress(rs)) {
		if (nonblock) {
			errno = EAGAIN;
			return -1;
		}
		wait_for(rs, -1);
	}
	return 0;
}

ssize_t rs_dgram_sendto(struct rsock *rs, const void *buf, size_t len, int flags,
			const struct sockaddr *to)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr = {.num_sge = len ? 1 : 0, .sg_list = &sge, .opcode = IBV_WR_SEND},
			   *bad;
	struct rsd_dest *d;
	uint32_t slot;

	if (!to && !rs->dg->connected) {
		errno = EDESTADDRREQ;
		return -1;
	}
	to = to ? to : (struct sockaddr *)&rs->dg->peer;
	if (resources(rs, to))
		return -1;
	if (len > rs->dg->mtu) {
		errno = EMSGSIZE;
		return -1;
	}
	d = resolve(rs, to);
	if (!d || !d->ah)
		return (ssize_t)len; /* nobody answers there: dropped, as UDP would */
	if (wait_for_slot(rs, rs->nonblock || (flags & MSG_DONTWAIT)))
		return -1;
	slot = rs->send_tail % rs->nsend;
	if (len)
		memcpy(tx_slot(rs, slot), buf, len);
	sge = (struct ibv_sge){(uintptr_t)tx_slot(rs, slot), (uint32_t)len, rs->smr->lkey};
	wr.wr_id = RSD_SEND | slot;
	wr.wr.ud.ah = d->ah;
	wr.wr.ud.remote_qpn = d->qpn;
	wr.wr.ud.remote_qkey = d->qkey;
	if (ibv_post_send(rs->dg->qp, &wr, &bad))
		return -1;
	rs->send_tail++;
	return (ssize_t)len;
}

/* A sender is known by its QP from its hello; one never heard from is
 * given its GID's address without a port. */
static void sender_addr(struct rsock *rs, uint32_t qpn, struct sockaddr *out, socklen_t *outlen)
{
	struct rsd_dest *d = dest_by_qpn(rs->dg, qpn);
	struct sockaddr_storage none = {.ss_family = AF_INET};
	const struct sockaddr *a = d ? (struct sockaddr *)&d->addr : (struct sockaddr *)&none;
	socklen_t n = addr_len(a);

	if (!out || !outlen)
		return;
	memcpy(out, a, *outlen < n ? *outlen : n);
	*outlen = n;
}

ssize_t rs_dgram_recvfrom(struct rsock *rs, void *buf, size_t len, int flags, struct sockaddr *from,
			  socklen_t *fromlen)
{
	int nonblock = rs->nonblock || (flags & MSG_DONTWAIT);
	uint32_t at, slot, got;

	for (progress(rs); rs->rx_head == rs->rx_tail; progress(rs)) {
		if (nonblock) {
			errno = EAGAIN;
			return -1;
		}
		wait_for(rs, -1);
	}
	at = rs->rx_head % rs->nrecv;
	slot = rs->rx_slot[at];
	got = rs->rx_len[at];
	if (len)
		memcpy(buf, rx_slot(rs, slot) + RSD_GRH, got < len ? got : len);
	sender_addr(rs, rs->dg->rx_qpn[at], from, fromlen);
	if (!(flags & MSG_PEEK)) {
		rs->rx_head++;
		(void)post_recv(rs, slot);
	}
	/* The rest of a datagram longer than buf is lost, as UDP's (recv(2)). */
	return (flags & MSG_TRUNC) || got < len ? (ssize_t)got : (ssize_t)len;
}

short rs_dgram_events(struct rsock *rs)
{
	progress(rs);
	return (short)((rs->rx_head != rs->rx_tail ? POLLIN : 0) |
		       (!rs->dg->qp || rs->send_tail - rs->send_head < rs->nsend ? POLLOUT : 0));
}

int rs_dgram_bind(struct rsock *rs, const struct sockaddr *addr, socklen_t len)
{
	return bind(rs->fd, addr, len);
}

int rs_dgram_connect(struct rsock *rs, const struct sockaddr *addr, socklen_t len)
{
	if (connect(rs->fd, addr, len))
		return -1;
	memcpy(&rs->dg->peer, addr, addr_len(addr));
	rs->dg->connected = 1;
	return 0;
}

int rs_dgram_names(struct rsock *rs, struct sockaddr *addr, socklen_t *len, int peer)
{
	return peer ? getpeername(rs->fd, addr, len) : getsockname(rs->fd, addr, len);
}

int rs_dgram_new(struct rsock *rs, int domain)
{
	rs->dg = calloc(1, sizeof(*rs->dg));
	rs->fd = socket(domain, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	return rs->dg && rs->fd >= 0 ? 0 : -1;
}

/* rclose lets the datagrams already sent leave first (at most
 * RSD_RESOLVE_MS): a UD send on the wire completes once its packet is
 * out, and a QP destroyed before that drops it, where a UDP socket's close
 * would not (a server's last echo was lost over RoCEv2). */
void rs_dgram_drain(struct rsock *rs)
{
	uint64_t t0 = uro_now_ns();

	for (progress(rs); rs->send_head != rs->send_tail && ms_since(t0) < RSD_RESOLVE_MS;
	     progress(rs))
		wait_for(rs, 10);
}

void rs_dgram_free(struct rsock *rs)
{
	struct rs_dgram *dg = rs->dg;

	while (dg && dg->dests) {
		struct rsd_dest *d = dg->dests;

		dg->dests = d->next;
		if (d->ah)
			ibv_destroy_ah(d->ah);
		free(d);
	}
	if (dg && dg->qp)
		ibv_destroy_qp(dg->qp);
	rs_destroy_resources(rs);
	if (dg)
		free(dg->rx_qpn);
	free(dg);
	if (rs->fd >= 0)
		close(rs->fd);
}
