/* uroce doctor: what this host gives uroce, and why. Each check runs the
 * probe the library itself relies on (src/core: attach_probe, own_userns,
 * port_probe, socket_buffer), so that what doctor says is what a program
 * will meet. A check that a default setup needs and finds missing fails;
 * the others warn. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attach_probe.h"
#include "commands.h"
#include "config.h"
#include "device_model.h"
#include "netdev.h"
#include "own_userns.h"
#include "port_probe.h"
#include "process_policy.h"
#include "registry.h"
#include "socket_buffer.h"

#define ROCE_PORT 4791

static const char doctor_usage[] = "usage: uroce doctor [--json]\n"
				   "\n"
				   "Checks what this host gives uroce: cross-memory attach, "
				   "seccomp, Yama,\nuser namespaces, UDP port 4791, socket "
				   "buffers, huge pages and the links'\nnetdevs. Exit status 1 "
				   "when something a default setup needs is missing.\n";

enum level { OK, WARN, FAIL };

static const char *const level_names[] = {"ok", "warn", "FAIL"};

struct result {
	char name[80];
	enum level level;
	char state[512];
	char consequence[512];
	char remedy[512];
};

struct report {
	struct result r[8 + URO_MAX_LINKS];
	int n;
	struct uro_config cfg;
	int cfg_ok;
};

/* The next result, named; the caller fills in the rest. */
static struct result *add(struct report *rep, const char *name, enum level level)
{
	struct result *r = &rep->r[rep->n++];

	memset(r, 0, sizeof(*r));
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->level = level;
	return r;
}

__attribute__((format(printf, 3, 4))) static void put(char *field, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(field, len, fmt, ap);
	va_end(ap);
}

#define SET(r, field, ...) put((r)->field, sizeof((r)->field), __VA_ARGS__)

static void check_user(struct report *rep)
{
	char path[4096], err[512];
	struct passwd *pw = getpwuid(getuid());
	struct stat st;
	struct result *r = add(rep, "user", OK);
	int have = 0;

	if (uro_config_path(path, sizeof(path))) {
		r->level = FAIL;
		SET(r, state, "the configuration path is too long");
		return;
	}
	have = !stat(path, &st);
	rep->cfg_ok = !uro_config_load(path, &rep->cfg, err, sizeof(err));
	SET(r, state, "uid %u (%s), config %s (%s), runtime dir %s", (unsigned)getuid(),
	    pw ? pw->pw_name : "?", path, !have ? "absent: the default, uroce0 on lo" : "present",
	    uro_registry_dir(NULL));
	if (rep->cfg_ok)
		return;
	r->level = FAIL;
	SET(r, consequence, "%s: programs see no device", err);
	SET(r, remedy, "correct the file, or remove it for the default");
}

static void check_yama(struct report *rep)
{
	int scope = uro_yama_scope();
	struct result *r = add(rep, "ptrace_scope", scope > 0 ? WARN : OK);

	if (scope < 0) {
		SET(r, state,
		    "no Yama in this kernel (/proc/sys/kernel/yama absent): "
		    "attaching needs only the same user");
		return;
	}
	SET(r, state, "Yama's kernel.yama.ptrace_scope is %d", scope);
	if (scope == 0)
		return;
	SET(r, consequence,
	    "it restricts cross-memory attach between a user's processes: "
	    "the cross-memory attach check shows whether it is refused here");
	SET(r, remedy, "as root: sysctl kernel.yama.ptrace_scope=0");
}

static void check_seccomp(struct report *rep)
{
	int filters, mode = uro_seccomp_mode(&filters);
	struct result *r = add(rep, "seccomp", mode > 0 ? WARN : OK);

	if (mode <= 0) {
		SET(r, state,
		    mode < 0 ? "the kernel does not say (no Seccomp: in /proc/self/status)"
			     : "no filter in force");
		return;
	}
	SET(r, state, "%s in force (%d filter%s)", mode == 1 ? "strict mode" : "a filter", filters,
	    filters == 1 ? "" : "s");
	SET(r, consequence,
	    "calls it refuses fail in every uroce program: the cross-memory "
	    "attach and user namespace checks show what it refuses");
	SET(r, remedy,
	    "in a container: a seccomp profile that allows process_vm_readv, "
	    "process_vm_writev and unshare");
}

static void check_attach(struct report *rep)
{
	struct uro_attach_facts f;
	struct uro_diagnosis d;
	struct result *r;

	uro_attach_probe(&f);
	/* A warning, not a failure: such programs meet on the wire instead
	 * (attach_path.h); only a type ib link has no wire to fall back on. */
	r = add(rep, "cross-memory attach",
		uro_attach_diagnose(&f, &d) == URO_ATTACH_OK ? OK : WARN);
	if (r->level == OK) {
		SET(r, state, "%s", d.why);
		return;
	}
	SET(r, state, "refused (%s): %s", strerrorname_np(f.err), d.why);
	SET(r, consequence,
	    "connections between this host's programs take RoCEv2 over the link's "
	    "netdev instead of shared memory (slower, and each program says so once); "
	    "on a type ib link, which has no wire, they end in 'transport retry "
	    "counter exceeded'");
	SET(r, remedy, "%s", d.remedy);
}

static void check_userns(struct report *rep)
{
	struct uro_userns_facts f;
	struct uro_diagnosis d;
	struct result *r;

	uro_userns_probe(&f);
	uro_userns_diagnose(&f, &d);
	r = add(rep, "user namespaces", f.way == URO_VIEW_NONE ? WARN : OK);
	SET(r, state, "uroce run's device view: %s", d.why);
	if (r->level == OK)
		return;
	SET(r, consequence,
	    "uroce run runs programs without /sys/class/infiniband and /dev/infiniband: verbs "
	    "and rdma_cm programs work; UCX (ucx_info -d, Open MPI's pml ucx) and tools that "
	    "read sysfs find no device");
	SET(r, remedy, "%s", d.remedy);
}

/* A link's address for the wire: its first IPv4 one, else its first. */
static int wire_address(const struct uro_device_model *m, struct sockaddr_storage *sa,
			socklen_t *len)
{
	int pick = -1;

	for (int i = 0; i < m->ngids && pick < 0; i++)
		if (uro_gid_is_ipv4_mapped(&m->gids[i].gid))
			pick = i;
	if (pick < 0 && m->ngids > 0)
		pick = 0;
	if (pick < 0)
		return -1;
	memset(sa, 0, sizeof(*sa));
	if (uro_gid_is_ipv4_mapped(&m->gids[pick].gid)) {
		struct sockaddr_in *in = (struct sockaddr_in *)sa;

		in->sin_family = AF_INET;
		in->sin_port = htons(ROCE_PORT);
		memcpy(&in->sin_addr, m->gids[pick].gid.raw + 12, 4);
		*len = sizeof(*in);
		return 0;
	}
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;

	in6->sin6_family = AF_INET6;
	in6->sin6_port = htons(ROCE_PORT);
	memcpy(&in6->sin6_addr, m->gids[pick].gid.raw, 16);
	in6->sin6_scope_id = m->netdev.ifindex;
	*len = sizeof(*in6);
	return 0;
}

/* The bind the endpoint makes (port_probe.h): 0 or its errno. */
static int try_bind(const struct sockaddr_storage *sa, socklen_t len)
{
	int one = 1, err = 0;
	int fd = socket(sa->ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return errno;
	if (sa->ss_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (uro_port_bind_shared(fd, (const struct sockaddr *)sa, len))
		err = errno;
	close(fd);
	return err;
}

static void check_port(struct report *rep)
{
	struct uro_port_holder h[URO_PORT_HOLDERS_MAX];
	enum uro_port_state worst = URO_PORT_FREE;
	struct uro_diagnosis d = {"no RoCE link with an address", ""};
	int tried = 0, off_lo = 0;
	struct result *r;

	for (int i = 0; rep->cfg_ok && i < rep->cfg.n; i++) {
		const struct uro_link *l = &rep->cfg.links[i];
		struct uro_device_model m;
		struct sockaddr_storage sa;
		socklen_t len;
		int err, n;
		struct uro_diagnosis one;
		enum uro_port_state s;

		if (l->type != URO_LINK_ROCE)
			continue;
		uro_device_model_build(l, &m);
		if (!m.netdev_present || wire_address(&m, &sa, &len))
			continue;
		off_lo |= strcmp(l->netdev, "lo") != 0;
		err = try_bind(&sa, len);
		n = uro_port_holders(ROCE_PORT, getpid(), h, URO_PORT_HOLDERS_MAX);
		s = uro_port_diagnose(ROCE_PORT, err, h, n, &one);
		if (!tried++ || s > worst) {
			worst = s;
			d = one;
		}
	}
	/* One host's default link reaches other hosts only when asked to:
	 * the port matters to a default setup once a link leaves lo. */
	r = add(rep, "udp port 4791",
		worst == URO_PORT_REFUSED     ? (off_lo ? FAIL : WARN)
		: worst == URO_PORT_CONTESTED ? WARN
					      : OK);
	SET(r, state, "%s", d.why);
	if (r->level == OK)
		return;
	SET(r, consequence,
	    worst == URO_PORT_REFUSED
		? "QPs towards other hosts cannot receive RoCEv2: they end in retry "
		  "errors (one host's processes still meet over shared memory)"
		: "RoCEv2 packets for uroce may be delivered to that program instead");
	SET(r, remedy, "%s", d.remedy);
}

static void check_buffers(struct report *rep)
{
	struct uro_sockbuf_limits l;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int got = fd < 0 ? -1 : uro_sockbuf_grow_rcv(fd, URO_WIRE_RCVBUF_WANT);
	struct result *r = add(rep, "socket buffers", uro_sockbuf_enough(got) ? OK : WARN);

	if (fd >= 0)
		close(fd);
	uro_sockbuf_limits(&l);
	SET(r, state,
	    "a RoCEv2 socket gets %d KiB of receive buffer, %d window%s of %u KiB "
	    "(net.core.rmem_max %ld KiB, wmem_max %ld KiB%s)",
	    got >> 10, got / URO_WIRE_RCVBUF_NEED, got / URO_WIRE_RCVBUF_NEED == 1 ? "" : "s",
	    URO_WIRE_GSO_WINDOW_BYTES >> 10, l.rmem_max >> 10, l.wmem_max >> 10,
	    got > 2 * l.rmem_max ? "; past rmem_max as root" : "");
	if (r->level == OK)
		return;
	SET(r, consequence,
	    "long messages on the wire lose packets in the receiver's socket "
	    "and wait for the ACK timeout to be sent again");
	SET(r, remedy, "as root: sysctl net.core.rmem_max=%d", URO_WIRE_RCVBUF_WANT);
}

static long meminfo(const char *key)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[128];
	size_t n = strlen(key);
	long v = -1;

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':')
			v = atol(line + n + 1);
	if (f)
		fclose(f);
	return v;
}

static void check_hugepages(struct report *rep)
{
	long total = meminfo("HugePages_Total"), free_ = meminfo("HugePages_Free");
	long size = meminfo("Hugepagesize");
	struct result *r = add(rep, "huge pages", total > 0 && free_ > 0 ? OK : WARN);

	SET(r, state, "%ld of %ld free (%ld KiB each)", free_, total, size);
	if (r->level == OK)
		return;
	SET(r, consequence,
	    "perftest's --use_hugepages cannot allocate its buffers (other "
	    "programs are unaffected)");
	SET(r, remedy, "as root: sysctl vm.nr_hugepages=64");
}

static void check_link(struct report *rep, const struct uro_link *l)
{
	char name[72];
	struct uro_device_model m;
	struct result *r;

	snprintf(name, sizeof(name), "link %s", l->name);
	uro_device_model_build(l, &m);
	r = add(rep, name, m.netdev_present && m.netdev.running ? OK : FAIL);
	if (!m.netdev_present) {
		SET(r, state, "netdev %s does not exist", l->netdev);
		SET(r, consequence, "its port is DOWN: programs using %s fail", l->name);
		SET(r, remedy, "uroce link set %s netdev IFACE, or uroce link delete %s", l->name,
		    l->name);
		return;
	}
	SET(r, state, "type %s, netdev %s %s, mtu %u (active MTU %u), %d address%s",
	    uro_link_type_name(l->type), l->netdev, m.netdev.running ? "up" : "down", m.netdev.mtu,
	    uro_mtu_bytes(m.port.active_mtu), m.netdev.naddrs, m.netdev.naddrs == 1 ? "" : "es");
	if (r->level == OK)
		return;
	SET(r, consequence, "its port is DOWN: programs using %s fail until it is up", l->name);
	SET(r, remedy, "ip link set %s up", l->netdev);
}

static void check_links(struct report *rep)
{
	for (int i = 0; rep->cfg_ok && i < rep->cfg.n; i++)
		check_link(rep, &rep->cfg.links[i]);
}

/* Run in this order: the links and the port need the configuration. */
static const struct {
	void (*run)(struct report *rep);
} checks[] = {
    {check_user}, {check_yama},	   {check_seccomp},   {check_attach}, {check_userns},
    {check_port}, {check_buffers}, {check_hugepages}, {check_links},
};

static void print_text(const struct report *rep)
{
	for (int i = 0; i < rep->n; i++) {
		const struct result *r = &rep->r[i];

		printf("%-4s  %-20s %s\n", level_names[r->level], r->name, r->state);
		if (*r->consequence)
			printf("      %-20s consequence: %s\n", "", r->consequence);
		if (*r->remedy)
			printf("      %-20s remedy: %s\n", "", r->remedy);
	}
}

static void json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", (unsigned char)*s);
		else
			putchar(*s);
	}
	putchar('"');
}

static void json_field(const char *key, const char *value, const char *after)
{
	printf("\"%s\": ", key);
	json_string(value);
	fputs(after, stdout);
}

static void print_json(const struct report *rep, int status)
{
	printf("{\"status\": %d, \"checks\": [", status);
	for (int i = 0; i < rep->n; i++) {
		const struct result *r = &rep->r[i];

		printf("%s\n  {", i ? "," : "");
		json_field("name", r->name, ", ");
		json_field("level", level_names[r->level], ", ");
		json_field("state", r->state, ", ");
		json_field("consequence", r->consequence, ", ");
		json_field("remedy", r->remedy, "}");
	}
	printf("\n]}\n");
}

int uro_cmd_doctor(int argc, char **argv)
{
	static struct report rep;
	int json = 0, status = 0;

	for (int i = 0; i < argc; i++) {
		if (uro_is_help(argv[i])) {
			fputs(doctor_usage, stdout);
			return 0;
		}
		if (strcmp(argv[i], "--json")) {
			fputs(doctor_usage, stderr);
			return 2;
		}
		json = 1;
	}
	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++)
		checks[i].run(&rep);
	for (int i = 0; i < rep.n; i++)
		status |= rep.r[i].level == FAIL;
	fflush(stdout);
	if (json)
		print_json(&rep, status);
	else
		print_text(&rep);
	return status;
}
