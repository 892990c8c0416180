/* Multicast groups: rdma_join_multicast(3), rdma_join_multicast_ex(3),
 * rdma_leave_multicast(3). A RoCE group is named by its IP multicast
 * address; its MGID is that address as a GID (IBTA A17.2), and joining
 * needs no subnet manager: the id's QP, if it has one, is attached at once
 * and the MULTICAST_JOIN event says how to send to the group. */
#include <stdlib.h>
#include <string.h>

#include "cm.h"
#include "device_model.h"

struct uro_cm_mcast {
	struct sockaddr_storage addr;
	union ibv_gid mgid;
	int attached; /* the id's QP is in the group (not send-only) */
	struct uro_cm_mcast *next;
};

static int same_group(const struct sockaddr *a, const struct sockaddr_storage *b)
{
	union ibv_gid ga, gb;

	uro_cm_addr_gid(a, &ga);
	uro_cm_addr_gid((const struct sockaddr *)b, &gb);
	return a->sa_family == b->ss_family && !memcmp(&ga, &gb, sizeof(ga));
}

/* The event that ends a join: the address vector of the group, its QPN
 * (0xFFFFFF, IBTA 10.5.2.1) and the port space's Q_Key; private_data is
 * the caller's context, as librdmacm passes it. */
static int post_joined(struct uro_cm_id *cm, const struct uro_cm_mcast *m, void *context)
{
	struct uro_cm_event *e = uro_cm_event_new(cm, RDMA_CM_EVENT_MULTICAST_JOIN, 0, NULL, 0);
	struct rdma_ud_param *ud;
	union ibv_gid sgid;

	if (!e)
		return uro_cm_err(ENOMEM);
	ud = &e->ev.param.ud;
	ud->private_data = context;
	ud->qp_num = 0xffffff;
	ud->qkey = URO_UDP_QKEY;
	ud->ah_attr.is_global = 1;
	ud->ah_attr.port_num = 1;
	ud->ah_attr.grh.dgid = m->mgid;
	ud->ah_attr.grh.hop_limit = 1; /* the link: uroce's groups are its host's */
	uro_cm_addr_gid(&cm->id.route.addr.src_addr, &sgid);
	ud->ah_attr.grh.sgid_index = (uint8_t)uro_cm_gid_index(cm->id.verbs, &sgid);
	uro_cm_queue(cm->chan, e);
	return uro_cm_wait(cm, RDMA_CM_EVENT_MULTICAST_JOIN);
}

static int join(struct rdma_cm_id *id, const struct sockaddr *addr, uint32_t flags, void *context)
{
	struct uro_cm_id *cm = to_cm(id);
	struct uro_cm_mcast *m;

	/* An id with a device (bound or resolved), for datagrams, and a
	 * multicast address; full members only, or send-only ones. */
	if (!id->verbs || id->qp_type != IBV_QPT_UD || !addr ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) ||
	    (flags != RDMA_MC_JOIN_FLAG_FULLMEMBER &&
	     flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER))
		return uro_cm_err(EINVAL);
	m = calloc(1, sizeof(*m));
	if (!m)
		return uro_cm_err(ENOMEM);
	memcpy(&m->addr, addr, sa_len(addr));
	uro_cm_addr_gid(addr, &m->mgid);
	if (!uro_gid_is_multicast(&m->mgid)) {
		free(m);
		return uro_cm_err(EINVAL);
	}
	/* A send-only member sends to the group and hears nothing from it. */
	if (id->qp && flags == RDMA_MC_JOIN_FLAG_FULLMEMBER) {
		int rc = ibv_attach_mcast(id->qp, &m->mgid, 0);

		if (rc) {
			free(m);
			return uro_cm_err(rc);
		}
		m->attached = 1;
	}
	pthread_mutex_lock(&cm->lock);
	m->next = cm->mcasts;
	cm->mcasts = m;
	pthread_mutex_unlock(&cm->lock);
	return post_joined(cm, m, context);
}

URO_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	return join(id, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

URO_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *mc,
				      void *context)
{
	uint32_t flags = RDMA_MC_JOIN_FLAG_FULLMEMBER;

	if (!mc || !(mc->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) ||
	    (mc->comp_mask &
	     ~(uint32_t)(RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS)))
		return uro_cm_err(EINVAL);
	if (mc->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS)
		flags = mc->join_flags;
	return join(id, mc->addr, flags, context);
}

static void forget(struct uro_cm_id *cm, struct uro_cm_mcast *m)
{
	if (m->attached && cm->id.qp)
		ibv_detach_mcast(cm->id.qp, &m->mgid, 0);
	free(m);
}

URO_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct uro_cm_id *cm = to_cm(id);
	struct uro_cm_mcast **link, *m = NULL;

	if (!addr)
		return uro_cm_err(EINVAL);
	pthread_mutex_lock(&cm->lock);
	for (link = &cm->mcasts; *link; link = &(*link)->next)
		if (same_group(addr, &(*link)->addr)) {
			m = *link;
			*link = m->next;
			break;
		}
	pthread_mutex_unlock(&cm->lock);
	if (!m)
		return uro_cm_err(EADDRNOTAVAIL);
	forget(cm, m);
	return 0;
}

void uro_cm_leave_all(struct uro_cm_id *cm)
{
	while (cm->mcasts) {
		struct uro_cm_mcast *m = cm->mcasts;

		cm->mcasts = m->next;
		forget(cm, m);
	}
}
