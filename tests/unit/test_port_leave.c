/* A socket leaving a UDP port that several sockets share loses none of
 * the datagrams the kernel gave it (src/transport/roce/port_leave.h, what
 * a closing RoCEv2 endpoint does with its socket on port 4791).
 *
 * An older socket and a sender stay; a newer socket, which the kernel
 * picks for every datagram, is opened and closed again and again, and what
 * each socket receives is marked. Every datagram sent must be marked.
 *
 * The loss this guards against is a race: a delivery looks the socket up,
 * then queues the datagram, and a connect(2) between the two, followed by
 * the last receive and close(2) before the queueing, lost the datagram.
 * The window is short, a loss in thousands of closes (6 to 12 in 20,000
 * with plain sockets on this project's machine). Here each newer socket
 * carries a socket filter that spins for a while, which runs between the
 * lookup and the queueing (a datagram is filtered before it is queued),
 * so that the window is wide. A first round closes each socket the way
 * the endpoint did before (stop receiving, empty, close) and must lose
 * datagrams: that is the premise, checked, so that the second round's
 * "none lost" cannot pass for want of a race. A second round closes them
 * the way it does now and must lose none.
 *
 * Loading an eBPF socket filter this long takes CAP_BPF or root (CI runs
 * as root); without it the test skips. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/bpf.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../check.h"
#include "port_leave.h"

#define MAX_SENT (1u << 22) /* the sender's bound */
#define CLOSES	 100	    /* newer sockets a round */
#define SPINS	 200000	    /* rounds of the filter's loop: about 0.2 ms */
#define RCVBUF	 (4 << 20)

struct shared {
	uint32_t sent;
	int stop;
};

static struct shared *sh;
static int older_stop;
static uint8_t seen[MAX_SENT];
static struct sockaddr_in port;

/* A socket filter that spins, then keeps the whole datagram. */
static int slow_filter(void)
{
	struct bpf_insn prog[] = {
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
	    {.code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = BPF_REG_0, .imm = 1},
	    {.code = BPF_JMP | BPF_JLT | BPF_K, .dst_reg = BPF_REG_0, .off = -2, .imm = SPINS},
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0xffff},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
	a.insns = (uintptr_t)prog;
	a.insn_cnt = sizeof(prog) / sizeof(prog[0]);
	a.license = (uintptr_t) "GPL";
	return (int)syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof(a));
}

static int port_socket(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), one = 1, buf = RCVBUF;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
	if (bind(fd, (struct sockaddr *)&port, sizeof(port))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Marks what waits in fd. */
static void take(int fd)
{
	uint32_t v;

	while (recv(fd, &v, sizeof(v), MSG_DONTWAIT) == sizeof(v))
		if (v < MAX_SENT)
			__atomic_store_n(&seen[v], 1, __ATOMIC_RELAXED);
}

/* The older socket's receiver, all along: its buffer never overflows. */
static void *older_receiver(void *arg)
{
	int fd = *(int *)arg;
	struct pollfd p = {.fd = fd, .events = POLLIN};

	while (!__atomic_load_n(&older_stop, __ATOMIC_ACQUIRE)) {
		if (poll(&p, 1, 20) > 0)
			take(fd);
	}
	take(fd);
	return NULL;
}

/* Numbered datagrams to the port, until told to stop. */
static void sender(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	alarm(60);
	for (uint32_t i = 0; i < MAX_SENT && !__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE); i++) {
		if (sendto(fd, &i, sizeof(i), 0, (struct sockaddr *)&port, sizeof(port)) !=
		    sizeof(i))
			_exit(1);
		__atomic_store_n(&sh->sent, i + 1, __ATOMIC_RELEASE);
		if (i % 32 == 31)
			usleep(1); /* the older socket's receiver keeps up, even under ASan */
	}
	_exit(0);
}

/* One round of CLOSES newer sockets, each closed with or without waiting
 * for the deliveries under way: the datagrams lost, or -1. */
static long round_of(int older, int filter, int wait)
{
	pthread_t receiver;
	pid_t pid;
	long lost = 0;
	int slept = 0;

	memset(seen, 0, sizeof(seen));
	sh->stop = 0;
	sh->sent = 0;
	older_stop = 0;
	pid = fork(); /* before the receiver thread: the child has one thread */
	if (pid == 0)
		sender();
	if (pid < 0 || pthread_create(&receiver, NULL, older_receiver, &older)) {
		if (pid > 0)
			kill(pid, SIGKILL);
		return -1;
	}
	for (int i = 0; i < CLOSES; i++) {
		int fd = port_socket();

		if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_ATTACH_BPF, &filter, sizeof(filter))) {
			perror("a newer socket");
			if (fd >= 0)
				close(fd);
			lost = -1;
			break;
		}
		for (int k = 0; k < 20; k++)
			take(fd);
		CHECK_EQ(uro_port_stop_receiving(fd, (struct sockaddr *)&port, sizeof(port)), 0);
		/* Refused (seccomp, nohz_full), the wait is a 1 ms sleep, longer
		 * than the filter's spin: the round must lose nothing either way. */
		if (wait && uro_port_await_deliveries() && !slept++)
			printf("membarrier refused (%s): the wait was a sleep\n", strerror(errno));
		take(fd);
		close(fd);
	}
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELEASE);
	waitpid(pid, NULL, 0);
	usleep(100 * 1000);
	__atomic_store_n(&older_stop, 1, __ATOMIC_RELEASE);
	pthread_join(receiver, NULL);
	for (uint32_t i = 0; lost >= 0 && i < sh->sent; i++)
		lost += !seen[i];
	printf("%s: %u datagrams sent, %ld lost over %d closes\n",
	       wait ? "waiting for deliveries" : "not waiting", sh->sent, lost, CLOSES);
	return lost;
}

static int filter, older;

static void test_leaving_loses_nothing(void)
{
	/* The sender never stops, and each datagram the newer socket takes
	 * spends 0.2 ms between lookup and queueing: some connect of 100
	 * falls in that window (11 to 27 losses a run here). */
	CHECK(round_of(older, filter, 0) > 0);
	CHECK_EQ(round_of(older, filter, 1), 0);
}

int main(void)
{
	socklen_t len = sizeof(port);

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	filter = slow_filter();
	if (filter < 0) {
		printf("skipped: no eBPF socket filter may be loaded here (%s)\n", strerror(errno));
		return 77;
	}
	/* A port of its own on 127.0.0.1: the older socket's, picked by bind. */
	port.sin_family = AF_INET;
	port.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	older = port_socket();
	if (sh == MAP_FAILED || older < 0 || getsockname(older, (struct sockaddr *)&port, &len)) {
		perror("set-up");
		return 1;
	}
	RUN(test_leaving_loses_nothing(), 120);
	return check_report();
}
