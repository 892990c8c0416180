/* The synchronous endpoint API: rdma_create_ep(3), rdma_destroy_ep(3),
 * rdma_get_request(3). An endpoint is an id without a channel, so each
 * step waits for its event. */
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_verbs.h>

#include "cm.h"

/* A QP for the id, on the caller's PD or the device's default one. */
static int ep_qp(struct rdma_cm_id *id, struct ibv_pd *pd, const struct ibv_qp_init_attr *a)
{
	struct ibv_qp_init_attr copy = *a;

	return rdma_create_qp(id, pd, &copy);
}

URO_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
			      struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cid;
	struct uro_cm_id *cm;

	if (!id || !res)
		return uro_cm_err(EINVAL);
	if (rdma_create_id(NULL, &cid, NULL, (enum rdma_port_space)res->ai_port_space))
		return -1;
	cm = to_cm(cid);
	cid->pd = pd;
	if (res->ai_qp_type)
		cid->qp_type = (enum ibv_qp_type)res->ai_qp_type;
	if (res->ai_flags & RAI_PASSIVE) {
		if (rdma_bind_addr(cid, res->ai_src_addr))
			goto fail;
		/* Each request's id gets a QP like this one (rdma_get_request). */
		if (qp_init_attr) {
			cm->ep_attr = malloc(sizeof(*cm->ep_attr));
			if (!cm->ep_attr)
				goto fail;
			*cm->ep_attr = *qp_init_attr;
		}
	} else {
		if (rdma_resolve_addr(cid, res->ai_src_addr, res->ai_dst_addr, 2000) ||
		    rdma_resolve_route(cid, 2000) || (qp_init_attr && ep_qp(cid, pd, qp_init_attr)))
			goto fail;
	}
	*id = cid;
	return 0;
fail:
	rdma_destroy_ep(cid);
	return -1;
}

URO_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	struct uro_cm_id *cm = to_cm(id);

	rdma_destroy_qp(id);
	rdma_destroy_srq(id);
	free(cm->ep_attr);
	rdma_destroy_id(id);
}

URO_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct uro_cm_id *l = to_cm(listen);
	struct rdma_cm_event *ev = NULL;
	struct rdma_cm_id *child;

	if (!l->sync || l->state != CM_LISTEN || !id)
		return uro_cm_err(EINVAL);
	if (uro_cm_wait_for(l, RDMA_CM_EVENT_CONNECT_REQUEST, &ev))
		return -1;
	child = ev->id; /* the request's own id, which keeps the event */
	child->pd = listen->pd;
	if (l->ep_attr && ep_qp(child, listen->pd, l->ep_attr)) {
		rdma_destroy_ep(child);
		return -1;
	}
	*id = child;
	return 0;
}
