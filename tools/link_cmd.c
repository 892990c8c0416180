/* uroce link: the device configuration, shown and edited the way
 * iproute2's `rdma link` shows and edits Soft-RoCE links. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "config.h"
#include "device_model.h"
#include "link_gone.h"
#include "netdev.h"

static const char link_usage[] =
    "usage: uroce link show [NAME]\n"
    "       uroce link add NAME netdev IFACE [type roce|ib]\n"
    "       uroce link delete NAME\n"
    "       uroce link set NAME [netdev IFACE] [type roce|ib] [name NEWNAME]\n"
    "\n"
    "type roce (the default): a RoCEv2 port whose GIDs are IFACE's addresses.\n"
    "type ib: an InfiniBand port with a LID (assigned here) and GID fe80::GUID.\n"
    "'type rxe' is accepted for 'roce', as in 'rdma link add NAME type rxe netdev IFACE'.\n";

static int load(char *path, size_t len, struct uro_config *cfg)
{
	char err[512];

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

static int cmd_show(int argc, char **argv)
{
	char path[4096];
	struct uro_config cfg;
	const struct uro_link *l;

	if (argc > 1) {
		fputs(link_usage, stderr);
		return 2;
	}
	if (load(path, sizeof(path), &cfg))
		return 1;
	if (argc == 0) {
		for (int i = 0; i < cfg.n; i++)
			show_one(&cfg.links[i]);
		return 0;
	}
	/* rdma link show accepts NAME and NAME/PORT. */
	char name[URO_NAME_MAX + 8];

	snprintf(name, sizeof(name), "%s", argv[0]);
	if (strchr(name, '/'))
		*strchr(name, '/') = '\0';
	l = uro_config_find(&cfg, name);
	if (!l) {
		fprintf(stderr, "uroce: no link named '%s'\n", name);
		return 1;
	}
	show_one(l);
	return 0;
}

/* Parses "key value" pairs (netdev, type, name) into *l. */
static int parse_pairs(int argc, char **argv, struct uro_link *l, const char **newname)
{
	for (int i = 0; i < argc; i += 2) {
		if (i + 1 >= argc) {
			fprintf(stderr, "uroce: '%s' needs a value\n", argv[i]);
			return -1;
		}
		if (!strcmp(argv[i], "netdev")) {
			if (!uro_netdev_exists(argv[i + 1])) {
				fprintf(stderr, "uroce: unknown netdev '%s'\n", argv[i + 1]);
				return -1;
			}
			snprintf(l->netdev, sizeof(l->netdev), "%s", argv[i + 1]);
		} else if (!strcmp(argv[i], "type")) {
			if (uro_link_type_parse(argv[i + 1], &l->type)) {
				fprintf(stderr, "uroce: type must be 'roce' or 'ib'\n");
				return -1;
			}
		} else if (!strcmp(argv[i], "name") && newname) {
			*newname = argv[i + 1];
		} else {
			fprintf(stderr, "uroce: unknown keyword '%s'\n%s", argv[i], link_usage);
			return -1;
		}
	}
	return 0;
}

static int cmd_add(int argc, char **argv)
{
	char path[4096], err[512];
	struct uro_config cfg;
	struct uro_link l;

	if (argc < 1) {
		fputs(link_usage, stderr);
		return 2;
	}
	memset(&l, 0, sizeof(l));
	snprintf(l.name, sizeof(l.name), "%s", argv[0]);
	if (load(path, sizeof(path), &cfg) || parse_pairs(argc - 1, argv + 1, &l, NULL))
		return 1;
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

	if (argc != 1) {
		fputs(link_usage, stderr);
		return 2;
	}
	if (load(path, sizeof(path), &cfg))
		return 1;
	l = uro_config_find(&cfg, argv[0]);
	if (!l) {
		fprintf(stderr, "uroce: no link named '%s'\n", argv[0]);
		return 1;
	}
	gone = *l;
	if (uro_config_delete(&cfg, argv[0], err, sizeof(err))) {
		fprintf(stderr, "uroce: %s\n", err);
		return 1;
	}
	if (save(path, &cfg))
		return 1;
	uro_link_gone_notify(path, &gone);
	return 0;
}

/* set = delete and add again, so every rule of add holds for the result. */
static int cmd_set(int argc, char **argv)
{
	char path[4096], err[512];
	struct uro_config cfg;
	const struct uro_link *old;
	const char *newname = NULL;
	struct uro_link l, was;

	if (argc < 3) {
		fputs(link_usage, stderr);
		return 2;
	}
	if (load(path, sizeof(path), &cfg))
		return 1;
	old = uro_config_find(&cfg, argv[0]);
	if (!old) {
		fprintf(stderr, "uroce: no link named '%s'\n", argv[0]);
		return 1;
	}
	l = was = *old;
	if (parse_pairs(argc - 1, argv + 1, &l, &newname))
		return 1;
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
	l = *uro_config_find(&cfg, l.name);
	if (uro_link_id(path, &l) != uro_link_id(path, &was))
		uro_link_gone_notify(path, &was);
	return 0;
}

int uro_cmd_link(int argc, char **argv)
{
	if (argc == 0)
		return cmd_show(0, argv);
	if (uro_is_help(argv[0])) {
		fputs(link_usage, stdout);
		return 0;
	}
	if (!strcmp(argv[0], "show") || !strcmp(argv[0], "list"))
		return cmd_show(argc - 1, argv + 1);
	if (!strcmp(argv[0], "add"))
		return cmd_add(argc - 1, argv + 1);
	if (!strcmp(argv[0], "delete") || !strcmp(argv[0], "del"))
		return cmd_delete(argc - 1, argv + 1);
	if (!strcmp(argv[0], "set"))
		return cmd_set(argc - 1, argv + 1);
	fprintf(stderr, "uroce: unknown link command '%s'\n%s", argv[0], link_usage);
	return 2;
}
