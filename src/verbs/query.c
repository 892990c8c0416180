/* Device, port, GID and P_Key queries (ibv_query_device(3),
 * ibv_query_port(3), ibv_query_gid_ex(3), ibv_query_pkey(3)). The port is
 * the snapshot of its netdev taken when the context was opened, but for
 * its state, which is the netdev's now. */
#include <errno.h>
#include <string.h>

#include "verbs_ops.h"

#undef ibv_query_port

/* rdma-core's private enum ibv_gid_type_sysfs, which ibv_devinfo prints. */
enum { GID_TYPE_SYSFS_IB_ROCE_V1 = 0, GID_TYPE_SYSFS_ROCE_V2 = 1 };

URO_EXPORT int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *attr)
{
	uro_device_attr(&to_uctx(context)->model, attr);
	return 0;
}

int uro_query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
			struct ibv_device_attr_ex *attr, size_t len)
{
	struct ibv_device_attr_ex full;

	if (in && in->comp_mask)
		return EINVAL;
	if (len < sizeof(attr->orig_attr))
		return EINVAL;
	uro_device_attr_ex(&to_uctx(c)->model, &full);
	memcpy(attr, &full, len < sizeof(full) ? len : sizeof(full));
	return 0;
}

int uro_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *attr, size_t len)
{
	struct uro_context *ctx = to_uctx(c);
	struct ibv_port_attr full = ctx->model.port;
	const struct uro_seg_counters *cnt = &ctx->self.hdr->counters;

	if (port != 1)
		return EINVAL;
	/* The port's state is its netdev's now, as a Soft-RoCE port's is;
	 * the port events (port_watch.c) tell of each change. */
	uro_port_set_running(&full, uro_netdev_running(ctx->model.link.netdev));
	full.bad_pkey_cntr = (uint32_t)cnt->bad_pkey;
	full.qkey_viol_cntr = (uint32_t)cnt->qkey_violations;
	memset(attr, 0, len);
	memcpy(attr, &full, len < sizeof(full) ? len : sizeof(full));
	return 0;
}

/* The IBVERBS_1.1 entry point that the header's ibv_query_port() falls back
 * to: its struct ends before port_cap_flags2. */
URO_EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port,
			      struct _compat_ibv_port_attr *attr)
{
	return uro_query_port(context, port, (struct ibv_port_attr *)attr,
			      offsetof(struct ibv_port_attr, port_cap_flags2));
}

static const struct uro_gid *gid_at(struct ibv_context *c, uint32_t port, uint32_t index, int *err)
{
	struct uro_context *ctx = to_uctx(c);

	*err = 0;
	if (port != 1 || index >= (uint32_t)ctx->model.port.gid_tbl_len) {
		*err = EINVAL;
		return NULL;
	}
	if ((int)index >= ctx->model.ngids) {
		*err = ENODATA; /* an empty entry of the table */
		ctx->empty_gid_read = (int)index + 1;
		return NULL;
	}
	return &ctx->model.gids[index];
}

URO_EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port, int index,
			     union ibv_gid *gid)
{
	int err;
	const struct uro_gid *g = index < 0 ? NULL : gid_at(context, port, (uint32_t)index, &err);

	if (index < 0 || err == EINVAL) {
		errno = EINVAL;
		return -1;
	}
	if (g)
		*gid = g->gid;
	else
		memset(gid, 0, sizeof(*gid));
	return 0;
}

static void fill_entry(struct ibv_context *c, uint32_t index, const struct uro_gid *g,
		       struct ibv_gid_entry *e)
{
	memset(e, 0, sizeof(*e));
	e->gid = g->gid;
	e->gid_index = index;
	e->port_num = 1;
	e->gid_type = g->type;
	e->ndev_ifindex = to_uctx(c)->model.netdev.ifindex;
}

URO_EXPORT int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port, uint32_t index,
				 struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
	struct ibv_gid_entry e;
	int err;
	const struct uro_gid *g;

	if (flags || entry_size < sizeof(e))
		return EINVAL;
	g = gid_at(context, port, index, &err);
	if (!g)
		return err;
	fill_entry(context, index, g, &e);
	memcpy(entry, &e, sizeof(e));
	return 0;
}

URO_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries,
					size_t max_entries, uint32_t flags, size_t entry_size)
{
	struct uro_context *ctx = to_uctx(context);

	if (flags || entry_size < sizeof(*entries))
		return -EINVAL;
	if ((size_t)ctx->model.ngids > max_entries)
		return -EINVAL;
	for (int i = 0; i < ctx->model.ngids; i++)
		fill_entry(context, (uint32_t)i, &ctx->model.gids[i],
			   (struct ibv_gid_entry *)((char *)entries + (size_t)i * entry_size));
	return ctx->model.ngids;
}

URO_EXPORT int ibv_query_gid_type(struct ibv_context *context, uint8_t port, unsigned int index,
				  int *type)
{
	int err;
	const struct uro_gid *g = gid_at(context, port, index, &err);

	if (!g) {
		errno = err == ENODATA ? EINVAL : err;
		return -1;
	}
	*type =
	    g->type == IBV_GID_TYPE_ROCE_V2 ? GID_TYPE_SYSFS_ROCE_V2 : GID_TYPE_SYSFS_IB_ROCE_V1;
	return 0;
}

URO_EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port, int index, __be16 *pkey)
{
	(void)context;
	if (port != 1 || index < 0 || index >= URO_PKEY_TBL_LEN) {
		errno = EINVAL;
		return -1;
	}
	*pkey = __builtin_bswap16(URO_DEFAULT_PKEY);
	return 0;
}

URO_EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port, __be16 pkey)
{
	for (int i = 0; i < URO_PKEY_TBL_LEN; i++) {
		__be16 p;

		if (ibv_query_pkey(context, port, i, &p))
			return -1;
		if (p == pkey)
			return i;
	}
	errno = ENOENT;
	return -1;
}

/* Default versions beside the IBVERBS_1.0 compat ones (compat_1_0.c). */
URO_DEFAULT_VERSION(ibv_query_device);
URO_DEFAULT_VERSION(ibv_query_gid);
URO_DEFAULT_VERSION(ibv_query_pkey);
URO_DEFAULT_VERSION(ibv_query_port);
