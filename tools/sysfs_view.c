/* The sysfs files a Soft-RoCE device has, written for uroce's links: what
 * programs read beside the verbs (UCX, Open MPI, ibstat, rdma-core's tests).
 * The layout and formats are the Linux kernel's for an RDMA device
 * (Documentation/ABI/stable/sysfs-class-infiniband); every value comes from
 * the device model, the one that ibv_query_device and ibv_query_port use. */
#include "sysfs_view.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "device_model.h"

#define UVERBS_ABI_VERSION 6 /* the kernel's uverbs ABI that rdma-core 44 speaks */
#define DRIVER_ABI_VERSION 1 /* a provider's own, per device; nothing reads uroce's */
#define UVERBS_MAJOR	   231
#define UVERBS_MINOR_BASE  192

/* Writes dir/name (dir relative to at) with printf-formatted content. */
__attribute__((format(printf, 4, 5))) static int put(int at, const char *dir, const char *name,
						     const char *fmt, ...)
{
	char path[512], text[256];
	va_list ap;
	int fd, n, ok;

	va_start(ap, fmt);
	n = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof(text) ||
	    snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return -1;
	fd = openat(at, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
	if (fd < 0)
		return -1;
	ok = write(fd, text, (size_t)n) == n;
	close(fd);
	return ok ? 0 : -1;
}

/* mkdir -p of a path relative to at. */
static int make_dirs(int at, const char *path)
{
	char buf[512];

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -1;
	for (char *p = buf + 1;; p++) {
		char c = *p;

		if (c != '/' && c != '\0')
			continue;
		*p = '\0';
		if (mkdirat(at, buf, 0755) && errno != EEXIST)
			return -1;
		if (c == '\0')
			return 0;
		*p = c;
	}
}

/* A GUID as sysfs shows it: four groups of four hex digits. */
static void guid_text(uint64_t guid, char out[20])
{
	snprintf(out, 20, "%04x:%04x:%04x:%04x", (unsigned)(guid >> 48) & 0xffff,
		 (unsigned)(guid >> 32) & 0xffff, (unsigned)(guid >> 16) & 0xffff,
		 (unsigned)guid & 0xffff);
}

/* A GID as sysfs shows it: eight groups of four hex digits, no compression. */
static void gid_text(const union ibv_gid *gid, char out[40])
{
	const uint8_t *r = gid->raw;

	snprintf(out, 40, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
		 r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12],
		 r[13], r[14], r[15]);
}

static const char *state_text(enum ibv_port_state s)
{
	return s == IBV_PORT_ACTIVE ? "4: ACTIVE" : "1: DOWN";
}

static const char *phys_state_text(uint8_t s)
{
	return s == 5 ? "5: LinkUp" : "3: Disabled";
}

/* The model's port is 4X EDR: the kernel prints that as below. */
static const char *rate_text(const struct ibv_port_attr *p)
{
	return p->active_width == 2 && p->active_speed == 32 ? "100 Gb/sec (4X EDR)"
							     : "10 Gb/sec (4X)";
}

static const char *gid_type_text(enum ibv_gid_type t)
{
	return t == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : "IB/RoCE v1";
}

static int write_gids(int at, const char *port, const struct uro_device_model *m)
{
	char dir[256], name[16], text[40];
	int err = 0;

	snprintf(dir, sizeof(dir), "%s/gids", port);
	err |= make_dirs(at, dir);
	for (int i = 0; i < m->port.gid_tbl_len; i++) {
		union ibv_gid zero = {.raw = {0}};

		gid_text(i < m->ngids ? &m->gids[i].gid : &zero, text);
		snprintf(name, sizeof(name), "%d", i);
		err |= put(at, dir, name, "%s\n", text);
	}
	/* As in the kernel, an empty entry has neither type nor netdev. */
	snprintf(dir, sizeof(dir), "%s/gid_attrs/types", port);
	err |= make_dirs(at, dir);
	for (int i = 0; i < m->ngids; i++) {
		snprintf(name, sizeof(name), "%d", i);
		err |= put(at, dir, name, "%s\n", gid_type_text(m->gids[i].type));
	}
	if (m->link.type == URO_LINK_IB)
		return err;
	snprintf(dir, sizeof(dir), "%s/gid_attrs/ndevs", port);
	err |= make_dirs(at, dir);
	for (int i = 0; i < m->ngids; i++) {
		snprintf(name, sizeof(name), "%d", i);
		err |= put(at, dir, name, "%s\n", m->link.netdev);
	}
	return err;
}

static int write_port(int at, const char *dev, const struct uro_device_model *m)
{
	const struct ibv_port_attr *p = &m->port;
	char port[192], pkeys[224];
	int err;

	snprintf(port, sizeof(port), "%s/ports/1", dev);
	snprintf(pkeys, sizeof(pkeys), "%s/pkeys", port);
	err = make_dirs(at, pkeys);
	err |= put(at, port, "state", "%s\n", state_text(p->state));
	err |= put(at, port, "phys_state", "%s\n", phys_state_text(p->phys_state));
	err |= put(at, port, "lid", "0x%x\n", p->lid);
	err |= put(at, port, "sm_lid", "0x%x\n", p->sm_lid);
	err |= put(at, port, "sm_sl", "%u\n", p->sm_sl);
	err |= put(at, port, "lid_mask_count", "%u\n", p->lmc);
	err |= put(at, port, "cap_mask", "0x%08x\n", p->port_cap_flags);
	err |= put(at, port, "rate", "%s\n", rate_text(p));
	err |= put(at, port, "link_layer", "%s\n",
		   p->link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
	/* The only P_Key: the default, full membership (IBTA 10.9.1.1). */
	err |= put(at, pkeys, "0", "0xffff\n");
	return err | write_gids(at, port, m);
}

/* device/net/<netdev>: where rdma-core's tests and UCX find the netdev. */
static int write_netdev_link(int at, const char *dev, const struct uro_device_model *m)
{
	char dir[192], path[256], target[64];

	if (m->link.type == URO_LINK_IB)
		return 0;
	snprintf(dir, sizeof(dir), "%s/device/net", dev);
	snprintf(path, sizeof(path), "%s/%s", dir, m->link.netdev);
	snprintf(target, sizeof(target), "/sys/class/net/%s", m->link.netdev);
	if (make_dirs(at, dir))
		return -1;
	return symlinkat(target, at, path) && errno != EEXIST ? -1 : 0;
}

static int write_device(int at, const struct uro_link *link)
{
	struct uro_device_model m;
	struct ibv_device_attr attr;
	char dev[128], guid[20], image[20];
	int err;

	uro_device_model_build(link, &m);
	uro_device_attr(&m, &attr);
	guid_text(m.node_guid, guid);
	guid_text(__builtin_bswap64(attr.sys_image_guid), image);
	snprintf(dev, sizeof(dev), "infiniband/%s", link->name);
	err = make_dirs(at, dev);
	err |= put(at, dev, "node_type", "1: CA\n");
	err |= put(at, dev, "node_guid", "%s\n", guid);
	err |= put(at, dev, "sys_image_guid", "%s\n", image);
	err |= put(at, dev, "fw_ver", "%s\n", attr.fw_ver);
	err |= put(at, dev, "hw_rev", "%x\n", attr.hw_ver);
	err |= put(at, dev, "node_desc", "uroce %s\n", link->name);
	return err | write_port(at, dev, &m) | write_netdev_link(at, dev, &m);
}

static int write_uverbs(int at, const struct uro_link *link, int index)
{
	char dir[64];
	int err;

	snprintf(dir, sizeof(dir), "infiniband_verbs/uverbs%d", index);
	err = make_dirs(at, dir);
	err |= put(at, dir, "ibdev", "%s\n", link->name);
	err |= put(at, dir, "abi_version", "%d\n", DRIVER_ABI_VERSION);
	err |= put(at, dir, "dev", "%d:%d\n", UVERBS_MAJOR, UVERBS_MINOR_BASE + index);
	return err;
}

int uro_sysfs_view_write(int class_fd, const struct uro_config *cfg)
{
	int err = make_dirs(class_fd, "infiniband") | make_dirs(class_fd, "infiniband_verbs");

	err |= put(class_fd, "infiniband_verbs", "abi_version", "%d\n", UVERBS_ABI_VERSION);
	for (int i = 0; i < cfg->n; i++)
		err |= write_device(class_fd, &cfg->links[i]) |
		       write_uverbs(class_fd, &cfg->links[i], i);
	return err ? -1 : 0;
}
