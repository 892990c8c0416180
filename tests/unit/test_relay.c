/* The host-local relay (relay.h): a packet passed over a connection
 * arrives whole, and a connection whose sender went is let go once, even
 * while a forked child still holds a copy of it. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "../check.h"
#include "relay.h"

static char got[64];
static size_t got_len;

static void take(void *arg, size_t len)
{
	(*(int *)arg)++;
	got_len = len;
}

/* An abstract name of this test's own, in place of a registry slot's
 * (whose socket is non-blocking too). */
static socklen_t name_of(struct sockaddr_un *a)
{
	int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "uroce-test-relay-%d", getpid());

	a->sun_family = AF_UNIX;
	a->sun_path[0] = 0;
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static int sender(void)
{
	struct sockaddr_un a;
	socklen_t len = name_of(&a);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, len)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Receives until n packets came or 100 passes went by. */
static int receive(struct uro_wire_relay *r, int n)
{
	struct iovec iov = {got, sizeof(got)};
	int count = 0;

	for (int pass = 0; pass < 100 && count < n; pass++) {
		uro_relay_receive(r, &iov, 1, 16, take, &count);
		usleep(1000);
	}
	return count;
}

static int connections(const struct uro_wire_relay *r)
{
	int n = 0;

	for (int i = 0; i < URO_RELAY_MAX_IN; i++)
		n += r->in[i] >= 0;
	return n;
}

static void test_sender_gone_while_forked(void)
{
	struct uro_wire_relay r;
	struct sockaddr_un a;
	socklen_t len = name_of(&a);
	int slot = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0), s, reused;
	pid_t child;

	CHECK(slot >= 0 && bind(slot, (struct sockaddr *)&a, len) == 0);
	CHECK_EQ(uro_relay_open(&r, slot), 0);
	s = sender();
	CHECK(s >= 0);
	CHECK_EQ(send(s, "hello", 5, 0), 5);
	CHECK_EQ(receive(&r, 1), 1);
	CHECK(got_len == 5 && !memcmp(got, "hello", 5));
	CHECK_EQ(connections(&r), 1);

	/* A child that holds copies of the relay's descriptors, as a
	 * program's forked child does, while the sender (another process)
	 * goes. */
	child = fork();
	if (child == 0) {
		close(s);
		pause();
		_exit(0);
	}
	close(s);
	CHECK_EQ(receive(&r, 1), 0);
	CHECK_EQ(connections(&r), 0);
	/* The program opens something under the number just freed; the
	 * relay must not take it for the gone connection. */
	reused = open("/dev/null", O_RDONLY);
	CHECK_EQ(receive(&r, 1), 0);
	CHECK(fcntl(reused, F_GETFD) >= 0);
	close(reused);

	/* And the relay still takes what a new sender passes. */
	s = sender();
	CHECK(s >= 0);
	CHECK_EQ(send(s, "again", 5, 0), 5);
	CHECK_EQ(receive(&r, 1), 1);
	CHECK(got_len == 5 && !memcmp(got, "again", 5));
	close(s);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	uro_relay_close(&r);
	close(slot);
}

int main(void)
{
	RUN(test_sender_gone_while_forked(), 20);
	return check_report();
}
