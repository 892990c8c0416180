/* uroce link: the device configuration, shown and edited the way
 * iproute2's `rdma link` shows and edits Soft-RoCE links. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "attach_path.h"
#include "commands.h"
#include "config.h"
#include "device_model.h"
#include "link_gone.h"
#include "netdev.h"

/* One usage per subcommand: each --help prints its own, and the whole
 * command's usage is them all. */
static const char show_usage[] = "usage: uroce link show [-d] [NAME[/PORT]]\n";
static const char add_usage[] = "usage: uroce link add NAME netdev IFACE [type roce|ib]\n";
static const char delete_usage[] = "usage: uroce link delete NAME\n";
static const char set_usage[] =
    "usage: uroce link set NAME [netdev IFACE] [type roce|ib] [name NEWNAME]\n";
static const char link_notes[] =
    "\n"
    "IFACE is a netdev ('ip link' lists them).\n"
    "type roce (the default): a RoCEv2 port whose GIDs are IFACE's addresses.\n"
    "type ib: an InfiniBand port with a LID (assigned here) and GID fe80::GUID.\n"
    "'type rxe' is accepted for 'roce', as in 'rdma link add NAME type rxe netdev IFACE'.\n"
    "show -d (--details) adds the path this host's processes take to each other.\n"
    "'list' and 'del' are accepted for 'show' and 'delete'.\n";

static void link_usage(FILE *f)
{
	fprintf(f, "%s%s%s%s%s", show_usage, add_usage, delete_usage, set_usage, link_notes);
}

/* A subcommand's usage error: what was wrong, then how it is used. */
static int usage_error(const char *usage, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int usage_error(const char *usage, const char *fmt, ...)
{
	va_list ap;

	fputs("uroce link: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n%s", usage);
	return 2;
}

static int load(char *path, size_t len, struct uro_config *cfg)
{
	char err[1024];

	if (uro_config_path(path, len)) {
		fprintf(stderr, "uroce: configuration path too long\n");
		return -1;
	}
	if (uro_config_load(path, cfg, err, sizeof(err))) {
		fprintf(stderr, "uroce: %s\n", err);
		return -1;
	}
	return 0;
}

static int save(const char *path, const struct uro_config *cfg)
{
	char err[512];

	if (uro_config_save(path, cfg, err, sizeof(err))) {
		fprintf(stderr, "uroce: %s\n", err);
		return 1;
	}
	return 0;
}

static const char *port_state(const struct ibv_port_attr *p)
{
	return p->state == IBV_PORT_ACTIVE ? "ACTIVE" : "DOWN";
}

static const char *phys_state(const struct ibv_port_attr *p)
{
	return p->phys_state == 5 ? "LINK_UP" : "DISABLED";
}

static void show_one(const struct uro_link *l)
{
	struct uro_device_model m;

	uro_device_model_build(l, &m);
	printf("link %s/1 ", l->name);
	if (l->type == URO_LINK_IB)
		printf("subnet_prefix fe80:0000:0000:0000 lid %u sm_lid 0 lmc 0 ", l->lid);
	printf("state %s physical_state %s netdev %s\n", port_state(&m.port), phys_state(&m.port),
	       l->netdev);
}

/* -d: the path two processes of this host take to each other on the link,
 * and why, from the probe their library makes at its first open
 * (attach_path.h). The probe runs in this command, which shares what a
 * program it starts inherits (a seccomp filter, Yama, the user). */
static void show_path(const struct uro_link *l)
{
	struct uro_diagnosis d;

	if (!uro_attach_refused_why(&d)) {
		printf("    same-host path: shared memory (cross-memory attach works here)\n");
		return;
	}
	if (l->type == URO_LINK_IB)
		printf("    same-host path: none, a type ib link has no wire (cross-memory attach "
		       "refused: %s)\n",
		       d.why);
	else
		printf("    same-host path: RoCEv2 over %s (cross-memory attach refused: %s)\n",
		       l->netdev, d.why);
}

static int no_link(const char *name)
{
	fprintf(stderr, "uroce: no link named '%s' ('uroce link show' lists them)\n", name);
	return 1;
}

static int cmd_show(int argc, char **argv)
{
	char path[4096], note[4300];
	struct uro_config cfg;
	const struct uro_link *l;
	int details = argc > 0 && (!strcmp(argv[0], "-d") || !strcmp(argv[0], "--details"));

	argc -= details;
	argv += details;
	if (argc > 1)
		return usage_error(show_usage, "show takes one NAME, not '%s'", argv[1]);
	if (load(path, sizeof(path), &cfg))
		return 1;
	if (argc == 0) {
		if (cfg.n == 0) {
			uro_config_no_links_note(path, note, sizeof(note));
			fprintf(stderr, "uroce: %s\n", note);
		}
		for (int i = 0; i < cfg.n; i++) {
			show_one(&cfg.links[i]);
			if (details)
				show_path(&cfg.links[i]);
		}
		return 0;
	}
	/* rdma link show accepts NAME and NAME/PORT. */
	char name[URO_NAME_MAX + 8];

	snprintf(name, sizeof(name), "%s", argv[0]);
	if (strchr(name, '/'))
		*strchr(name, '/') = '\0';
	l = uro_config_find(&cfg, name);
	if (!l)
		return no_link(name);
	show_one(l);
	if (details)
		show_path(l);
	return 0;
}

/* Parses "key value" pairs (netdev, type, name) into *l: 0, or the exit
 * status after saying what is wrong (2: misused, 1: a value refused). */
static int parse_pairs(int argc, char **argv, struct uro_link *l, const char **newname,
		       const char *usage)
{
	for (int i = 0; i < argc; i += 2) {
		if (strcmp(argv[i], "netdev") && strcmp(argv[i], "type") &&
		    (strcmp(argv[i], "name") || !newname))
			return usage_error(usage, "unknown keyword '%s'", argv[i]);
		if (i + 1 >= argc)
			return usage_error(usage, "'%s' needs a value", argv[i]);
		if (!strcmp(argv[i], "netdev")) {
			if (!uro_netdev_exists(argv[i + 1])) {
				fprintf(stderr,
					"uroce: unknown netdev '%s': name one that 'ip link' "
					"lists\n",
					argv[i + 1]);
				return 1;
			}
			snprintf(l->netdev, sizeof(l->netdev), "%s", argv[i + 1]);
		} else if (!strcmp(argv[i], "type")) {
			if (uro_link_type_parse(argv[i + 1], &l->type)) {
				fprintf(stderr, "uroce: type '%s': must be roce (or rxe) or ib\n",
					argv[i + 1]);
				return 1;
			}
		} else {
			*newname = argv[i + 1];
		}
	}
	return 0;
}

static int cmd_add(int argc, char **argv)
{
	char path[4096], err[512];
	struct uro_config cfg;
	struct uro_link l;
	int rc;

	if (argc < 1)
		return usage_error(add_usage, "add needs a NAME and 'netdev IFACE'");
	memset(&l, 0, sizeof(l));
	snprintf(l.name, sizeof(l.name), "%s", argv[0]);
	if (load(path, sizeof(path), &cfg))
		return 1;
	rc = parse_pairs(argc - 1, argv + 1, &l, NULL, add_usage);
	if (rc)
		return rc;
	if (!l.netdev[0])
		return usage_error(add_usage,
				   "link '%s' needs a netdev: uroce link add %s netdev IFACE",
				   l.name, l.name);
	if (uro_config_add(&cfg, &l, err, sizeof(err))) {
		fprintf(stderr, "uroce: %s\n", err);
		return 1;
	}
	return save(path, &cfg);
}

static int cmd_delete(int argc, char **argv)
{
	char path[4096], err[512];
	struct uro_config cfg;
	const struct uro_link *l;
	struct uro_link gone;

	if (argc != 1)
		return usage_error(delete_usage, "delete takes one NAME%s",
				   argc ? ", not more" : "");
	if (load(path, sizeof(path), &cfg))
		return 1;
	l = uro_config_find(&cfg, argv[0]);
	if (!l)
		return no_link(argv[0]);
	gone = *l;
	if (uro_config_delete(&cfg, argv[0], err, sizeof(err))) {
		fprintf(stderr, "uroce: %s\n", err);
		return 1;
	}
	if (save(path, &cfg))
		return 1;
	uro_link_gone_notify(path, &gone);
	if (cfg.n == 0) {
		char note[4300];

		uro_config_no_links_note(path, note, sizeof(note));
		fprintf(stderr, "uroce: %s\n", note);
	}
	return 0;
}

/* set = delete and add again, so every rule of add holds for the result. */
static int cmd_set(int argc, char **argv)
{
	char path[4096], err[512];
	struct uro_config cfg;
	const struct uro_link *old;
	const char *newname = NULL;
	const struct uro_link *now;
	struct uro_link l, was;
	int rc;

	if (argc < 3)
		return usage_error(set_usage, "set needs a NAME and what to change");
	if (load(path, sizeof(path), &cfg))
		return 1;
	old = uro_config_find(&cfg, argv[0]);
	if (!old)
		return no_link(argv[0]);
	l = was = *old;
	rc = parse_pairs(argc - 1, argv + 1, &l, &newname, set_usage);
	if (rc)
		return rc;
	if (newname)
		snprintf(l.name, sizeof(l.name), "%s", newname);
	if (l.type != old->type)
		l.lid = 0; /* a new IB link gets a LID; a RoCE link has none */
	if (uro_config_delete(&cfg, argv[0], err, sizeof(err)) ||
	    uro_config_add(&cfg, &l, err, sizeof(err))) {
		fprintf(stderr, "uroce: %s\n", err);
		return 1;
	}
	if (save(path, &cfg))
		return 1;
	/* The device its users opened is not the one the link now names,
	 * unless nothing changed. */
	now = uro_config_find(&cfg, l.name);
	if (!now || uro_link_id(path, now) != uro_link_id(path, &was))
		uro_link_gone_notify(path, &was);
	return 0;
}

static const struct link_cmd {
	const char *name, *alias;
	const char *usage;
	int (*run)(int argc, char **argv);
} link_cmds[] = {
    {"show", "list", show_usage, cmd_show},
    {"add", NULL, add_usage, cmd_add},
    {"delete", "del", delete_usage, cmd_delete},
    {"set", NULL, set_usage, cmd_set},
};

int uro_cmd_link(int argc, char **argv)
{
	if (argc == 0)
		return cmd_show(0, argv);
	if (uro_is_help(argv[0])) {
		link_usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(link_cmds) / sizeof(link_cmds[0]); i++) {
		const struct link_cmd *c = &link_cmds[i];

		if (strcmp(argv[0], c->name) && (!c->alias || strcmp(argv[0], c->alias)))
			continue;
		if (uro_asks_help(argc, argv)) {
			fputs(c->usage, stdout);
			fputs(link_notes, stdout);
			return 0;
		}
		return c->run(argc - 1, argv + 1);
	}
	fprintf(stderr, "uroce link: unknown command '%s' (show, add, delete or set)\n\n", argv[0]);
	link_usage(stderr);
	return 2;
}
