/* rsockets through <rdma/rsocket.h>, the behaviours a socket program relies
 * on that Debian's rstream and rcopy do not reach: the end of the stream
 * after everything sent, MSG_PEEK, EAGAIN and EINPROGRESS, rpoll over an
 * rsocket and a pipe together, a refused connect (blocking and not), a
 * large blocking send against a reader slower than its credits, a client
 * that connects again at once, rpoll before every blocking call, and the
 * errors of misuse. The passive side
 * is a forked process. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../check.h"

#define BIG (3u << 20) /* more than a connection's credits: 12 x 32 KiB */

static int port;

static struct sockaddr_in addr_of(int p)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static int listener(int p)
{
	struct sockaddr_in a = addr_of(p);
	int one = 1, l = rsocket(AF_INET, SOCK_STREAM, 0);

	if (l < 0 || rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    rbind(l, (struct sockaddr *)&a, sizeof(a)) || rlisten(l, 4))
		return -1;
	return l;
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

/* A server in a child of its own (a forked process has none of the CM's
 * threads: it makes its rsockets itself), ready once it listens. */
static pid_t spawn(int p, int (*serve)(int l))
{
	int ready[2];
	char c = 0;
	pid_t pid;

	if (pipe(ready))
		return -1;
	pid = fork();
	if (pid == 0) {
		int l = listener(p);

		c = l >= 0;
		if (write(ready[1], &c, 1) != 1 || l < 0)
			_exit(9);
		_exit(serve(l));
	}
	close(ready[1]);
	if (read(ready[0], &c, 1) != 1 || !c)
		pid = -1;
	close(ready[0]);
	return pid;
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
	uint8_t *big = malloc(BIG);
	char reply[8] = {0};
	pid_t pid = spawn(port, serve);
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

/* Nobody listens: ECONNREFUSED, blocking or through SO_ERROR. */
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

	CHECK_EQ(rsocket(AF_INET, SOCK_DGRAM, 0), -1);
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
	CHECK_EQ(rgetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, &len), 0);
	CHECK_EQ(v, 1 << 20);
	CHECK_EQ(rclose(s), 0);
	CHECK_EQ(rclose(s), -1); /* closed: no longer an rsocket */
	CHECK_EQ(errno, EBADF);
}

int main(void)
{
	port = 21000 + getpid() % 4000;
	RUN(test_misuse(), 20);
	RUN(test_refused(), 20);
	RUN(test_stream_and_end(), 60);
	RUN(test_poll_and_nonblocking(), 30);
	RUN(test_reconnect(), 30);
	RUN(test_rpoll_pingpong(), 60);
	return check_report();
}
