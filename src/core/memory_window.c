#include "memory_window.h"

#include "key_hold.h"
#include "segment_ops.h"

/* The region stays registered (its window count) until the last copy
 * through the window has let go of it. */
void uro_mw_unbind(struct uro_peer *p, struct uro_seg_mr *mw)
{
	if (!mw->bound)
		return;
	struct uro_seg_mr *parent = uro_peer_mr(p, mw->parent);

	__atomic_store_n(&mw->bound, 0, __ATOMIC_SEQ_CST);
	uro_key_quiesce(mw);
	if (parent)
		__atomic_sub_fetch(&parent->windows, 1, __ATOMIC_RELEASE);
}

/* A window may give remote write or atomic access only over a region the
 * owner may write (IBTA 10.6.7.2.2, C10-74). LOCAL_WRITE means nothing to a
 * window, which only remote peers use; it is accepted and ignored, as
 * Soft-RoCE and rdma-core's tests expect. */
static int access_ok(const struct uro_seg_mr *mr, unsigned access)
{
	if (!(mr->access & IBV_ACCESS_MW_BIND))
		return 0;
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(mr->access & IBV_ACCESS_LOCAL_WRITE))
		return 0;
	return !(access & ~(unsigned)(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
				      IBV_ACCESS_ZERO_BASED));
}

enum ibv_wc_status uro_mw_bind(struct uro_peer *self, uint32_t pd, uint32_t qpn,
			       const struct uro_bind *b)
{
	struct uro_seg_mr *mw = &self->mr[b->mw_index];
	const struct uro_seg_mr *mr;

	if (!mw->in_use || mw->kind == URO_KEY_MR || mw->pd != pd ||
	    (b->new_rkey >> 8) != (mw->rkey >> 8))
		return IBV_WC_MW_BIND_ERR;
	/* A bound type 2 window must be invalidated before it binds again. */
	if (mw->kind == URO_KEY_MW2 && mw->bound)
		return IBV_WC_MW_BIND_ERR;
	if (!b->length) {
		uro_mw_unbind(self, mw);
		mw->rkey = b->new_rkey;
		return IBV_WC_SUCCESS;
	}
	mr = uro_mr_lookup(self, b->mr_lkey, 0);
	if (!mr || mr->pd != pd || !access_ok(mr, b->access) || b->addr < mr->iova ||
	    b->length > mr->length || b->addr - mr->iova > mr->length - b->length)
		return IBV_WC_MW_BIND_ERR;
	uro_mw_unbind(self, mw);
	mw->parent = (uint32_t)(mr - self->mr);
	mw->addr = mr->addr + (b->addr - mr->iova);
	mw->iova = b->addr;
	mw->length = b->length;
	mw->access = b->access;
	mw->qpn = qpn;
	mw->rkey = b->new_rkey;
	__atomic_add_fetch(&self->mr[mw->parent].windows, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&mw->bound, 1, __ATOMIC_RELEASE);
	return IBV_WC_SUCCESS;
}

int uro_mw_invalidate(struct uro_peer *p, uint32_t pd, uint32_t qpn, uint32_t rkey)
{
	struct uro_seg_mr *mw = (struct uro_seg_mr *)uro_mr_lookup(p, rkey, 1);

	if (!mw || mw->kind != URO_KEY_MW2 || !mw->bound || mw->pd != pd || mw->qpn != qpn)
		return -1;
	uro_mw_unbind(p, mw);
	return 0;
}
