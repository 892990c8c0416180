#include "cq_ring.h"

#include <sched.h>
#include <string.h>
#include <time.h>

uint64_t uro_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t uro_coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t distance(uint32_t from, uint32_t to)
{
	return (to - from) & URO_CQ_POS_MASK;
}

/* The ring is frozen: wait for it to thaw, a bounded time. Returns the
 * tail then, or URO_CQ_FROZEN when it stayed frozen. */
static __attribute__((noinline)) uint32_t wait_thaw(struct uro_seg_cq *cq)
{
	uint64_t start = uro_now_ns();
	uint32_t t;

	while ((t = __atomic_load_n(&cq->tail, __ATOMIC_ACQUIRE)) & URO_CQ_FROZEN) {
		if (uro_now_ns() - start > URO_CQ_WAIT_NS)
			return URO_CQ_FROZEN;
		sched_yield();
	}
	return t;
}

int uro_cq_reserve(struct uro_seg_cq *cq, uint32_t *pos)
{
	uint32_t t = __atomic_load_n(&cq->tail, __ATOMIC_ACQUIRE);
	uint32_t size = __atomic_load_n(&cq->size, __ATOMIC_RELAXED);

	for (;;) {
		if (__builtin_expect(t & URO_CQ_FROZEN, 0)) {
			t = wait_thaw(cq);
			if (t & URO_CQ_FROZEN)
				return URO_CQ_BUSY;
			size = __atomic_load_n(&cq->size, __ATOMIC_RELAXED);
		}
		if (distance(__atomic_load_n(&cq->head, __ATOMIC_ACQUIRE), t) >= size) {
			/* The head was read after t: other producers and the
			 * consumer may have moved both past t since. Only a
			 * tail that has not moved makes the ring full. */
			uint32_t now = __atomic_load_n(&cq->tail, __ATOMIC_ACQUIRE);

			if (now == t)
				return URO_CQ_FULL;
			t = now;
			continue;
		}
		if (__atomic_compare_exchange_n(&cq->tail, &t, (t + 1) & URO_CQ_POS_MASK, 0,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			*pos = t;
			return 0;
		}
	}
}

void uro_cq_publish(struct uro_cqe *ring, uint32_t size, uint32_t pos, const struct uro_cqe *e)
{
	struct uro_cqe *slot = &ring[pos % size];

	memcpy(slot, e, offsetof(struct uro_cqe, seq));
	/* The second line only when it carries something. */
	if (e->staged_len) {
		slot->staged_lkey = e->staged_lkey;
		slot->staged_addr = e->staged_addr;
		memcpy(slot->staged, e->staged, e->staged_len);
	}
	__atomic_store_n(&slot->seq, pos + 1, __ATOMIC_RELEASE);
}

struct uro_cqe *uro_cq_peek(struct uro_seg_cq *cq, struct uro_cqe *ring)
{
	struct uro_cqe *e = &ring[cq->head % cq->size];

	return __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) == cq->head + 1 ? e : NULL;
}

void uro_cq_consume(struct uro_seg_cq *cq)
{
	__atomic_store_n(&cq->head, (cq->head + 1) & URO_CQ_POS_MASK, __ATOMIC_RELEASE);
}

uint32_t uro_cq_pending(const struct uro_seg_cq *cq)
{
	return distance(__atomic_load_n(&cq->head, __ATOMIC_ACQUIRE),
			__atomic_load_n(&cq->tail, __ATOMIC_ACQUIRE) & URO_CQ_POS_MASK);
}

uint32_t uro_cq_freeze(struct uro_seg_cq *cq, const struct uro_cqe *ring, int *all_published)
{
	uint32_t tail = __atomic_fetch_or(&cq->tail, URO_CQ_FROZEN, __ATOMIC_ACQ_REL);
	uint64_t start = uro_now_ns();

	*all_published = 1;
	for (uint32_t p = cq->head; p != tail; p = (p + 1) & URO_CQ_POS_MASK) {
		const struct uro_cqe *e = &ring[p % cq->size];

		while (__atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) != p + 1) {
			if (uro_now_ns() - start > URO_CQ_WAIT_NS) {
				*all_published = 0;
				break;
			}
			sched_yield();
		}
	}
	return tail;
}

void uro_cq_thaw(struct uro_seg_cq *cq, uint32_t tail)
{
	__atomic_store_n(&cq->tail, tail & URO_CQ_POS_MASK, __ATOMIC_RELEASE);
}

/* armed 1 fires on any completion, 2 only on a solicited one or an error
 * (IBTA 11.4.2.2). */
static int arm_fires(uint32_t armed, int solicited)
{
	return armed == 1 || (armed == 2 && solicited);
}

int uro_cq_would_wake(const struct uro_seg_cq *cq, int solicited)
{
	return __atomic_load_n(&cq->channel_wfd, __ATOMIC_RELAXED) >= 0 &&
	       arm_fires(__atomic_load_n(&cq->armed, __ATOMIC_ACQUIRE), solicited);
}

int uro_cq_take_arm(struct uro_seg_cq *cq, int solicited)
{
	uint32_t armed;

	/* The entry just published must be visible before the arm is read
	 * (a store then a load: only a full fence orders them; ibv_req_notify_cq
	 * pairs with it). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	armed = __atomic_load_n(&cq->armed, __ATOMIC_ACQUIRE);

	/* The CAS makes exactly one producer fire. */
	while (arm_fires(armed, solicited))
		if (__atomic_compare_exchange_n(&cq->armed, &armed, 0, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			return 1;
	return 0;
}
