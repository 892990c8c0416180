/* Receive queues in the segment (a QP's own or an SRQ's). The owner posts
 * at tail; a process delivering a SEND copies the entry at head and then
 * claims it with a CAS, so several senders (UD, SRQ) can share a queue. */
#ifndef URO_RECV_QUEUE_H
#define URO_RECV_QUEUE_H

#include <infiniband/verbs.h>

#include "segment_layout.h"

struct uro_recv_wqe {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t reserved;
	struct ibv_sge sge[];
};

struct uro_recv {
	uint64_t wr_id;
	uint32_t num_sge;
	struct ibv_sge sge[URO_MAX_SGE];
};

uint32_t uro_rq_stride(uint32_t max_sge);
/* 0, or -1 when the queue is full. */
int uro_rq_post(struct uro_seg_rq *rq, uint8_t *ring, const struct ibv_recv_wr *wr);
/* A queue's shape as a taker reads it once from the segment: the fields
 * the owner could change between two reads are read here only. */
struct uro_rq_view {
	const uint8_t *ring;
	uint32_t size, stride, max_sge;
};

/* 0 and *out filled, or -1 when nothing is posted. */
int uro_rq_take(struct uro_seg_rq *rq, const struct uro_rq_view *v, struct uro_recv *out);
uint32_t uro_rq_count(const struct uro_seg_rq *rq);

#endif
