/* uroce stat: a port's counters and its QPs, read from the segments of the
 * processes that have the device open, while they run. The
 * port lines follow iproute2's `rdma statistic show`, the QP lines its
 * `rdma resource show qp`, with the per-QP counters added. */
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "config.h"
#include "netdev.h"
#include "peer.h"
#include "port_counters.h"
#include "registry.h"

static const char stat_usage[] =
    "usage: uroce stat [show] [DEV[/PORT]] [--pid PID] [--json]\n"
    "       uroce stat qp [show] [DEV] [--pid PID] [--json]\n"
    "\n"
    "stat: the port's counters, summed over the live processes that have DEV\n"
    "open (every device when none is named): the counters Soft-RoCE keeps, under\n"
    "rxe's names, then uroce's. Packet counts are the RoCEv2 path's; the\n"
    "shared-memory path counts operations and errors only. A process's counts\n"
    "go with it when it exits.\n"
    "stat qp: each QP of those processes: its state, PSNs and counters.\n";

struct stat_args {
	int qp, json;
	long pid; /* 0: every process */
	const char *dev;
};

/* One process's segment on the device, mapped read-only. */
struct owner {
	struct uro_peer peer;
	struct uro_slot_record rec;
};

static int parse(int argc, char **argv, struct stat_args *a)
{
	int i = 0;

	memset(a, 0, sizeof(*a));
	if (i < argc && !strcmp(argv[i], "qp") && ++i)
		a->qp = 1;
	if (i < argc && !strcmp(argv[i], "show"))
		i++;
	for (; i < argc; i++) {
		char *end;

		if (!strcmp(argv[i], "--json")) {
			a->json = 1;
		} else if (!strcmp(argv[i], "--pid")) {
			if (i + 1 == argc) {
				fprintf(stderr, "uroce stat: --pid needs a PID\n\n%s", stat_usage);
				return -1;
			}
			a->pid = strtol(argv[++i], &end, 10);
			if (*end || a->pid <= 0) {
				fprintf(stderr,
					"uroce stat: --pid '%s': a PID is a number above 0\n",
					argv[i]);
				return -1;
			}
		} else if (argv[i][0] != '-' && !a->dev) {
			a->dev = argv[i];
		} else {
			fprintf(stderr, "uroce stat: unexpected '%s'%s\n\n%s", argv[i],
				argv[i][0] == '-' ? " (the options are --pid PID and --json)"
						  : " (one DEV at most)",
				stat_usage);
			return -1;
		}
	}
	return 0;
}

/* Whether rec is a context on the link: the name is not enough, as a
 * program of another configuration may have a link of that name. */
static int on_link(const struct uro_slot_record *rec, const char *dev, uint64_t link_id)
{
	if (link_id)
		return rec->link_id == link_id;
	return !strncmp(rec->device, dev, sizeof(rec->device));
}

/* The next live process after *slot whose record is on the link (and
 * pid), attached; 0 when there is none. Another user's processes cannot
 * be read (cross-memory attach would refuse too) and are skipped. */
static int next_owner(unsigned *slot, const char *dev, uint64_t link_id, long pid, struct owner *o)
{
	while (++*slot < URO_MAX_SLOTS) {
		if (uro_registry_lookup(NULL, *slot, &o->rec) != 1 ||
		    !on_link(&o->rec, dev, link_id) || (pid && o->rec.pid != pid))
			continue;
		/* Zeroed: a fresh mapping, never one over a previous owner's. */
		memset(&o->peer, 0, sizeof(o->peer));
		if (uro_peer_observe(&o->peer, NULL, *slot) == 0)
			return 1;
	}
	return 0;
}

/* rxe's link_downed is the port's own count of its link going down; a
 * uroce port is its netdev's, so it is the kernel's count of that
 * netdev's (carrier_down_count), printed where rxe prints it: before
 * rdma_sends. */
static void print_port(const char *dev, const char *netdev, const struct uro_seg_counters *sum,
		       int json, int first)
{
	uint64_t downs = 0;

	if (uro_netdev_carrier_downs(netdev, &downs))
		downs = 0; /* no such netdev (the port is down), or a kernel before 4.16 */
	printf(json ? "%s{\"ifname\":\"%s\",\"port\":1" : "%slink %s/1", json && !first ? "," : "",
	       dev);
	for (unsigned i = 0; i < uro_port_counter_count; i++) {
		if (!strcmp(uro_port_counters[i].name, "rdma_sends"))
			printf(json ? ",\"link_downed\":%llu" : " link_downed %llu",
			       (unsigned long long)downs);
		printf(json ? ",\"%s\":%llu" : " %s %llu", uro_port_counters[i].name,
		       (unsigned long long)uro_counter_read(sum, &uro_port_counters[i]));
	}
	printf(json ? "}" : "\n");
}

void uro_counters_add(struct uro_seg_counters *sum, const struct uro_seg_counters *c)
{
	for (unsigned i = 0; i < uro_port_counter_count; i++)
		*(uint64_t *)((char *)sum + uro_port_counters[i].offset) +=
		    uro_counter_read(c, &uro_port_counters[i]);
}

void uro_stat_port(const char *dev, uint64_t link_id, long pid, struct uro_seg_counters *sum)
{
	struct owner o;
	unsigned slot = 0;

	memset(sum, 0, sizeof(*sum));
	while (next_owner(&slot, dev, link_id, pid, &o)) {
		uro_counters_add(sum, &o.peer.hdr->counters);
		uro_peer_detach(&o.peer);
	}
}

static void port_stats(const struct uro_link *link, uint64_t link_id, const struct stat_args *a,
		       int first)
{
	struct uro_seg_counters sum;

	uro_stat_port(link->name, link_id, a->pid, &sum);
	print_port(link->name, link->netdev, &sum, a->json, first);
}

static const char *qp_type_name(uint32_t type)
{
	switch (type) {
	case IBV_QPT_RC:
		return "RC";
	case IBV_QPT_UC:
		return "UC";
	case IBV_QPT_UD:
		return "UD";
	case IBV_QPT_XRC_SEND:
		return "XRC_INI";
	case IBV_QPT_XRC_RECV:
		return "XRC_TGT";
	default:
		return "?";
	}
}

static const char *qp_state_name(uint32_t state)
{
	static const char *const names[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};

	return state < sizeof(names) / sizeof(names[0]) ? names[state] : "?";
}

static void comm_of(long pid, char *buf, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
	buf[0] = 0;
	f = fopen(path, "r");
	if (!f)
		return;
	if (fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = 0;
	fclose(f);
}

/* A process may name itself anything (prctl PR_SET_NAME): quotes,
 * backslashes and control bytes are escaped as JSON needs. */
static void json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void print_qp(const char *dev, const struct owner *o, const struct uro_seg_qp *q, int json,
		     int first)
{
	char comm[32];

	comm_of(o->rec.pid, comm, sizeof(comm));
	printf(json ? "%s{\"ifname\":\"%s\",\"port\":1,\"lqpn\":%u,\"rqpn\":%u,\"type\":\"%s\","
		      "\"state\":\"%s\",\"sq-psn\":%u,\"rq-psn\":%u"
		    : "%slink %s/1 lqpn %u rqpn %u type %s state %s sq-psn %u rq-psn %u",
	       json && !first ? "," : "", dev, q->qpn, q->dest_qpn, qp_type_name(q->type),
	       qp_state_name(q->state), q->sq_psn, q->rq_psn);
	for (unsigned i = 0; i < uro_qp_counter_count; i++)
		printf(json ? ",\"%s\":%llu" : " %s %llu", uro_qp_counters[i].name,
		       (unsigned long long)uro_counter_read(&q->counters, &uro_qp_counters[i]));
	if (!json) {
		printf(" pid %d comm %s\n", o->rec.pid, comm);
		return;
	}
	printf(",\"pid\":%d,\"comm\":", o->rec.pid);
	json_string(comm);
	putchar('}');
}

/* Returns how many QPs it printed, so that JSON separates them. */
static int qp_stats(const char *dev, uint64_t link_id, const struct stat_args *a, int printed)
{
	struct owner o;
	unsigned slot = 0;

	while (next_owner(&slot, dev, link_id, a->pid, &o)) {
		for (unsigned i = 0; i < URO_MAX_QP; i++) {
			struct uro_seg_qp q;

			/* A copy, taken once the entry is in use: the owner may
			 * change it meanwhile, never into a fault here. */
			if (!__atomic_load_n(&o.peer.qp[i].in_use, __ATOMIC_ACQUIRE))
				continue;
			memcpy(&q, &o.peer.qp[i], sizeof(q));
			if (q.qpn)
				print_qp(dev, &o, &q, a->json, printed++ == 0);
		}
		uro_peer_detach(&o.peer);
	}
	return printed;
}

static int names(const char *arg, const char *dev);

/* This user's live uroce processes, into f: " PID (COMM) on DEV," each. */
static int list_users(FILE *f)
{
	struct uro_slot_record rec;
	int n = 0;

	for (unsigned slot = 1; slot < URO_MAX_SLOTS; slot++) {
		char comm[32];

		if (uro_registry_lookup(NULL, slot, &rec) != 1)
			continue;
		comm_of(rec.pid, comm, sizeof(comm));
		fprintf(f, "%s %d (%s) on %.*s", n++ ? "," : "", rec.pid, comm,
			(int)sizeof(rec.device), rec.device);
	}
	return n;
}

/* Whether the registry has a record of pid on a link of cfg (the one dev
 * names, or any): the link's id, not its name, as another configuration
 * may have a link of that name. With no cfg, on any uroce device. */
static int uses_link(long pid, const char *path, const struct uro_config *cfg, const char *dev)
{
	struct uro_slot_record rec;

	for (unsigned slot = 1; slot < URO_MAX_SLOTS; slot++) {
		if (uro_registry_lookup(NULL, slot, &rec) != 1 || rec.pid != pid)
			continue;
		if (!cfg)
			return 1;
		for (int i = 0; i < cfg->n; i++)
			if ((!dev || names(dev, cfg->links[i].name)) &&
			    on_link(&rec, cfg->links[i].name, uro_link_id(path, &cfg->links[i])))
				return 1;
	}
	return 0;
}

/* --pid names a process that shows nothing: say why, rather than print an
 * empty table a user would take for a process without traffic. */
static int no_such_user(const struct stat_args *a)
{
	char comm[32];

	comm_of(a->pid, comm, sizeof(comm));
	if (!comm[0])
		fprintf(stderr, "uroce stat: no process %ld is running", a->pid);
	else if (uses_link(a->pid, NULL, NULL, NULL))
		fprintf(stderr, "uroce stat: process %ld (%s) does not have %s open", a->pid, comm,
			a->dev ? a->dev : "a link of this configuration");
	else
		fprintf(stderr,
			"uroce stat: process %ld (%s) does not use uroce (it has no uroce "
			"device open)",
			a->pid, comm);
	fputs("; your processes using uroce now:", stderr);
	if (!list_users(stderr))
		fputs(" none", stderr);
	fputc('\n', stderr);
	return 1;
}

/* DEV or DEV/PORT names dev. */
static int names(const char *arg, const char *dev)
{
	size_t n = strcspn(arg, "/");

	return strlen(dev) == n && !strncmp(arg, dev, n);
}

static int has_device(const struct uro_config *cfg, const char *arg)
{
	for (int i = 0; i < cfg->n; i++)
		if (names(arg, cfg->links[i].name))
			return 1;
	return 0;
}

int uro_cmd_stat(int argc, char **argv)
{
	struct uro_config cfg;
	struct stat_args a;
	char path[4096], err[512], *slash;
	int shown = 0, printed = 0;

	if (uro_asks_help(argc, argv)) {
		fputs(stat_usage, stdout);
		return 0;
	}
	if (parse(argc, argv, &a))
		return 2;
#ifdef URO_NO_COUNTERS
	fprintf(stderr,
		"uroce stat: this build counts nothing (built with -DUROCE_COUNTERS=OFF)\n");
	return 1;
#endif
	if (uro_config_path(path, sizeof(path))) {
		fprintf(stderr, "uroce: configuration path too long\n");
		return 1;
	}
	if (uro_config_load(path, &cfg, err, sizeof(err))) {
		fprintf(stderr, "uroce: %s\n", err);
		return 1;
	}
	/* "DEV/1" names the port: a uroce device has one. */
	if (a.dev && (slash = strchr(a.dev, '/')) && strcmp(slash, "/1")) {
		fprintf(stderr, "uroce stat: %s has one port, 1\n", a.dev);
		return 1;
	}
	if (a.dev && !has_device(&cfg, a.dev)) {
		fprintf(stderr, "uroce stat: no device '%s' ('uroce link show' lists them)\n",
			a.dev);
		return 1;
	}
	if (a.pid && !uses_link(a.pid, path, &cfg, a.dev))
		return no_such_user(&a);
	if (a.json)
		putchar('[');
	for (int i = 0; i < cfg.n; i++) {
		const char *dev = cfg.links[i].name;
		uint64_t id = uro_link_id(path, &cfg.links[i]);

		if (a.dev && !names(a.dev, dev))
			continue;
		if (a.qp)
			printed = qp_stats(dev, id, &a, printed);
		else
			port_stats(&cfg.links[i], id, &a, shown == 0);
		shown++;
	}
	if (a.json)
		puts("]");
	return 0;
}
