/* The host probes' diagnoses, from facts this host cannot be put in
 * without changing it for everyone (Yama's scopes, a user namespace
 * sysctl, a small net.core.rmem_max), and the probes themselves in the
 * state this host is in. */
#include <arpa/inet.h>
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../check.h"
#include "attach_probe.h"
#include "own_userns.h"
#include "port_probe.h"
#include "socket_buffer.h"

struct attach_case {
	const char *what;
	struct uro_attach_facts f;
	enum uro_attach_cause cause;
	const char *why; /* a part of the diagnosis */
};

static void test_attach_causes(void)
{
	static const struct attach_case cases[] = {
	    {"works", {.err = 0, .yama = -1}, URO_ATTACH_OK, "works"},
	    {"gone", {.err = ESRCH, .yama = -1}, URO_ATTACH_GONE, "exited"},
	    {"no syscall",
	     {.err = ENOSYS, .yama = -1},
	     URO_ATTACH_NO_SYSCALL,
	     "CONFIG_CROSS_MEMORY_ATTACH"},
	    {"filter answers ENOSYS",
	     {.err = ENOSYS, .yama = -1, .seccomp = 2},
	     URO_ATTACH_SECCOMP,
	     "seccomp filter answers ENOSYS"},
	    {"seccomp",
	     {.err = EPERM, .self_err = EPERM, .yama = 1, .seccomp = 2},
	     URO_ATTACH_SECCOMP,
	     "seccomp filter refuses"},
	    {"lsm",
	     {.err = EACCES, .self_err = EACCES, .yama = -1},
	     URO_ATTACH_LSM,
	     "security module"},
	    {"other user",
	     {.err = EPERM, .yama = 1, .other_user = 1},
	     URO_ATTACH_OTHER_USER,
	     "another user"},
	    {"user namespace",
	     {.err = EPERM, .yama = -1, .other_userns = 1},
	     URO_ATTACH_USERNS,
	     "user namespace this one is not in"},
	    {"yama 1", {.err = EPERM, .yama = 1}, URO_ATTACH_YAMA, "descendants"},
	    {"yama 2", {.err = EPERM, .yama = 2}, URO_ATTACH_YAMA, "CAP_SYS_PTRACE"},
	    {"yama 3", {.err = EPERM, .yama = 3}, URO_ATTACH_YAMA, "no process may attach"},
	    {"unknown", {.err = EPERM, .yama = 0}, URO_ATTACH_UNKNOWN, "not dumpable"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct uro_diagnosis d;

		CHECK_EQ(uro_attach_diagnose(&cases[i].f, &d), cases[i].cause);
		if (!strstr(d.why, cases[i].why))
			fprintf(stderr, "%s: '%s'\n", cases[i].what, d.why);
		CHECK(strstr(d.why, cases[i].why) != NULL);
		/* Every refusal tells what to do about it. */
		CHECK(cases[i].cause <= URO_ATTACH_GONE || *d.remedy);
	}
}

/* This host, as the probe finds it, between two sibling processes. */
static void test_attach_probe_here(void)
{
	struct uro_attach_facts f;
	struct uro_diagnosis d;

	uro_attach_probe(&f);
	CHECK_EQ(f.err, 0);
	CHECK_EQ(f.self_err, 0);
	CHECK_EQ(uro_attach_diagnose(&f, &d), URO_ATTACH_OK);
}

static void test_userns_causes(void)
{
	struct uro_userns_facts base = {.way = URO_VIEW_NONE,
					.err = EPERM,
					.step = "unshare(CLONE_NEWUSER)",
					.max_userns = 1000,
					.unpriv_clone = -1,
					.apparmor = -1};
	struct uro_userns_facts f;
	struct uro_diagnosis d;

	f = base;
	f.max_userns = 0;
	f.err = ENOSPC;
	uro_userns_diagnose(&f, &d);
	CHECK(strstr(d.why, "max_user_namespaces is 0") && strstr(d.remedy, "sysctl"));
	f = base;
	f.unpriv_clone = 0;
	uro_userns_diagnose(&f, &d);
	CHECK(strstr(d.why, "unprivileged_userns_clone is 0") != NULL);
	f = base;
	f.apparmor = 1;
	f.step = "writing uid_map";
	uro_userns_diagnose(&f, &d);
	CHECK(strstr(d.why, "AppArmor") && strstr(d.why, "uid_map"));
	f = base;
	f.seccomp = 2;
	uro_userns_diagnose(&f, &d);
	CHECK(strstr(d.why, "seccomp filter") != NULL);
	f = base;
	f.err = ENOSPC;
	uro_userns_diagnose(&f, &d);
	CHECK(strstr(d.why, "as many user namespaces") != NULL);
	f = base;
	f.way = URO_VIEW_USERNS;
	uro_userns_diagnose(&f, &d);
	CHECK(*d.remedy == '\0');
}

static void test_port_states(void)
{
	struct uro_port_holder h[2] = {
	    {.pid = 812, .uid = 0, .inode = 5, .comm = "python3", .addr = "0.0.0.0:4791"},
	    {.pid = 900,
	     .uid = 0,
	     .inode = 6,
	     .uroce = 1,
	     .comm = "ibv_rc_pingpong",
	     .addr = "127.0.0.1:4791"},
	};
	struct uro_port_holder kernel = {.kernel = 1, .addr = "10.0.0.1:4791"};
	struct uro_diagnosis d;

	CHECK_EQ(uro_port_diagnose(4791, EADDRINUSE, h, 2, &d), URO_PORT_REFUSED);
	CHECK(strstr(d.why, "pid 812 (python3, uid 0) on 0.0.0.0:4791") != NULL);
	CHECK(strstr(d.why, "ibv_rc_pingpong") == NULL); /* uroce's own are not in the way */
	CHECK_EQ(uro_port_diagnose(4791, 0, h, 2, &d), URO_PORT_CONTESTED);
	CHECK_EQ(uro_port_diagnose(4791, 0, h + 1, 1, &d), URO_PORT_SHARED);
	CHECK_EQ(uro_port_diagnose(4791, 0, NULL, 0, &d), URO_PORT_FREE);
	CHECK_EQ(uro_port_diagnose(4791, 0, &kernel, 1, &d), URO_PORT_CONTESTED);
	CHECK(strstr(d.why, "the kernel") != NULL);
	/* A root socket this user cannot see the holder of, with rdma_rxe
	 * loaded, may be rxe's: both are named. */
	struct uro_port_holder hidden = {.uid = 0, .inode = 7, .addr = "0.0.0.0:4791"};
	CHECK_EQ(uro_port_diagnose(4791, EADDRINUSE, &hidden, 1, &d), URO_PORT_REFUSED);
	CHECK(strstr(d.why, "rdma_rxe") == NULL);
	hidden.rxe_loaded = 1;
	CHECK_EQ(uro_port_diagnose(4791, EADDRINUSE, &hidden, 1, &d), URO_PORT_REFUSED);
	CHECK(strstr(d.why, "the kernel's Soft-RoCE (rdma_rxe is loaded) or a process of uid 0") !=
	      NULL);
}

/* A socket of ours bound to a port is found, with our pid, and skipped
 * when we ask to skip ourselves. */
static void test_port_holders_here(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
	struct uro_port_holder h[URO_PORT_HOLDERS_MAX];
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_DGRAM, 0), n, found = 0;

	CHECK(fd >= 0 && !uro_port_bind_shared(fd, (struct sockaddr *)&a, sizeof(a)));
	CHECK(!getsockname(fd, (struct sockaddr *)&a, &len));
	n = uro_port_holders(ntohs(a.sin_port), 0, h, URO_PORT_HOLDERS_MAX);
	for (int i = 0; i < n; i++)
		found |= h[i].pid == getpid() && !strncmp(h[i].addr, "127.0.0.1:", 10);
	CHECK(found);
	CHECK_EQ(uro_port_holders(ntohs(a.sin_port), getpid(), h, URO_PORT_HOLDERS_MAX), 0);
	close(fd);
}

static void test_buffers(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0), got, now = 0;
	socklen_t len = sizeof(now);

	CHECK(!uro_sockbuf_enough(URO_WIRE_RCVBUF_NEED - 1));
	CHECK(uro_sockbuf_enough(URO_WIRE_RCVBUF_NEED));
	/* What it says it got is what the socket has. */
	CHECK(fd >= 0);
	got = uro_sockbuf_grow_rcv(fd, URO_WIRE_RCVBUF_WANT);
	CHECK(!getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &now, &len));
	CHECK(got > 0 && got == now);
	close(fd);
}

int main(void)
{
	test_attach_causes();
	test_attach_probe_here();
	test_userns_causes();
	test_port_states();
	test_port_holders_here();
	test_buffers();
	return check_report();
}
