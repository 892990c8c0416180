/* Which uroce device an IP address belongs to, and the verbs contexts
 * librdmacm shares among all its ids (rdma_get_devices(3)). An address
 * belongs to the device bound to the netdev that carries it, as with
 * Soft-RoCE. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm.h"
#include "config.h"
#include "device_model.h"

/* One context per device for the life of the process: ids point at them
 * and programs compare id->verbs with what rdma_get_devices returned. */
static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibv_context *contexts[URO_MAX_LINKS];
static struct ibv_pd *default_pds[URO_MAX_LINKS];
static struct ibv_xrcd *default_xrcds[URO_MAX_LINKS];
static char names[URO_MAX_LINKS][URO_NAME_MAX];
/* A forked child does not use its parent's contexts (ibv_fork_init(3)):
 * its own registry slot and segment come with its own. */
static pid_t owner;

static void forget_parents(void)
{
	if (owner == getpid())
		return;
	memset(contexts, 0, sizeof(contexts));
	memset(default_pds, 0, sizeof(default_pds));
	memset(default_xrcds, 0, sizeof(default_xrcds));
	memset(names, 0, sizeof(names));
	owner = getpid();
}

static struct ibv_context *context_named(const char *name)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int i;

	pthread_mutex_lock(&devices_lock);
	forget_parents();
	for (i = 0; i < URO_MAX_LINKS && names[i][0]; i++)
		if (!strcmp(names[i], name)) {
			ctx = contexts[i];
			goto out;
		}
	if (i == URO_MAX_LINKS)
		goto out;
	list = ibv_get_device_list(NULL);
	for (int d = 0; list && list[d]; d++)
		if (!strcmp(ibv_get_device_name(list[d]), name))
			ctx = ibv_open_device(list[d]);
	ibv_free_device_list(list);
	if (ctx) {
		contexts[i] = ctx;
		snprintf(names[i], sizeof(names[i]), "%s", name);
	}
out:
	pthread_mutex_unlock(&devices_lock);
	return ctx;
}

/* For fork.c only. */
void uro_cm_devices_lock(void)
{
	pthread_mutex_lock(&devices_lock);
}

void uro_cm_devices_unlock(void)
{
	pthread_mutex_unlock(&devices_lock);
}

/* The device's slot in the tables above, or -1. Called with devices_lock. */
static int device_index(struct ibv_context *ctx)
{
	forget_parents();
	for (int i = 0; i < URO_MAX_LINKS && names[i][0]; i++)
		if (contexts[i] == ctx)
			return i;
	return -1;
}

/* The PD a QP gets when its creator names none (rdma_create_qp(3)): one
 * per device, as librdmacm keeps it. */
struct ibv_pd *uro_cm_default_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd = NULL;
	int i;

	pthread_mutex_lock(&devices_lock);
	i = device_index(ctx);
	if (i >= 0 && !default_pds[i])
		default_pds[i] = ibv_alloc_pd(ctx);
	if (i >= 0)
		pd = default_pds[i];
	pthread_mutex_unlock(&devices_lock);
	return pd;
}

/* The XRC domain of a device's XRC ids, private to the process, one per
 * device as librdmacm keeps it. */
struct ibv_xrcd *uro_cm_default_xrcd(struct ibv_context *ctx)
{
	struct ibv_xrcd_init_attr attr = {.comp_mask =
					      IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
					  .fd = -1,
					  .oflags = O_CREAT};
	struct ibv_xrcd *xrcd = NULL;
	int i;

	pthread_mutex_lock(&devices_lock);
	i = device_index(ctx);
	if (i >= 0 && !default_xrcds[i])
		default_xrcds[i] = ibv_open_xrcd(ctx, &attr);
	if (i >= 0)
		xrcd = default_xrcds[i];
	pthread_mutex_unlock(&devices_lock);
	return xrcd;
}

void uro_cm_set_device(struct rdma_cm_id *id, struct ibv_context *verbs)
{
	id->verbs = verbs;
	id->pd = verbs ? uro_cm_default_pd(verbs) : NULL;
}

URO_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context **out;
	int n = 0;

	if (num_devices)
		*num_devices = 0;
	if (!list)
		return NULL;
	for (; list[n]; n++)
		;
	out = calloc((size_t)n + 1, sizeof(*out));
	for (int i = 0, k = 0; out && i < n; i++) {
		struct ibv_context *c = context_named(ibv_get_device_name(list[i]));

		if (c)
			out[k++] = c;
		if (num_devices && c)
			(*num_devices)++;
	}
	ibv_free_device_list(list);
	return out;
}

URO_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list); /* the contexts stay: they are shared */
}

static int same_ip(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return 0;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		       &((const struct sockaddr_in6 *)b)->sin6_addr, 16);
}

/* The netdev carrying a local address: exact, or anywhere in 127/8 on lo. */
static int netdev_of(const struct sockaddr *addr, char *ifname)
{
	struct ifaddrs *list;
	int found = 0;

	if (addr->sa_family == AF_INET && uro_cm_is_loopback(addr)) {
		strcpy(ifname, "lo");
		return 1;
	}
	if (getifaddrs(&list))
		return 0;
	for (struct ifaddrs *i = list; i && !found; i = i->ifa_next)
		if (i->ifa_addr && same_ip(i->ifa_addr, addr)) {
			snprintf(ifname, IFNAMSIZ, "%s", i->ifa_name);
			found = 1;
		}
	freeifaddrs(list);
	return found;
}

static const struct uro_link *link_on(const struct uro_config *cfg, const char *ifname)
{
	for (int i = 0; i < cfg->n; i++)
		if (!strcmp(cfg->links[i].netdev, ifname))
			return &cfg->links[i];
	return NULL;
}

/* The context of the device bound to the netdev of a local address, or
 * NULL (errno ENODEV) when no uroce device is. */
struct ibv_context *uro_cm_device_for_addr(const struct sockaddr *addr)
{
	char path[4096], err[512], ifname[IFNAMSIZ];
	struct uro_config cfg;
	const struct uro_link *l;
	struct ibv_context *ctx;

	if (!netdev_of(addr, ifname) || uro_config_path(path, sizeof(path)) ||
	    uro_config_load(path, &cfg, err, sizeof(err)) || !(l = link_on(&cfg, ifname))) {
		errno = ENODEV;
		return NULL;
	}
	ctx = context_named(l->name);
	if (!ctx)
		errno = ENODEV;
	return ctx;
}

int uro_cm_is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	return sa->sa_family == AF_INET6 &&
	       IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* The first device whose port is active, else the first device: what
 * the kernel's CM gives a loopback address when no device carries it
 * (cma.c, cma_bind_loopback). NULL (errno ENODEV) without devices. */
static struct ibv_context *loopback_device(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *first = NULL, *active = NULL;

	for (int d = 0; list && list[d] && !active; d++) {
		struct ibv_context *c = context_named(ibv_get_device_name(list[d]));
		struct ibv_port_attr port;

		if (c && !first)
			first = c;
		if (c && !ibv_query_port(c, 1, &port) && port.state == IBV_PORT_ACTIVE)
			active = c;
	}
	ibv_free_device_list(list);
	if (!first)
		errno = ENODEV;
	return active ? active : first;
}

struct ibv_context *uro_cm_device_for_local(const struct sockaddr *addr)
{
	struct ibv_context *ctx = uro_cm_device_for_addr(addr);

	return ctx || !uro_cm_is_loopback(addr) ? ctx : loopback_device();
}

void uro_cm_addr_gid(const struct sockaddr *sa, union ibv_gid *gid)
{
	if (sa->sa_family == AF_INET)
		uro_gid_from_ip(gid, AF_INET, &((const struct sockaddr_in *)sa)->sin_addr);
	else
		uro_gid_from_ip(gid, AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr);
}

/* The route of a resolved id: one path between its GIDs (a RoCE path is
 * its IP addresses as GIDs; an IB port's is its GID and LID). */
int uro_cm_fill_route(struct uro_cm_id *cm)
{
	struct rdma_cm_id *id = &cm->id;
	struct ibv_sa_path_rec *p = &cm->path;
	struct ibv_port_attr port;

	if (ibv_query_port(id->verbs, 1, &port))
		return -1;
	memset(p, 0, sizeof(*p));
	if (port.link_layer == IBV_LINK_LAYER_INFINIBAND) {
		ibv_query_gid(id->verbs, 1, 0, &p->sgid);
		p->dgid = p->sgid; /* on one host, the same fabric port */
		p->slid = p->dlid = htons(port.lid);
	} else if (uro_cm_is_loopback(&id->route.addr.src_addr) &&
		   uro_cm_device_for_addr(&id->route.addr.src_addr) != id->verbs) {
		/* A loopback address the device does not carry: its first GID
		 * at both ends, as the kernel's cma_bind_loopback sets them. */
		ibv_query_gid(id->verbs, 1, 0, &p->sgid);
		p->dgid = p->sgid;
	} else {
		uro_cm_addr_gid(&id->route.addr.src_addr, &p->sgid);
		uro_cm_addr_gid(&id->route.addr.dst_addr, &p->dgid);
	}
	p->pkey = htons(0xffff);
	p->mtu = (uint8_t)port.active_mtu;
	p->rate = IBV_RATE_100_GBPS;
	p->hop_limit = 64;
	p->numb_path = 1;
	p->packet_life_time = 14;
	id->route.addr.addr.ibaddr.sgid = p->sgid;
	id->route.addr.addr.ibaddr.dgid = p->dgid;
	id->route.addr.addr.ibaddr.pkey = p->pkey;
	id->route.path_rec = p;
	id->route.num_paths = 1;
	return 0;
}
