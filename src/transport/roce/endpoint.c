/* A process's RoCEv2 endpoint: its UDP socket on port 4791, and how a
 * packet that reached the wrong process of the host gets to the right one.
 *
 * Every uroce process with a QP on the wire binds the link's address (its
 * first IPv4 one, and its first IPv6 one when a GID of that family is
 * used), port 4791, with SO_REUSEADDR, which the kernel allows across
 * users. The kernel
 * gives each datagram to one of those sockets (the newest); the process
 * that gets a packet for another slot's QP (the BTH's destination QP names
 * the slot) passes it on to that slot's process (relay.h), with the
 * addresses it came with. A dead process's socket is gone with it, so the
 * others still receive; a packet for a slot nobody listens on is dropped
 * and counted. docs/architecture.md gives the reasons and the limits.
 *
 * The kernel writes the IP and UDP headers, so the ICRC (IBTA A17.8) is
 * computed over the headers it will write: IPv4, identification 0 and DF,
 * which Linux gives a datagram of an unconnected socket with
 * IP_PMTUDISC_DO, or IPv6, whose traffic class, flow label and hop limit
 * the ICRC masks. A received packet's headers are rebuilt the same way. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "address_watch.h"
#include "device_model.h"
#include "icrc.h"
#include "log.h"
#include "mad_route.h"
#include "port_leave.h"
#include "port_probe.h"
#include "socket_buffer.h"
#include "wire.h"
#include "wire_flow.h"
#include "wire_socket.h"

/* What a forwarded datagram carries in front of the packet: its
 * addresses as GIDs (IPv4-mapped for IPv4) and its UDP source port; and
 * the IPv4 identification its ICRC checked with, which the receiving
 * process tries first (a segment of a GSO datagram has its own: see
 * take_datagram). A process of an older build sends 0 there. */
struct forward_head {
	union ibv_gid src, dst;
	uint16_t sport; /* network order */
	uint16_t ip_id;
};

/* Family f's address was refused (still tentative, or not assigned yet
 * though the netdev announced it): from now on the endpoint hears the
 * kernel's address announcements and tries again on each (heal_families).
 * Under open_lock. 0, or the errno that leaves it deaf on f. */
static int await_address(struct uro_wire_endpoint *w, enum uro_wire_family f)
{
	if (w->addr_fd < 0) {
		w->addr_fd = uro_addr_watch_open();
		if (w->addr_fd < 0)
			return errno;
		if (uro_wire_watch(w->rx_efd, w->addr_fd, RX_ADDRESSES)) {
			int err = errno;

			close(w->addr_fd);
			w->addr_fd = -1;
			return err;
		}
	}
	w->awaited[f] = 1;
	return 0;
}

/* Opens family f's sockets, unless they are: 0, or an errno. */
static int socks_open(struct uro_context *ctx, struct uro_wire_endpoint *w, enum uro_wire_family f)
{
	struct uro_wire_socks *s = &w->fam[f], n;
	int fd;

	if (__atomic_load_n(&s->fd, __ATOMIC_ACQUIRE) >= 0)
		return 0;
	memset(&n, 0, sizeof(n));
	n.fd = -1;
	for (int i = 0; i < URO_WIRE_TX_PORTS; i++)
		n.tx_fd[i] = -1;
	if (uro_wire_link_addr(&ctx->model, f, &n.addr)) {
		uro_warn("device %s: no IPv%c address on its netdev for RoCEv2 to that family",
			 ctx->dev->ibdev.name, f == URO_WIRE_IPV4 ? '4' : '6');
		return EADDRNOTAVAIL;
	}
	pthread_mutex_lock(&w->open_lock);
	if (s->fd >= 0) {
		pthread_mutex_unlock(&w->open_lock);
		return 0;
	}
	for (int i = 0; i < URO_WIRE_TX_PORTS; i++)
		if ((n.tx_fd[i] = uro_wire_tx_socket(f, &n.addr, w->ifindex, &n.tx_port[i])) < 0)
			break;
	fd = n.tx_fd[URO_WIRE_TX_PORTS - 1] < 0 ? -1 : uro_wire_udp_socket(f, &n.addr, w->ifindex);
	if (fd >= 0 && uro_wire_watch(w->rx_efd, fd, f)) {
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		int err = errno;
		int later = err == EADDRNOTAVAIL && !await_address(w, f);
		/* A UD QP opens on every post: a refusal is said (and its holder
		 * looked for through /proc) once, until it changes. */
		int tell = w->refused[f] != err;
		struct uro_diagnosis d;

		w->refused[f] = err;
		if (!later)
			w->awaited[f] = 0; /* no announcement will mend it */
		pthread_mutex_unlock(&w->open_lock);
		uro_wire_socks_close(&n);
		if (!tell)
			return err;
		if (later) {
			uro_warn(
			    "device %s: cannot receive RoCEv2 over IPv%c yet: %s (while duplicate "
			    "address detection runs, an address is tentative); it is bound once "
			    "the kernel says the address is usable",
			    ctx->dev->ibdev.name, f == URO_WIRE_IPV4 ? '4' : '6', strerror(err));
		} else {
			uro_port_explain(URO_ROCE_PORT, err, &d);
			uro_warn("device %s: cannot receive RoCEv2 on UDP port 4791: %s%s%s",
				 ctx->dev->ibdev.name, d.why, *d.remedy ? "; " : "", d.remedy);
		}
		return err;
	}
	memcpy(s->tx_fd, n.tx_fd, sizeof(n.tx_fd));
	memcpy(s->tx_port, n.tx_port, sizeof(n.tx_port));
	s->addr = n.addr;
	w->awaited[f] = 0;
	w->refused[f] = 0;
	/* Published last: the receivers and the progress thread look at fd. */
	__atomic_store_n(&s->fd, fd, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&w->open_lock);
	return 0;
}

/* The sending socket of the packet whose BTH is at bth: its QP's for the
 * QP's life (the UDP source port is flow entropy: a flow's packets keep
 * one, so that a network spreading flows over paths never reorders a QP's),
 * as rxe picks a port by QPN. A connected QP's packets all go to one
 * destination QP, which stands for it; a UD packet names its QP in its
 * DETH. */
static unsigned tx_index(const uint8_t *bth)
{
	const uint8_t *q = (bth[0] >> 5) == 3 /* UD */ ? bth + URO_ROCE_BTH_LEN + 4 : bth + 4;
	uint32_t qpn = (uint32_t)q[1] << 16 | q[2] << 8 | q[3];

	return (qpn * 2654435761u) >> 28; /* Knuth's multiplicative hash: 16 ports */
}

static void endpoint_free(struct uro_wire_endpoint *w)
{
	for (int f = 0; f < URO_WIRE_FAMILIES; f++)
		uro_wire_socks_close(&w->fam[f]);
	uro_wire_flows_close(w);
	uro_wire_groups_close(w);
	uro_relay_close(&w->relay);
	uro_wire_faults_free(w->faults);
	uro_pcap_close(w->pcap);
	if (w->kick_fd >= 0)
		close(w->kick_fd);
	if (w->rx_efd >= 0)
		close(w->rx_efd);
	if (w->addr_fd >= 0)
		close(w->addr_fd);
	free(w->rx);
	free(w->burst);
	pthread_mutex_destroy(&w->rx_lock);
	pthread_mutex_destroy(&w->open_lock);
	free(w);
}

static struct uro_wire_endpoint *endpoint_new(struct uro_context *ctx)
{
	struct uro_wire_endpoint *w = calloc(1, sizeof(*w));
	const char *spec;
	int err_no;
	char err[256];

	if (!w)
		return NULL;
	pthread_mutex_init(&w->rx_lock, NULL);
	pthread_mutex_init(&w->open_lock, NULL);
	w->kick_fd = w->rx_efd = w->relay.lfd = w->relay.efd = w->addr_fd = -1;
	for (int f = 0; f < URO_WIRE_FAMILIES; f++) {
		w->fam[f].fd = -1;
		for (int i = 0; i < URO_WIRE_TX_PORTS; i++)
			w->fam[f].tx_fd[i] = -1;
	}
	for (int i = 0; i < URO_WIRE_GROUPS; i++)
		w->groups[i].fd = -1;
	w->ifindex = ctx->model.netdev.ifindex;
	w->look_ns = URO_WIRE_LOOK_NS;
	w->n = &ctx->self.hdr->counters;
	w->rx = calloc(URO_WIRE_BATCH, sizeof(*w->rx));
	w->burst = calloc(URO_WIRE_BURST, sizeof(*w->burst));
	if (!w->rx || !w->burst) {
		endpoint_free(w);
		errno = ENOMEM;
		return NULL;
	}
	w->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	w->rx_efd = epoll_create1(EPOLL_CLOEXEC);
	if (w->kick_fd < 0 || w->rx_efd < 0 || uro_relay_open(&w->relay, ctx->slot.sock) ||
	    uro_wire_watch(w->rx_efd, w->relay.efd, RX_RELAY)) {
		int err = errno;

		uro_warn("device %s: cannot receive RoCEv2: %s", ctx->dev->ibdev.name,
			 strerror(err));
		endpoint_free(w);
		errno = err;
		return NULL;
	}
	/* A trace watches; one that cannot be written leaves the program be. */
	w->pcap = uro_pcap_from_env(err, sizeof(err));
	if (!w->pcap && *err)
		uro_warn("UROCE_PCAP=%s: running without the trace it asks for: %s (point "
			 "UROCE_PCAP at a file that can be written, or unset it)",
			 getenv("UROCE_PCAP"), err);
	spec = getenv("UROCE_FAULTS");
	if (spec && *spec &&
	    (err_no = uro_wire_faults_open(spec, ctx->dev->ibdev.name, &w->faults))) {
		endpoint_free(w);
		errno = err_no;
		return NULL;
	}
	return w;
}

/* The families gid needs (NULL: those of the link's addresses, of which
 * one must open). */
static int families_open(struct uro_context *ctx, struct uro_wire_endpoint *w,
			 const union ibv_gid *gid)
{
	union ibv_gid any;
	int err = EADDRNOTAVAIL, opened = 0;

	if (gid)
		return socks_open(ctx, w, uro_wire_family_of(gid));
	for (int f = 0; f < URO_WIRE_FAMILIES; f++) {
		if (uro_wire_link_addr(&ctx->model, (enum uro_wire_family)f, &any))
			continue;
		if (!(err = socks_open(ctx, w, (enum uro_wire_family)f)))
			opened = 1;
	}
	return opened ? 0 : err;
}

struct uro_wire_endpoint *uro_wire_open(struct uro_context *ctx, const union ibv_gid *gid)
{
	struct uro_wire_endpoint *w = __atomic_load_n(&ctx->wire, __ATOMIC_ACQUIRE);
	int err;

	if (!w) {
		w = endpoint_new(ctx);
		if (!w)
			return NULL;
		__atomic_store_n(&ctx->wire, w, __ATOMIC_RELEASE);
		/* The progress thread answers the peers while the program sleeps. */
		uro_progress_kick(ctx);
	}
	err = families_open(ctx, w, gid);
	if (err) {
		errno = err;
		return NULL;
	}
	return w;
}

void uro_wire_header(struct uro_roce_packet *pkt, int code, uint32_t dest_qp, uint32_t psn)
{
	memset(pkt, 0, sizeof(*pkt));
	pkt->opcode = (uint8_t)code;
	pkt->op = uro_wire_opcode((uint8_t)code);
	pkt->pkey = URO_DEFAULT_PKEY;
	pkt->dest_qp = dest_qp & URO_PSN_MASK;
	pkt->psn = psn & URO_PSN_MASK;
}

int uro_wire_transmit(struct uro_wire_endpoint *w, const struct uro_wire_dest *to,
		      const uint8_t *data, size_t len)
{
	const struct uro_wire_socks *s = &w->fam[to->family];
	unsigned tx = tx_index(data);

	w->n->sent++;
	if (sendto(s->tx_fd[tx], data, len, 0, &to->sa.sa, to->len) >= 0) {
		if (w->pcap)
			uro_pcap_packet(w->pcap, s->addr.raw, s->tx_port[tx], to->gid.raw, 0, data,
					len);
		return 0;
	}
	/* A full socket buffer is a lost packet: the peer's retry covers it. */
	w->n->send_err++;
	return errno == EAGAIN || errno == ENOBUFS ? 0 : errno;
}

/* The IPv4 identification of the header at ip (IPv6 has none). */
static void set_ip_id(uint8_t *ip, size_t hl, uint16_t id)
{
	if (hl != URO_ROCE_IPV4_UDP_LEN)
		return;
	ip[4] = (uint8_t)(id >> 8);
	ip[5] = (uint8_t)id;
}

void uro_wire_finish(const struct uro_wire_endpoint *w, const struct uro_wire_dest *to,
		     uint8_t *buf, size_t tlen, uint16_t ip_id)
{
	const struct uro_wire_socks *s = &w->fam[to->family];
	size_t hl = uro_roce_ip_udp_len(to->gid.raw);
	uint8_t *ip = buf + URO_WIRE_HEAD - hl;

	uro_roce_ip_udp(ip, s->addr.raw, to->gid.raw, s->tx_port[tx_index(buf + URO_WIRE_HEAD)],
			tlen + URO_ROCE_ICRC_LEN);
	set_ip_id(ip, hl, ip_id);
	uro_roce_icrc_put(ip, hl - 8, hl + tlen);
}

/* The IP and UDP headers in front of a packet sent alone, its ICRC behind. */
static void finish(const struct uro_wire_endpoint *w, const struct uro_wire_dest *to, uint8_t *buf,
		   size_t tlen)
{
	uro_wire_finish(w, to, buf, tlen, 0);
}

void uro_wire_trace_sent(struct uro_wire_endpoint *w, const struct uro_wire_dest *to, uint8_t *buf,
			 size_t tlen)
{
	const struct uro_wire_socks *s = &w->fam[to->family];

	finish(w, to, buf, tlen);
	uro_pcap_packet(w->pcap, s->addr.raw, s->tx_port[tx_index(buf + URO_WIRE_HEAD)],
			to->gid.raw, 0, buf + URO_WIRE_HEAD, tlen + URO_ROCE_ICRC_LEN);
}

int uro_wire_send(struct uro_wire_endpoint *w, const struct uro_wire_dest *to, uint8_t *buf,
		  size_t tlen)
{
	finish(w, to, buf, tlen);
	if (w->faults) {
		uro_wire_faults_send(w, to, buf + URO_WIRE_HEAD, tlen + URO_ROCE_ICRC_LEN);
		return 0;
	}
	return uro_wire_transmit(w, to, buf + URO_WIRE_HEAD, tlen + URO_ROCE_ICRC_LEN);
}

void uro_wire_send_burst(struct uro_wire_endpoint *w, const struct uro_wire_dest *to,
			 uint8_t (*buf)[URO_WIRE_BUF], const size_t *tlen, unsigned n)
{
	/* Faults and traces act on each packet as it leaves. */
	if (w->faults || w->pcap || n == 1) {
		for (unsigned i = 0; i < n; i++)
			uro_wire_send(w, to, buf[i], tlen[i]);
		return;
	}
	/* One QP's packets leave by one socket (tx_index). */
	uro_wire_send_gso(w, w->fam[to->family].tx_fd[tx_index(buf[0] + URO_WIRE_HEAD)], to, buf,
			  tlen, n);
}

static void forward(struct uro_wire_endpoint *w, unsigned slot, const uint8_t *pkt, size_t len,
		    const struct forward_head *fh)
{
	struct iovec iov[2] = {{(void *)fh, sizeof(*fh)}, {(void *)pkt, len}};

	if (uro_relay_send(&w->relay, slot, iov, 2) == 0)
		w->n->forwarded++;
	else
		w->n->no_qp++;
}

static int is_response(const struct uro_roce_packet *p)
{
	return p->op->op == WIRE_ACK || p->op->op == WIRE_ATOMIC_ACK || p->op->op == WIRE_READ_RESP;
}

/* The QP a packet names, if it is this process's, on the wire and of the
 * transport the opcode belongs to; of XRC's two halves, an initiator takes
 * only responses and a target only requests (IBTA Annex A14). */
static struct uro_qp *target_qp(struct uro_context *ctx, const struct uro_roce_packet *p)
{
	struct uro_qp *qp = ctx->qps[p->dest_qp & (URO_MAX_QP - 1)];
	enum ibv_qp_type t;

	if (!qp || !qp->wire || qp->qpx.qp_base.qp_num != p->dest_qp)
		return NULL;
	t = qp->qpx.qp_base.qp_type;
	if ((p->op->qp & WIRE_RC) && t == IBV_QPT_RC)
		return qp;
	if ((p->op->qp & WIRE_UC) && t == IBV_QPT_UC)
		return qp;
	if (p->op->qp & WIRE_XRC)
		return t == (is_response(p) ? IBV_QPT_XRC_SEND : IBV_QPT_XRC_RECV) ? qp : NULL;
	return (p->op->qp & WIRE_UD) && t == IBV_QPT_UD ? qp : NULL;
}

/* Rebuilds at ip the headers the packet (tlen bytes after them) came
 * with, with *id as its IPv4 identification, and parses it. A wrong ICRC
 * is tried again with the identification that makes it right, if one does
 * (icrc.h: Linux rxe numbers its packets, GSO numbers its segments);
 * *id is then the one the packet checked with. */
static enum uro_roce_drop check(struct uro_wire_endpoint *w, uint8_t *ip, size_t hl, size_t tlen,
				const struct forward_head *fh, uint16_t *id,
				struct uro_roce_packet *p)
{
	enum uro_roce_drop why;

	uro_roce_ip_udp(ip, fh->src.raw, fh->dst.raw, fh->sport, tlen);
	set_ip_id(ip, hl, *id);
	why = uro_roce_parse(ip, hl + tlen, p);
	if (why == ROCE_BAD_ICRC &&
	    !uro_roce_icrc_find_ipv4_id(&w->ids, ip, hl + tlen - URO_ROCE_ICRC_LEN))
		why = uro_roce_parse(ip, hl + tlen, p);
	*id = hl == URO_ROCE_IPV4_UDP_LEN ? (uint16_t)(ip[4] << 8 | ip[5]) : 0;
	return why;
}

/* One packet: the transport bytes at buf + URO_WIRE_HEAD, tried with the
 * IPv4 identification fh->ip_id first. Returns the identification it
 * checked with, or -1 when it was dropped as malformed.
 *
 * The headers are rebuilt in front of the packet, where the ICRC covers
 * them (Annex A17.8), and checked there in one pass. In front of a packet
 * inside a GRO datagram (take_datagram) lie the tail of the packet before
 * it, whose payload a WRITE's run may still place (rc_responder.c places
 * runs when a later packet of the batch calls for it, and at the batch's
 * end), so the bytes written over are saved first and put back once the
 * packet is parsed, before anything acts on it: the parsed packet points
 * only behind them. Computing the ICRC over headers kept apart would need
 * a parser and a solver (icrc.c) that take the packet in two pieces; a
 * copy of 48 bytes costs less than either. */
static int dispatch(struct uro_context *ctx, uint8_t *buf, size_t tlen,
		    const struct forward_head *fh, int forwarded)
{
	struct uro_wire_endpoint *w = ctx->wire;
	size_t hl = uro_roce_ip_udp_len(fh->dst.raw);
	uint8_t *ip = buf + URO_WIRE_HEAD - hl, saved[URO_WIRE_HEAD];
	uint16_t id = fh->ip_id;
	struct uro_roce_packet p;
	enum uro_roce_drop why;
	struct uro_qp *qp;
	int gsi, mcast;

	memcpy(saved, ip, hl);
	why = check(w, ip, hl, tlen, fh, &id, &p);
	memcpy(ip, saved, hl);
	gsi = why == ROCE_OK && p.dest_qp == URO_GSI_QPN;
	mcast = why == ROCE_OK && p.dest_qp == URO_MCAST_QPN;
	if (why == ROCE_OK && !gsi && !mcast && (p.dest_qp >> 12) != ctx->slot.slot && !forwarded) {
		struct forward_head on = *fh;

		on.ip_id = id;
		forward(w, p.dest_qp >> 12, buf + URO_WIRE_HEAD, tlen, &on);
		return id; /* its process traces and counts it */
	}
	w->n->received++;
	if (w->pcap)
		uro_pcap_packet(w->pcap, fh->src.raw, fh->sport, fh->dst.raw, id,
				buf + URO_WIRE_HEAD, tlen);
	if (why != ROCE_OK) {
		w->n->dropped[why]++;
		return -1;
	}
	if (gsi) { /* QP 1 is the host's: its MADs go to the CM they are for */
		uro_wire_gsi_take(w, &p, &fh->src, &fh->dst, fh->sport);
		return id;
	}
	if (mcast) { /* every process joined to the group has its own copy */
		if (p.pkey != URO_DEFAULT_PKEY)
			w->n->bad_pkey++;
		else
			uro_wire_mcast_receive(ctx, &p, &fh->src, &fh->dst);
		return id;
	}
	if ((p.dest_qp >> 12) != ctx->slot.slot) {
		w->n->no_qp++;
		return id;
	}
	qp = target_qp(ctx, &p);
	if (!qp) {
		w->n->no_qp++;
		return id;
	}
	if (p.pkey != URO_DEFAULT_PKEY) {
		w->n->bad_pkey++;
		return id;
	}
	/* Another process of the host took it first: its flow gets a
	 * socket of this process's, so that what follows comes straight
	 * here. A UD QP hears many flows, each of a few datagrams. */
	if (forwarded && qp->qpx.qp_base.qp_type != IBV_QPT_UD)
		uro_wire_flow_open(w, &fh->src, fh->sport, RX_FLOW0);
	if (qp->qpx.qp_base.qp_type == IBV_QPT_UD)
		uro_wire_ud_receive(ctx, qp, &p, &fh->src, &fh->dst);
	else if (is_response(&p))
		uro_wire_complete(ctx, qp, &p);
	else
		uro_wire_respond(ctx, qp, &p);
	return id;
}

/* A datagram of len bytes at buf + URO_WIRE_HEAD. One the kernel's GRO
 * coalesced from several packets of one flow (udp(7), UDP_GRO; seg, the
 * size of each but the last, from its cmsg) is split back into them, each
 * parsed, checked and dispatched on its own: a malformed one is dropped
 * and counted, its neighbours are not. The IPv4 identifications its
 * packets had are gone; tried first is the next of the previous packet's,
 * as GSO numbers a message's segments (wire_burst.c) and as GRO requires of
 * an incrementing flow, or the same, once two packets showed it fixed
 * (GRO coalesces those too: inet_gro_flush). A peer that does not use GSO
 * sends one packet a datagram, with identification 0 from uroce. */
static void take_datagram(struct uro_context *ctx, uint8_t *buf, size_t len, size_t seg,
			  struct forward_head *fh)
{
	struct uro_wire_endpoint *w = ctx->wire;
	uint16_t step = 1;
	int prev = -1;

	if (!seg || seg >= len) {
		dispatch(ctx, buf, len, fh, 0);
		return;
	}
	w->n->gro_msgs++;
	for (size_t off = 0; off < len; off += seg) {
		size_t plen = len - off < seg ? len - off : seg;
		int id;

		if (plen < URO_ROCE_BTH_LEN) {
			w->n->dropped[ROCE_TRUNCATED]++;
			continue;
		}
		id = dispatch(ctx, buf + off, plen, fh, 0);
		if (id >= 0) {
			step = prev == id ? 0 : step;
			prev = id;
		}
		fh->ip_id = (uint16_t)((id >= 0 ? id : fh->ip_id) + step);
	}
}

/* The address a datagram came to, from its IP_PKTINFO or IPV6_PKTINFO,
 * and the size of the packets GRO coalesced into it (UDP_GRO; 0 for a
 * datagram of one packet). */
static size_t arrived_at(struct msghdr *h, union ibv_gid *dst)
{
	size_t seg = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c)) {
		int gso_size;

		if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
			uro_gid_from_ip(dst, AF_INET,
					&((struct in_pktinfo *)CMSG_DATA(c))->ipi_addr);
		} else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
			uro_gid_from_ip(dst, AF_INET6,
					&((struct in6_pktinfo *)CMSG_DATA(c))->ipi6_addr);
		} else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
			memcpy(&gso_size, CMSG_DATA(c), sizeof(gso_size));
			seg = gso_size > 0 ? (size_t)gso_size : 0;
		}
	}
	return seg;
}

/* A batch from fd, a socket of family f: the family's own, or a flow's. */
static int receive_from(struct uro_context *ctx, enum uro_wire_family f, int fd)
{
	struct uro_wire_endpoint *w = ctx->wire;
	const struct uro_wire_socks *s = &w->fam[f];
	struct mmsghdr m[URO_WIRE_BATCH];
	union {
		struct sockaddr_in in;
		struct sockaddr_in6 in6;
	} from[URO_WIRE_BATCH];
	struct iovec iov[URO_WIRE_BATCH];
	char cmsg[URO_WIRE_BATCH][CMSG_SPACE(sizeof(struct in6_pktinfo)) + CMSG_SPACE(sizeof(int))];
	int n;

	if (fd < 0)
		return 0;
	memset(m, 0, sizeof(m));
	for (int i = 0; i < URO_WIRE_BATCH; i++) {
		iov[i].iov_base = w->rx[i] + URO_WIRE_HEAD;
		iov[i].iov_len = URO_WIRE_RX_BUF - URO_WIRE_HEAD;
		m[i].msg_hdr.msg_name = &from[i];
		m[i].msg_hdr.msg_namelen = sizeof(from[i]);
		m[i].msg_hdr.msg_iov = &iov[i];
		m[i].msg_hdr.msg_iovlen = 1;
		m[i].msg_hdr.msg_control = cmsg[i];
		m[i].msg_hdr.msg_controllen = sizeof(cmsg[i]);
	}
	n = recvmmsg(fd, m, URO_WIRE_BATCH, MSG_DONTWAIT, NULL);
	for (int i = 0; i < n; i++) {
		struct forward_head fh = {.dst = s->addr};
		size_t seg;

		if (f == URO_WIRE_IPV4) {
			fh.sport = from[i].in.sin_port;
			uro_gid_from_ip(&fh.src, AF_INET, &from[i].in.sin_addr);
		} else {
			fh.sport = from[i].in6.sin6_port;
			uro_gid_from_ip(&fh.src, AF_INET6, &from[i].in6.sin6_addr);
		}
		seg = arrived_at(&m[i].msg_hdr, &fh.dst);
		if (m[i].msg_hdr.msg_flags & MSG_TRUNC || m[i].msg_len < URO_ROCE_BTH_LEN) {
			w->n->dropped[ROCE_TRUNCATED]++;
			continue;
		}
		take_datagram(ctx, w->rx[i], m[i].msg_len, seg, &fh);
	}
	uro_wire_batch_end(ctx); /* before the buffers take the next batch */
	return n;
}

static int receive_udp(struct uro_context *ctx, enum uro_wire_family f)
{
	return receive_from(ctx, f, __atomic_load_n(&ctx->wire->fam[f].fd, __ATOMIC_ACQUIRE));
}

static int receive_flow(struct uro_context *ctx, unsigned i)
{
	const struct uro_wire_flow *flow = &ctx->wire->flows[i];

	return receive_from(ctx, uro_wire_family_of(&flow->peer), flow->fd);
}

static int receive_group(struct uro_context *ctx, unsigned i)
{
	struct uro_wire_endpoint *w = ctx->wire;

	return receive_from(ctx, uro_wire_family_of(&w->groups[i].gid), uro_wire_group_fd(w, i));
}

struct forwarded {
	struct uro_context *ctx;
	struct forward_head fh;
};

static void take_forwarded(void *arg, size_t len)
{
	struct forwarded *f = arg;
	struct uro_wire_endpoint *w = f->ctx->wire;

	if (len < sizeof(f->fh) + URO_ROCE_BTH_LEN) {
		w->n->dropped[ROCE_TRUNCATED]++;
		return;
	}
	dispatch(f->ctx, w->rx[0], len - sizeof(f->fh), &f->fh, 1);
	uro_wire_batch_end(f->ctx); /* the next one comes into the same buffer */
}

/* Packets other processes passed on: trusted no more than the network's. */
static int receive_forwarded(struct uro_context *ctx)
{
	struct uro_wire_endpoint *w = ctx->wire;
	struct forwarded f = {.ctx = ctx};
	struct iovec iov[2] = {{&f.fh, sizeof(f.fh)},
			       {w->rx[0] + URO_WIRE_HEAD, URO_WIRE_RX_BUF - URO_WIRE_HEAD}};

	return uro_relay_receive(&w->relay, iov, 2, URO_WIRE_BATCH, take_forwarded, &f);
}

/* An address of the link's netdev became usable: the families refused
 * before are opened now. The announcements stop being heard once none
 * waits. */
static void heal_families(struct uro_context *ctx)
{
	struct uro_wire_endpoint *w = ctx->wire;
	uint8_t awaited[URO_WIRE_FAMILIES];
	int waiting = 0;

	if (!uro_addr_watch_usable(w->addr_fd, w->ifindex))
		return;
	/* Read under the lock a refusal marks them under: an announcement
	 * read after a bind failed then always finds its family waiting. */
	pthread_mutex_lock(&w->open_lock);
	memcpy(awaited, w->awaited, sizeof(awaited));
	pthread_mutex_unlock(&w->open_lock);
	for (int f = 0; f < URO_WIRE_FAMILIES; f++)
		if (awaited[f] && !socks_open(ctx, w, (enum uro_wire_family)f))
			uro_warn("device %s: now receiving RoCEv2 over IPv%c", ctx->dev->ibdev.name,
				 f == URO_WIRE_IPV4 ? '4' : '6');
	pthread_mutex_lock(&w->open_lock);
	for (int f = 0; f < URO_WIRE_FAMILIES; f++)
		waiting |= w->awaited[f];
	if (!waiting) {
		epoll_ctl(w->rx_efd, EPOLL_CTL_DEL, w->addr_fd, NULL);
		close(w->addr_fd);
		w->addr_fd = -1;
	}
	pthread_mutex_unlock(&w->open_lock);
}

/* Takes a batch from each family's socket and from the relay that has
 * packets: whether one was full. An empty poll is one system call, however
 * many families are open. */
static int receive_ready(struct uro_context *ctx)
{
	struct epoll_event ev[RX_MEMBERS];
	int n = epoll_wait(ctx->wire->rx_efd, ev, RX_MEMBERS, 0), full = 0;

	for (int i = 0; i < n; i++) {
		uint32_t what = ev[i].data.u32;
		int got = 0;

		if (what == RX_RELAY)
			got = receive_forwarded(ctx);
		else if (what == RX_ADDRESSES)
			heal_families(ctx);
		else if (what >= RX_GROUP0)
			got = receive_group(ctx, what - RX_GROUP0);
		else if (what >= RX_FLOW0)
			got = receive_flow(ctx, what - RX_FLOW0);
		else
			got = receive_udp(ctx, (enum uro_wire_family)what);
		full |= got == URO_WIRE_BATCH;
	}
	return full;
}

static uint64_t tick_all(struct uro_context *ctx)
{
	uint32_t limit = __atomic_load_n(&ctx->wire->qp_limit, __ATOMIC_ACQUIRE);
	uint64_t next = 0;

	for (unsigned i = 0; i < limit; i++) {
		struct uro_qp *qp = ctx->qps[i];
		uint64_t t;

		if (!qp || !qp->wire || qp->qpx.qp_base.qp_type == IBV_QPT_UD)
			continue;
		t = uro_wire_qp_tick(ctx, qp);
		if (t && (!next || t < next))
			next = t;
	}
	return next;
}

uint64_t uro_wire_progress(struct uro_context *ctx, int wait_for_lock)
{
	struct uro_wire_endpoint *w = __atomic_load_n(&ctx->wire, __ATOMIC_ACQUIRE);
	uint64_t next = 0, now;
	int rounds = 0;

	if (!w)
		return 0;
	now = uro_now_ns();
	if (!wait_for_lock)
		__atomic_store_n(&w->last_active_ns, now, __ATOMIC_RELAXED);
	if (wait_for_lock) {
		pthread_mutex_lock(&w->rx_lock);
	} else if (pthread_mutex_trylock(&w->rx_lock)) {
		/* Another thread is at it: the progress thread perhaps,
		 * preempted on this core by this very poll, which then gives
		 * it the core back instead of polling on without it. */
		sched_yield();
		return 0;
	}
	while (rounds++ < 8 && receive_ready(ctx))
		;
	while (!wait_for_lock && uro_wire_awaits_answer(w))
		receive_ready(ctx);
	w->await_qp = NULL; /* the progress thread waits in ppoll */
	uro_wire_push_held(ctx);
	/* Timers are milliseconds apart: a busy poll looks at them now and
	 * then, not on every call. */
	if (wait_for_lock || now - w->last_tick_ns >= URO_WIRE_TICK_NS) {
		w->last_tick_ns = now;
		next = tick_all(ctx);
	}
	pthread_mutex_unlock(&w->rx_lock);
	/* A long pass (a batch of 8 x 16 packets) still counts as polling
	 * when the progress thread looks. */
	if (!wait_for_lock)
		__atomic_store_n(&w->last_active_ns, uro_now_ns(), __ATOMIC_RELAXED);
	/* Packets UROCE_FAULTS held back go when due, as timers fire. */
	if (w->faults) {
		uint64_t due = uro_wire_faults_flush(w);

		if (due && (!next || due < next))
			next = due;
	}
	return next;
}

/* Makes family f's port-4791 socket one the kernel no longer picks for a
 * datagram, keeping what waits in it (port_leave.h): whether it had one. */
static int stop_receiving(struct uro_wire_endpoint *w, enum uro_wire_family f)
{
	const struct uro_wire_socks *s = &w->fam[f];
	struct uro_wire_dest self;

	if (s->fd < 0)
		return 0;
	uro_wire_dest_of(&s->addr, htons(URO_ROCE_PORT), w->ifindex, &self);
	if (uro_port_stop_receiving(s->fd, &self.sa.sa, self.len))
		uro_warn("a closing RoCEv2 endpoint could not stop receiving: %s (what reaches "
			 "it until it is closed is lost, as when a process dies)",
			 strerror(errno));
	return 1;
}

/* The kernel gives the host's packets to the newest socket: what waits in
 * this one for other processes (an ACK this process's own responder sent
 * to a peer of the host, say) is passed on before it goes. The socket stops
 * being picked first; once the deliveries that picked it before have
 * queued their datagrams, it is emptied (port_leave.h). Drained while it
 * was still the newest, it lost a datagram that came after the last
 * receive; drained at once after it stopped, one whose delivery was still
 * under way. A process killed outright, or one that exits with its
 * context open, cannot pass anything on: the peer's retransmission then
 * reaches the next socket (RC), or the datagram is lost (UD). A forked
 * child's copy of the context shares its parent's sockets (the same open
 * files): its close leaves them alone, for the parent still receives there. */
void uro_wire_close(struct uro_context *ctx)
{
	struct uro_wire_endpoint *w = ctx->wire;
	int receiving = 0;

	if (!w)
		return;
	if (ctx->owner_pid != getpid()) {
		endpoint_free(w);
		ctx->wire = NULL;
		return;
	}
	pthread_mutex_lock(&w->rx_lock);
	for (int f = 0; f < URO_WIRE_FAMILIES; f++)
		receiving += stop_receiving(w, (enum uro_wire_family)f);
	if (receiving && uro_port_await_deliveries())
		uro_debug("membarrier(MEMBARRIER_CMD_GLOBAL) refused (%s): a closing RoCEv2 "
			  "endpoint waited 1 ms for datagrams still being delivered to it",
			  strerror(errno));
	for (int f = 0; f < URO_WIRE_FAMILIES; f++)
		for (int i = 0; i < 64 && receive_udp(ctx, (enum uro_wire_family)f) > 0; i++)
			;
	pthread_mutex_unlock(&w->rx_lock);
	endpoint_free(w);
	ctx->wire = NULL;
}

void uro_wire_kick(struct uro_context *ctx)
{
	struct uro_wire_endpoint *w = __atomic_load_n(&ctx->wire, __ATOMIC_ACQUIRE);
	uint64_t one = 1;

	if (w && write(w->kick_fd, &one, sizeof(one)) < 0)
		return; /* the counter is full: the thread is awake already */
}
