/* Shared receive queues: ibv_create_srq(3), ibv_create_srq_ex(3),
 * ibv_modify_srq(3), ibv_query_srq(3), ibv_destroy_srq(3). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "objects.h"
#include "recv_queue.h"

static size_t ring_bytes(const struct uro_seg_rq *rq)
{
	return (size_t)rq->size * rq->stride;
}

static struct ibv_srq *srq_create(struct ibv_pd *pd, void *srq_context, struct ibv_srq_attr *a)
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
	return srq_create(pd, attr->srq_context, &attr->attr);
}

struct ibv_srq *uro_create_srq_ex(struct ibv_context *c, struct ibv_srq_init_attr_ex *ax)
{
	const uint32_t basic = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;

	if (!(ax->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !ax->pd || ax->pd->context != c)
		return uro_fail_null(EINVAL);
	/* XRC and tag-matching SRQs are not implemented. */
	if ((ax->comp_mask & ~basic) ||
	    ((ax->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && ax->srq_type != IBV_SRQT_BASIC))
		return uro_fail_null(EOPNOTSUPP);
	return srq_create(ax->pd, ax->srq_context, &ax->attr);
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
