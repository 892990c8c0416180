/* The host-local relay between uroce processes sharing UDP port 4791
 * (relay.h). Whatever arrives over it is parsed and checked as a packet
 * from the network is: another local user may connect too. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "limits.h"
#include "registry.h"
#include "relay.h"

/* As much as an unprivileged socket may queue (net.core.wmem_max). */
#define URO_RELAY_SNDBUF (4 << 20)

static int watch(struct uro_wire_relay *r, int fd)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};

	return epoll_ctl(r->efd, EPOLL_CTL_ADD, fd, &ev);
}

int uro_relay_open(struct uro_wire_relay *r, int slot_sock)
{
	memset(r->in, 0xff, sizeof(r->in)); /* all -1 */
	r->efd = epoll_create1(EPOLL_CLOEXEC);
	/* The slot's own socket, bound since the slot was claimed: nobody
	 * else can have taken its name. */
	r->lfd = fcntl(slot_sock, F_DUPFD_CLOEXEC, 0);
	r->out = malloc(URO_MAX_SLOTS * sizeof(*r->out));
	if (r->out)
		memset(r->out, 0xff, URO_MAX_SLOTS * sizeof(*r->out)); /* all -1 */
	if (r->efd < 0 || r->lfd < 0 || !r->out || listen(r->lfd, 64) || watch(r, r->lfd)) {
		int err = r->out ? errno : ENOMEM;

		uro_relay_close(r);
		errno = err;
		return -1;
	}
	return 0;
}

void uro_relay_close(struct uro_wire_relay *r)
{
	/* Without out, open never ran or failed before any connection. */
	for (unsigned i = 0; r->out && i < URO_RELAY_MAX_IN; i++)
		if (r->in[i] >= 0)
			close(r->in[i]);
	for (unsigned i = 0; r->out && i < URO_MAX_SLOTS; i++)
		if (r->out[i] >= 0)
			close(r->out[i]);
	free(r->out);
	r->out = NULL;
	if (r->lfd >= 0)
		close(r->lfd);
	if (r->efd >= 0)
		close(r->efd);
	r->lfd = r->efd = -1;
}

static int connect_to(unsigned slot)
{
	struct sockaddr_un a;
	socklen_t len = uro_registry_slot_name(NULL, slot, &a);
	int buf = URO_RELAY_SNDBUF;
	int fd = len ? socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0) : -1;

	if (fd < 0)
		return -1;
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	if (connect(fd, (struct sockaddr *)&a, len)) {
		close(fd);
		return -1;
	}
	return fd;
}

int uro_relay_send(struct uro_wire_relay *r, unsigned slot, const struct iovec *iov, int n)
{
	struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n};

	if (slot >= URO_MAX_SLOTS)
		return -1;
	/* A connection found dead (the slot's process is gone, maybe
	 * replaced) is made again once. */
	for (int attempt = 0; attempt < 2; attempt++) {
		if (r->out[slot] < 0 && (r->out[slot] = connect_to(slot)) < 0)
			return -1;
		if (sendmsg(r->out[slot], &m, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0)
			return 0;
		if (errno == EAGAIN || errno == ENOBUFS)
			return -1; /* full: lost, as on a congested wire */
		close(r->out[slot]);
		r->out[slot] = -1;
	}
	return -1;
}

/* The place of fd in r->in (-1 for a free one), or -1. */
static int find_in(const struct uro_wire_relay *r, int fd)
{
	for (int i = 0; i < URO_RELAY_MAX_IN; i++)
		if (r->in[i] == fd)
			return i;
	return -1;
}

static void accept_all(struct uro_wire_relay *r)
{
	int fd;

	while ((fd = accept4(r->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		int i = find_in(r, -1);

		if (i < 0 || watch(r, fd)) {
			close(fd);
			continue;
		}
		r->in[i] = fd;
	}
}

/* The sending process went: its connection is closed, and taken out of
 * the epoll set first. Closing alone does not take it out while a forked
 * child still holds a copy of the socket (epoll(7), "Q6"): epoll went on
 * reporting the number, which the relay then took for a connection of
 * its own (an index of -1 into in[]) and closed again, whatever the
 * program had opened under that number since. */
static void let_go(struct uro_wire_relay *r, int fd)
{
	int i = find_in(r, fd);

	if (i < 0)
		return;
	epoll_ctl(r->efd, EPOLL_CTL_DEL, fd, NULL);
	r->in[i] = -1;
	close(fd);
}

/* Up to max packets from one connection; a closed one is let go. */
static int drain(struct uro_wire_relay *r, int fd, const struct iovec *iov, int n, int max,
		 void (*fn)(void *, size_t), void *arg)
{
	struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n};
	int got = 0;

	while (got < max) {
		ssize_t len = recvmsg(fd, &m, MSG_DONTWAIT);

		if (len > 0) {
			fn(arg, (m.msg_flags & MSG_TRUNC) ? 0 : (size_t)len);
			got++;
			continue;
		}
		if (len < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		let_go(r, fd);
		break;
	}
	return got;
}

int uro_relay_receive(struct uro_wire_relay *r, const struct iovec *iov, int n, int max,
		      void (*fn)(void *arg, size_t len), void *arg)
{
	struct epoll_event ev[16];
	int ready = epoll_wait(r->efd, ev, 16, 0), got = 0;

	for (int i = 0; i < ready && got < max; i++) {
		if (ev[i].data.fd == r->lfd)
			accept_all(r);
		else
			got += drain(r, ev[i].data.fd, iov, n, max - got, fn, arg);
	}
	return got;
}
