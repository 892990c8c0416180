#include "recv_queue.h"

#include <string.h>

uint32_t uro_rq_stride(uint32_t max_sge)
{
	size_t bytes =
	    sizeof(struct uro_recv_wqe) + (max_sge ? max_sge : 1) * sizeof(struct ibv_sge);

	return (uint32_t)((bytes + 63) & ~(size_t)63);
}

uint32_t uro_rq_count(const struct uro_seg_rq *rq)
{
	/* The head first: read after the tail, it could have passed it. */
	uint32_t head = __atomic_load_n(&rq->head, __ATOMIC_ACQUIRE);

	return __atomic_load_n(&rq->tail, __ATOMIC_ACQUIRE) - head;
}

int uro_rq_post(struct uro_seg_rq *rq, uint8_t *ring, const struct ibv_recv_wr *wr)
{
	uint32_t t = rq->tail;
	struct uro_recv_wqe *e;

	if (t - __atomic_load_n(&rq->head, __ATOMIC_ACQUIRE) >= rq->size)
		return -1;
	e = (struct uro_recv_wqe *)(ring + (size_t)(t % rq->size) * rq->stride);
	e->wr_id = wr->wr_id;
	e->num_sge = (uint32_t)wr->num_sge;
	/* A receive without SGEs may carry a NULL list (one for a WRITE with
	 * immediate data, which places nothing through it). */
	if (wr->num_sge)
		memcpy(e->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(struct ibv_sge));
	__atomic_store_n(&rq->tail, t + 1, __ATOMIC_RELEASE);
	return 0;
}

int uro_rq_take(struct uro_seg_rq *rq, const struct uro_rq_view *v, struct uro_recv *out)
{
	uint32_t h = __atomic_load_n(&rq->head, __ATOMIC_ACQUIRE);

	for (;;) {
		const struct uro_recv_wqe *e;

		if (__atomic_load_n(&rq->tail, __ATOMIC_ACQUIRE) == h)
			return -1;
		/* The owner cannot reuse entry h until head has passed it, so
		 * the copy is good if the CAS below succeeds. */
		e = (const struct uro_recv_wqe *)(v->ring + (size_t)(h % v->size) * v->stride);
		out->wr_id = e->wr_id;
		out->num_sge = e->num_sge <= v->max_sge ? e->num_sge : v->max_sge;
		memcpy(out->sge, e->sge, out->num_sge * sizeof(struct ibv_sge));
		if (__atomic_compare_exchange_n(&rq->head, &h, h + 1, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			return 0;
	}
}
