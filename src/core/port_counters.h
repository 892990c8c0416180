/* The names `uroce stat` gives the counters a port keeps in its owner's
 * segment (struct uro_seg_counters): Soft-RoCE's hw counters first, under
 * the names `rdma statistic show` prints for an rxe device, then uroce's
 * own (uroce stat). */
#ifndef URO_PORT_COUNTERS_H
#define URO_PORT_COUNTERS_H

#include <stddef.h>
#include <stdint.h>

#include "segment_layout.h"

struct uro_counter_desc {
	const char *name;
	size_t offset; /* of a uint64_t in the counters' struct */
};

/* In struct uro_seg_counters. */
extern const struct uro_counter_desc uro_port_counters[];
extern const unsigned uro_port_counter_count;
/* In struct uro_seg_qp_counters: the names `uroce stat qp` prints. */
extern const struct uro_counter_desc uro_qp_counters[];
extern const unsigned uro_qp_counter_count;

/* The owner's threads count, and peers count into it, while another
 * process reads: aligned 64-bit words, never torn. A load and a store, not
 * a locked add: the data path pays nothing that waits for its stores to
 * reach another core (locked adds cost ib_send_lat 15% and ib_send_bw 8 B
 * up to a third on shared memory). So a count is exact while one thread
 * or process updates a counter at a time (a QP's posts are under its
 * lock), and two updating the same counter at the same instant may lose
 * one. */
static inline void uro_count(uint64_t *counter, uint64_t n)
{
#ifdef URO_NO_COUNTERS /* -DUROCE_COUNTERS=OFF: what counting costs, measured */
	(void)counter;
	(void)n;
#else
	__atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
#endif
}

static inline uint64_t uro_counter_read(const void *counters, const struct uro_counter_desc *d)
{
	return __atomic_load_n((const uint64_t *)((const char *)counters + d->offset),
			       __ATOMIC_RELAXED);
}

#endif
