/* Atomics executed by the process whose memory they act on.
 *
 * An initiator on this host checks an atomic's key as a NIC's responder
 * would (segment_ops.c), then hands the operation to the target process:
 * it claims a slot of the target's table (struct uro_seg_atomics), writes
 * the request there and waits for the answer. The target's own thread
 * executes it with one CPU atomic on its own memory (user_memory.h), checks
 * the key again under its hold, and answers in the slot.
 *
 * Why not the initiator, as for READ and WRITE: cross-memory attach has no
 * compare-and-swap, so an initiator doing read-modify-write needs a lock
 * that every other initiator then waits for, and one stopped while holding
 * it fails everyone's atomics. Here an initiator holds nothing but its own
 * slot: a stopped or dead one delays only itself, and its request, once
 * posted, is executed exactly once whether or not it ever runs again. The
 * cost moves to the target: a stopped target leaves the atomics on its
 * memory unanswered, which its initiators retry until retry_cnt is spent,
 * as a NIC's unanswered requests are (IBTA 9.7.6.1.3). */
#ifndef URO_ATOMIC_TABLE_H
#define URO_ATOMIC_TABLE_H

#include <stdint.h>

#include "peer.h"
#include "user_memory.h"

/* What an initiator asks for: its fields, as checked by the initiator. */
struct uro_atomic_request {
	enum uro_user_atomic_kind kind;
	uint32_t rkey, pd, qpn; /* the key, and the target QP's PD and number */
	uint64_t va, operand, compare;
};

/* One request of this process's in a target's table. */
struct uro_atomic_ticket {
	uint32_t slot, ticket;
	int32_t target_pid; /* the table's owner: a slot's new owner is not it */
};

/* The answer: status is an enum ibv_wc_status or URO_ATOMIC_UNANSWERED. */
struct uro_atomic_answer {
	uint32_t status;
	uint64_t old;
};

/* Initiator. Posts rq into p's table and wakes its thread: 0, or -1 when
 * every slot is held (by live initiators: the slots of dead ones are
 * taken back first), a responder too busy to answer. */
int uro_atomic_post(struct uro_peer *p, const struct uro_atomic_request *rq,
		    struct uro_atomic_ticket *t);

/* Waits at most wait_ns for the answer: 1 and the slot given back, 0 not
 * yet (wait again later: the request stays posted and runs once), -1 the
 * table's owner is another process now (the request went with the old). */
int uro_atomic_wait(struct uro_peer *p, const struct uro_atomic_ticket *t, uint64_t wait_ns,
		    struct uro_atomic_answer *a);

/* Gives the request up: its slot goes back to the table, and the request
 * runs at most once, or never if its owner had not taken it yet. */
void uro_atomic_abandon(struct uro_peer *p, const struct uro_atomic_ticket *t);

/* Whether p's thread executes atomics. */
int uro_atomic_served(const struct uro_peer *p);

/* Owner. Executes every request posted to self's table: how many. */
unsigned uro_atomic_serve(struct uro_peer *self);

/* Whether a request is posted and not yet taken. */
int uro_atomic_pending(const struct uro_peer *self);

/* Sleeps until an initiator rings (or timeout_ns passes): called when
 * uro_atomic_serve found nothing. */
void uro_atomic_sleep(struct uro_peer *self, uint64_t timeout_ns);

/* The owner's thread starts (1) or stops (0) executing: a stop wakes it. */
void uro_atomic_set_serving(struct uro_peer *self, int serving);
void uro_atomic_ring(struct uro_peer *self);

#endif
