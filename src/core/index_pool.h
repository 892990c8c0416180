/* A pool of small integer ids, O(1) take and give back. Table slots in the
 * segment and key indexes come from here. */
#ifndef URO_INDEX_POOL_H
#define URO_INDEX_POOL_H

#include <stdint.h>

/* Which free id is taken next: the one given back last (its table entry
 * is warm), or the one given back longest ago. A QP's number is its
 * index: a packet still on its way to a destroyed QP (a retransmission,
 * one a busy relay held) must not find a new QP under the same number
 * with the same start PSN, so QP and SRQ numbers come back last, after
 * every other free one, as Soft-RoCE's come cyclically (rxe_pool.c,
 * xa_alloc_cyclic). A memory key carries a generation of its own. */
enum uro_index_reuse { URO_REUSE_FIRST, URO_REUSE_LAST };

struct uro_index_pool {
	uint32_t *free; /* a ring: nfree ids from head on */
	uint32_t head;
	uint32_t nfree;
	uint32_t capacity;
	enum uro_index_reuse reuse;
};

int uro_index_pool_init(struct uro_index_pool *p, uint32_t capacity, enum uro_index_reuse reuse);
void uro_index_pool_fini(struct uro_index_pool *p);
/* -1 when the pool is empty. */
int64_t uro_index_take(struct uro_index_pool *p);
void uro_index_give(struct uro_index_pool *p, uint32_t id);

#endif
