/* The owner's side of the per-process segment: create it, allocate table
 * entries and ring memory in it. */
#ifndef URO_SEGMENT_H
#define URO_SEGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "index_pool.h"
#include "segment_layout.h"

struct uro_arena_extent;

/* The owner reaches its tables as any peer does, through a struct
 * uro_peer on its own segment (uro_peer_self): one view of the layout. */
struct uro_segment {
	int fd; /* memfd */
	uint8_t *base;
	size_t size;
	struct uro_index_pool qp_ids, cq_ids, srq_ids, mr_ids;
	struct uro_arena_extent *free_list; /* sorted by offset */
};

int uro_segment_create(struct uro_segment *s, unsigned slot);
/* Where every segment's tables are: they are fixed, so a peer's are
 * computed here, never read from its header. */
void uro_seg_table_offsets(struct uro_seg_header *h);
/* A segment's size: the tables and the arena. */
size_t uro_seg_size(void);
void uro_segment_destroy(struct uro_segment *s);

/* Ring memory: a 64-byte aligned offset into the segment, 0 on failure. */
uint64_t uro_arena_alloc(struct uro_segment *s, size_t bytes);
void uro_arena_free(struct uro_segment *s, uint64_t off, size_t bytes);

static inline struct uro_seg_header *uro_seg_header(const struct uro_segment *s)
{
	return (struct uro_seg_header *)s->base;
}

static inline void *uro_seg_ptr(const struct uro_segment *s, uint64_t off)
{
	return s->base + off;
}

#endif
