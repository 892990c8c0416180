/* The sockets of a RoCEv2 endpoint (endpoint.c): which address of the
 * link a family uses, the receiving socket on port 4791 and the sending
 * ones, and where a GID's packets go. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/udp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "device_model.h"
#include "log.h"
#include "port_probe.h"
#include "socket_buffer.h"
#include "wire.h"
#include "wire_socket.h"

static const int af_of[URO_WIRE_FAMILIES] = {[URO_WIRE_IPV4] = AF_INET, [URO_WIRE_IPV6] = AF_INET6};

enum uro_wire_family uro_wire_family_of(const union ibv_gid *gid)
{
	return uro_gid_is_ipv4_mapped(gid) ? URO_WIRE_IPV4 : URO_WIRE_IPV6;
}

/* The link's first address of family f, as its GID: -1 for none. */
int uro_wire_link_addr(const struct uro_device_model *m, enum uro_wire_family f, union ibv_gid *gid)
{
	for (int i = 0; i < m->ngids; i++) {
		if (uro_wire_family_of(&m->gids[i].gid) == f) {
			*gid = m->gids[i].gid;
			return 0;
		}
	}
	return -1;
}

/* gid's address and port (network order); a link-local IPv6 address
 * (fe80::/10) is scoped to ifindex. */
void uro_wire_dest_of(const union ibv_gid *gid, uint16_t port, unsigned ifindex,
		      struct uro_wire_dest *d)
{
	memset(d, 0, sizeof(*d));
	d->gid = *gid;
	d->family = (uint8_t)uro_wire_family_of(gid);
	if (d->family == URO_WIRE_IPV4) {
		d->sa.in.sin_family = AF_INET;
		d->sa.in.sin_port = port;
		memcpy(&d->sa.in.sin_addr, gid->raw + 12, 4);
		d->len = sizeof(d->sa.in);
		return;
	}
	d->sa.in6.sin6_family = AF_INET6;
	d->sa.in6.sin6_port = port;
	memcpy(&d->sa.in6.sin6_addr, gid->raw, 16);
	if (gid->raw[0] == 0xfe && (gid->raw[1] & 0xc0) == 0x80)
		d->sa.in6.sin6_scope_id = ifindex;
	d->len = sizeof(d->sa.in6);
}

void uro_wire_dest(const struct uro_wire_endpoint *w, const union ibv_gid *gid,
		   struct uro_wire_dest *d)
{
	uro_wire_dest_of(gid, htons(URO_ROCE_PORT), w->ifindex, d);
}

/* Never fragmented: Linux then sends IPv4 with DF and identification 0
 * from an unconnected socket, the header the ICRC is computed over. */
static int no_fragments(int fd, enum uro_wire_family f)
{
	int v4 = IP_PMTUDISC_DO, v6 = IPV6_PMTUDISC_DO, one = 1;

	if (f == URO_WIRE_IPV4)
		return setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &v4, sizeof(v4));
	return setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &v6, sizeof(v6)) ||
	       setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
}

/* A UDP socket of family f bound to gid's address and port (network
 * order, 0 for one the kernel picks). */
static int bound_socket(enum uro_wire_family f, const union ibv_gid *gid, uint16_t port,
			unsigned ifindex)
{
	struct uro_wire_dest a;
	int fd = socket(af_of[f], SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	uro_wire_dest_of(gid, port, ifindex, &a);
	if (no_fragments(fd, f) ||
	    (port ? uro_port_bind_shared(fd, &a.sa.sa, a.len) : bind(fd, &a.sa.sa, a.len))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A receive buffer smaller than one window loses packets of every long
 * message: said once, with the limit that made it so. */
static void small_buffer(int got)
{
	static int told;
	struct uro_sockbuf_limits l;

	if (got < 0 || uro_sockbuf_enough(got) || __atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
		return;
	uro_sockbuf_limits(&l);
	uro_warn("the kernel gives a RoCEv2 socket %d KiB of receive buffer, less than the %d KiB "
		 "a %u KiB window needs (net.core.rmem_max is %ld): long messages will be lost "
		 "and sent again; as root: sysctl net.core.rmem_max=%d",
		 got >> 10, URO_WIRE_RCVBUF_NEED >> 10, URO_WIRE_GSO_WINDOW_BYTES >> 10, l.rmem_max,
		 URO_WIRE_RCVBUF_WANT);
}

int uro_wire_udp_socket(enum uro_wire_family f, const union ibv_gid *gid, unsigned ifindex)
{
	int one = 1;
	int fd = bound_socket(f, gid, htons(URO_ROCE_PORT), ifindex);

	/* The address a packet came to: the ICRC covers it. */
	if (fd >= 0 && (f == URO_WIRE_IPV4
			    ? setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one))
			    : setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one)))) {
		close(fd);
		return -1;
	}
	/* Several packets of a flow in one datagram, split by the endpoint
	 * (udp(7), UDP_GRO, Linux 5.0): one system call and one buffer charge
	 * for what GSO sent as one. An older kernel segments as before. */
	if (fd >= 0 && setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)))
		uro_debug("UDP_GRO refused on the RoCEv2 socket (%s): one packet a datagram",
			  strerror(errno));
	if (fd >= 0)
		small_buffer(uro_sockbuf_grow_rcv(fd, URO_WIRE_RCVBUF_WANT));
	return fd;
}

int uro_wire_watch(int efd, int fd, uint32_t what)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = what};

	return epoll_ctl(efd, EPOLL_CTL_ADD, fd, &ev);
}

/* A connected UDP socket scores above the port's unconnected ones for a
 * datagram from its peer (net/ipv4/udp.c compute_score: a matching
 * inet_daddr and inet_dport each add to the score; net/ipv6/udp.c
 * likewise), whichever was bound last. */
int uro_wire_flow_socket(enum uro_wire_family f, const union ibv_gid *gid, unsigned ifindex,
			 const union ibv_gid *peer, uint16_t sport)
{
	struct uro_wire_dest to;
	int fd = uro_wire_udp_socket(f, gid, ifindex);

	uro_wire_dest_of(peer, sport, ifindex, &to);
	if (fd >= 0 && connect(fd, &to.sa.sa, to.len)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A datagram to a multicast group (wire_mcast.c) leaves by the link's
 * netdev, whatever the routes say (ip(7), ipv6(7): a namespace with only
 * its link's subnet has no route to 239.0.0.0/8), and is not looped back
 * to this host's sockets: its members have it over shared memory. */
static int multicast_out(int fd, enum uro_wire_family f, unsigned ifindex)
{
	struct ip_mreqn out = {.imr_ifindex = (int)ifindex};
	int off = 0, index = (int)ifindex;

	if (f == URO_WIRE_IPV4)
		return setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &out, sizeof(out)) ||
		       setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &off, sizeof(off));
	return setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, &index, sizeof(index)) ||
	       setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, &off, sizeof(off));
}

/* A socket that only sends, from an ephemeral port of gid's address that
 * the kernel picks and keeps for it: one flow's UDP source port. */
int uro_wire_tx_socket(enum uro_wire_family f, const union ibv_gid *gid, unsigned ifindex,
		       uint16_t *port)
{
	struct uro_wire_dest a;
	socklen_t len = sizeof(a.sa);
	int small = 1, fd = bound_socket(f, gid, 0, ifindex);

	if (fd < 0)
		return -1;
	/* Nothing is sent to it: a datagram that is waits in a tiny buffer. */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) ||
	    getsockname(fd, &a.sa.sa, &len)) {
		close(fd);
		return -1;
	}
	*port = f == URO_WIRE_IPV4 ? a.sa.in.sin_port : a.sa.in6.sin6_port;
	if (multicast_out(fd, f, ifindex)) {
		close(fd);
		return -1;
	}
	return fd;
}

void uro_wire_socks_close(struct uro_wire_socks *s)
{
	for (int i = 0; i < URO_WIRE_TX_PORTS; i++)
		if (s->tx_fd[i] >= 0)
			close(s->tx_fd[i]);
	if (s->fd >= 0)
		close(s->fd);
}
