/* Multicast groups: ibv_attach_mcast(3), ibv_detach_mcast(3). A UD QP
 * joins a group by an entry in its context's segment (segment_layout.h);
 * a datagram sent to the group's GID and QPN 0xFFFFFF reaches every QP of
 * the host attached to it on the same device (datagram.c), and the group is
 * joined on the link's netdev for the members on other hosts
 * (wire_mcast.c), as a RoCE NIC's multicast reaches the members on its
 * Ethernet segment. The LID is not
 * used: RoCE has none (IBTA A17.4.3). */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "log.h"
#include "verbs_ops.h"
#include "wire.h"

static struct uro_seg_mcast *find(struct uro_context *ctx, uint32_t qpn, const union ibv_gid *gid)
{
	for (unsigned i = 0; i < URO_MAX_MCAST_ATTACH; i++) {
		struct uro_seg_mcast *m = &ctx->self.mcast[i];

		if (m->in_use && m->qpn == qpn && (!gid || !memcmp(&m->mgid, gid, sizeof(*gid))))
			return m;
	}
	return NULL;
}

/* This context's attachments to gid. */
static unsigned attachments(struct uro_context *ctx, const union ibv_gid *gid)
{
	unsigned n = 0;

	for (unsigned i = 0; i < URO_MAX_MCAST_ATTACH; i++)
		n += ctx->self.mcast[i].in_use &&
		     !memcmp(&ctx->self.mcast[i].mgid, gid, sizeof(*gid));
	return n;
}

/* The group's first attachment in this process joins it on the link's
 * netdev for the members on other hosts (wire_mcast.c). A refusal leaves
 * the QP attached for this host's members, and is said. */
static void join_wire(struct uro_context *ctx, const union ibv_gid *gid)
{
	char text[INET6_ADDRSTRLEN];
	int err = uro_wire_mcast_join(ctx, gid);

	if (!err)
		return;
	inet_ntop(AF_INET6, gid->raw, text, sizeof(text));
	uro_warn("device %s: cannot join multicast group %s on %s: %s; only this host's members "
		 "hear it",
		 ctx->dev->ibdev.name, text, ctx->model.netdev.name, strerror(err));
}

int uro_qp_in_mcast_group(struct uro_context *ctx, uint32_t qpn)
{
	return find(ctx, qpn, NULL) != NULL;
}

URO_EXPORT int ibv_attach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid)
{
	struct uro_context *ctx = to_uctx(ibqp->context);
	struct uro_seg_mcast *free_entry = NULL;
	int rc = 0, first = 0;

	(void)lid;
	if (ibqp->qp_type != IBV_QPT_UD || !uro_gid_is_multicast(gid))
		return EINVAL;
	uro_lock(ctx);
	/* Attaching twice is one attachment, as the kernel's uverbs keeps it. */
	if (find(ctx, ibqp->qp_num, gid))
		goto out;
	for (unsigned i = 0; i < URO_MAX_MCAST_ATTACH && !free_entry; i++)
		if (!ctx->self.mcast[i].in_use)
			free_entry = &ctx->self.mcast[i];
	if (!free_entry) {
		rc = ENOMEM;
		goto out;
	}
	first = !attachments(ctx, gid);
	free_entry->qpn = ibqp->qp_num;
	free_entry->mgid = *gid;
	/* Published last: a sender scanning the table sees a whole entry. */
	__atomic_store_n(&free_entry->in_use, 1, __ATOMIC_RELEASE);
out:
	uro_unlock(ctx);
	if (first && uro_wire_mcast_carried(ctx))
		join_wire(ctx, gid);
	return rc;
}

URO_EXPORT int ibv_detach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid)
{
	struct uro_context *ctx = to_uctx(ibqp->context);
	struct uro_seg_mcast *m;
	int last = 0;

	(void)lid;
	uro_lock(ctx);
	m = find(ctx, ibqp->qp_num, gid);
	if (m) {
		__atomic_store_n(&m->in_use, 0, __ATOMIC_RELEASE);
		last = !attachments(ctx, gid);
	}
	uro_unlock(ctx);
	if (last)
		uro_wire_mcast_leave(ctx, gid);
	return m ? 0 : EINVAL;
}

/* Default versions beside the IBVERBS_1.0 compat ones (compat_1_0.c). */
URO_DEFAULT_VERSION(ibv_attach_mcast);
URO_DEFAULT_VERSION(ibv_detach_mcast);
