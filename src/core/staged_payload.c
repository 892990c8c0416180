#include "staged_payload.h"

#include <string.h>

#include "segment_ops.h"
#include "user_memory.h"

/* Any of these lets another party read or write the buffer before the
 * receiver polls (IBTA 10.6.3). */
#define REMOTE_ACCESS                                                                              \
	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |             \
	 IBV_ACCESS_MW_BIND)

static const struct ibv_sge *first_sge(const struct uro_recv *r)
{
	for (uint32_t i = 0; i < r->num_sge; i++)
		if (r->sge[i].length)
			return &r->sge[i];
	return NULL;
}

int uro_stage_payload(const struct uro_peer *target, const struct uro_recv *r,
		      const struct iovec *liov, int nl, uint64_t len, struct uro_cqe *e)
{
	const struct ibv_sge *sge = first_sge(r);
	const struct uro_seg_mr *mr;

	/* One destination keeps the placement one memcpy. */
	if (len == 0 || len > URO_STAGED_MAX || !sge || sge->length < len)
		return 0;
	mr = uro_lkey_region(target, sge->lkey, sge->addr, len);
	if (!mr || (mr->access & REMOTE_ACCESS))
		return 0;
	for (uint8_t *to = e->staged; nl > 0; to += liov->iov_len, liov++, nl--)
		memcpy(to, liov->iov_base, liov->iov_len);
	e->staged_len = (uint16_t)len;
	e->staged_lkey = sge->lkey;
	e->staged_addr = sge->addr;
	return 1;
}

int uro_place_payload(struct uro_peer *self, const struct uro_cqe *e)
{
	const struct uro_seg_mr *mr =
	    uro_lkey_region(self, e->staged_lkey, e->staged_addr, e->staged_len);

	/* Deregistered between the SEND and the poll: the program has taken
	 * the memory back, and a NIC would have written it before. */
	if (!mr || !(mr->access & IBV_ACCESS_LOCAL_WRITE)) {
		__atomic_add_fetch(&self->hdr->counters.staged_dropped, 1, __ATOMIC_RELAXED);
		return 0;
	}
	return uro_user_copy((void *)(uintptr_t)e->staged_addr, e->staged, e->staged_len);
}
