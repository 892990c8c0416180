/* Memory windows (IBTA 10.6.7): binding a window to part of a region, and
 * invalidating a type 2 window, on a process's key table. */
#ifndef URO_MEMORY_WINDOW_H
#define URO_MEMORY_WINDOW_H

#include <infiniband/verbs.h>

#include "peer.h"

struct uro_bind {
	uint32_t mw_index;
	uint32_t new_rkey;
	uint32_t mr_lkey; /* 0 with length 0: unbind */
	uint64_t addr;
	uint64_t length;
	unsigned access;
};

/* Binds (or, with length 0, unbinds) a window for a QP of PD pd; returns
 * IBV_WC_SUCCESS or IBV_WC_MW_BIND_ERR (IBTA 10.6.7.2.2). */
enum ibv_wc_status uro_mw_bind(struct uro_peer *self, uint32_t pd, uint32_t qpn,
			       const struct uro_bind *b);

/* Invalidates the type 2 window rkey names, bound to QP qpn of PD pd
 * (Local Invalidate, Send with Invalidate: IBTA 10.6.7.2.3); 0 or -1. */
int uro_mw_invalidate(struct uro_peer *p, uint32_t pd, uint32_t qpn, uint32_t rkey);

/* Unbinds a window, if bound, once no copy through it is in flight. */
void uro_mw_unbind(struct uro_peer *p, struct uro_seg_mr *mw);

#endif
