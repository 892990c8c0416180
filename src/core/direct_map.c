#include "direct_map.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "shareable.h"

/* Regions of one peer mapped at a time; a region whose slot another takes
 * is unmapped at the next sweep. */
#define DIRECT_SLOTS 64

/* One publication of one region, mapped: never changed once in a slot.
 * One that could not be mapped stays in its slot too, with no mapping, so
 * that each request to it goes the cross-memory way at once: trying again
 * cost every one of them a stat or two, a shmat or an open, and a lock. */
struct direct_region {
	uint32_t index, serial;
	int32_t pid;
	uint32_t kind;
	void *base; /* what to unmap; NULL: not mapped */
	size_t len;
	uint8_t *at;		    /* the region's first byte; NULL: not mapped */
	uint64_t length;	    /* of the region, all mapped from at */
	struct direct_region *next; /* on the retired list */
};

struct uro_direct_maps {
	/* Threads copying through a mapping, and a sweep that would unmap:
	 * each looks at the other's after announcing its own (so one of the
	 * two sees the other), so nothing is unmapped under a copy. */
	uint32_t users, sweeping;
	pthread_mutex_t lock; /* mapping, retiring, unmapping */
	struct direct_region *slot[DIRECT_SLOTS];
	struct direct_region *retired;
};

static struct uro_direct_maps *maps_of(struct uro_peer *p)
{
	struct uro_direct_maps *d = __atomic_load_n(&p->direct, __ATOMIC_ACQUIRE), *none = NULL;

	if (d)
		return d;
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	pthread_mutex_init(&d->lock, NULL);
	if (__atomic_compare_exchange_n(&p->direct, &none, d, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE))
		return d;
	pthread_mutex_destroy(&d->lock);
	free(d);
	return none;
}

/* The region an entry held in h stands for: itself, or a window's. */
static const struct uro_seg_mr *region_of(const struct uro_peer *p, const struct uro_seg_mr *e)
{
	return e->kind == URO_KEY_MR ? e : e->bound ? uro_peer_mr(p, e->parent) : NULL;
}

/* The held region holding [addr, addr+len), or NULL. */
static const struct uro_seg_mr *held_region(const struct uro_peer *p, const struct uro_holds *h,
					    uint64_t addr, uint64_t len)
{
	for (int i = 0; i < h->n; i++) {
		const struct uro_seg_mr *r = region_of(p, h->entry[i]);

		if (r && addr >= r->addr && len <= r->length && addr - r->addr <= r->length - len)
			return r;
	}
	return NULL;
}

static int same_ipc_namespace(pid_t pid)
{
	char path[64];
	struct stat a, b;

	snprintf(path, sizeof(path), "/proc/%d/ns/ipc", (int)pid);
	return !stat(path, &a) && !stat("/proc/self/ns/ipc", &b) && a.st_ino == b.st_ino &&
	       a.st_dev == b.st_dev;
}

/* System V memory: the segment the owner's mapping shows, if it is still
 * this user's and large enough. Attached whole (shmat has no offset). */
static int map_sysv(const struct uro_peer *p, const struct uro_seg_share *s, uint64_t length,
		    struct direct_region *m)
{
	struct shmid_ds ds;
	void *base;

	if (!same_ipc_namespace(p->pid) || shmctl(s->id, IPC_STAT, &ds) ||
	    ds.shm_perm.uid != geteuid() || s->offset > ds.shm_segsz ||
	    length > ds.shm_segsz - s->offset)
		return -1;
	base = shmat(s->id, NULL, 0);
	if (base == (void *)-1)
		return -1;
	m->base = base;
	m->len = ds.shm_segsz;
	m->at = (uint8_t *)base + s->offset;
	return 0;
}

/* A file or memfd the owner holds open, through /proc (its user's
 * credentials), if the descriptor still names the object the owner
 * published. The pages of the region only, at the object's block size (a
 * huge page on hugetlbfs). */
static int map_fd(const struct uro_peer *p, const struct uro_seg_share *s, uint64_t length,
		  struct direct_region *m)
{
	struct stat st;
	uint64_t blk, start, end;
	void *base;
	int fd = uro_peer_open_fd(p, s->id, O_RDWR, s->dev, s->ino);

	if (fd < 0 || fstat(fd, &st)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	blk = (uint64_t)sysconf(_SC_PAGESIZE);
	if (st.st_blksize > (blksize_t)blk && !(st.st_blksize & (st.st_blksize - 1)))
		blk = (uint64_t)st.st_blksize;
	/* Whatever the owner published, the mapping holds the whole region. */
	if (s->offset >= (1ull << 62) || length >= (1ull << 62)) {
		close(fd);
		return -1;
	}
	start = s->offset & ~(blk - 1);
	end = (s->offset + length + blk - 1) & ~(blk - 1);
	base = mmap(NULL, end - start, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)start);
	close(fd);
	if (base == MAP_FAILED)
		return -1;
	m->base = base;
	m->len = end - start;
	m->at = (uint8_t *)base + (s->offset - start);
	return 0;
}

static void unmap(struct direct_region *m)
{
	if (m->base && m->kind == URO_SHARE_SYSV)
		shmdt(m->base);
	else if (m->base)
		munmap(m->base, m->len);
	free(m);
}

static int current(const struct direct_region *m, const struct uro_peer *p, uint32_t index)
{
	return m && m->index == index && m->pid == p->pid &&
	       m->serial == __atomic_load_n(&p->share[index].serial, __ATOMIC_RELAXED);
}

static void retire(struct uro_direct_maps *d, unsigned i)
{
	struct direct_region *m = d->slot[i];

	if (!m)
		return;
	__atomic_store_n(&d->slot[i], NULL, __ATOMIC_RELEASE);
	m->next = d->retired;
	d->retired = m;
}

/* Unmaps the retired mappings if no thread copies through any; under the
 * lock. */
static void unmap_retired(struct uro_direct_maps *d)
{
	if (!d->retired)
		return;
	__atomic_store_n(&d->sweeping, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&d->users, __ATOMIC_SEQ_CST)) {
		while (d->retired) {
			struct direct_region *m = d->retired;

			d->retired = m->next;
			unmap(m);
		}
	}
	__atomic_store_n(&d->sweeping, 0, __ATOMIC_SEQ_CST);
}

/* The region at index, mapped for this publication: under the lock. */
static struct direct_region *map_region(struct uro_peer *p, struct uro_direct_maps *d,
					uint32_t index, const struct uro_seg_mr *r)
{
	const struct uro_seg_share *s = &p->share[index];
	unsigned i = index % DIRECT_SLOTS;
	struct direct_region *m = d->slot[i];
	int err;

	if (current(m, p, index))
		return m;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->index = index;
	m->serial = s->serial;
	m->pid = p->pid;
	m->kind = s->kind;
	m->length = r->length;
	err = m->kind == URO_SHARE_SYSV ? map_sysv(p, s, r->length, m)
	      : m->kind == URO_SHARE_FD ? map_fd(p, s, r->length, m)
					: -1;
	/* Said at debug level (UROCE_LOG=debug), once a publication: which
	 * path a program's requests take is otherwise seen only in their
	 * speed. */
	uro_debug("direct path: %s region %u of pid %d (%s, %llu bytes)",
		  err ? "cannot map" : "mapped", index, (int)p->pid,
		  m->kind == URO_SHARE_SYSV ? "System V" : "file", (unsigned long long)r->length);
	retire(d, i);
	__atomic_store_n(&d->slot[i], m, __ATOMIC_RELEASE);
	return m;
}

/* [addr, addr+len)'s place in this process's mapping of its region, or
 * NULL. The region's bounds are read again from the owner's table, so the
 * mapping's own length bounds the copy whatever the table says. */
static uint8_t *translate(struct uro_peer *p, struct uro_direct_maps *d, const struct uro_seg_mr *r,
			  uint64_t addr, uint64_t len)
{
	uint32_t index = (uint32_t)(r - p->mr);
	struct direct_region *m = __atomic_load_n(&d->slot[index % DIRECT_SLOTS], __ATOMIC_ACQUIRE);

	if (!current(m, p, index)) {
		pthread_mutex_lock(&d->lock);
		m = map_region(p, d, index, r);
		pthread_mutex_unlock(&d->lock);
		if (!m)
			return NULL;
	}
	if (!m->at || addr - r->addr > m->length || len > m->length - (addr - r->addr))
		return NULL;
	return m->at + (addr - r->addr);
}

/* Every remote iovec lies in shareable memory of a held region: the
 * cheap test that keeps private memory's requests off this path. */
static int shareable(const struct uro_peer *p, const struct uro_holds *h, const struct iovec *r,
		     int nr, const struct uro_seg_mr **reg)
{
	for (int i = 0; i < nr; i++) {
		reg[i] = held_region(p, h, (uintptr_t)r[i].iov_base, r[i].iov_len);
		if (!reg[i] || !reg[i]->shared)
			return 0;
	}
	return nr > 0;
}

int uro_direct_begin(struct uro_peer *p, const struct uro_holds *h, const struct iovec *r, int nr,
		     struct iovec *out)
{
	const struct uro_seg_mr *reg[URO_MAX_SGE + 1];
	struct uro_direct_maps *d;

	if (p->self || !p->share || nr > URO_MAX_SGE + 1 || !uro_direct_enabled() ||
	    !shareable(p, h, r, nr, reg))
		return 0;
	d = maps_of(p);
	if (!d)
		return 0;
	__atomic_add_fetch(&d->users, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&d->sweeping, __ATOMIC_SEQ_CST))
		goto cross;
	for (int i = 0; i < nr; i++) {
		out[i].iov_base = translate(p, d, reg[i], (uintptr_t)r[i].iov_base, r[i].iov_len);
		out[i].iov_len = r[i].iov_len;
		if (!out[i].iov_base)
			goto cross;
	}
	return 1;
cross:
	__atomic_sub_fetch(&d->users, 1, __ATOMIC_RELEASE);
	return 0;
}

void uro_direct_end(struct uro_peer *p)
{
	__atomic_sub_fetch(&p->direct->users, 1, __ATOMIC_RELEASE);
}

int uro_direct_shared(const struct uro_peer *p, uint32_t key)
{
	const struct uro_seg_mr *e = (key >> 8) ? uro_peer_mr(p, (key >> 8) - 1) : NULL;
	const struct uro_seg_mr *r = e && !p->self && p->share ? region_of(p, e) : NULL;

	return r && uro_direct_enabled() && __atomic_load_n(&r->shared, __ATOMIC_RELAXED);
}

int uro_direct_atomic(struct uro_peer *p, const struct uro_holds *h, uint64_t addr,
		      struct uro_user_atomic *a)
{
	struct iovec r = {.iov_base = (void *)(uintptr_t)addr, .iov_len = 8}, local;
	int err;

	if (!uro_direct_begin(p, h, &r, 1, &local))
		return -1;
	err = uro_user_atomic(local.iov_base, a);
	uro_direct_end(p);
	return err;
}

void uro_direct_sweep(struct uro_peer *p)
{
	struct uro_direct_maps *d = __atomic_load_n(&p->direct, __ATOMIC_ACQUIRE);

	if (!d || pthread_mutex_trylock(&d->lock))
		return;
	for (unsigned i = 0; i < DIRECT_SLOTS; i++) {
		struct direct_region *m = d->slot[i];

		if (m && (!__atomic_load_n(&p->mr[m->index].in_use, __ATOMIC_ACQUIRE) ||
			  !current(m, p, m->index)))
			retire(d, i);
	}
	unmap_retired(d);
	pthread_mutex_unlock(&d->lock);
}

void uro_direct_drop(struct uro_peer *p)
{
	struct uro_direct_maps *d = p->direct;

	if (!d)
		return;
	for (unsigned i = 0; i < DIRECT_SLOTS; i++)
		retire(d, i);
	unmap_retired(d);
	pthread_mutex_destroy(&d->lock);
	free(d);
	p->direct = NULL;
}
