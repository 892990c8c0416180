#include "index_pool.h"

#include <stdlib.h>

int uro_index_pool_init(struct uro_index_pool *p, uint32_t capacity)
{
	p->free = malloc(capacity * sizeof(*p->free));
	if (!p->free)
		return -1;
	p->capacity = capacity;
	p->nfree = capacity;
	/* Stack order hands out 0, 1, 2 ... first: QPNs read naturally. */
	for (uint32_t i = 0; i < capacity; i++)
		p->free[i] = capacity - 1 - i;
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
	if (!p->nfree)
		return -1;
	return p->free[--p->nfree];
}

void uro_index_give(struct uro_index_pool *p, uint32_t id)
{
	if (p->nfree < p->capacity)
		p->free[p->nfree++] = id;
}
