#include "cq_ring.h"

#include <string.h>

int uro_cq_produce(struct uro_seg_cq *cq, struct uro_cqe *ring, uint32_t size,
		   const struct uro_cqe *e)
{
	uint32_t t = __atomic_load_n(&cq->tail, __ATOMIC_RELAXED);
	struct uro_cqe *slot;

	do {
		uint32_t h = __atomic_load_n(&cq->head, __ATOMIC_ACQUIRE);

		if (t - h >= size)
			return -1;
	} while (!__atomic_compare_exchange_n(&cq->tail, &t, t + 1, 0, __ATOMIC_ACQ_REL,
					      __ATOMIC_RELAXED));
	slot = &ring[t % size];
	memcpy(slot, e, offsetof(struct uro_cqe, seq));
	/* The second line only when it carries something. */
	if (e->staged_len) {
		slot->staged_lkey = e->staged_lkey;
		slot->staged_addr = e->staged_addr;
		memcpy(slot->staged, e->staged, e->staged_len);
	}
	__atomic_store_n(&slot->seq, t + 1, __ATOMIC_RELEASE);
	return 0;
}

struct uro_cqe *uro_cq_peek(struct uro_seg_cq *cq, struct uro_cqe *ring)
{
	struct uro_cqe *e = &ring[cq->head % cq->size];

	return __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) == cq->head + 1 ? e : NULL;
}

void uro_cq_consume(struct uro_seg_cq *cq)
{
	__atomic_store_n(&cq->head, cq->head + 1, __ATOMIC_RELEASE);
}

uint32_t uro_cq_pending(const struct uro_seg_cq *cq)
{
	return __atomic_load_n(&cq->tail, __ATOMIC_ACQUIRE) -
	       __atomic_load_n(&cq->head, __ATOMIC_ACQUIRE);
}

int uro_cq_take_arm(struct uro_seg_cq *cq, int solicited)
{
	uint32_t armed;

	/* The entry just published must be visible before the arm is read
	 * (a store then a load: only a full fence orders them; ibv_req_notify_cq
	 * pairs with it). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	armed = __atomic_load_n(&cq->armed, __ATOMIC_ACQUIRE);

	/* armed 1 fires on any completion, 2 only on a solicited one or an
	 * error (IBTA 11.4.2.2); the CAS makes exactly one producer fire. */
	while (armed == 1 || (armed == 2 && solicited))
		if (__atomic_compare_exchange_n(&cq->armed, &armed, 0, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			return 1;
	return 0;
}
