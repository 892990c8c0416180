/* An initiator's hold on the key-table entries it moves bytes through, so
 * that the owner's ibv_dereg_mr(3), ibv_rereg_mr(3), ibv_dealloc_mw(3), a
 * rebind or an invalidation returns only once no copy through the old key
 * can still touch the memory (ibv_dereg_mr(3): the region is no longer
 * accessible once it returns). The owner makes the entry unreachable, then
 * waits for its holders; a holder checks the key after taking its hold and
 * again between chunks of a long copy, so it lets go within one chunk. A
 * hold is counted in a lane of the entry under the holder's pid, so that
 * one that dies mid-copy is told from one still copying: dereg never waits
 * on the dead. */
#ifndef URO_KEY_HOLD_H
#define URO_KEY_HOLD_H

#include <infiniband/verbs.h>
#include <stdint.h>

#include "limits.h"
#include "peer.h"

/* The entries one request holds: a remote key, or a receive's SGEs. */
struct uro_holds {
	struct uro_seg_mr *entry[URO_MAX_SGE];
	uint64_t *lane[URO_MAX_SGE]; /* where each hold is counted */
	uint32_t key[URO_MAX_SGE];
	uint8_t remote; /* the keys are rkeys */
	uint8_t n;
};

static inline void uro_holds_init(struct uro_holds *h, int remote)
{
	h->n = 0;
	h->remote = (uint8_t)remote;
}

/* Holds the entry key names, before the caller looks the key up: the hold
 * keeps what that lookup finds true until uro_release. 0; also 0 for a key
 * that names no entry (its lookup fails anyway); -1 when every lane of the
 * entry is taken by other processes, a responder too busy to answer. */
int uro_hold(const struct uro_peer *p, uint32_t key, struct uro_holds *h);

/* Holds the lkey of each SGE that names bytes: 0 or -1 as uro_hold. */
int uro_hold_sges(const struct uro_peer *p, const struct ibv_sge *sge, uint32_t n,
		  struct uro_holds *h);

/* Every held key still names what it named: checked between chunks. */
int uro_holds_valid(const struct uro_peer *p, const struct uro_holds *h);

void uro_release(struct uro_holds *h);

/* A holder that will never let go: its process is gone, or dead and not
 * yet reaped (a pid reused since makes a dead one look alive, which is
 * accepted). Also asked of an atomic slot's initiator (atomic_table.c). */
int uro_holder_gone(uint32_t pid);

/* The owner, after making e unreachable (in_use, key or bound changed):
 * returns once no live process holds it. */
void uro_key_quiesce(struct uro_seg_mr *e);

#endif
