/* A CQ ring in the segment. Many producers (the owner's requester, and any
 * peer process delivering to the owner) reserve a position with a CAS on
 * tail and publish the entry there by writing its seq; the single consumer,
 * the owner's poll, reads entries in order. No lock on either side.
 *
 * Positions count modulo 2^31: tail's top bit is the owner's "frozen" flag,
 * set while ibv_resize_cq moves the ring, when no position can be reserved.
 * A producer that holds a reserved position keeps the ring where it is:
 * the owner waits (a bounded time) for every reserved entry to be published
 * before it moves the ring. */
#ifndef URO_CQ_RING_H
#define URO_CQ_RING_H

#include <stdint.h>

#include "cqe.h"
#include "segment_layout.h"

#define URO_CQ_POS_MASK 0x7fffffffu
#define URO_CQ_FROZEN	0x80000000u

/* How long a producer waits for a frozen ring before it drops its entry,
 * and how long the owner waits for a reserved entry to be published before
 * it takes its producer for dead: far beyond the nanoseconds a live
 * producer takes, short enough that a stopped or killed one costs a bounded
 * wait, never a wedge. */
#define URO_CQ_WAIT_NS (100ull * 1000 * 1000)

enum { URO_CQ_FULL = -1, URO_CQ_BUSY = -2 };

/* 0 and *pos reserved; URO_CQ_FULL when the ring holds size entries (a CQ
 * overrun, IBTA 11.4.2.1); URO_CQ_BUSY when it stayed frozen for
 * URO_CQ_WAIT_NS. */
int uro_cq_reserve(struct uro_seg_cq *cq, uint32_t *pos);
/* Writes e at the reserved pos of ring (size entries) and publishes it. */
void uro_cq_publish(struct uro_cqe *ring, uint32_t size, uint32_t pos, const struct uro_cqe *e);

/* The next entry to poll, or NULL. */
struct uro_cqe *uro_cq_peek(struct uro_seg_cq *cq, struct uro_cqe *ring);
void uro_cq_consume(struct uro_seg_cq *cq);
uint32_t uro_cq_pending(const struct uro_seg_cq *cq);

/* The owner's resize: freeze stops reservations and waits for reserved
 * entries to be published; it returns the tail, and *all_published says
 * whether every one was (else a producer died holding one, and its entry
 * may still be written into the old ring later). thaw sets the new ring's
 * tail and lets producers in. */
uint32_t uro_cq_freeze(struct uro_seg_cq *cq, const struct uro_cqe *ring, int *all_published);
void uro_cq_thaw(struct uro_seg_cq *cq, uint32_t tail);

/* Whether the producer of e must signal the CQ's channel; disarms it. */
int uro_cq_take_arm(struct uro_seg_cq *cq, int solicited);
/* Whether a completion added now would signal the CQ's channel: read,
 * not taken. */
int uro_cq_would_wake(const struct uro_seg_cq *cq, int solicited);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t uro_now_ns(void);
/* The same clock read at the last timer tick (CLOCK_MONOTONIC_COARSE, a
 * few milliseconds behind at most): cheaper, for checks that are due
 * milliseconds apart on a request's path. */
uint64_t uro_coarse_ns(void);

#endif
