/* The per-process segment: layout, arena allocation and reuse. */
#include <unistd.h>

#include "../check.h"
#include "peer.h"
#include "segment.h"

static void test_layout(struct uro_segment *s)
{
	CHECK_EQ(uro_seg_header(s)->magic, URO_SEG_MAGIC);
	CHECK_EQ(uro_seg_header(s)->slot, 7);
	CHECK_EQ(uro_seg_header(s)->pid, getpid());
	struct uro_peer view;

	/* The tables as the owner (and any peer) sees them. */
	uro_peer_self(&view, s, 7);
	CHECK(view.hdr == uro_seg_header(s));
	CHECK((uint8_t *)view.qp < (uint8_t *)view.cq);
	CHECK((uint8_t *)view.mr + URO_MAX_MR * sizeof(struct uro_seg_mr) <=
	      s->base + uro_seg_header(s)->arena_off);
	CHECK_EQ(uro_seg_header(s)->arena_off + URO_ARENA_SIZE, s->size);
}

static void test_arena(struct uro_segment *s)
{
	uint64_t a = uro_arena_alloc(s, 100);
	uint64_t b = uro_arena_alloc(s, 4096);
	uint64_t c;

	CHECK(a >= uro_seg_header(s)->arena_off);
	CHECK_EQ(a % 64, 0);
	CHECK_EQ(b, a + 128); /* 100 rounded up to 64-byte lines */
	memset(uro_seg_ptr(s, b), 0xab, 4096);
	uro_arena_free(s, a, 100);
	c = uro_arena_alloc(s, 64);
	CHECK_EQ(c, a); /* first fit reuses the freed range */
	uro_arena_free(s, c, 64);
	uro_arena_free(s, b, 4096);
	/* Everything merged back: one allocation can take the whole arena. */
	c = uro_arena_alloc(s, URO_ARENA_SIZE);
	CHECK_EQ(c, uro_seg_header(s)->arena_off);
	CHECK_EQ(uro_arena_alloc(s, 64), 0);
	uro_arena_free(s, c, URO_ARENA_SIZE);
}

static void test_ids(struct uro_segment *s)
{
	CHECK_EQ(uro_index_take(&s->qp_ids), 0);
	CHECK_EQ(uro_index_take(&s->qp_ids), 1);
	uro_index_give(&s->qp_ids, 0);
	CHECK_EQ(uro_index_take(&s->qp_ids), 0);
	for (unsigned i = 2; i < URO_MAX_QP; i++)
		uro_index_take(&s->qp_ids);
	CHECK_EQ(uro_index_take(&s->qp_ids), -1);
}

int main(void)
{
	struct uro_segment s;

	CHECK_EQ(uro_segment_create(&s, 7), 0);
	test_layout(&s);
	test_arena(&s);
	test_ids(&s);
	uro_segment_destroy(&s);
	return check_report();
}
