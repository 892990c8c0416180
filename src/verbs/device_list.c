/* ibv_get_device_list(3) and the device helpers. The list of devices is the
 * link configuration, read afresh on every call. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver_abi.h"
#include "log.h"
#include "verbs_ops.h"

#undef ibv_get_device_list

/* Device structs outlive any list they were returned in (contexts point at
 * them), so they are kept for the life of the process: the ABI forces this
 * one piece of global state. */
static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static struct uro_device *devices;

/* For fork.c only. */
void uro_devices_lock(void)
{
	pthread_mutex_lock(&devices_lock);
}

void uro_devices_unlock(void)
{
	pthread_mutex_unlock(&devices_lock);
}

/* A link changed (or read from another UROCE_CONFIG) since an earlier
 * list is another device, though its name is the same: the contexts
 * opened on the earlier one keep it as it was. */
static struct uro_device *device_for(const struct uro_link *link, uint64_t link_id, int index)
{
	struct uro_device *d;

	for (d = devices; d; d = d->next)
		if (d->link_id == link_id && !strcmp(d->link.name, link->name))
			break;
	if (!d) {
		d = calloc(1, URO_DEVICE_ALLOC);
		if (!d)
			return NULL;
		d->next = devices;
		devices = d;
	}
	d->link = *link;
	d->link_id = link_id;
	d->index = index;
	d->ibdev.node_type = IBV_NODE_CA;
	d->ibdev.transport_type = IBV_TRANSPORT_IB;
	/* Named as rdma-core names a kernel device's: its uverbs node, and
	 * the sysfs directories that uroce run's view provides (sysfs_view.h). */
	snprintf(d->ibdev.name, sizeof(d->ibdev.name), "%s", link->name);
	snprintf(d->ibdev.dev_name, sizeof(d->ibdev.dev_name), "uverbs%d", index);
	snprintf(d->ibdev.dev_path, sizeof(d->ibdev.dev_path), "%s/class/infiniband_verbs/uverbs%d",
		 ibv_get_sysfs_path(), index);
	snprintf(d->ibdev.ibdev_path, sizeof(d->ibdev.ibdev_path), "%s/class/infiniband/%s",
		 ibv_get_sysfs_path(), link->name);
	return d;
}

/* A program that finds no device usually prints only its own complaint
 * ("Failed to get IB devices list"): the why is said here, with the file
 * and line to fix. An empty file is said once: a program may ask often. */
static int load_config(struct uro_config *cfg, char *path, size_t len)
{
	static int told_empty;
	char err[1024];

	if (uro_config_path(path, len)) {
		uro_warn("configuration path too long (UROCE_CONFIG, XDG_CONFIG_HOME or HOME)");
		return EINVAL;
	}
	if (uro_config_load(path, cfg, err, sizeof(err))) {
		uro_warn("%s; there are no devices until it is fixed", err);
		return EINVAL;
	}
	if (cfg->n == 0 && !__atomic_exchange_n(&told_empty, 1, __ATOMIC_RELAXED)) {
		uro_config_no_links_note(path, err, sizeof(err));
		uro_warn("%s", err);
	}
	return 0;
}

URO_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct uro_config cfg;
	struct ibv_device **list;
	char path[4096];
	int err = load_config(&cfg, path, sizeof(path));
	int n = 0;

	if (num_devices)
		*num_devices = 0;
	if (err)
		return uro_fail_null(err);
	list = calloc((size_t)cfg.n + 1, sizeof(*list));
	if (!list)
		return uro_fail_null(ENOMEM);
	pthread_mutex_lock(&devices_lock);
	for (int i = 0; i < cfg.n; i++) {
		struct uro_device *d =
		    device_for(&cfg.links[i], uro_link_id(path, &cfg.links[i]), i);

		if (d)
			list[n++] = &d->ibdev;
	}
	pthread_mutex_unlock(&devices_lock);
	if (num_devices)
		*num_devices = n;
	return list;
}

URO_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

URO_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

URO_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	struct uro_device *d = (struct uro_device *)device;
	struct uro_device_model m;

	uro_device_model_build(&d->link, &m);
	return __builtin_bswap64(m.node_guid);
}

URO_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	return ((struct uro_device *)device)->index;
}

__attribute__((destructor)) static void free_devices(void)
{
	while (devices) {
		struct uro_device *next = devices->next;

		free(devices);
		devices = next;
	}
}

/* Default versions beside the IBVERBS_1.0 compat ones (compat_1_0.c). */
URO_DEFAULT_VERSION(ibv_free_device_list);
URO_DEFAULT_VERSION(ibv_get_device_guid);
URO_DEFAULT_VERSION(ibv_get_device_list);
URO_DEFAULT_VERSION(ibv_get_device_name);
