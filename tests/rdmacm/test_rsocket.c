/* rsockets through <rdma/rsocket.h>, the behaviours a socket program relies
 * on that Debian's rstream and rcopy do not reach: the end of the stream
 * after everything sent, MSG_PEEK, EAGAIN and EINPROGRESS, rpoll over an
 * rsocket and a pipe together, a refused connect (blocking and not), a
 * large blocking send against a reader slower than its credits, a client
 * that connects again at once, rpoll before every blocking call, the
 * errors of misuse, and datagram rsockets. The passive side
 * is a forked process. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../check.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define BIG (3u << 20) /* more than a connection's credits: 12 x 32 KiB */

static int port;

static struct sockaddr_in addr_of(int p)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

/* A listening rsocket on p, or -1 with the call that failed said. */
static int listener(int p)
{
	struct sockaddr_in a = addr_of(p);
	int one = 1, l = rsocket(AF_INET, SOCK_STREAM, 0);
	const char *failed = l < 0 ? "rsocket"
			     : rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one))
				 ? "rsetsockopt"
			     : rbind(l, (struct sockaddr *)&a, sizeof(a)) ? "rbind"
			     : rlisten(l, 4)				  ? "rlisten"
									  : NULL;

	if (!failed)
		return l;
	fprintf(stderr, "listener on port %d: %s: %s\n", p, failed, strerror(errno));
	return -1;
}

static int connect_to(int p)
{
	struct sockaddr_in a = addr_of(p);
	int s = rsocket(AF_INET, SOCK_STREAM, 0);

	if (s < 0 || rconnect(s, (struct sockaddr *)&a, sizeof(a))) {
		if (s >= 0)
			rclose(s);
		return -1;
	}
	return s;
}

/* Where a child that does not end stands: its threads' stacks, when gdb
 * is there to read them, so that a rare hang is more than a count. */
static void print_stacks(pid_t pid)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd),
		 "timeout 30 gdb -q -batch -p %d -ex 'thread apply all bt' 1>&2 2>/dev/null",
		 (int)pid);
	if (system(cmd) != 0)
		fprintf(stderr, "(no stacks of %d: gdb is missing or failed)\n", (int)pid);
}

/* A server in a child of its own (a forked process has none of the CM's
 * threads: it makes its rsockets itself), ready once it listens. */
static pid_t spawn_with(int p, int (*make)(int p), int (*serve)(int l))
{
	int ready[2];
	char c = 0;
	pid_t pid;

	if (pipe(ready))
		return -1;
	pid = fork();
	if (pid == 0) {
		int l = make(p);

		c = l >= 0;
		if (write(ready[1], &c, 1) != 1 || l < 0)
			_exit(9);
		_exit(serve(l));
	}
	close(ready[1]);
	/* Bounded: a child that hangs before it listens is killed, so that it
	 * neither stalls the test nor keeps CTest's output pipe open. */
	if (pid > 0) {
		int said =
		    poll(&(struct pollfd){.fd = ready[0], .events = POLLIN}, 1, 20000) == 1 &&
		    read(ready[0], &c, 1) == 1;

		if (!said) {
			fprintf(stderr, "child %d did not listen within 20 s:\n", (int)pid);
			print_stacks(pid);
		}
		if (!said || !c) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			pid = -1;
		}
	}
	close(ready[0]);
	return pid;
}

static pid_t spawn(int p, int (*serve)(int l))
{
	return spawn_with(p, listener, serve);
}

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 131 + 7);
}

/* The server: reads the big message slowly (its credits run out under
 * the sender), answers "ok", then sends "bye" and closes. */
static int serve(int l)
{
	uint8_t *buf = malloc(BIG);
	size_t got = 0;
	int s = raccept(l, NULL, NULL), bad = 0;

	rclose(l);
	if (s < 0 || !buf)
		return 1;
	while (got < BIG) {
		ssize_t n = rrecv(s, buf + got, BIG - got < 4096 ? BIG - got : 4096, 0);

		if (n <= 0)
			return 2;
		got += (size_t)n;
		if (got % (256 << 10) < 4096)
			usleep(2000);
	}
	for (size_t i = 0; i < BIG; i++)
		bad |= buf[i] != pattern(i);
	free(buf);
	if (rsend(s, bad ? "no" : "ok", 2, 0) != 2 || rsend(s, "bye", 3, 0) != 3)
		return 3;
	rclose(s);
	return bad ? 4 : 0;
}

static void test_stream_and_end(void)
{
	char reply[8] = {0};
	/* Forked first: a child that inherits the parent's buffer, and
	 * exits without it in a local, leaks it to valgrind (seen once the
	 * parent's frame was inlined into main). */
	pid_t pid = spawn(port, serve);
	uint8_t *big = malloc(BIG);
	int s, status;

	CHECK(pid > 0 && big);
	s = connect_to(port);
	CHECK(s >= 0);
	for (size_t i = 0; i < BIG; i++)
		big[i] = pattern(i);
	/* Blocking: all of it, though the reader frees slots slowly. */
	CHECK_EQ(rsend(s, big, BIG, 0), BIG);
	CHECK_EQ(rrecv(s, reply, 2, MSG_WAITALL), 2);
	CHECK_STR(reply, "ok");
	/* MSG_PEEK leaves the bytes for the next read. */
	CHECK_EQ(rrecv(s, reply, 3, MSG_PEEK | MSG_WAITALL), 3);
	memset(reply, 0, sizeof(reply));
	CHECK_EQ(rrecv(s, reply, 3, MSG_WAITALL), 3);
	CHECK_STR(reply, "bye");
	/* The peer closed after everything it sent: 0, and 0 again. */
	CHECK_EQ(rrecv(s, reply, sizeof(reply), 0), 0);
	CHECK_EQ(rrecv(s, reply, sizeof(reply), 0), 0);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(rclose(s), 0);
	free(big);
}

/* Sends a byte 300 ms after the connection, then expects the end. */
static int serve_late_byte(int l)
{
	int a = raccept(l, NULL, NULL);
	char c;

	usleep(300 * 1000);
	return a < 0 || rsend(a, "x", 1, 0) != 1 || rrecv(a, &c, 1, 0) != 0;
}

/* rpoll over a pipe and an rsocket: each wakes it for its own event. */
static void test_poll_and_nonblocking(void)
{
	int s, pipefd[2], status;
	struct pollfd fds[2];
	char c = 0;
	pid_t pid = spawn(port + 1, serve_late_byte);

	CHECK(pid > 0 && pipe(pipefd) == 0);
	s = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	CHECK(s >= 0);
	{
		struct sockaddr_in a = addr_of(port + 1);
		int r = rconnect(s, (struct sockaddr *)&a, sizeof(a)), err = -1;
		socklen_t len = sizeof(err);

		CHECK(r == 0 || errno == EINPROGRESS);
		fds[0] = (struct pollfd){.fd = s, .events = POLLOUT};
		CHECK_EQ(rpoll(fds, 1, 5000), 1);
		CHECK_EQ(rgetsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len), 0);
		CHECK_EQ(err, 0);
	}
	/* Nothing yet: EAGAIN, and rpoll sees the pipe first. */
	CHECK_EQ(rrecv(s, &c, 1, 0), -1);
	CHECK_EQ(errno, EAGAIN);
	CHECK_EQ(write(pipefd[1], "p", 1), 1);
	fds[0] = (struct pollfd){.fd = s, .events = POLLIN};
	fds[1] = (struct pollfd){.fd = pipefd[0], .events = POLLIN};
	CHECK_EQ(rpoll(fds, 2, 5000), 1);
	CHECK_EQ(fds[0].revents, 0);
	CHECK_EQ(fds[1].revents, POLLIN);
	CHECK_EQ(read(pipefd[0], &c, 1), 1);
	/* Then the rsocket, once the peer's byte came (it waits 300 ms). */
	CHECK_EQ(rpoll(fds, 2, 5000), 1);
	CHECK(fds[0].revents & POLLIN);
	CHECK_EQ(rrecv(s, &c, 1, 0), 1);
	CHECK_EQ(c, 'x');
	CHECK_EQ(rshutdown(s, SHUT_WR), 0);
	/* Sending after SHUT_WR is EPIPE, as a socket's. */
	CHECK_EQ(rsend(s, "y", 1, 0), -1);
	CHECK_EQ(errno, EPIPE);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	rclose(s);
	close(pipefd[0]);
	close(pipefd[1]);
}

/* rstream's pattern: a connection, both ends shut down and close it, and
 * the client connects again at once, to a server child forked after the
 * previous test's child exited without closing its context: the new child
 * took that one's slot and QP number, and this process's first SEND went
 * to the old child's segment (test_liveness, test_successor_of_vanished_peer). */
static int serve_twice(int l)
{
	for (int i = 0; i < 2; i++) {
		int a = raccept(l, NULL, NULL);
		char c[16];

		if (a < 0 || rrecv(a, c, 16, MSG_WAITALL) != 16 || rsend(a, c, 16, 0) != 16)
			return 1 + i;
		rshutdown(a, SHUT_RDWR);
		rclose(a);
	}
	return 0;
}

static void test_reconnect(void)
{
	pid_t pid = spawn(port + 3, serve_twice);
	char c[16] = "0123456789abcdef", back[16];
	int status;

	CHECK(pid > 0);
	for (int i = 0; i < 2; i++) {
		int s = connect_to(port + 3);

		CHECK(s >= 0);
		CHECK_EQ(rsend(s, c, 16, 0), 16);
		CHECK_EQ(rrecv(s, back, 16, MSG_WAITALL), 16);
		CHECK(memcmp(c, back, 16) == 0);
		rshutdown(s, SHUT_RDWR);
		rclose(s);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* rstream -T a -T b's step: rpoll for the direction, then the blocking
 * call. rpoll asked readability and writability each after progress of
 * its own: a message taken while writability was asked was not seen as
 * readable, and rpoll slept with it queued (within 2,500 exchanges in
 * every run of rstream). */
#define PINGS 5000

static int pollwait(int s, short events)
{
	struct pollfd p = {.fd = s, .events = events};

	return rpoll(&p, 1, 5000) == 1 && (p.revents & events) ? 0 : -1;
}

static int ping(int s, int first_send)
{
	char c = 'p';

	for (int i = 0; i < PINGS; i++)
		for (int half = 0; half < 2; half++) {
			int sending = half == !first_send;

			if (pollwait(s, sending ? POLLOUT : POLLIN) ||
			    (sending ? rsend(s, &c, 1, 0) : rrecv(s, &c, 1, MSG_WAITALL)) != 1)
				return -1;
		}
	return 0;
}

/* rclose before the exit: it waits for the last pong to be sent, which
 * over RoCE may still be on its way when ping returns. */
static int serve_pings(int l)
{
	int a = raccept(l, NULL, NULL), r = a < 0 || ping(a, 0);

	return rclose(a) || r;
}

static void test_rpoll_pingpong(void)
{
	pid_t pid = spawn(port + 4, serve_pings);
	int s = connect_to(port + 4), status;

	CHECK(pid > 0 && s >= 0);
	CHECK_EQ(ping(s, 1), 0);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	rclose(s);
}

/* Datagram rsockets (SOCK_DGRAM over UD): a bound echo server in a
 * child answers each datagram to where it came from. */
#define ECHOES 200

static int dgram_bound(int p)
{
	struct sockaddr_in a = addr_of(p);
	int s = rsocket(AF_INET, SOCK_DGRAM, 0);

	if (s < 0 || rbind(s, (struct sockaddr *)&a, sizeof(a)))
		return -1;
	return s;
}

/* The echo server stays until the client has its last echo, and says so on
 * this pipe: a UDP server whose last answer may be lost lingers to answer
 * the client's retries (as TFTP's last ACK waits, RFC 1350 section 6). Over
 * RoCEv2 on one host the kernel gives a datagram for port 4791 to the newest
 * socket there (docs/architecture.md, "UDP port 4791 shared by many
 * processes"). When that is the server's own, its echo of "END" waits in
 * its own socket to be passed on to the client; a server that _exits at
 * once takes it along, and the client's retries found nobody: 1 run in 16
 * under load. */
static int linger_pipe[2] = {-1, -1};

/* Whether the client has said it is done, without waiting. */
static int client_done(void)
{
	char c;

	return poll(&(struct pollfd){.fd = linger_pipe[0], .events = POLLIN}, 1, 0) == 1 &&
	       read(linger_pipe[0], &c, 1) == 1;
}

/* Echoes every datagram to its sender; after one that starts "END", until
 * the client says it is done. */
static int serve_echoes(int s)
{
	char buf[2048];
	int ended = 0;

	for (;;) {
		struct pollfd p = {.fd = s, .events = POLLIN};
		struct sockaddr_in from;
		socklen_t len = sizeof(from);
		ssize_t n;

		if (ended) {
			if (client_done())
				return rclose(s) ? 2 : 0;
			if (rpoll(&p, 1, 20) != 1)
				continue;
		}
		n = rrecvfrom(s, buf, sizeof(buf), 0, (struct sockaddr *)&from, &len);
		if (n < 0 || rsendto(s, buf, (size_t)n, 0, (struct sockaddr *)&from, len) != n)
			return 1;
		ended |= n >= 3 && !memcmp(buf, "END", 3);
	}
}

/* Sends out (to `to`, or where s is connected) until its echo comes, as a
 * UDP program does: a datagram may be lost (over RoCEv2, one was). The
 * echo's length, or -1 after 5 tries. */
static ssize_t echo(int s, const struct sockaddr_in *to, const char *out, size_t n, char *back,
		    struct sockaddr_in *from)
{
	for (int tries = 0; tries < 5; tries++) {
		struct pollfd p = {.fd = s, .events = POLLIN};
		socklen_t len = sizeof(*from);
		ssize_t got;

		if ((to ? rsendto(s, out, n, 0, (const struct sockaddr *)to, sizeof(*to))
			: rsend(s, out, n, 0)) != (ssize_t)n)
			return -1;
		while (rpoll(&p, 1, 500) == 1) {
			got = rrecvfrom(s, back, 2048, 0, (struct sockaddr *)from, &len);
			if (got == (ssize_t)n && !memcmp(out, back, n))
				return got;
		}
	}
	return -1;
}

/* Each datagram whole, in its own rrecvfrom, from the server's address. */
static void test_dgram_echo(void)
{
	pid_t pid = pipe(linger_pipe) ? -1 : spawn_with(port + 5, dgram_bound, serve_echoes);
	struct sockaddr_in to = addr_of(port + 5), from, me;
	socklen_t len = sizeof(me);
	int s = rsocket(AF_INET, SOCK_DGRAM, 0), status, ok = 0;
	char out[1500], back[2048];

	CHECK(pid > 0 && s >= 0);
	for (int i = 0; i < ECHOES; i++) {
		size_t n = 4 + (size_t)(i * 7) % (sizeof(out) - 4);

		memset(out, 'a' + i % 26, n);
		memcpy(out, &i, sizeof(i)); /* a late echo of another is not this one's */
		ssize_t got = echo(s, &to, out, n, back, &from);
		int right = got == (ssize_t)n && from.sin_port == to.sin_port &&
			    from.sin_addr.s_addr == to.sin_addr.s_addr;

		if (!right)
			fprintf(stderr, "echo %d (%zu B): %s\n", i, n,
				got < 0 ? "none in 5 tries" : "from another address");
		ok += right;
	}
	CHECK_EQ(ok, ECHOES);
	/* The address the kernel gave the socket at its first send. */
	CHECK_EQ(rgetsockname(s, (struct sockaddr *)&me, &len), 0);
	CHECK(me.sin_family == AF_INET && me.sin_port != 0);
	/* Connected: rsend and rrecv go to and come from the server; a short
	 * buffer takes the datagram's first bytes and loses the rest, and
	 * MSG_TRUNC tells its length, as recv(2) on UDP. */
	CHECK_EQ(rconnect(s, (struct sockaddr *)&to, sizeof(to)), 0);
	for (int tries = 0; tries < 5; tries++) {
		struct pollfd p = {.fd = s, .events = POLLIN};

		CHECK_EQ(rsend(s, "0123456789", 10, 0), 10);
		if (rpoll(&p, 1, 500) == 1)
			break;
	}
	CHECK_EQ(rrecv(s, back, 4, MSG_PEEK | MSG_TRUNC), 10);
	CHECK_EQ(rrecv(s, back, 4, 0), 4);
	CHECK(memcmp(back, "0123", 4) == 0);
	CHECK_EQ(echo(s, NULL, "END", 3, back, &from), 3);
	CHECK_EQ(write(linger_pipe[1], "d", 1), 1);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	rclose(s);
	close(linger_pipe[0]);
	close(linger_pipe[1]);
}

/* A child forked while this process's CM thread holds the CM lock (it
 * serves the connections a thread here makes and ends) gets the lock
 * free: its own listener came up in every one of 100 forks. Before, a
 * child could wait for ever in rdma_listen (seen once under ASan). */
static volatile int churning;

static int accept_and_close(int l)
{
	for (int a; (a = raccept(l, NULL, NULL)) >= 0;)
		rclose(a);
	return 0;
}

static void *churn(void *arg)
{
	int p = *(int *)arg;

	while (churning) {
		int s = connect_to(p);

		if (s >= 0)
			rclose(s);
	}
	return NULL;
}

static int just_exit(int l)
{
	return rclose(l);
}

/* Whether a child exits with status 0 within the time; one that does not
 * end is killed. Each way of failing is said. */
static int exits_cleanly(pid_t pid, int seconds)
{
	int status;

	if (pid <= 0) {
		fprintf(stderr, "the child did not come up listening\n");
		return 0;
	}
	for (int waited = 0; waited < seconds * 100; waited++) {
		if (waitpid(pid, &status, WNOHANG) != pid) {
			usleep(10000);
			continue;
		}
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			return 1;
		fprintf(stderr, "child %d ended with %s %d\n", (int)pid,
			WIFEXITED(status) ? "status" : "signal",
			WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		return 0;
	}
	fprintf(stderr, "child %d still runs after %d s:\n", (int)pid, seconds);
	print_stacks(pid);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return 0;
}

static void test_fork_while_cm_busy(void)
{
	int p = port + 7, failed = 0, status;
	pid_t server = spawn(p, accept_and_close);
	pthread_t t;

	CHECK(server > 0);
	churning = 1;
	pthread_create(&t, NULL, churn, &p);
	for (int i = 0; i < 100 && !failed; i++)
		failed += !exits_cleanly(spawn(port + 8 + i % 2, just_exit), 5);
	churning = 0;
	pthread_join(t, NULL);
	CHECK_EQ(failed, 0);
	kill(server, SIGKILL);
	waitpid(server, &status, 0);
}

static void *ask_error(void *arg)
{
	int s = *(int *)arg, err;
	socklen_t len = sizeof(err);

	while (churning)
		rgetsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
	return NULL;
}

static int make_one(void)
{
	int s = rsocket(AF_INET, SOCK_STREAM, 0);

	return s >= 0 && rclose(s) == 0 ? 0 : 1;
}

/* Every rsocket call looks its descriptor up under one table lock: a child
 * forked while another thread held it waited for ever in its first
 * rsocket() (CI's test_fork_while_cm_busy, 1 run in 20 under load). */
static void test_fork_while_rsocket_busy(void)
{
	int s = rsocket(AF_INET, SOCK_STREAM, 0), failed = 0;
	pthread_t t;

	CHECK(s >= 0);
	churning = 1;
	pthread_create(&t, NULL, ask_error, &s);
	for (int i = 0; i < 200 && !failed; i++) {
		pid_t pid = fork();

		if (pid == 0)
			_exit(make_one());
		failed += !exits_cleanly(pid, 5);
	}
	churning = 0;
	pthread_join(t, NULL);
	CHECK_EQ(failed, 0);
	rclose(s);
}

/* A child forked while a closed connection's CM watch waited for the CM
 * thread to free it dropped it with its parent's lists: valgrind, which
 * checks a child's leaks at its exit too, ended the child with its error
 * status (valgrind_rsocket failed 1 run in 4 in test_rpoll_pingpong, whose
 * server child is forked just after test_reconnect closes). */
static void test_fork_after_close(void)
{
	pid_t server = spawn(port + 10, accept_and_close);
	int s = connect_to(port + 10), status;

	CHECK(server > 0 && s >= 0);
	rclose(s);
	CHECK(exits_cleanly(spawn(port + 11, just_exit), 30)); /* valgrind's child is slow */
	kill(server, SIGKILL);
	waitpid(server, &status, 0);
}

/* What a UDP socket says, a datagram rsocket says. */
static void test_dgram_misuse(void)
{
	struct sockaddr_in nobody = addr_of(port + 6);
	int s = rsocket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
	static char big[65536];
	struct pollfd p = {.fd = s, .events = POLLIN | POLLOUT};
	char c;

	CHECK(s >= 0);
	CHECK_EQ(rsend(s, "x", 1, 0), -1); /* no destination */
	CHECK_EQ(errno, EDESTADDRREQ);
	CHECK_EQ(rrecv(s, &c, 1, 0), -1);
	CHECK_EQ(errno, EAGAIN);
	CHECK_EQ(rlisten(s, 1), -1);
	CHECK_EQ(errno, EOPNOTSUPP);
	/* Nobody answers there: the datagram goes over UDP, as each one to an
	 * address whose QP is not known yet, and is lost as UDP loses it. */
	CHECK_EQ(rsendto(s, "x", 1, 0, (struct sockaddr *)&nobody, sizeof(nobody)), 1);
	CHECK_EQ(rsendto(s, big, sizeof(big), 0, (struct sockaddr *)&nobody, sizeof(nobody)), -1);
	CHECK_EQ(errno, EMSGSIZE);
	CHECK_EQ(rpoll(&p, 1, 0), 1);
	CHECK_EQ(p.revents, POLLOUT);
	CHECK_EQ(rclose(s), 0);
}

/* rdma-core's datagram protocol on the wire (librdmacm's rsocket.c),
 * against a peer played by a plain UDP socket and a UD QP of this
 * process: the bytes of each header are checked where librdmacm puts
 * them, not through uroce's structs. */
struct wire_peer {
	int u; /* the peer's UDP socket */
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	uint8_t buf[2 * (40 + 2048)]; /* a receive (GRH, then RS_SNDLOWAT), a send */
};

/* ds_udp_header of IPv4 (16 bytes): tag, version 4, op, length, 0, QPN,
 * address. */
static size_t udp_hdr4(uint8_t *out, uint8_t op, uint32_t qpn, uint32_t ip_be)
{
	uint32_t tag = htonl(0x55555555), q = htonl(qpn);

	memcpy(out, &tag, 4);
	out[4] = 4;
	out[5] = op;
	out[6] = 16;
	out[7] = 0;
	memcpy(out + 8, &q, 4);
	memcpy(out + 12, &ip_be, 4);
	return 16;
}

static uint32_t be32_at(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return ntohl(v);
}

static int peer_post_recv(struct wire_peer *w)
{
	struct ibv_sge sge = {(uintptr_t)w->buf, 40 + 2048, w->mr->lkey};
	struct ibv_recv_wr wr = {.sg_list = &sge, .num_sge = 1}, *bad;

	return ibv_post_recv(w->qp, &wr, &bad);
}

/* The UD QP, as librdmacm makes one: Q_Key RDMA_UDP_QKEY. */
static int peer_qp(struct wire_peer *w)
{
	struct ibv_qp_init_attr ia = {
	    .qp_type = IBV_QPT_UD,
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = RDMA_UDP_QKEY};
	struct ibv_ah_attr ah = {.is_global = 1, .port_num = 1, .grh.hop_limit = 64};

	ia.send_cq = ia.recv_cq = w->cq;
	w->qp = ibv_create_qp(w->pd, &ia);
	if (!w->qp ||
	    ibv_modify_qp(w->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(w->qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	if (ibv_modify_qp(w->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return -1;
	ibv_query_gid(w->ctx, 1, 0, &ah.grh.dgid); /* uroce0's first GID: 127.0.0.1 */
	w->ah = ibv_create_ah(w->pd, &ah);
	return w->ah ? peer_post_recv(w) : -1;
}

static int peer_open(struct wire_peer *w, int p)
{
	struct sockaddr_in a = addr_of(p);
	struct ibv_device **list = ibv_get_device_list(NULL);

	memset(w, 0, sizeof(*w));
	w->u = socket(AF_INET, SOCK_DGRAM, 0);
	w->ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	ibv_free_device_list(list);
	if (w->u < 0 || bind(w->u, (struct sockaddr *)&a, sizeof(a)) || !w->ctx)
		return -1;
	w->pd = ibv_alloc_pd(w->ctx);
	w->cq = w->pd ? ibv_create_cq(w->ctx, 8, NULL, NULL, 0) : NULL;
	w->mr = w->cq ? ibv_reg_mr(w->pd, w->buf, sizeof(w->buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	return w->mr ? peer_qp(w) : -1;
}

static void peer_close(struct wire_peer *w)
{
	if (w->qp)
		ibv_destroy_qp(w->qp);
	if (w->ah)
		ibv_destroy_ah(w->ah);
	if (w->mr)
		ibv_dereg_mr(w->mr);
	if (w->cq)
		ibv_destroy_cq(w->cq);
	if (w->pd)
		ibv_dealloc_pd(w->pd);
	if (w->ctx)
		ibv_close_device(w->ctx);
	if (w->u >= 0)
		close(w->u);
}

/* The next completion of the peer's QP within 2 s (0 if none). */
static int peer_completion(struct wire_peer *w, struct ibv_wc *wc)
{
	for (int ms = 0; ms < 2000; ms++) {
		if (ibv_poll_cq(w->cq, 1, wc) == 1)
			return 1;
		usleep(1000);
	}
	return 0;
}

/* A UDP datagram for the peer within 2 s: its length, or -1. */
static ssize_t peer_udp(struct wire_peer *w, uint8_t *buf, size_t len, struct sockaddr_in *from)
{
	socklen_t alen = sizeof(*from);

	if (poll(&(struct pollfd){.fd = w->u, .events = POLLIN}, 1, 2000) != 1)
		return -1;
	return recvfrom(w->u, buf, len, 0, (struct sockaddr *)from, &alen);
}

/* A datagram for s within 2 s, and its source. */
static ssize_t dgram_in(int s, char *buf, size_t len, struct sockaddr_in *from)
{
	struct pollfd p = {.fd = s, .events = POLLIN};
	socklen_t alen = sizeof(*from);

	if (rpoll(&p, 1, 2000) != 1)
		return -1;
	return rrecvfrom(s, buf, len, 0, (struct sockaddr *)from, &alen);
}

/* The peer's UD SEND to qpn: a ds_header naming 127.0.0.1:p, then text. */
static int peer_send_ud(struct wire_peer *w, uint32_t qpn, int p, const char *text)
{
	uint8_t *m = w->buf + 40 + 2048;
	uint16_t port = htons((uint16_t)p);
	uint32_t ip = htonl(INADDR_LOOPBACK);
	struct ibv_sge sge = {(uintptr_t)m, (uint32_t)(8 + strlen(text)), w->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 1,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;

	m[0] = 4;
	m[1] = 8;
	memcpy(m + 2, &port, 2);
	memcpy(m + 4, &ip, 4);
	memcpy(m + 8, text, strlen(text));
	wr.wr.ud.ah = w->ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = RDMA_UDP_QKEY;
	if (ibv_post_send(w->qp, &wr, &bad) || !peer_completion(w, &wc))
		return -1;
	return wc.status == IBV_WC_SUCCESS ? 0 : -1;
}

/* The peer's first datagram comes over UDP (ds_sendv_udp): s delivers it
 * with the peer's UDP address as its source, and answers over UDP with a
 * CTRL header naming its own QP (udp_svc_process_rs); that QP's number. */
static uint32_t wire_udp_in(struct wire_peer *w, int s, int p)
{
	uint8_t m[64], back[64];
	struct sockaddr_in to = addr_of(p + 1), from;
	char got[16] = {0};
	size_t n = udp_hdr4(m, 0, w->qp->qp_num, htonl(INADDR_LOOPBACK));

	memcpy(m + n, "hello", 5);
	CHECK_EQ(sendto(w->u, m, n + 5, 0, (struct sockaddr *)&to, sizeof(to)), (ssize_t)n + 5);
	CHECK_EQ(dgram_in(s, got, sizeof(got), &from), 5);
	CHECK(!memcmp(got, "hello", 5));
	CHECK(from.sin_family == AF_INET && from.sin_port == htons((uint16_t)p) &&
	      from.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
	CHECK_EQ(peer_udp(w, back, sizeof(back), &from), 16);
	CHECK_EQ(be32_at(back), 0x55555555);
	CHECK(back[4] == 4 && back[5] == 7 && back[6] == 16 && back[7] == 0);
	CHECK(be32_at(back + 8) != 0 && be32_at(back + 8) < (1u << 24));
	CHECK_EQ(be32_at(back + 12), INADDR_LOOPBACK);
	CHECK_EQ(ntohs(from.sin_port), p + 1);
	return be32_at(back + 8);
}

/* The peer's DATA datagrams "<tag>00", "<tag>01"... over UDP to s. */
static void peer_udp_data(struct wire_peer *w, int p, char tag, int count)
{
	struct sockaddr_in to = addr_of(p + 1);
	uint8_t m[64];

	for (int i = 0; i < count; i++) {
		size_t n = udp_hdr4(m, 0, w->qp->qp_num, htonl(INADDR_LOOPBACK));

		n += (size_t)snprintf((char *)m + n, sizeof(m) - n, "%c%02d", tag, i);
		CHECK_EQ(sendto(w->u, m, n, 0, (struct sockaddr *)&to, sizeof(to)), (ssize_t)n);
	}
}

/* How many of "<tag>00" to "<tag><count - 1>" s delivers, in that order. */
static int in_order(int s, char tag, int count)
{
	struct sockaddr_in from;
	char want[16], got[8];
	int came = 0;

	for (; came < count; came++) {
		snprintf(want, sizeof(want), "%c%02d", tag, came);
		memset(got, 0, sizeof(got));
		if (dgram_in(s, got, sizeof(got), &from) != 3 || memcmp(got, want, 3)) {
			fprintf(stderr, "    datagram %d: wanted %s, got %.3s\n", came, want, got);
			break;
		}
	}
	return came;
}

/* How many of count CTRL answers (udp_svc_process_rs) the peer has. */
static int answers(struct wire_peer *w, int count)
{
	struct sockaddr_in from;
	uint8_t m[64];
	int answered = 0;

	for (int i = 0; i < count && peer_udp(w, m, sizeof(m), &from) == 16; i++)
		answered += m[5] == 7;
	return answered;
}

/* A burst over UDP, more than the datagrams an rsocket takes off its UDP
 * socket before the program reads them (16): each comes, in order, and
 * each DATA is answered. */
static void wire_udp_burst(struct wire_peer *w, int s, int p)
{
	peer_udp_data(w, p, 'b', 40);
	CHECK_EQ(in_order(s, 'b', 40), 40);
	CHECK_EQ(answers(w, 40), 40);
}

/* A peer switches from UDP to UD SENDs once it learns s's QP: its
 * datagrams still on s's UDP socket, more than s takes off it before the
 * program reads (16), were sent before its first UD SEND and come before
 * it. */
static void wire_udp_then_ud(struct wire_peer *w, int s, int p, uint32_t s_qpn)
{
	peer_udp_data(w, p, 'u', 20);
	CHECK_EQ(peer_send_ud(w, s_qpn, p, "u20"), 0);
	CHECK_EQ(in_order(s, 'u', 21), 21);
	CHECK_EQ(answers(w, 20), 20);
}

/* Once s knows the peer's QP, its datagrams are UD SENDs with Q_Key
 * RDMA_UDP_QKEY, each a ds_header (version 4, length 8, s's port, its
 * address) then the payload (dsend). */
static void wire_ud_out(struct wire_peer *w, int s, int p, uint32_t s_qpn)
{
	struct sockaddr_in to = addr_of(p);
	struct ibv_wc wc = {0};
	uint16_t port;

	CHECK_EQ(rsendto(s, "world", 5, 0, (struct sockaddr *)&to, sizeof(to)), 5);
	CHECK(peer_completion(w, &wc));
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 40 + 8 + 5);
	CHECK_EQ(wc.src_qp, s_qpn);
	memcpy(&port, w->buf + 42, 2);
	CHECK(w->buf[40] == 4 && w->buf[41] == 8 && ntohs(port) == p + 1);
	CHECK_EQ(be32_at(w->buf + 44), INADDR_LOOPBACK);
	CHECK(!memcmp(w->buf + 48, "world", 5));
	CHECK_EQ(peer_post_recv(w), 0);
}

/* A UD SEND to s: its source is the address its ds_header names, one s
 * never heard from over UDP (ds_set_src). */
static void wire_ud_in(struct wire_peer *w, int s, int p, uint32_t s_qpn)
{
	struct sockaddr_in from;
	char got[16] = {0};

	CHECK_EQ(peer_send_ud(w, s_qpn, p + 2, "via ud"), 0);
	CHECK_EQ(dgram_in(s, got, sizeof(got), &from), 6);
	CHECK(!memcmp(got, "via ud", 6));
	CHECK(from.sin_port == htons((uint16_t)(p + 2)) &&
	      from.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
}

/* An rsocket's first datagram to an address, over UDP: a DATA header
 * naming its QP and its address, then the payload, from the port the
 * socket then has. A payload fills at most the 2048 bytes a librdmacm
 * peer reads with its header (2032), and one more is EMSGSIZE. */
static void wire_udp_out(struct wire_peer *w, int p)
{
	static uint8_t big[2033], back[4096];
	struct sockaddr_in to = addr_of(p), from, me;
	socklen_t len = sizeof(me);
	int c = rsocket(AF_INET, SOCK_DGRAM, 0);

	CHECK_EQ(rsendto(c, "abc", 3, 0, (struct sockaddr *)&to, sizeof(to)), 3);
	CHECK_EQ(rgetsockname(c, (struct sockaddr *)&me, &len), 0);
	CHECK_EQ(peer_udp(w, back, sizeof(back), &from), 16 + 3);
	CHECK_EQ(be32_at(back), 0x55555555);
	CHECK(back[4] == 4 && back[5] == 0 && back[6] == 16 && back[7] == 0);
	CHECK(be32_at(back + 8) != 0 && be32_at(back + 8) < (1u << 24));
	CHECK_EQ(be32_at(back + 12), INADDR_LOOPBACK);
	CHECK(!memcmp(back + 16, "abc", 3));
	CHECK(me.sin_port != 0 && from.sin_port == me.sin_port);
	CHECK_EQ(rsendto(c, big, 2032, 0, (struct sockaddr *)&to, sizeof(to)), 2032);
	CHECK_EQ(peer_udp(w, back, sizeof(back), &from), 2048);
	CHECK_EQ(rsendto(c, big, 2033, 0, (struct sockaddr *)&to, sizeof(to)), -1);
	CHECK_EQ(errno, EMSGSIZE);
	CHECK_EQ(rclose(c), 0);
}

static void test_dgram_wire(void)
{
	struct sockaddr_in a = addr_of(port + 13);
	int s = rsocket(AF_INET, SOCK_DGRAM, 0);
	struct wire_peer w;
	uint32_t s_qpn;

	CHECK_EQ(peer_open(&w, port + 12), 0);
	CHECK(s >= 0 && !rbind(s, (struct sockaddr *)&a, sizeof(a)));
	s_qpn = wire_udp_in(&w, s, port + 12);
	wire_udp_burst(&w, s, port + 12);
	wire_udp_then_ud(&w, s, port + 12, s_qpn);
	wire_ud_out(&w, s, port + 12, s_qpn);
	wire_ud_in(&w, s, port + 12, s_qpn);
	wire_udp_out(&w, port + 12);
	CHECK_EQ(rclose(s), 0);
	peer_close(&w);
}

/* The same over IPv6, where lo has ::1: headers of version 6 (a
 * ds_udp_header of 28 bytes, its address 16), a sockaddr_in6 source, and
 * 2048 - 28 bytes of payload at most. */
static struct sockaddr_in6 addr6_of(int p)
{
	struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)p)};

	a.sin6_addr = in6addr_loopback;
	return a;
}

static void check_udp_hdr6(const uint8_t *h, uint8_t op)
{
	CHECK_EQ(be32_at(h), 0x55555555);
	CHECK(h[4] == 6 && h[5] == op && h[6] == 28 && h[7] == 0);
	CHECK(be32_at(h + 8) != 0 && be32_at(h + 8) < (1u << 24));
	CHECK(!memcmp(h + 12, &in6addr_loopback, 16));
}

static void wire6_in(int u, int p)
{
	struct sockaddr_in6 to = addr6_of(p + 1), from;
	socklen_t len = sizeof(from);
	uint8_t m[64] = {0x55, 0x55, 0x55, 0x55, 6, 0, 28, 0, 0, 0, 0x01, 0x23};
	char got[16] = {0};
	struct pollfd pf = {.fd = u, .events = POLLIN};
	int s = rsocket(AF_INET6, SOCK_DGRAM, 0);
	struct pollfd ps = {.fd = s, .events = POLLIN};

	CHECK(s >= 0 && !rbind(s, (struct sockaddr *)&to, sizeof(to)));
	memcpy(m + 12, &in6addr_loopback, 16);
	memcpy(m + 28, "six", 3);
	CHECK_EQ(sendto(u, m, 31, 0, (struct sockaddr *)&to, sizeof(to)), 31);
	CHECK_EQ(rpoll(&ps, 1, 2000), 1);
	CHECK_EQ(rrecvfrom(s, got, sizeof(got), 0, (struct sockaddr *)&from, &len), 3);
	CHECK(!memcmp(got, "six", 3) && len == sizeof(from) && from.sin6_family == AF_INET6);
	CHECK(from.sin6_port == htons((uint16_t)p) && IN6_IS_ADDR_LOOPBACK(&from.sin6_addr));
	CHECK_EQ(poll(&pf, 1, 2000), 1);
	CHECK_EQ(recv(u, m, sizeof(m), 0), 28);
	check_udp_hdr6(m, 7);
	CHECK_EQ(rclose(s), 0);
}

static void wire6_out(int u, int p)
{
	static uint8_t big[2021], back[4096];
	struct sockaddr_in6 to = addr6_of(p);
	struct pollfd pf = {.fd = u, .events = POLLIN};
	int c = rsocket(AF_INET6, SOCK_DGRAM, 0);

	CHECK_EQ(rsendto(c, "abc", 3, 0, (struct sockaddr *)&to, sizeof(to)), 3);
	CHECK_EQ(poll(&pf, 1, 2000), 1);
	CHECK_EQ(recv(u, back, sizeof(back), 0), 28 + 3);
	check_udp_hdr6(back, 0);
	CHECK(!memcmp(back + 28, "abc", 3));
	CHECK_EQ(rsendto(c, big, 2020, 0, (struct sockaddr *)&to, sizeof(to)), 2020);
	CHECK_EQ(poll(&pf, 1, 2000), 1);
	CHECK_EQ(recv(u, back, sizeof(back), 0), 2048);
	CHECK_EQ(rsendto(c, big, 2021, 0, (struct sockaddr *)&to, sizeof(to)), -1);
	CHECK_EQ(errno, EMSGSIZE);
	CHECK_EQ(rclose(c), 0);
}

static void test_dgram_wire6(void)
{
	struct sockaddr_in6 a = addr6_of(port + 14);
	int u = socket(AF_INET6, SOCK_DGRAM, 0);

	if (u < 0 || bind(u, (struct sockaddr *)&a, sizeof(a))) {
		printf("skipped: IPv6 datagrams (no ::1 here: %s)\n", strerror(errno));
		if (u >= 0)
			close(u);
		return;
	}
	wire6_in(u, port + 14);
	wire6_out(u, port + 14);
	close(u);
}

/* Nobody listens: ECONNREFUSED, blocking or through SO_ERROR. */
/* rdma-core's stream protocol on the wire (librdmacm's rsocket.c), against
 * a peer played by rdma_cm and an RC QP of this process: the connection
 * data, a grant, a data message each way, SHUTDOWN and DISCONNECT, each
 * checked where librdmacm puts its bytes, not through uroce's structs. */
#define WIRE_HALF (32u << 10)

struct stream_peer {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *ring_mr, *table_mr;
	uint8_t ring[2 * WIRE_HALF];
	uint8_t table[32]; /* two grant entries, no iomap table */
	uint8_t rep[40];   /* the server's rs_conn_data */
};

static int serve_wire(int l)
{
	int s = raccept(l, NULL, NULL), ok;
	char b[8];

	ok = s >= 0 && rrecv(s, b, 5, MSG_WAITALL) == 5 && !memcmp(b, "hello", 5) &&
	     rsend(s, "world", 5, 0) == 5 && rrecv(s, b, 1, 0) == 0; /* SHUTDOWN: the end */
	rclose(s);
	rclose(l);
	return ok ? 0 : 1;
}

static int cm_event_is(struct rdma_event_channel *ch, enum rdma_cm_event_type want, uint8_t *pdata,
		       size_t len)
{
	struct rdma_cm_event *e;
	int ok;

	if (rdma_get_cm_event(ch, &e))
		return 0;
	ok = e->event == want && (!pdata || e->param.conn.private_data_len >= len);
	if (ok && pdata)
		memcpy(pdata, e->param.conn.private_data, len);
	rdma_ack_cm_event(e);
	return ok;
}

static void put_be(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t get_be(const uint8_t *p, int bytes)
{
	uint64_t v = 0;

	for (int i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	return v;
}

/* librdmacm's rs_conn_data: version 1, IOMAP flag, 8 credits, no iomap
 * table, the grant table, then the ring's first half. */
static void conn_data(const struct stream_peer *w, uint8_t *d)
{
	memset(d, 0, 40);
	d[0] = 1;
	d[1] = 2;
	put_be(d + 2, 8, 2);
	put_be(d + 8, (uintptr_t)w->table, 8);
	put_be(d + 16, w->table_mr->rkey, 4);
	put_be(d + 20, 2, 4);
	put_be(d + 24, (uintptr_t)w->ring, 8);
	put_be(d + 32, w->ring_mr->rkey, 4);
	put_be(d + 36, WIRE_HALF, 4);
}

static int stream_peer_connect(struct stream_peer *w, int p)
{
	struct sockaddr_in a = addr_of(p);
	struct ibv_qp_init_attr ia = {.qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 8,
					      .max_recv_wr = 8,
					      .max_send_sge = 1,
					      .max_recv_sge = 1,
					      .max_inline_data = 64}};
	int remote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	uint8_t req[40];
	struct rdma_conn_param cp = {.private_data = req,
				     .private_data_len = sizeof(req),
				     .responder_resources = 1,
				     .initiator_depth = 1,
				     .retry_count = 7,
				     .rnr_retry_count = 7};
	struct ibv_recv_wr rwr = {.wr_id = 1}, *bad;

	w->ch = rdma_create_event_channel();
	if (!w->ch || rdma_create_id(w->ch, &w->id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(w->id, NULL, (struct sockaddr *)&a, 2000) ||
	    !cm_event_is(w->ch, RDMA_CM_EVENT_ADDR_RESOLVED, NULL, 0) ||
	    rdma_resolve_route(w->id, 2000) ||
	    !cm_event_is(w->ch, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL, 0))
		return -1;
	w->pd = ibv_alloc_pd(w->id->verbs);
	w->cq = w->pd ? ibv_create_cq(w->id->verbs, 32, NULL, NULL, 0) : NULL;
	ia.send_cq = ia.recv_cq = w->cq;
	if (!w->cq || rdma_create_qp(w->id, w->pd, &ia))
		return -1;
	w->ring_mr = ibv_reg_mr(w->pd, w->ring, sizeof(w->ring), remote);
	w->table_mr = ibv_reg_mr(w->pd, w->table, sizeof(w->table), remote);
	if (!w->ring_mr || !w->table_mr)
		return -1;
	for (int i = 0; i < 8; i++)
		if (ibv_post_recv(w->id->qp, &rwr, &bad))
			return -1;
	conn_data(w, req);
	return rdma_connect(w->id, &cp) ||
		       !cm_event_is(w->ch, RDMA_CM_EVENT_ESTABLISHED, w->rep, sizeof(w->rep))
		   ? -1
		   : 0;
}

static void stream_peer_close(struct stream_peer *w)
{
	if (w->id && w->id->qp)
		rdma_destroy_qp(w->id);
	if (w->ring_mr)
		ibv_dereg_mr(w->ring_mr);
	if (w->table_mr)
		ibv_dereg_mr(w->table_mr);
	if (w->cq)
		ibv_destroy_cq(w->cq);
	if (w->pd)
		ibv_dealloc_pd(w->pd);
	if (w->id)
		rdma_destroy_id(w->id);
	if (w->ch)
		rdma_destroy_event_channel(w->ch);
}

/* An RDMA WRITE with immediate data (op << 29 | data), inline. */
static int stream_peer_write(struct stream_peer *w, const char *text, uint32_t imm)
{
	struct ibv_sge sge = {(uintptr_t)text, text ? (uint32_t)strlen(text) : 0, 0};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = text ? 1 : 0,
				 .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
				 .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE,
				 .imm_data = htonl(imm)},
			   *bad;

	wr.wr.rdma.remote_addr = get_be(w->rep + 24, 8);
	wr.wr.rdma.rkey = (uint32_t)get_be(w->rep + 32, 4);
	return ibv_post_send(w->id->qp, &wr, &bad);
}

/* The next message the rsocket wrote (2 s at most): its immediate, host
 * order, and its length; -1 when none came. */
static int64_t stream_peer_message(struct stream_peer *w, uint32_t *len)
{
	struct ibv_wc wc;

	for (int ms = 0; ms < 2000;) {
		struct ibv_recv_wr rwr = {.wr_id = 1}, *bad;

		if (ibv_poll_cq(w->cq, 1, &wc) != 1) {
			usleep(1000);
			ms++;
			continue;
		}
		if (!(wc.opcode & IBV_WC_RECV))
			continue; /* our own write's */
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
		    ibv_post_recv(w->id->qp, &rwr, &bad))
			return -1;
		*len = wc.byte_len;
		return ntohl(wc.imm_data);
	}
	return -1;
}

static void test_stream_wire(void)
{
	int p = port + 16;
	pid_t pid = spawn(p, serve_wire);
	struct stream_peer *w = calloc(1, sizeof(*w));
	int status = -1, granted = 0, got = 0;
	uint32_t len;
	int64_t imm;

	CHECK(pid > 0 && w);
	if (pid <= 0 || !w)
		return;
	CHECK_EQ(stream_peer_connect(w, p), 0);
	/* The REP's rs_conn_data: version 1, IOMAP, its RDMA_RQSIZE (384) of
	 * credits, two grant entries, the first half of a 128 KiB ring. */
	CHECK_EQ(w->rep[0], 1);
	CHECK(w->rep[1] & 2);
	CHECK_EQ(get_be(w->rep + 2, 2), 384);
	CHECK_EQ(get_be(w->rep + 20, 4), 2);
	CHECK_EQ(get_be(w->rep + 36, 4), 64u << 10);
	/* Data: 5 bytes at the granted place, the immediate their length. */
	CHECK_EQ(stream_peer_write(w, "hello", 5), 0);
	/* Back: a grant of its ring's second half into our table's second
	 * entry (in our byte order, librdmacm's rs_send_credits), with
	 * credits, and "world" at the start of our first half. */
	while (!(granted && got) && (imm = stream_peer_message(w, &len)) >= 0) {
		if (imm >> 29 == 4 && len == 16) {
			uint64_t addr;
			uint32_t key, length;

			memcpy(&addr, w->table + 16, 8);
			memcpy(&key, w->table + 24, 4);
			memcpy(&length, w->table + 28, 4);
			CHECK_EQ(addr, get_be(w->rep + 24, 8) + (64u << 10));
			CHECK_EQ(key, get_be(w->rep + 32, 4));
			CHECK_EQ(length, 64u << 10);
			CHECK((imm & 0x1fffffff) >= 8);
			granted = 1;
		} else if (imm >> 29 == 0) {
			CHECK_EQ(imm, 5);
			CHECK_EQ(len, 5);
			CHECK(!memcmp(w->ring, "world", 5));
			got = 1;
		}
	}
	CHECK(granted && got);
	/* SHUTDOWN (control 2): the server reads the end, closes, and its
	 * DISCONNECT (control 0) comes. */
	CHECK_EQ(stream_peer_write(w, NULL, 7u << 29 | 2), 0);
	while ((imm = stream_peer_message(w, &len)) >= 0 && imm != 7u << 29)
		;
	CHECK_EQ(imm, 7u << 29);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	stream_peer_close(w);
	free(w);
}

static void test_refused(void)
{
	struct sockaddr_in a = addr_of(port + 2);
	struct pollfd p;
	int s = rsocket(AF_INET, SOCK_STREAM, 0), err = 0;
	socklen_t len = sizeof(err);

	CHECK_EQ(rconnect(s, (struct sockaddr *)&a, sizeof(a)), -1);
	CHECK_EQ(errno, ECONNREFUSED);
	rclose(s);
	s = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK_EQ(rfcntl(s, F_SETFL, O_NONBLOCK), 0);
	CHECK(rfcntl(s, F_GETFL) & O_NONBLOCK);
	if (rconnect(s, (struct sockaddr *)&a, sizeof(a))) {
		CHECK(errno == EINPROGRESS || errno == ECONNREFUSED);
		if (errno == EINPROGRESS) {
			p = (struct pollfd){.fd = s, .events = POLLOUT};
			CHECK_EQ(rpoll(&p, 1, 5000), 1);
			CHECK(p.revents & POLLERR);
			CHECK_EQ(rgetsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len), 0);
			CHECK_EQ(err, ECONNREFUSED);
		}
	}
	rclose(s);
}

static void test_misuse(void)
{
	int s = rsocket(AF_INET, SOCK_STREAM, 0), v;
	socklen_t len = sizeof(v);
	char c;

	CHECK_EQ(rsocket(AF_INET, SOCK_SEQPACKET, 0), -1);
	CHECK_EQ(errno, EPROTONOSUPPORT);
	CHECK_EQ(rsocket(AF_UNIX, SOCK_STREAM, 0), -1);
	CHECK_EQ(errno, EAFNOSUPPORT);
	CHECK_EQ(rsend(12345, "x", 1, 0), -1); /* not an rsocket */
	CHECK_EQ(errno, EBADF);
	CHECK_EQ(rrecv(s, &c, 1, 0), -1);
	CHECK_EQ(errno, ENOTCONN);
	CHECK_EQ(raccept(s, NULL, NULL), -1); /* not listening */
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(riomap(s, &c, 1, PROT_WRITE, 0, 0), -1);
	CHECK_EQ(errno, ENOTCONN);
	CHECK_EQ(rgetsockopt(s, SOL_SOCKET, SO_TYPE, &v, &len), -1);
	CHECK_EQ(errno, ENOPROTOOPT);
	v = 1 << 20;
	CHECK_EQ(rsetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)), 0);
	/* Read back doubled, as a kernel socket's (socket(7)) and librdmacm's. */
	CHECK_EQ(rgetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, &len), 0);
	CHECK_EQ(v, 2 << 20);
	CHECK_EQ(rclose(s), 0);
	CHECK_EQ(rclose(s), -1); /* closed: no longer an rsocket */
	CHECK_EQ(errno, EBADF);
}

int main(void)
{
	int valgrind = getenv("LD_PRELOAD") && strstr(getenv("LD_PRELOAD"), "vgpreload");

	/* Nothing left in the buffer for forked children to print again. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	port = 21000 + getpid() % 4000;
	RUN(test_misuse(), 20);
	RUN(test_refused(), 20);
	RUN(test_stream_and_end(), 60);
	RUN(test_poll_and_nonblocking(), 30);
	RUN(test_reconnect(), 30);
	RUN(test_rpoll_pingpong(), 60);
	RUN(test_fork_after_close(), 60);
	/* Under valgrind a child takes longer than the 5 s allowed. Under
	 * ASan a child may never end: GCC 12's libasan takes no lock of its
	 * allocator around fork (newer compiler-rt does, InstallAtForkHandler),
	 * so a child forked while another thread of the parent (the churning
	 * one, the CM's) is in malloc waits for ever in its own first malloc.
	 * Seen 3 times in 173 ASan runs under load, every child's stack in
	 * the sanitizer's allocator lock (in ibv_open_device's first
	 * allocations); glibc's malloc, which fork locks, never does it. */
	if (valgrind || UNDER_ASAN) {
		printf("skipped: fork while the CM or an rsocket call is busy (%s)\n",
		       valgrind ? "valgrind" : "ASan's allocator is not fork-safe");
	} else {
		RUN(test_fork_while_rsocket_busy(), 60);
		RUN(test_fork_while_cm_busy(), 60);
	}
	RUN(test_dgram_echo(), 30);
	RUN(test_dgram_misuse(), 30);
	RUN(test_dgram_wire(), 30);
	RUN(test_dgram_wire6(), 30);
	RUN(test_stream_wire(), 30);
	return check_report();
}
