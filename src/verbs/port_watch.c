/* Port events (ibv_get_async_event(3)): IBV_EVENT_PORT_ACTIVE and
 * IBV_EVENT_PORT_ERR when the link's netdev comes up or goes down, and
 * IBV_EVENT_DEVICE_FATAL when it disappears, as Soft-RoCE reports them.
 * No thread watches: the context's async_fd is an epoll set of the event
 * pipe and a netlink socket that hears only the link's netdev (a socket
 * filter drops the rest in the kernel), so the fd polls ready when the
 * netdev changes, and ibv_get_async_event turns the change into the event. */
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stddef.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "verbs_ops.h"

/* Where a link message names its interface: after the netlink header, the
 * ifinfomsg's family (1), padding (1) and type (2). */
#define IFINDEX_OFFSET (NLMSG_HDRLEN + offsetof(struct ifinfomsg, ifi_index))

/* Accepts a datagram whose first message is about ifindex, drops the rest.
 * The kernel sends one link message per notification. */
static int attach_filter(int fd, unsigned ifindex)
{
	struct sock_filter code[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, IFINDEX_OFFSET),
	    /* ifi_index is in host order; classic BPF loads big-endian. */
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ntohl(ifindex), 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, 0xffff),
	    BPF_STMT(BPF_RET | BPF_K, 0),
	};
	struct sock_fprog prog = {.len = sizeof(code) / sizeof(code[0]), .filter = code};

	return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog));
}

static int open_netlink(unsigned ifindex)
{
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK, .nl_groups = RTMGRP_LINK};
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);

	if (fd < 0)
		return -1;
	if (attach_filter(fd, ifindex) || bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return -1;
	}
	return fd;
}

int uro_port_watch_open(struct uro_context *ctx, int pipe_rfd)
{
	struct epoll_event ev = {.events = EPOLLIN};
	int ep = epoll_create1(EPOLL_CLOEXEC);

	ctx->netlink_fd = -1;
	ctx->port_up = ctx->model.netdev.running;
	if (ep < 0)
		return -1;
	ev.data.fd = pipe_rfd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, pipe_rfd, &ev)) {
		close(ep);
		return -1;
	}
	/* A missing netdev has no index to watch: its port stays down. */
	if (ctx->model.netdev_present) {
		ctx->netlink_fd = open_netlink(ctx->model.netdev.ifindex);
		ev.data.fd = ctx->netlink_fd;
		if (ctx->netlink_fd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ctx->netlink_fd, &ev)) {
			if (ctx->netlink_fd >= 0)
				close(ctx->netlink_fd);
			ctx->netlink_fd = -1;
			close(ep);
			return -1;
		}
	}
	ctx->async_rfd = pipe_rfd;
	ctx->vctx.context.async_fd = ep;
	return 0;
}

void uro_port_watch_close(struct uro_context *ctx)
{
	if (ctx->netlink_fd >= 0)
		close(ctx->netlink_fd);
	ctx->netlink_fd = -1;
}

/* The device is gone, its netdev deleted or its link (link_gone.c): one
 * DEVICE_FATAL, whichever says so first. Called under the context lock. */
static int gone(struct uro_context *ctx)
{
	int first = !ctx->port_gone;

	ctx->port_gone = 1;
	ctx->port_up = 0;
	return first;
}

int uro_port_gone(struct uro_context *ctx)
{
	int first;

	uro_lock(ctx);
	first = gone(ctx);
	uro_unlock(ctx);
	return first;
}

/* The event one link message means, given the port's state so far; 0 when
 * it changes nothing. Called under the context lock. */
static enum ibv_event_type port_change(struct uro_context *ctx, const struct nlmsghdr *h)
{
	const struct ifinfomsg *ifi = NLMSG_DATA(h);
	int up;

	if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifi)) ||
	    (unsigned)ifi->ifi_index != ctx->model.netdev.ifindex || ctx->port_gone)
		return 0;
	if (h->nlmsg_type == RTM_DELLINK)
		return gone(ctx) ? IBV_EVENT_DEVICE_FATAL : 0;
	up = (ifi->ifi_flags & IFF_UP) && (ifi->ifi_flags & IFF_RUNNING);
	if (h->nlmsg_type != RTM_NEWLINK || up == ctx->port_up)
		return 0;
	ctx->port_up = up;
	return up ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR;
}

/* After the socket overflowed (ENOBUFS), what is queued is older than
 * what was lost: it is dropped, and the netdev's state now decides. */
static enum ibv_event_type resync(struct uro_context *ctx, char *buf, size_t len)
{
	const char *name = ctx->model.link.netdev;
	int up;

	while (recv(ctx->netlink_fd, buf, len, MSG_DONTWAIT) > 0 || errno == ENOBUFS)
		;
	if (ctx->port_gone)
		return 0;
	if (!uro_netdev_exists(name))
		return gone(ctx) ? IBV_EVENT_DEVICE_FATAL : 0;
	up = uro_netdev_running(name);
	if (up == ctx->port_up)
		return 0;
	ctx->port_up = up;
	return up ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR;
}

int uro_port_watch_event(struct uro_context *ctx, struct ibv_async_event *event)
{
	char buf[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
	enum ibv_event_type type = 0;
	ssize_t n;

	if (ctx->netlink_fd < 0)
		return 0;
	uro_lock(ctx);
	/* One datagram at a time, so that a second change waits in the socket
	 * (and keeps the fd ready) for the next call. */
	while (!type) {
		n = recv(ctx->netlink_fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && errno == ENOBUFS) {
			type = resync(ctx, buf, sizeof(buf));
			break;
		}
		if (n <= 0)
			break;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n))
			if (!type)
				type = port_change(ctx, h);
	}
	uro_unlock(ctx);
	if (!type)
		return 0;
	memset(event, 0, sizeof(*event));
	event->event_type = type;
	if (type != IBV_EVENT_DEVICE_FATAL)
		event->element.port_num = 1;
	return 1;
}
