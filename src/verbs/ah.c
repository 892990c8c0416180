/* Address handles: ibv_create_ah(3), ibv_destroy_ah(3),
 * ibv_init_ah_from_wc(3), ibv_create_ah_from_wc(3). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "verbs_ops.h"
#include "own_address.h"
#include "wire.h"

/* Which indexes hold GIDs, for a message: the table is filled from 0. */
static void gid_indexes(const struct uro_context *ctx, char *buf, size_t len)
{
	int n = ctx->model.ngids;

	if (n == 0)
		snprintf(buf, len, "the port has no GID: netdev %s has no IP address",
			 ctx->model.link.netdev);
	else if (n == 1)
		snprintf(buf, len, "the port's only GID is index 0");
	else
		snprintf(buf, len, "the port's GIDs are indexes 0 to %d", n - 1);
}

/* rdma-core's examples read the GID their -g names and set a GRH only when
 * it is not zero: given an empty slot they build an address without one,
 * so the index to blame is the one they read, not the GRH they left out. */
static void no_grh_hint(const struct uro_context *ctx)
{
	const char *dev = ctx->dev->link.name;
	char have[64];

	gid_indexes(ctx, have, sizeof(have));
	if (ctx->empty_gid_read)
		uro_warn("%s is a RoCE port: an address needs a GRH, and the GID index this "
			 "program read, %d, is empty (%s): with rdma-core's examples, pass "
			 "-g 0",
			 dev, ctx->empty_gid_read - 1, have);
	else
		uro_warn("%s is a RoCE port: an address needs a GRH (is_global=1 and a GID "
			 "index; %s): with rdma-core's examples, pass -g 0",
			 dev, have);
}

int uro_ah_attr_check(struct uro_context *ctx, const struct ibv_ah_attr *ah)
{
	const char *dev = ctx->dev->link.name;

	if (ah->port_num != 1) {
		uro_debug("%s: address uses port %u; the device has port 1 only", dev,
			  ah->port_num);
		return EINVAL;
	}
	/* A RoCE packet always carries a GRH (IBTA Annex A16/A17): RoCE NICs
	 * refuse an address without one, and so does uroce. */
	if (ctx->model.link.type == URO_LINK_ROCE && !ah->is_global) {
		no_grh_hint(ctx);
		return EINVAL;
	}
	if (ah->is_global && ah->grh.sgid_index >= ctx->model.ngids) {
		char have[64];

		gid_indexes(ctx, have, sizeof(have));
		uro_warn("%s: sgid_index %u is an empty GID slot; %s", dev, ah->grh.sgid_index,
			 have);
		return EINVAL;
	}
	if (ctx->model.link.type == URO_LINK_IB && !ah->is_global && ah->dlid == 0) {
		uro_debug("%s: an address without a GRH needs a DLID", dev);
		return EINVAL;
	}
	return 0;
}

URO_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct uro_context *ctx;
	struct uro_ah *ah;
	int err;

	if (!pd)
		return uro_fail_null(EINVAL);
	ctx = to_uctx(pd->context);
	err = uro_ah_attr_check(ctx, attr);
	if (err)
		return uro_fail_null(err);
	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return uro_fail_null(ENOMEM);
	ah->attr = *attr;
	/* Decided once here, not per datagram (wire_qp.c). */
	ah->wire = attr->is_global && !uro_gid_is_multicast(&attr->grh.dgid) &&
		   uro_wire_gid_is_remote(ctx, &attr->grh.dgid);
	ah->own = attr->is_global && uro_gid_is_own(&attr->grh.dgid);
	ah->pd = to_upd(pd);
	ah->ibah.context = pd->context;
	ah->ibah.pd = pd;
	uro_lock(ctx);
	if (ctx->ahs == URO_MAX_AH) {
		uro_unlock(ctx);
		free(ah);
		return uro_fail_null(ENOMEM);
	}
	ctx->ahs++;
	ah->ibah.handle = ++ctx->next_handle;
	ah->pd->users++;
	uro_unlock(ctx);
	return &ah->ibah;
}

URO_EXPORT int ibv_destroy_ah(struct ibv_ah *ibah)
{
	struct uro_ah *ah = uro_container_of(ibah, struct uro_ah, ibah);
	struct uro_context *ctx = to_uctx(ibah->context);

	uro_lock(ctx);
	ah->pd->users--;
	ctx->ahs--;
	uro_unlock(ctx);
	free(ah);
	return 0;
}

/* The 40-byte GRH area of a UD receive holds an IPv6 GRH, or for a RoCEv2
 * packet over IPv4 the IPv4 header in its last 20 bytes (IBTA A17.4.5.2). */
static void grh_gids(const struct ibv_grh *grh, union ibv_gid *sgid, union ibv_gid *dgid,
		     uint32_t *flow, uint8_t *tclass)
{
	const uint8_t *raw = (const uint8_t *)grh;
	const uint8_t *ip4 = raw + 20;

	if ((ip4[0] >> 4) == 4 && (raw[0] >> 4) != 6) {
		uro_gid_from_ip(sgid, AF_INET, ip4 + 12);
		uro_gid_from_ip(dgid, AF_INET, ip4 + 16);
		*flow = 0;
		*tclass = ip4[1];
		return;
	}
	*sgid = grh->sgid;
	*dgid = grh->dgid;
	*flow = ntohl(grh->version_tclass_flow) & 0xfffff;
	*tclass = (uint8_t)(ntohl(grh->version_tclass_flow) >> 20);
}

URO_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc,
				   struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)
{
	struct uro_context *ctx = to_uctx(context);
	union ibv_gid sgid, dgid;
	uint32_t flow;
	uint8_t tclass;
	int index;

	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	if (!(wc->wc_flags & IBV_WC_GRH))
		return 0;
	if (!grh) {
		errno = EINVAL;
		return -1;
	}
	grh_gids(grh, &sgid, &dgid, &flow, &tclass);
	/* The reply goes back from the GID the request was sent to. */
	index = uro_gid_find(&ctx->model, &dgid);
	if (index < 0) {
		errno = ENOENT;
		return -1;
	}
	ah_attr->is_global = 1;
	ah_attr->grh.dgid = sgid;
	ah_attr->grh.sgid_index = (uint8_t)index;
	ah_attr->grh.flow_label = flow;
	ah_attr->grh.traffic_class = tclass;
	ah_attr->grh.hop_limit = 0xff;
	return 0;
}

URO_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
						struct ibv_grh *grh, uint8_t port_num)
{
	struct ibv_ah_attr attr;

	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr))
		return NULL;
	return ibv_create_ah(pd, &attr);
}

/* Default versions beside the IBVERBS_1.0 compat ones (compat_1_0.c). */
URO_DEFAULT_VERSION(ibv_create_ah);
URO_DEFAULT_VERSION(ibv_destroy_ah);
