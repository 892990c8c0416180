/* A pool of small integer ids, O(1) take and give back. Table slots in the
 * segment and key indexes come from here. */
#ifndef URO_INDEX_POOL_H
#define URO_INDEX_POOL_H

#include <stdint.h>

struct uro_index_pool {
	uint32_t *free;
	uint32_t nfree;
	uint32_t capacity;
};

int uro_index_pool_init(struct uro_index_pool *p, uint32_t capacity);
void uro_index_pool_fini(struct uro_index_pool *p);
/* -1 when the pool is empty. */
int64_t uro_index_take(struct uro_index_pool *p);
void uro_index_give(struct uro_index_pool *p, uint32_t id);

#endif
