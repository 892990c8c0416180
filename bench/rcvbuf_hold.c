/* How many bytes of RoCEv2 packets a UDP receive buffer of an unprivileged
 * process holds before the kernel drops (docs/architecture.md, "The RC
 * requester": the window). The kernel charges a socket each datagram's
 * truesize, not its length (udp_rmem_schedule), so the answer depends on
 * how the packets arrive: one a datagram, or coalesced by GRO (udp(7),
 * UDP_GRO) from a GSO send (UDP_SEGMENT).
 *
 *   rcvbuf_hold [RCVBUF]
 *
 * RCVBUF (default 212992, net.core.rmem_max's default: what an
 * unprivileged process gets however much it asks; the kernel doubles it)
 * is set on a socket on 127.0.0.1 that does not read while a sender sends
 * it four times as much as it holds; then it is drained and what it held
 * counted. Per packet size (path MTU 1024 and 4096 with BTH and ICRC, and
 * a 20-byte ACK), four ways: plain sends to a plain receiver, plain sends
 * to a UDP_GRO receiver, GSO sends (as many packets a message as fit
 * 64 KiB, at most 64) to a plain receiver, and GSO to UDP_GRO. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_SEGS  64
#define MAX_BYTES 65507

static int receiver(int rcvbuf, int gro, struct sockaddr_in *at)
{
	socklen_t len = sizeof(*at);
	int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1;

	memset(at, 0, sizeof(*at));
	at->sin_family = AF_INET;
	at->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) ||
	    (gro && setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one))) ||
	    bind(fd, (struct sockaddr *)at, sizeof(*at)) ||
	    getsockname(fd, (struct sockaddr *)at, &len)) {
		perror("rcvbuf_hold: receiver");
		exit(1);
	}
	return fd;
}

/* Sends n packets of size bytes, seg a message (1: plain sends). */
static void send_all(int fd, const struct sockaddr_in *to, size_t size, unsigned seg, unsigned n)
{
	static char data[MAX_BYTES];
	char ctl[CMSG_SPACE(sizeof(uint16_t))];
	uint16_t gso = (uint16_t)size;

	for (unsigned sent = 0; sent < n; sent += seg) {
		struct iovec iov = {data, size * seg};
		struct msghdr h = {.msg_name = (void *)to,
				   .msg_namelen = sizeof(*to),
				   .msg_iov = &iov,
				   .msg_iovlen = 1};

		if (seg > 1) {
			struct cmsghdr *c = (struct cmsghdr *)ctl;

			memset(ctl, 0, sizeof(ctl));
			h.msg_control = ctl;
			h.msg_controllen = sizeof(ctl);
			c->cmsg_level = SOL_UDP;
			c->cmsg_type = UDP_SEGMENT;
			c->cmsg_len = CMSG_LEN(sizeof(gso));
			memcpy(CMSG_DATA(c), &gso, sizeof(gso));
		}
		if (sendmsg(fd, &h, 0) < 0) {
			perror("rcvbuf_hold: sendmsg");
			exit(1);
		}
	}
}

/* Drains fd: the packets and bytes it held. */
static void drain(int fd, size_t size, unsigned long *pkts, unsigned long *bytes)
{
	static char buf[65536];

	*pkts = *bytes = 0;
	for (;;) {
		ssize_t got = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (got <= 0)
			return;
		*pkts += ((size_t)got + size - 1) / size;
		*bytes += (size_t)got;
	}
}

static void measure(int rcvbuf, size_t size, int gso, int gro)
{
	struct sockaddr_in at;
	int rx = receiver(rcvbuf, gro, &at), tx = socket(AF_INET, SOCK_DGRAM, 0), got;
	socklen_t gl = sizeof(got);
	unsigned seg = 1, n;
	unsigned long pkts, bytes;

	if (gso) {
		seg = (unsigned)(MAX_BYTES / size);
		seg = seg > MAX_SEGS ? MAX_SEGS : seg;
	}
	getsockopt(rx, SOL_SOCKET, SO_RCVBUF, &got, &gl);
	n = (unsigned)(4 * (size_t)got / size / seg + 1) * seg;
	send_all(tx, &at, size, seg, n);
	drain(rx, size, &pkts, &bytes);
	printf("%6zu  %-5s %-5s %8d %8lu %9lu %8.2f\n", size, gso ? "GSO" : "plain",
	       gro ? "GRO" : "plain", got, pkts, bytes, bytes ? (double)got / (double)bytes : 0);
	close(rx);
	close(tx);
}

int main(int argc, char **argv)
{
	int rcvbuf = argc > 1 ? atoi(argv[1]) : 212992;
	static const size_t sizes[] = {12 + 1024 + 4, 12 + 4096 + 4, 12 + 4 + 4};

	printf("# bytes send  recv  SO_RCVBUF packets     bytes buf/byte\n");
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (int gso = 0; gso < 2; gso++)
			for (int gro = 0; gro < 2; gro++)
				measure(rcvbuf, sizes[i], gso, gro);
	return 0;
}
