#include "segment.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ARENA_ALIGN 64

struct uro_arena_extent {
	uint64_t off;
	uint64_t len;
	struct uro_arena_extent *next;
};

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

static int init_pools(struct uro_segment *s)
{
	if (uro_index_pool_init(&s->qp_ids, URO_MAX_QP, URO_REUSE_LAST) ||
	    uro_index_pool_init(&s->cq_ids, URO_MAX_CQ, URO_REUSE_FIRST) ||
	    uro_index_pool_init(&s->srq_ids, URO_MAX_SRQ, URO_REUSE_LAST) ||
	    uro_index_pool_init(&s->mr_ids, URO_MAX_MR, URO_REUSE_FIRST))
		return -1;
	return 0;
}

/* Where each table starts: the one layout both the size and the
 * mapping are computed from. */
void uro_seg_table_offsets(struct uro_seg_header *h)
{
	size_t off = align_up(sizeof(*h), 4096);

	h->qp_off = off;
	off = align_up(off + URO_MAX_QP * sizeof(struct uro_seg_qp), 4096);
	h->cq_off = off;
	off = align_up(off + URO_MAX_CQ * sizeof(struct uro_seg_cq), 4096);
	h->srq_off = off;
	off = align_up(off + URO_MAX_SRQ * sizeof(struct uro_seg_srq), 4096);
	h->mr_off = off;
	off = align_up(off + URO_MAX_MR * sizeof(struct uro_seg_mr), 4096);
	h->share_off = off;
	off = align_up(off + URO_MAX_MR * sizeof(struct uro_seg_share), 4096);
	h->mcast_off = off;
	off = align_up(off + URO_MAX_MCAST_ATTACH * sizeof(struct uro_seg_mcast), 4096);
	h->atomic_off = off;
	h->arena_off = align_up(off + sizeof(struct uro_seg_atomics), 4096);
}

static void lay_out(struct uro_segment *s, unsigned slot)
{
	struct uro_seg_header *h = (struct uro_seg_header *)s->base;

	h->magic = URO_SEG_MAGIC;
	h->version = URO_SEG_VERSION;
	h->slot = slot;
	h->pid = (int32_t)getpid();
	h->uid = (uint32_t)getuid();
	h->size = s->size;
	uro_seg_table_offsets(h);
	h->async_wfd = -1;
}

size_t uro_seg_size(void)
{
	struct uro_seg_header h;

	uro_seg_table_offsets(&h);
	return h.arena_off + URO_ARENA_SIZE;
}

int uro_segment_create(struct uro_segment *s, unsigned slot)
{
	char name[64];

	memset(s, 0, sizeof(*s));
	s->fd = -1;
	s->size = uro_seg_size();
	snprintf(name, sizeof(name), "uroce-seg-%u", slot);
	/* A memfd is private to its owner's user (peers open it through
	 * /proc/<pid>/fd, which needs the owner's credentials) and disappears
	 * with the process: no file is left behind by a crash. */
	s->fd = memfd_create(name, MFD_CLOEXEC);
	if (s->fd < 0 || ftruncate(s->fd, (off_t)s->size))
		goto fail;
	s->base = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (s->base == MAP_FAILED) {
		s->base = NULL;
		goto fail;
	}
	lay_out(s, slot);
	if (init_pools(s))
		goto fail;
	s->free_list = malloc(sizeof(*s->free_list));
	if (!s->free_list)
		goto fail;
	s->free_list->off = uro_seg_header(s)->arena_off;
	s->free_list->len = URO_ARENA_SIZE;
	s->free_list->next = NULL;
	return 0;
fail:
	uro_segment_destroy(s);
	if (!errno)
		errno = ENOMEM;
	return -1;
}

void uro_segment_destroy(struct uro_segment *s)
{
	while (s->free_list) {
		struct uro_arena_extent *next = s->free_list->next;

		free(s->free_list);
		s->free_list = next;
	}
	uro_index_pool_fini(&s->qp_ids);
	uro_index_pool_fini(&s->cq_ids);
	uro_index_pool_fini(&s->srq_ids);
	uro_index_pool_fini(&s->mr_ids);
	if (s->base)
		munmap(s->base, s->size);
	if (s->fd >= 0)
		close(s->fd);
	s->base = NULL;
	s->fd = -1;
}

uint64_t uro_arena_alloc(struct uro_segment *s, size_t bytes)
{
	struct uro_arena_extent **pp = &s->free_list;
	uint64_t len = align_up(bytes ? bytes : 1, ARENA_ALIGN);

	for (; *pp; pp = &(*pp)->next) {
		struct uro_arena_extent *e = *pp;
		uint64_t off = e->off;

		if (e->len < len)
			continue;
		e->off += len;
		e->len -= len;
		if (!e->len) {
			*pp = e->next;
			free(e);
		}
		return off;
	}
	return 0;
}

/* Returns the range to the free list, merging with its neighbours. The
 * pages are handed back to the kernel so a freed ring costs nothing. */
void uro_arena_free(struct uro_segment *s, uint64_t off, size_t bytes)
{
	uint64_t len = align_up(bytes ? bytes : 1, ARENA_ALIGN);
	struct uro_arena_extent **pp = &s->free_list;
	struct uro_arena_extent *prev = NULL;
	struct uro_arena_extent *e;

	while (*pp && (*pp)->off < off) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (prev && prev->off + prev->len == off) {
		prev->len += len;
		e = prev;
	} else {
		e = malloc(sizeof(*e));
		if (!e)
			return; /* leaks arena space, never memory safety */
		e->off = off;
		e->len = len;
		e->next = *pp;
		*pp = e;
	}
	if (e->next && e->off + e->len == e->next->off) {
		struct uro_arena_extent *n = e->next;

		e->len += n->len;
		e->next = n->next;
		free(n);
	}
	uint64_t first = align_up(off, 4096);
	uint64_t end = (off + len) & ~4095ull;

	if (end > first)
		(void)fallocate(s->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)first,
				(off_t)(end - first));
}
