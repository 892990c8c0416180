/* The most UDP this path carries: the physical limit that uroce's RoCEv2
 * runs beside in bench/run's veth part. The sender cuts a stream into
 * datagrams of SEG bytes (a RoCE packet's payload at that path MTU) and
 * hands the kernel 64 KiB at a time with UDP GSO, as uroce's wire bursts
 * do; the receiver takes them with UDP GRO and recvmmsg, as uroce's
 * endpoint does. One copy each side: into the kernel and out of it.
 *
 *   udp_limit server ADDR PORT SECONDS
 *   udp_limit client ADDR PORT SECONDS SEG
 *
 * The server prints "received BYTES in SECONDS s: GB/s", the rate between
 * its first and its last datagram (10^9 bytes a second), and exits once
 * nothing came for half a second after the first, or after SECONDS + 5. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

#define BATCH	  8
#define BUF_BYTES 65536
#define MAX_SEGS  64
#define IDLE_MS	  500

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int open_socket(const char *addr, int port, struct sockaddr_in *sa)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	int big = 64 << 20;

	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	if (s < 0 || inet_pton(AF_INET, addr, &sa->sin_addr) != 1) {
		fprintf(stderr, "udp_limit: bad address %s\n", addr);
		exit(2);
	}
	/* As root the buffers may exceed net.core.*mem_max; else the default. */
	if (setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)))
		setsockopt(s, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	if (setsockopt(s, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)))
		setsockopt(s, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	return s;
}

static int serve(const char *addr, int port, double seconds)
{
	static char bufs[BATCH][BUF_BYTES];
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];
	struct sockaddr_in sa;
	int s = open_socket(addr, port, &sa), on = 1;
	double first = 0, last = 0, stop = now_s() + seconds + 5;
	uint64_t bytes = 0;

	if (setsockopt(s, IPPROTO_UDP, UDP_GRO, &on, sizeof(on)))
		perror("udp_limit: UDP_GRO (one datagram a segment then)");
	if (bind(s, (struct sockaddr *)&sa, sizeof(sa))) {
		perror("udp_limit: bind");
		return 1;
	}
	for (int i = 0; i < BATCH; i++) {
		iov[i] = (struct iovec){bufs[i], BUF_BYTES};
		memset(&msgs[i], 0, sizeof(msgs[i]));
		msgs[i].msg_hdr.msg_iov = &iov[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	while (now_s() < stop) {
		struct pollfd p = {.fd = s, .events = POLLIN};
		int n;

		if (poll(&p, 1, first ? IDLE_MS : 1000) == 0) {
			if (first)
				break;
			continue;
		}
		n = recvmmsg(s, msgs, BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			continue;
		last = now_s();
		if (!first)
			first = last;
		for (int i = 0; i < n; i++)
			bytes += msgs[i].msg_len;
	}
	if (last <= first) {
		fprintf(stderr, "udp_limit: nothing received\n");
		return 1;
	}
	printf("received %llu in %.3f s: %.4f GB/s\n", (unsigned long long)bytes, last - first,
	       (double)bytes / (last - first) / 1e9);
	return 0;
}

static int send_stream(const char *addr, int port, double seconds, int seg)
{
	static char buf[BUF_BYTES];
	struct mmsghdr msgs[BATCH];
	struct iovec iov;
	struct sockaddr_in sa;
	int s = open_socket(addr, port, &sa);
	int segs = (65507 / seg) < MAX_SEGS ? 65507 / seg : MAX_SEGS;
	uint64_t sent = 0;
	double stop;

	if (seg < 64 || seg > 9000) {
		fprintf(stderr, "udp_limit: a segment of %d bytes\n", seg);
		return 2;
	}
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) ||
	    setsockopt(s, IPPROTO_UDP, UDP_SEGMENT, &seg, sizeof(seg))) {
		perror("udp_limit: connect or UDP_SEGMENT");
		return 1;
	}
	iov = (struct iovec){buf, (size_t)seg * (size_t)segs};
	for (int i = 0; i < BATCH; i++) {
		memset(&msgs[i], 0, sizeof(msgs[i]));
		msgs[i].msg_hdr.msg_iov = &iov;
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	stop = now_s() + seconds;
	while (now_s() < stop) {
		int n = sendmmsg(s, msgs, BATCH, 0);

		if (n < 0 && errno != ENOBUFS && errno != EAGAIN && errno != ECONNREFUSED) {
			perror("udp_limit: sendmmsg");
			return 1;
		}
		if (n > 0)
			sent += (uint64_t)n * iov.iov_len;
	}
	printf("sent %llu in %.3f s, segments of %d bytes\n", (unsigned long long)sent, seconds,
	       seg);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "server"))
		return serve(argv[2], atoi(argv[3]), atof(argv[4]));
	if (argc == 6 && !strcmp(argv[1], "client"))
		return send_stream(argv[2], atoi(argv[3]), atof(argv[4]), atoi(argv[5]));
	fprintf(stderr, "usage: udp_limit server ADDR PORT SECONDS\n"
			"       udp_limit client ADDR PORT SECONDS SEG\n");
	return 2;
}
