#include "index_pool.h"

#include <stdlib.h>

int uro_index_pool_init(struct uro_index_pool *p, uint32_t capacity, enum uro_index_reuse reuse)
{
	p->free = malloc(capacity * sizeof(*p->free));
	if (!p->free)
		return -1;
	p->capacity = capacity;
	p->nfree = capacity;
	p->head = 0;
	p->reuse = reuse;
	/* 0, 1, 2 ... first: QPNs read naturally. */
	for (uint32_t i = 0; i < capacity; i++)
		p->free[i] = i;
	return 0;
}

void uro_index_pool_fini(struct uro_index_pool *p)
{
	free(p->free);
	p->free = NULL;
	p->nfree = 0;
}

int64_t uro_index_take(struct uro_index_pool *p)
{
	uint32_t id;

	if (!p->nfree)
		return -1;
	id = p->free[p->head];
	p->head = (p->head + 1) % p->capacity;
	p->nfree--;
	return id;
}

void uro_index_give(struct uro_index_pool *p, uint32_t id)
{
	if (p->nfree >= p->capacity)
		return;
	if (p->reuse == URO_REUSE_LAST) {
		p->free[(p->head + p->nfree++) % p->capacity] = id;
		return;
	}
	p->head = (p->head + p->capacity - 1) % p->capacity;
	p->free[p->head] = id;
	p->nfree++;
}
