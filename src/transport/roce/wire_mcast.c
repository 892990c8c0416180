/* Multicast on the wire (IBTA 10.5.2.1: a datagram to DestQP 0xFFFFFF and
 * a multicast DGID reaches every QP attached to the group). On RoCEv2 a
 * group's GID is an IP multicast address (::ffff:224.0.0.0/4 or ff00::/8)
 * and the datagram a UDP datagram to it, port 4791: the kernel's rdma_cm
 * joins the group with IGMP or MLD on the netdev (cma.c,
 * cma_iboe_join_multicast) and rxe hands what arrives to every QP of its
 * own attached to the group (rxe_recv.c, rxe_rcv_mcast_pkt). Here each
 * process with a QP attached binds a socket to the group's address and
 * port 4791 and joins the group on the link's netdev: every socket so
 * bound gets a copy (udp(7)), and the process hands it to its own
 * attached QPs. What a process sends leaves once with multicast loopback
 * off (wire_socket.c): the host's own members get it over shared memory
 * (datagram.c). A link on lo has no other host: nothing is joined or
 * sent there. */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

#include "wire.h"
#include "wire_socket.h"

/* Every network namespace's loopback device is named lo (Linux's
 * loopback_net_init). */
int uro_wire_mcast_carried(const struct uro_context *ctx)
{
	return strcmp(ctx->model.netdev.name, "lo") != 0;
}

static int join(int fd, const union ibv_gid *g, unsigned ifindex)
{
	struct ip_mreqn v4 = {.imr_ifindex = (int)ifindex};
	struct ipv6_mreq v6 = {.ipv6mr_interface = ifindex};

	if (uro_wire_family_of(g) == URO_WIRE_IPV4) {
		memcpy(&v4.imr_multiaddr, g->raw + 12, 4);
		return setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &v4, sizeof(v4));
	}
	memcpy(&v6.ipv6mr_multiaddr, g->raw, 16);
	return setsockopt(fd, IPPROTO_IPV6, IPV6_JOIN_GROUP, &v6, sizeof(v6));
}

/* The group's socket: bound to its address, joined on the link's netdev,
 * watched by the endpoint. The entry's GID is set before the endpoint can
 * hear the socket, its fd published once the socket is whole. */
int uro_wire_mcast_join(struct uro_context *ctx, const union ibv_gid *mgid)
{
	struct uro_wire_endpoint *w = uro_wire_open(ctx, mgid);
	struct uro_wire_group *g = NULL;
	int fd = -1, err = 0;

	if (!w)
		return errno;
	pthread_mutex_lock(&w->open_lock);
	for (unsigned i = 0; i < URO_WIRE_GROUPS && !g; i++)
		if (w->groups[i].fd < 0)
			g = &w->groups[i];
	if (!g) {
		err = ENOMEM;
	} else {
		g->gid = *mgid;
		fd = uro_wire_udp_socket(uro_wire_family_of(mgid), mgid, w->ifindex);
		if (fd < 0 || join(fd, mgid, w->ifindex))
			err = errno;
	}
	if (!err) {
		__atomic_store_n(&g->fd, fd, __ATOMIC_RELEASE);
		if (uro_wire_watch(w->rx_efd, fd, RX_GROUP0 + (unsigned)(g - w->groups))) {
			err = errno;
			g->fd = -1;
		}
	}
	if (err && fd >= 0)
		close(fd);
	pthread_mutex_unlock(&w->open_lock);
	return err;
}

/* Under rx_lock, which the receiver holds: the socket is never closed
 * under a receive (the order rx_lock then open_lock is the receiver's,
 * heal_families). */
void uro_wire_mcast_leave(struct uro_context *ctx, const union ibv_gid *mgid)
{
	struct uro_wire_endpoint *w = __atomic_load_n(&ctx->wire, __ATOMIC_ACQUIRE);

	if (!w)
		return;
	pthread_mutex_lock(&w->rx_lock);
	pthread_mutex_lock(&w->open_lock);
	for (unsigned i = 0; i < URO_WIRE_GROUPS; i++) {
		struct uro_wire_group *g = &w->groups[i];

		if (g->fd >= 0 && !memcmp(&g->gid, mgid, sizeof(*mgid))) {
			close(g->fd); /* leaves the group, and the receive set (epoll(7)) */
			g->fd = -1;
			break;
		}
	}
	pthread_mutex_unlock(&w->open_lock);
	pthread_mutex_unlock(&w->rx_lock);
}

int uro_wire_group_fd(struct uro_wire_endpoint *w, unsigned i)
{
	return i < URO_WIRE_GROUPS ? __atomic_load_n(&w->groups[i].fd, __ATOMIC_ACQUIRE) : -1;
}

void uro_wire_groups_close(struct uro_wire_endpoint *w)
{
	for (unsigned i = 0; i < URO_WIRE_GROUPS; i++)
		if (w->groups[i].fd >= 0)
			close(w->groups[i].fd);
}

/* A datagram to group dst: each of this process's UD QPs attached to it
 * receives it (rxe_rcv_mcast_pkt delivers to each too). */
void uro_wire_mcast_receive(struct uro_context *ctx, const struct uro_roce_packet *p,
			    const union ibv_gid *src, const union ibv_gid *dst)
{
	int heard = 0;

	if (p->op->op != WIRE_SEND || !(p->op->qp & WIRE_UD)) {
		ctx->wire->n->no_qp++; /* IBTA 10.5.2.1: multicast is UD only */
		return;
	}
	for (unsigned k = 0; k < URO_MAX_MCAST_ATTACH; k++) {
		const struct uro_seg_mcast *m = &ctx->self.mcast[k];
		struct uro_qp *qp;

		if (!__atomic_load_n(&m->in_use, __ATOMIC_ACQUIRE) ||
		    memcmp(&m->mgid, dst, sizeof(*dst)))
			continue;
		qp = ctx->qps[m->qpn & (URO_MAX_QP - 1)];
		if (!qp || qp->qpx.qp_base.qp_num != m->qpn)
			continue;
		uro_wire_ud_receive(ctx, qp, p, src, dst);
		heard = 1;
	}
	if (!heard)
		ctx->wire->n->no_qp++;
}
