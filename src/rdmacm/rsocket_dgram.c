/* Datagram rsockets (rsocket(7): SOCK_DGRAM over UD), speaking the
 * protocol of rdma-core's librdmacm (its rsocket.c, the ds_* and udp_svc_*
 * functions), so that a uroce rsocket and an rdma-core one exchange
 * datagrams. Each rsocket has a UD QP and a kernel UDP socket that is its
 * descriptor: the UDP socket holds the address and port (rbind, rconnect,
 * rgetsockname, as the kernel checks and assigns them), and carries each
 * datagram to an address whose QP is not known yet, with a header that
 * names the sender's QP; the receiver answers with its own, and from then
 * on the datagrams travel as UD SENDs, each behind a header that names its
 * sender's UDP address (docs/rsockets.md). */
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

#define RSD_GRH	      40 /* ahead of every UD receive (ibv_post_recv(3)) */
#define RSD_RSLOT     (RSD_GRH + RSD_MSG)
#define RSD_SLOTS_MIN 4
#define RSD_SLOTS_MAX 256
#define RSD_SLOTS_DEF 64
#define RSD_UDP_SLOTS 16 /* datagrams that came over UDP, waiting to be read */
#define RSD_DRAIN_MS  1000
#define RSD_SEND      (1ull << 32) /* a send's wr_id; a receive's is its slot */
#define RSD_UDP_NS    1000000ull   /* a busy caller reads the UDP socket this often */

/* An address sent to or heard from over UDP (ds_dest). */
struct rsd_dest {
	struct rsd_dest *next;
	struct sockaddr_storage addr;
	struct rsd_hdr hdr; /* ours towards it: the source address we use and our port */
	uint8_t sgid_index; /* that source address's GID */
	uint32_t qpn;	    /* its QP, once its ds_udp_header came */
	struct ibv_ah *ah;  /* NULL until then: datagrams to it go over UDP */
	int udp_in;	    /* its last datagram came over UDP */
};

/* A datagram to read: its ds_header, then the payload, at RSD_GRH in the
 * slot, len bytes in all. */
struct rsd_rx {
	uint32_t slot, len;
};

struct rs_dgram {
	int family;
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_cq *cq; /* its channel is rs->cc, which rpoll sleeps on */
	struct ibv_qp *qp;
	struct ibv_mr *smr, *rmr;
	uint8_t *sbuf, *rbuf;
	uint32_t nsend, nrecv; /* rbuf: nrecv posted slots, then RSD_UDP_SLOTS */
	uint32_t send_head, send_tail;
	uint32_t max_len;  /* the largest payload */
	struct rsd_rx *rx; /* nrecv + RSD_UDP_SLOTS entries, a ring */
	uint32_t rx_head, rx_tail;
	struct rsd_rx *held; /* UD receives behind the UDP socket's backlog */
	uint32_t nheld;
	uint32_t switching;		  /* destinations whose last datagram came over UDP */
	uint32_t udp_free[RSD_UDP_SLOTS]; /* UDP slots not in use, a stack */
	uint32_t nudp_free;
	struct rsd_dest *dests;
	struct sockaddr_storage peer; /* rconnect's */
	int connected;
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

static uint16_t port_of(const struct sockaddr *a)
{
	return a->sa_family == AF_INET6 ? ((const struct sockaddr_in6 *)a)->sin6_port
					: ((const struct sockaddr_in *)a)->sin_port;
}

static int is_any(const struct sockaddr *a)
{
	if (a->sa_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)a)->sin6_addr);
	return ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_ANY);
}

/* The header that names a: as librdmacm's ds_format_hdr writes it. */
static void format_hdr(struct rsd_hdr *h, const struct sockaddr *a)
{
	memset(h, 0, sizeof(*h));
	if (a->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)a;

		h->version = 6;
		h->length = RSD_HDR6;
		h->port = s->sin6_port;
		h->addr.ipv6.flowinfo = s->sin6_flowinfo;
		memcpy(h->addr.ipv6.addr, &s->sin6_addr, 16);
		return;
	}
	h->version = 4;
	h->length = RSD_HDR4;
	h->port = ((const struct sockaddr_in *)a)->sin_port;
	h->addr.ipv4 = ((const struct sockaddr_in *)a)->sin_addr.s_addr;
}

/* The address a header names (librdmacm's ds_set_src). */
static socklen_t hdr_addr(const struct rsd_hdr *h, struct sockaddr_storage *out)
{
	memset(out, 0, sizeof(*out));
	if (h->version == 6) {
		struct sockaddr_in6 *s = (void *)out;

		s->sin6_family = AF_INET6;
		s->sin6_port = h->port;
		s->sin6_flowinfo = h->addr.ipv6.flowinfo;
		memcpy(&s->sin6_addr, h->addr.ipv6.addr, 16);
		return sizeof(*s);
	}
	struct sockaddr_in *s = (void *)out;

	s->sin_family = AF_INET;
	s->sin_port = h->port;
	s->sin_addr.s_addr = h->addr.ipv4;
	return sizeof(*s);
}

/* A UD message that starts with a ds_header that fits it, as librdmacm's
 * ds_valid_recv asks (a message that does not is reposted unread). */
static int hdr_valid(const uint8_t *p, uint32_t len)
{
	return len >= RSD_HDR4 && ((p[0] == 4 && p[1] == RSD_HDR4) ||
				   (p[0] == 6 && p[1] == RSD_HDR6 && len >= RSD_HDR6));
}

/* A ds_udp_header of from's family, whole in n bytes (librdmacm's
 * udp_svc_valid_udp_hdr). */
static int udp_hdr_valid(const struct rsd_udp_hdr *h, size_t n, const struct sockaddr *from)
{
	if (n < RSD_UDP4 || ntohl(h->tag) != RSD_UDP_TAG)
		return 0;
	if (from->sa_family == AF_INET)
		return h->version == 4 && h->length == RSD_UDP4;
	return from->sa_family == AF_INET6 && h->version == 6 && h->length == RSD_UDP6 &&
	       n >= RSD_UDP6;
}

static uint8_t *rx_buf(struct rs_dgram *dg, uint32_t slot)
{
	return dg->rbuf + (size_t)slot * RSD_RSLOT + RSD_GRH;
}

static uint8_t *tx_buf(struct rs_dgram *dg, uint32_t slot)
{
	return dg->sbuf + (size_t)slot * RSD_MSG;
}

static uint32_t slots_for(int bytes, uint32_t size)
{
	uint32_t n = bytes > 0 ? (uint32_t)bytes / size : RSD_SLOTS_DEF;

	return n < RSD_SLOTS_MIN ? RSD_SLOTS_MIN : n > RSD_SLOTS_MAX ? RSD_SLOTS_MAX : n;
}

/* The port goes into every header, so the socket takes one before its
 * first: the kernel's own choice, as its first sendto would bind it. */
static int ensure_port(const struct rsock *rs)
{
	struct sockaddr_storage me = {.ss_family = (sa_family_t)rs->dg->family};
	socklen_t len = sizeof(me);

	if (getsockname(rs->fd, (struct sockaddr *)&me, &len))
		return -1;
	if (port_of((struct sockaddr *)&me))
		return 0;
	memset(&me, 0, sizeof(me));
	me.ss_family = (sa_family_t)rs->dg->family;
	return bind(rs->fd, (struct sockaddr *)&me, addr_len((struct sockaddr *)&me));
}

/* Our address towards `to`, with our port: the bound address, or the one
 * the kernel routes from (librdmacm's ds_get_src_addr). */
static int source_for(const struct rsock *rs, const struct sockaddr *to,
		      struct sockaddr_storage *src)
{
	struct sockaddr_storage me;
	socklen_t len = sizeof(me);
	int s, err;

	if (ensure_port(rs) || getsockname(rs->fd, (struct sockaddr *)&me, &len))
		return -1;
	memcpy(src, &me, sizeof(me));
	if (!is_any((struct sockaddr *)&me))
		return 0;
	s = socket(to->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	len = sizeof(*src);
	err = s < 0 || connect(s, to, addr_len(to)) || getsockname(s, (struct sockaddr *)src, &len);
	if (s >= 0)
		close(s);
	if (err)
		return -1;
	if (src->ss_family == AF_INET6)
		((struct sockaddr_in6 *)src)->sin6_port = port_of((struct sockaddr *)&me);
	else
		((struct sockaddr_in *)src)->sin_port = port_of((struct sockaddr *)&me);
	return 0;
}

/* The index of the GID of a local address on our port, or -1: a source
 * address our device does not carry cannot be sent from. */
static int gid_index_of(struct ibv_context *verbs, const struct sockaddr *a)
{
	union ibv_gid want, g;

	uro_cm_addr_gid(a, &want);
	for (int i = 0; i < URO_GID_TBL_MAX && !ibv_query_gid(verbs, 1, i, &g); i++)
		if (!memcmp(&g, &want, sizeof(g)))
			return i;
	return -1;
}

static int post_recv(struct rs_dgram *dg, uint32_t slot)
{
	struct ibv_sge sge = {(uintptr_t)(rx_buf(dg, slot) - RSD_GRH), RSD_RSLOT, dg->rmr->lkey};
	struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1}, *bad;

	return ibv_post_recv(dg->qp, &wr, &bad);
}

/* A datagram's slot, read: a posted one goes back to the QP, a UDP one to
 * its stack. */
static void release(struct rs_dgram *dg, uint32_t slot)
{
	if (slot < dg->nrecv)
		(void)post_recv(dg, slot);
	else
		dg->udp_free[dg->nudp_free++] = slot;
}

/* RDMA_UDP_QKEY, the Q_Key of RDMA_PS_UDP: what rdma-core's datagram
 * rsockets take and send with. */
static int qp_to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = RDMA_UDP_QKEY};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

static void *page_alloc(size_t bytes)
{
	return aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095);
}

static int make_buffers(struct rsock *rs)
{
	struct rs_dgram *dg = rs->dg;
	uint32_t nrx = dg->nrecv + RSD_UDP_SLOTS;
	size_t sbytes = (size_t)dg->nsend * RSD_MSG, rbytes = (size_t)nrx * RSD_RSLOT;

	dg->pd = ibv_alloc_pd(dg->verbs);
	rs->cc = dg->pd ? ibv_create_comp_channel(dg->verbs) : NULL;
	if (!rs->cc)
		return -1;
	(void)fcntl(rs->cc->fd, F_SETFL, fcntl(rs->cc->fd, F_GETFL) | O_NONBLOCK);
	dg->cq = ibv_create_cq(dg->verbs, (int)(dg->nsend + dg->nrecv), NULL, rs->cc, 0);
	dg->sbuf = page_alloc(sbytes);
	dg->rbuf = page_alloc(rbytes);
	dg->rx = calloc(nrx, sizeof(*dg->rx));
	dg->held = calloc(dg->nrecv, sizeof(*dg->held));
	if (!dg->cq || !dg->sbuf || !dg->rbuf || !dg->rx || !dg->held)
		return -1;
	/* Written by cross-memory attach, which valgrind does not see. */
	memset(dg->rbuf, 0, rbytes);
	for (uint32_t i = 0; i < RSD_UDP_SLOTS; i++)
		dg->udp_free[dg->nudp_free++] = dg->nrecv + i;
	dg->smr = ibv_reg_mr(dg->pd, dg->sbuf, sbytes, IBV_ACCESS_LOCAL_WRITE);
	dg->rmr = ibv_reg_mr(dg->pd, dg->rbuf, rbytes, IBV_ACCESS_LOCAL_WRITE);
	return dg->smr && dg->rmr ? 0 : -1;
}

/* A payload fits a peer's receive behind either header (rdma-core posts
 * RS_SNDLOWAT bytes after the GRH and reads as much from UDP), and a UD
 * message fits one packet of the path MTU. */
static uint32_t max_payload(int family, uint32_t mtu)
{
	uint32_t udp = family == AF_INET6 ? RSD_UDP6 : RSD_UDP4,
		 ud = family == AF_INET6 ? RSD_HDR6 : RSD_HDR4;

	return RSD_MSG - udp < mtu - ud ? RSD_MSG - udp : mtu - ud;
}

/* The QP and all it takes, gone: at rclose, and after a start that
 * failed half way, so that the next datagram starts from nothing. */
static void drop_resources(struct rsock *rs)
{
	struct rs_dgram *dg = rs->dg;

	if (dg->qp)
		ibv_destroy_qp(dg->qp);
	if (dg->smr)
		ibv_dereg_mr(dg->smr);
	if (dg->rmr)
		ibv_dereg_mr(dg->rmr);
	if (dg->cq)
		ibv_destroy_cq(dg->cq);
	if (rs->cc)
		ibv_destroy_comp_channel(rs->cc);
	if (dg->pd)
		ibv_dealloc_pd(dg->pd);
	free(dg->sbuf);
	free(dg->rbuf);
	free(dg->rx);
	free(dg->held);
	dg->qp = NULL;
	dg->smr = dg->rmr = NULL;
	dg->cq = NULL;
	rs->cc = NULL;
	dg->pd = NULL;
	dg->sbuf = dg->rbuf = NULL;
	dg->rx = NULL;
	dg->held = NULL;
	dg->nudp_free = dg->nheld = 0;
}

/* The QP, made once on the device of our first source address. One QP
 * answers every peer: librdmacm makes one per source address, but which
 * QP a peer is told is all the wire shows. */
static int make_resources(struct rsock *rs, const struct sockaddr *src)
{
	struct rs_dgram *dg = rs->dg;
	struct ibv_qp_init_attr a;
	struct ibv_port_attr port;

	dg->verbs = uro_cm_device_for_addr(src);
	if (!dg->verbs || ibv_query_port(dg->verbs, 1, &port))
		return -1;
	dg->max_len = max_payload(dg->family, 128u << port.active_mtu);
	dg->nsend = slots_for(rs->sndbuf, RSD_MSG);
	dg->nrecv = slots_for(rs->rcvbuf, RSD_RSLOT);
	if (make_buffers(rs))
		return -1;
	memset(&a, 0, sizeof(a));
	a.send_cq = a.recv_cq = dg->cq;
	a.qp_type = IBV_QPT_UD;
	a.sq_sig_all = 1;
	a.cap.max_send_wr = dg->nsend;
	a.cap.max_recv_wr = dg->nrecv;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	dg->qp = ibv_create_qp(dg->pd, &a);
	if (!dg->qp || qp_to_rts(dg->qp))
		return -1;
	for (uint32_t i = 0; i < dg->nrecv; i++)
		if (post_recv(dg, i))
			return -1;
	return 0;
}

static int resources(struct rsock *rs, const struct sockaddr *src)
{
	int err;

	if (rs->dg->qp)
		return 0;
	if (!make_resources(rs, src))
		return 0;
	err = errno;
	drop_resources(rs);
	errno = err;
	return -1;
}

static struct rsd_dest *dest_by_addr(struct rs_dgram *dg, const struct sockaddr *a)
{
	struct rsd_dest *d = dg->dests;

	while (d && !same_addr((struct sockaddr *)&d->addr, a))
		d = d->next;
	return d;
}

/* The destination `to`, made the first time with our source address
 * towards it (librdmacm's ds_get_dest); NULL with errno. */
static struct rsd_dest *dest_for(struct rsock *rs, const struct sockaddr *to)
{
	struct rs_dgram *dg = rs->dg;
	struct rsd_dest *d = dest_by_addr(dg, to);
	struct sockaddr_storage src;
	int gid;

	if (d)
		return d;
	if (to->sa_family != dg->family) {
		errno = EAFNOSUPPORT;
		return NULL;
	}
	if (source_for(rs, to, &src) || resources(rs, (struct sockaddr *)&src))
		return NULL;
	gid = gid_index_of(dg->verbs, (struct sockaddr *)&src);
	if (gid < 0) { /* a route out of another device than the rsocket's */
		errno = ENETUNREACH;
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	memcpy(&d->addr, to, addr_len(to));
	format_hdr(&d->hdr, (struct sockaddr *)&src);
	d->sgid_index = (uint8_t)gid;
	d->next = dg->dests;
	dg->dests = d;
	return d;
}

/* The peer's QP, from its ds_udp_header: an AH to its address from ours
 * (librdmacm's udp_svc_create_ah). */
static void learn_qpn(struct rsock *rs, struct rsd_dest *d, uint32_t qpn)
{
	struct ibv_ah_attr a = {.is_global = 1, .port_num = 1};

	if (d->ah && d->qpn == qpn)
		return;
	if (d->ah)
		ibv_destroy_ah(d->ah);
	uro_cm_addr_gid((struct sockaddr *)&d->addr, &a.grh.dgid);
	a.grh.sgid_index = d->sgid_index;
	a.grh.hop_limit = 64;
	d->ah = ibv_create_ah(rs->dg->pd, &a);
	d->qpn = qpn;
}

/* A ds_udp_header naming our QP and our source address towards d, then
 * len bytes of buf, over UDP (librdmacm's ds_sendv_udp): the payload's
 * length sent, or -1. */
static ssize_t udp_send(struct rsock *rs, const struct rsd_dest *d, uint8_t op, const void *buf,
			size_t len)
{
	struct rsd_udp_hdr h = {.tag = htonl(RSD_UDP_TAG),
				.version = d->hdr.version,
				.op = op,
				.qpn = htonl(rs->dg->qp->qp_num & 0xffffff)};
	struct iovec iov[2] = {{&h, 0}, {(void *)buf, len}};
	struct msghdr m = {.msg_name = (void *)&d->addr,
			   .msg_namelen = addr_len((struct sockaddr *)&d->addr),
			   .msg_iov = iov,
			   .msg_iovlen = len ? 2 : 1};
	ssize_t n;

	if (d->hdr.version == 6) {
		h.length = RSD_UDP6;
		memcpy(h.addr, d->hdr.addr.ipv6.addr, 16);
	} else {
		h.length = RSD_UDP4;
		memcpy(h.addr, &d->hdr.addr.ipv4, 4);
	}
	iov[0].iov_len = h.length;
	n = sendmsg(rs->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
	return n < 0 ? -1 : n - h.length;
}

/* A datagram that came over UDP, queued to be read as one that came as a
 * UD SEND: its sender's address ahead in a ds_header, as librdmacm's
 * udp_svc_forward sends it to its own QP. The socket is read only while a
 * UDP slot is free (udp_input). */
static void deliver(struct rs_dgram *dg, const uint8_t *payload, size_t len,
		    const struct sockaddr *from)
{
	struct rsd_hdr h;
	uint32_t slot;

	if (!dg->nudp_free)
		return;
	slot = dg->udp_free[--dg->nudp_free];
	format_hdr(&h, from);
	memcpy(rx_buf(dg, slot), &h, h.length);
	memcpy(rx_buf(dg, slot) + h.length, payload, len);
	dg->rx[dg->rx_tail++ % (dg->nrecv + RSD_UDP_SLOTS)] =
	    (struct rsd_rx){slot, (uint32_t)(h.length + len)};
}

/* One datagram from the UDP socket, as librdmacm's udp_svc_process_rs
 * takes it: a DATA is answered with a CTRL naming our QP, the sender's QP
 * is learnt, and a DATA's payload is delivered. Anything else is dropped,
 * as a datagram nobody expects. */
static int udp_datagram(struct rsock *rs, const uint8_t *buf, size_t n, const struct sockaddr *from)
{
	struct rsd_udp_hdr h = {0};
	struct rsd_dest *d;

	memcpy(&h, buf, n < sizeof(h) ? n : sizeof(h));
	if (!udp_hdr_valid(&h, n, from) || !(d = dest_for(rs, from)))
		return 0;
	if (h.op == RS_OP_DATA)
		(void)udp_send(rs, d, RS_OP_CTRL, NULL, 0);
	learn_qpn(rs, d, ntohl(h.qpn) & 0xffffff);
	if (h.op == RS_OP_DATA) {
		rs->dg->switching += !d->udp_in;
		d->udp_in = 1;
		deliver(rs->dg, buf + h.length, n - h.length, from);
	}
	return 1;
}

/* What waits on the UDP socket, while a UDP slot is free (or before the
 * QP, which the first datagram makes): the rest waits in the socket's
 * buffer until the program reads, and what overflows it the kernel drops,
 * as for a UDP socket. An rdma-core peer sends a burst over UDP until
 * its service thread has resolved a route to us. A datagram over RSD_MSG
 * bytes, which no peer sends (rdma-core reads RSD_MSG and no more), is
 * dropped. */
static int udp_input(struct rsock *rs)
{
	struct sockaddr_storage from;
	uint8_t buf[RSD_MSG];
	int n = 0;

	while (!rs->dg->qp || rs->dg->nudp_free) {
		socklen_t len = sizeof(from);
		ssize_t got = recvfrom(rs->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC,
				       (struct sockaddr *)&from, &len);

		if (got < 0)
			return n;
		if (got <= (ssize_t)sizeof(buf))
			n += udp_datagram(rs, buf, (size_t)got, (struct sockaddr *)&from);
	}
	return n;
}

/* The UDP socket is read after a sleep that it may have ended, and at
 * most once a millisecond by a caller that never sleeps: a recvfrom per
 * call was half of a small datagram's cost (udpong's 64 B echo took
 * 15 us against the kernel's 8). */
static int udp_poll(struct rsock *rs, int now)
{
	uint64_t t = uro_now_ns();

	if (!now && t < rs->dg->udp_next_ns)
		return 0;
	rs->dg->udp_next_ns = t + RSD_UDP_NS;
	return udp_input(rs);
}

static void queue_rx(struct rs_dgram *dg, struct rsd_rx rx)
{
	dg->rx[dg->rx_tail++ % (dg->nrecv + RSD_UDP_SLOTS)] = rx;
}

/* The destination a UD datagram's ds_header names, if we know it. */
static struct rsd_dest *sender_of(struct rs_dgram *dg, uint32_t slot)
{
	struct sockaddr_storage a;
	struct rsd_hdr h;

	memcpy(&h, rx_buf(dg, slot), sizeof(h)); /* the slot holds RSD_MSG bytes */
	hdr_addr(&h, &a);
	return dest_by_addr(dg, (struct sockaddr *)&a);
}

/* A peer sends over UDP until it learns our QP, then as UD SENDs; its
 * datagrams still waiting on our UDP socket were sent before its first
 * UD SEND, and a program reads them first, as librdmacm's service thread
 * passes each to the QP as it comes. So the first UD SEND from a peer
 * heard over UDP waits, with every receive after it, until the UDP
 * socket has been read dry (release_held). Seen, as far as counters
 * tell: the kernel peer's udpong client sent its end message by UD while
 * 8 of its 32 datagrams still waited on the socket, and counted 24. */
static void completion(struct rs_dgram *dg, const struct ibv_wc *wc)
{
	uint32_t slot = (uint32_t)wc->wr_id;
	struct rsd_rx rx = {slot, wc->byte_len - RSD_GRH};
	struct rsd_dest *d;

	if (wc->wr_id & RSD_SEND) {
		dg->send_head++;
		return;
	}
	if (wc->status != IBV_WC_SUCCESS || wc->byte_len < RSD_GRH ||
	    !hdr_valid(rx_buf(dg, slot), rx.len)) {
		(void)post_recv(dg, slot);
		return;
	}
	/* The sender is looked up only while a peer is switching. */
	d = dg->switching ? sender_of(dg, slot) : NULL;
	if (dg->nheld || (d && d->udp_in))
		dg->held[dg->nheld++] = rx;
	else
		queue_rx(dg, rx);
	if (d && d->udp_in) {
		d->udp_in = 0;
		dg->switching--;
	}
}

/* The held UD receives follow once nothing waits on the UDP socket: it is
 * read while a UDP slot is free, and otherwise again after the program
 * has read one. Read with a slot left free, it was read dry. */
static int release_held(struct rsock *rs)
{
	struct rs_dgram *dg = rs->dg;
	int n = udp_input(rs);

	if (!dg->nudp_free)
		return n;
	for (uint32_t i = 0; i < dg->nheld; i++)
		queue_rx(dg, dg->held[i]);
	dg->nheld = 0;
	return n;
}

static int progress(struct rsock *rs)
{
	struct rs_dgram *dg = rs->dg;
	struct ibv_wc wc[16];
	int n, total = udp_poll(rs, 0);

	while (dg->cq && (n = ibv_poll_cq(dg->cq, 16, wc)) > 0) {
		for (int i = 0; i < n; i++)
			completion(dg, &wc[i]);
		total += n;
	}
	if (dg->nheld)
		total += release_held(rs);
	return total;
}

/* Before a sleep: the CQ armed, then one more look, the UDP socket
 * included. */
int rs_dgram_arm(struct rsock *rs)
{
	int news;

	if (rs->dg->cq)
		ibv_req_notify_cq(rs->dg->cq, 0);
	news = udp_poll(rs, 1);
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
		(void)udp_poll(rs, 1);
}

static int ms_since(uint64_t t0_ns)
{
	return (int)((uro_now_ns() - t0_ns) / 1000000);
}

static int wait_for_slot(struct rsock *rs, int nonblock)
{
	struct rs_dgram *dg = rs->dg;

	for (progress(rs); dg->send_tail - dg->send_head >= dg->nsend; progress(rs)) {
		if (nonblock) {
			errno = EAGAIN;
			return -1;
		}
		wait_for(rs, -1);
	}
	return 0;
}

/* Our ds_header and the payload as a UD SEND to the peer's QP (librdmacm's
 * dsend and ds_post_send). */
static ssize_t ud_send(struct rsock *rs, const struct rsd_dest *d, const void *buf, size_t len,
		       int nonblock)
{
	struct rs_dgram *dg = rs->dg;
	struct ibv_sge sge;
	struct ibv_send_wr wr = {.num_sge = 1, .sg_list = &sge, .opcode = IBV_WR_SEND}, *bad;
	uint32_t slot;

	if (wait_for_slot(rs, nonblock))
		return -1;
	slot = dg->send_tail % dg->nsend;
	memcpy(tx_buf(dg, slot), &d->hdr, d->hdr.length);
	if (len)
		memcpy(tx_buf(dg, slot) + d->hdr.length, buf, len);
	sge = (struct ibv_sge){(uintptr_t)tx_buf(dg, slot), (uint32_t)(d->hdr.length + len),
			       dg->smr->lkey};
	wr.wr_id = RSD_SEND | slot;
	wr.wr.ud.ah = d->ah;
	wr.wr.ud.remote_qpn = d->qpn;
	wr.wr.ud.remote_qkey = RDMA_UDP_QKEY;
	if (ibv_post_send(dg->qp, &wr, &bad))
		return -1;
	dg->send_tail++;
	return (ssize_t)len;
}

/* Over UDP until the peer's QP is known. A blocking send waits for room
 * in the socket's buffer, as a blocking UDP socket's does. */
static ssize_t udp_data(struct rsock *rs, const struct rsd_dest *d, const void *buf, size_t len,
			int nonblock)
{
	ssize_t n;

	while ((n = udp_send(rs, d, RS_OP_DATA, buf, len)) < 0 && errno == EAGAIN && !nonblock) {
		struct pollfd p = {.fd = rs->fd, .events = POLLOUT};

		pthread_mutex_unlock(&rs->lock);
		(void)poll(&p, 1, -1);
		pthread_mutex_lock(&rs->lock);
	}
	return n;
}

ssize_t rs_dgram_sendto(struct rsock *rs, const void *buf, size_t len, int flags,
			const struct sockaddr *to)
{
	int nonblock = rs->nonblock || (flags & MSG_DONTWAIT);
	struct rsd_dest *d;

	if (!to && !rs->dg->connected) {
		errno = EDESTADDRREQ;
		return -1;
	}
	d = dest_for(rs, to ? to : (struct sockaddr *)&rs->dg->peer);
	if (!d)
		return -1;
	if (len > rs->dg->max_len) {
		errno = EMSGSIZE;
		return -1;
	}
	if (!d->ah) /* the peer's answer may be waiting on the socket */
		(void)udp_poll(rs, 1);
	return d->ah ? ud_send(rs, d, buf, len, nonblock) : udp_data(rs, d, buf, len, nonblock);
}

ssize_t rs_dgram_recvfrom(struct rsock *rs, void *buf, size_t len, int flags, struct sockaddr *from,
			  socklen_t *fromlen)
{
	struct rs_dgram *dg = rs->dg;
	int nonblock = rs->nonblock || (flags & MSG_DONTWAIT);
	struct sockaddr_storage src;
	struct rsd_hdr h = {0};
	struct rsd_rx rx;
	socklen_t srclen;
	uint32_t got;

	for (progress(rs); dg->rx_head == dg->rx_tail; progress(rs)) {
		if (nonblock) {
			errno = EAGAIN;
			return -1;
		}
		wait_for(rs, -1);
	}
	rx = dg->rx[dg->rx_head % (dg->nrecv + RSD_UDP_SLOTS)];
	memcpy(&h, rx_buf(dg, rx.slot), sizeof(h) < rx.len ? sizeof(h) : rx.len);
	got = rx.len - h.length;
	if (len)
		memcpy(buf, rx_buf(dg, rx.slot) + h.length, got < len ? got : len);
	srclen = hdr_addr(&h, &src);
	if (from && fromlen) {
		memcpy(from, &src, *fromlen < srclen ? *fromlen : srclen);
		*fromlen = srclen;
	}
	if (!(flags & MSG_PEEK)) {
		dg->rx_head++;
		release(dg, rx.slot);
	}
	/* The rest of a datagram longer than buf is lost, as UDP's (recv(2)). */
	return (flags & MSG_TRUNC) || got < len ? (ssize_t)got : (ssize_t)len;
}

short rs_dgram_events(struct rsock *rs)
{
	struct rs_dgram *dg = rs->dg;

	progress(rs);
	return (short)((dg->rx_head != dg->rx_tail ? POLLIN : 0) |
		       (!dg->qp || dg->send_tail - dg->send_head < dg->nsend ? POLLOUT : 0));
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
	if (!rs->dg)
		return -1;
	rs->dg->family = domain;
	rs->fd = socket(domain, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	return rs->fd >= 0 ? 0 : -1;
}

/* rclose lets the datagrams already sent leave first (at most
 * RSD_DRAIN_MS): a UD send on the wire completes once its packet is
 * out, and a QP destroyed before that drops it, where a UDP socket's close
 * would not (a server's last echo was lost over RoCEv2). */
void rs_dgram_drain(struct rsock *rs)
{
	struct rs_dgram *dg = rs->dg;
	uint64_t t0 = uro_now_ns();

	for (progress(rs); dg->send_head != dg->send_tail && ms_since(t0) < RSD_DRAIN_MS;
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
	if (dg) {
		drop_resources(rs);
		free(dg);
	}
	rs->dg = NULL;
	if (rs->fd >= 0)
		close(rs->fd);
}
