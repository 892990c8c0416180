/* Shared receive queues: ibv_create_srq(3), ibv_create_srq_ex(3),
 * ibv_modify_srq(3), ibv_query_srq(3), ibv_destroy_srq(3). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs_ops.h"
#include "recv_queue.h"

static size_t ring_bytes(const struct uro_seg_rq *rq)
{
	return (size_t)rq->size * rq->stride;
}

/* xrcd and cq: an XRC SRQ's domain and CQ, NULL for a basic SRQ. */
static struct ibv_srq *srq_create(struct ibv_pd *pd, void *srq_context, struct ibv_srq_attr *a,
				  struct uro_xrcd *xrcd, struct uro_cq *cq)
{
	struct uro_context *ctx;
	struct uro_srq *srq;
	int64_t index;

	if (!pd || a->max_wr < 1 || a->max_wr > URO_MAX_SRQ_WR || a->max_sge > URO_MAX_SGE)
		return uro_fail_null(EINVAL);
	ctx = to_uctx(pd->context);
	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return uro_fail_null(ENOMEM);
	uro_lock(ctx);
	index = uro_index_take(&ctx->seg.srq_ids);
	if (index < 0) {
		uro_unlock(ctx);
		free(srq);
		return uro_fail_null(ENOMEM);
	}
	srq->index = (uint32_t)index;
	srq->pd = to_upd(pd);
	srq->pub = &ctx->self.srq[index];
	memset(srq->pub, 0, sizeof(*srq->pub));
	srq->pub->pd = pd->handle;
	srq->pub->token = (uintptr_t)&srq->ibsrq;
	srq->pub->serial = uro_next_serial(ctx);
	if (xrcd)
		srq->pub->xrcd = xrcd->id;
	srq->pub->cq = cq ? cq->index : URO_MAX_CQ;
	srq->pub->rq.size = a->max_wr;
	srq->pub->rq.max_sge = a->max_sge;
	srq->pub->rq.stride = uro_rq_stride(a->max_sge);
	srq->pub->rq.ring = uro_arena_alloc(&ctx->seg, ring_bytes(&srq->pub->rq));
	if (!srq->pub->rq.ring) {
		uro_index_give(&ctx->seg.srq_ids, srq->index);
		uro_unlock(ctx);
		free(srq);
		return uro_fail_null(ENOMEM);
	}
	__atomic_store_n(&srq->pub->in_use, 1, __ATOMIC_RELEASE);
	srq->pd->users++;
	srq->xrcd = xrcd;
	srq->cq = cq;
	if (xrcd) {
		xrcd->users++;
		cq->users++;
	}
	uro_unlock(ctx);
	/* srq_limit is not an input of creation (ibv_create_srq(3)): the SRQ
	 * starts unarmed. */
	a->srq_limit = 0;
	srq->ibsrq.context = pd->context;
	srq->ibsrq.srq_context = srq_context;
	srq->ibsrq.pd = pd;
	srq->ibsrq.handle = srq->index;
	pthread_mutex_init(&srq->ibsrq.mutex, NULL);
	pthread_cond_init(&srq->ibsrq.cond, NULL);
	pthread_spin_init(&srq->rq_lock, PTHREAD_PROCESS_PRIVATE);
	return &srq->ibsrq;
}

URO_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	return srq_create(pd, attr->srq_context, &attr->attr, NULL, NULL);
}

/* An XRC SRQ (ibv_create_srq_ex(3)) names its domain and its CQ: its
 * receives complete there, whichever XRC target QP they came through. */
struct ibv_srq *uro_create_srq_ex(struct ibv_context *c, struct ibv_srq_init_attr_ex *ax)
{
	const uint32_t known = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			       IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	enum ibv_srq_type type =
	    (ax->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? ax->srq_type : IBV_SRQT_BASIC;

	if (!(ax->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !ax->pd || ax->pd->context != c)
		return uro_fail_null(EINVAL);
	/* Tag-matching SRQs are not implemented. */
	if ((ax->comp_mask & ~known) || type == IBV_SRQT_TM)
		return uro_fail_null(EOPNOTSUPP);
	if (type == IBV_SRQT_BASIC)
		return srq_create(ax->pd, ax->srq_context, &ax->attr, NULL, NULL);
	if (type != IBV_SRQT_XRC || !(ax->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) ||
	    !(ax->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !ax->xrcd || !ax->cq ||
	    ax->xrcd->context != c || ax->cq->context != c)
		return uro_fail_null(EINVAL);
	return srq_create(ax->pd, ax->srq_context, &ax->attr, to_uxrcd(ax->xrcd), to_ucq(ax->cq));
}

/* An SRQ's number names its process and index as a QPN does, so that an
 * XRC request finds it from any process of the host. */
int uro_get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num)
{
	struct uro_context *ctx = to_uctx(ibsrq->context);

	*srq_num = (ctx->slot.slot << URO_QPN_INDEX_BITS) | to_usrq(ibsrq)->index;
	return 0;
}

URO_EXPORT int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	struct uro_srq *srq = to_usrq(ibsrq);
	struct uro_context *ctx = to_uctx(ibsrq->context);

	/* Resizing needs IBV_DEVICE_SRQ_RESIZE, which uroce does not claim. */
	if (mask & ~IBV_SRQ_LIMIT || (mask & IBV_SRQ_MAX_WR))
		return EINVAL;
	if ((mask & IBV_SRQ_LIMIT) && attr->srq_limit > srq->pub->rq.size)
		return EINVAL;
	uro_lock(ctx);
	if (mask & IBV_SRQ_LIMIT)
		__atomic_store_n(&srq->pub->rq.limit, attr->srq_limit, __ATOMIC_RELEASE);
	uro_unlock(ctx);
	return 0;
}

URO_EXPORT int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct uro_srq *srq = to_usrq(ibsrq);

	attr->max_wr = srq->pub->rq.size;
	attr->max_sge = srq->pub->rq.max_sge;
	attr->srq_limit = __atomic_load_n(&srq->pub->rq.limit, __ATOMIC_ACQUIRE);
	return 0;
}

URO_EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct uro_srq *srq = to_usrq(ibsrq);
	struct uro_context *ctx = to_uctx(ibsrq->context);

	uro_lock(ctx);
	if (srq->users) {
		uro_unlock(ctx);
		return EBUSY;
	}
	uro_unlock(ctx);
	uro_forget_events(ctx, &srq->pub->serial);
	uro_wait_acked(&ibsrq->mutex, &ibsrq->cond, &ibsrq->events_completed, &srq->events);
	uro_lock(ctx);
	__atomic_store_n(&srq->pub->in_use, 0, __ATOMIC_RELEASE);
	uro_arena_free(&ctx->seg, srq->pub->rq.ring, ring_bytes(&srq->pub->rq));
	srq->pd->users--;
	if (srq->xrcd) {
		srq->xrcd->users--;
		srq->cq->users--;
	}
	uro_index_give(&ctx->seg.srq_ids, srq->index);
	uro_unlock(ctx);
	pthread_cond_destroy(&ibsrq->cond);
	pthread_mutex_destroy(&ibsrq->mutex);
	pthread_spin_destroy(&srq->rq_lock);
	free(srq);
	return 0;
}

/* Default versions beside the IBVERBS_1.0 compat ones (compat_1_0.c). */
URO_DEFAULT_VERSION(ibv_create_srq);
URO_DEFAULT_VERSION(ibv_destroy_srq);
URO_DEFAULT_VERSION(ibv_modify_srq);
URO_DEFAULT_VERSION(ibv_query_srq);
