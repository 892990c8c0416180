/* A port follows its netdev. When the link's netdev loses its carrier,
 * comes back, or disappears, the context's async fd polls ready and
 * ibv_get_async_event(3) reports IBV_EVENT_PORT_ERR, IBV_EVENT_PORT_ACTIVE
 * and IBV_EVENT_DEVICE_FATAL, as Soft-RoCE does; ibv_query_port(3) says the
 * same state; another netdev's changes wake nothing. The GID table holds
 * every address of a netdev that has more than the 16 entries a port has at
 * least; `uroce stat` counts the port's downs as link_downed. Needs root to
 * make a network namespace with a veth pair (198.18.0.0/15, the
 * benchmarking range); skipped with a message otherwise. */
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "fixture.h"
#include "stat_read.h"

static int sh(const char *cmd)
{
	int rc = system(cmd);

	CHECK_EQ(rc, 0);
	return rc;
}

static int ready(struct ibv_context *ctx, int ms)
{
	struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};

	return poll(&p, 1, ms) == 1;
}

/* The next event within 5 s (a carrier change takes the kernel a moment). */
static int next_event(struct ibv_context *ctx, enum ibv_event_type want)
{
	struct ibv_async_event ev;

	if (!ready(ctx, 5000)) {
		fprintf(stderr, "no event within 5 s, expected %s\n", ibv_event_type_str(want));
		return -1;
	}
	if (ibv_get_async_event(ctx, &ev))
		return -1;
	CHECK_EQ(ev.event_type, want);
	if (want != IBV_EVENT_DEVICE_FATAL)
		CHECK_EQ(ev.element.port_num, 1);
	ibv_ack_async_event(&ev);
	return ev.event_type == want ? 0 : -1;
}

static enum ibv_port_state port_state(struct ibv_context *ctx)
{
	struct ibv_port_attr a;

	return ibv_query_port(ctx, 1, &a) ? IBV_PORT_NOP : a.state;
}

/* Many changes unread overflow the netlink socket: the events read after
 * that end at the netdev's real state, not at whatever was queued. */
static void test_overflow(struct ibv_context *ctx)
{
	struct ibv_async_event ev;
	enum ibv_event_type last = IBV_EVENT_PORT_ACTIVE;
	int flags = fcntl(ctx->async_fd, F_GETFL), n = 0;

	sh("for i in $(seq 300); do ip link set uro-pe1 down; ip link set uro-pe1 up; done; "
	   "ip link set uro-pe1 down");
	usleep(300000); /* the carrier follows the peer a moment later */
	CHECK_EQ(fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
	while (n < 10000 && ibv_get_async_event(ctx, &ev) == 0) {
		last = ev.event_type;
		ibv_ack_async_event(&ev);
		n++;
	}
	CHECK_EQ(errno, EAGAIN);
	CHECK_EQ(fcntl(ctx->async_fd, F_SETFL, flags), 0);
	CHECK(n > 0);
	CHECK_EQ(last, IBV_EVENT_PORT_ERR);
	CHECK_EQ(port_state(ctx), IBV_PORT_DOWN);
	sh("ip link set uro-pe1 up");
	CHECK_EQ(next_event(ctx, IBV_EVENT_PORT_ACTIVE), 0);
}

/* 40 more addresses than the table's least 16: each is a GID. */
static void test_gid_table_grows(struct ibv_context *ctx)
{
	struct ibv_port_attr a;
	union ibv_gid gid;
	int last = -1;

	CHECK_EQ(ibv_query_port(ctx, 1, &a), 0);
	CHECK(a.gid_tbl_len >= 41);
	for (int i = 0; i < a.gid_tbl_len; i++)
		if (ibv_query_gid(ctx, 1, i, &gid) == 0 && gid.raw[10] == 0xff &&
		    gid.raw[12] == 198 && gid.raw[13] == 18 && gid.raw[14] == 2 &&
		    gid.raw[15] == 40)
			last = i;
	CHECK(last >= 16); /* 198.18.2.40, beyond the first 16 entries */
	CHECK_EQ(ibv_query_gid(ctx, 1, a.gid_tbl_len, &gid), -1);
}

/* `uroce stat`'s link_downed, as rxe's: how often the port went down. */
static long long link_downed(void)
{
	char line[4096];

	stat_line("pe0", "link pe0/1 ", line, sizeof(line));
	return field(line, "link_downed");
}

static void test_port_follows_netdev(struct ibv_context *ctx)
{
	long long downs = link_downed();

	struct ibv_async_event ev;
	int flags = fcntl(ctx->async_fd, F_GETFL);

	CHECK_EQ(port_state(ctx), IBV_PORT_ACTIVE);
	/* Nothing yet, and another netdev's changes do not wake the fd. */
	sh("ip link add uro-other0 type veth peer name uro-other1 && ip link set uro-other0 up");
	CHECK(!ready(ctx, 300));
	CHECK_EQ(fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
	errno = 0;
	CHECK_EQ(ibv_get_async_event(ctx, &ev), -1);
	CHECK_EQ(errno, EAGAIN);
	CHECK_EQ(fcntl(ctx->async_fd, F_SETFL, flags), 0);

	sh("ip link set uro-pe1 down"); /* the link's netdev loses its carrier */
	CHECK_EQ(next_event(ctx, IBV_EVENT_PORT_ERR), 0);
	CHECK_EQ(port_state(ctx), IBV_PORT_DOWN);
	CHECK(downs >= 0);
	CHECK_EQ(link_downed(), downs + 1);
	sh("ip link set uro-pe1 up");
	CHECK_EQ(next_event(ctx, IBV_EVENT_PORT_ACTIVE), 0);
	CHECK_EQ(port_state(ctx), IBV_PORT_ACTIVE);
	test_overflow(ctx);
	/* Deleting an interface that is up takes it down first: the port
	 * goes down, then the device is gone, as with Soft-RoCE (NETDEV_DOWN,
	 * then NETDEV_UNREGISTER). */
	sh("ip link del uro-pe0");
	CHECK_EQ(next_event(ctx, IBV_EVENT_PORT_ERR), 0);
	CHECK_EQ(next_event(ctx, IBV_EVENT_DEVICE_FATAL), 0);
	CHECK_EQ(port_state(ctx), IBV_PORT_DOWN);
}

int main(void)
{
	char conf[] = "/tmp/uroce-port-events-XXXXXX";
	struct fixture f;
	int fd;

	if (geteuid() != 0 || unshare(CLONE_NEWNET)) {
		printf("SKIP: needs root for a network namespace of its own\n");
		return 0;
	}
	if (sh("ip link set lo up && ip link add uro-pe0 type veth peer name uro-pe1 && "
	       "ip addr add 198.18.1.1/24 dev uro-pe0 && ip link set uro-pe0 up && "
	       "ip link set uro-pe1 up"))
		return check_report();
	fd = mkstemp(conf);
	if (fd < 0 || write(fd, "link pe0 netdev uro-pe0\n", 24) != 24)
		return 1;
	close(fd);
	setenv("UROCE_CONFIG", conf, 1);
	sh("for i in $(seq 40); do ip addr add 198.18.2.$i/32 dev uro-pe0; done");
	/* A veth's carrier comes up a moment after both ends are up. */
	for (int i = 0; i < 50 && system("ip link show uro-pe0 | grep -q LOWER_UP"); i++)
		usleep(100000);
	if (fixture_open(&f, "pe0") == 0) {
		test_gid_table_grows(f.ctx);
		RUN(test_port_follows_netdev(f.ctx), 60);
		fixture_close(&f);
	} else {
		CHECK(0);
	}
	unlink(conf);
	return check_report();
}
