/* The direct path: a peer's region that lies in shareable memory
 * (shareable.h) is mapped into this process once, and the bytes of a WRITE,
 * a READ or a SEND into it move with memcpy, its atomics with CPU atomics
 * on the mapping, instead of a cross-memory system call.
 *
 * Nothing a NIC guarantees changes: a request is checked (key, PD, bounds,
 * access, QP state) and holds its key (key_hold.h) exactly as on the
 * cross-memory path before anything here runs, so an owner's
 * ibv_dereg_mr(3) still waits for copies under way and nothing lands
 * after it returns. A mapping names one publication of a region (its
 * serial) by one owner; one whose region has gone is unmapped at the next
 * look at that peer once no thread of this process is copying through
 * it, and all of them when the peer is let go. The copies are guarded
 * (user_memory.h): an object the owner truncated is EFAULT, never a fault
 * of this process. */
#ifndef URO_DIRECT_MAP_H
#define URO_DIRECT_MAP_H

#include <sys/uio.h>

#include "key_hold.h"
#include "user_memory.h"

/* Whether a request holding h may reach memory a peer shares: a look at
 * the held entries, whose lines the key check has just read, so that
 * private memory's requests pay no call for the direct path. */
static inline int uro_direct_maybe(const struct uro_holds *h)
{
	for (int i = 0; i < h->n; i++)
		if (h->entry[i]->shared || h->entry[i]->kind != URO_KEY_MR)
			return 1;
	return 0;
}

/* The remote iovecs r (owner's addresses, each within a region h holds)
 * as this process's mappings of them in out: 1, and a use begun that
 * uro_direct_end ends; 0 when any of them is not in shareable memory or
 * cannot be mapped (the cross-memory path then). */
int uro_direct_begin(struct uro_peer *p, const struct uro_holds *h, const struct iovec *r, int nr,
		     struct iovec *out);
void uro_direct_end(struct uro_peer *p);

/* A hint, read without a hold: the region key names lies in shareable
 * memory of another process. */
int uro_direct_shared(const struct uro_peer *p, uint32_t key);

/* An atomic on the owner's 8 bytes at addr, within the region h holds, as
 * one CPU atomic on the mapping: atomic with respect to the owner's own
 * (atomic_table.h) on the same memory. 0, EFAULT, or -1 when the memory is
 * not mapped (the owner executes it then). */
int uro_direct_atomic(struct uro_peer *p, const struct uro_holds *h, uint64_t addr,
		      struct uro_user_atomic *a);

/* Unmaps what names a region gone, unless a copy is under way. */
void uro_direct_sweep(struct uro_peer *p);

/* Unmaps everything: p is let go, and nothing copies through it. */
void uro_direct_drop(struct uro_peer *p);

#endif
