/* A CQ ring in the segment. Many producers (the owner's requester, and any
 * peer process delivering to the owner) reserve an entry with a CAS on tail
 * and publish it by writing its seq; the single consumer, the owner's
 * poll, reads entries in order. No lock on either side. */
#ifndef URO_CQ_RING_H
#define URO_CQ_RING_H

#include "cqe.h"
#include "segment_layout.h"

/* 0, or -1 when the ring of size entries is full: a CQ overrun (IBTA
 * 11.4.2.1). ring and size are the producer's checked reading of cq. */
int uro_cq_produce(struct uro_seg_cq *cq, struct uro_cqe *ring, uint32_t size,
		   const struct uro_cqe *e);
/* The next entry to poll, or NULL. */
struct uro_cqe *uro_cq_peek(struct uro_seg_cq *cq, struct uro_cqe *ring);
void uro_cq_consume(struct uro_seg_cq *cq);
uint32_t uro_cq_pending(const struct uro_seg_cq *cq);

/* Whether the producer of e must signal the CQ's channel; disarms it. */
int uro_cq_take_arm(struct uro_seg_cq *cq, int solicited);

#endif
