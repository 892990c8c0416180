/* Memory windows: ibv_alloc_mw(3), ibv_bind_mw(3), ibv_dealloc_mw(3), and
 * the BIND_MW and LOCAL_INV work requests (ibv_post_send(3)). A window is
 * an entry of the published key table, so a responder checks its rkey like
 * any other (src/core/memory_window.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "memory_window.h"
#include "verbs_ops.h"

struct ibv_mw *uro_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct uro_context *ctx = to_uctx(pd->context);
	struct uro_seg_mr *e;
	struct uro_mw *mw;
	int64_t index;

	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)
		return uro_fail_null(EINVAL);
	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return uro_fail_null(ENOMEM);
	uro_lock(ctx);
	index = uro_index_take(&ctx->seg.mr_ids);
	if (index < 0) {
		uro_unlock(ctx);
		free(mw);
		return uro_fail_null(ENOMEM);
	}
	e = &ctx->self.mr[index];
	/* The generation outlives the entry's uses: reset, it would make a
	 * stale key of an earlier region valid again. */
	e->generation++;
	e->lkey = e->pd = e->access = 0;
	/* Not the lanes: an initiator holding a stale key of the entry's last
	 * use still counts there until its own release (key_hold.c). */
	memset((char *)e + offsetof(struct uro_seg_mr, addr), 0,
	       offsetof(struct uro_seg_mr, lanes) - offsetof(struct uro_seg_mr, addr));
	e->kind = type == IBV_MW_TYPE_1 ? URO_KEY_MW1 : URO_KEY_MW2;
	e->pd = pd->handle;
	e->rkey = uro_make_key((uint32_t)index, e->generation);
	mw->index = (uint32_t)index;
	mw->ibmw.context = pd->context;
	mw->ibmw.pd = pd;
	mw->ibmw.rkey = e->rkey;
	mw->ibmw.handle = (uint32_t)index;
	mw->ibmw.type = type;
	__atomic_store_n(&e->in_use, 1, __ATOMIC_RELEASE);
	mw->pd = to_upd(pd);
	mw->pd->users++;
	uro_unlock(ctx);
	return &mw->ibmw;
}

int uro_dealloc_mw(struct ibv_mw *ibmw)
{
	struct uro_mw *mw = to_umw(ibmw);
	struct uro_context *ctx = to_uctx(ibmw->context);
	struct uro_seg_mr *e = &ctx->self.mr[mw->index];

	uro_lock(ctx);
	uro_mw_unbind(&ctx->self, e); /* returns once no copy uses it */
	__atomic_store_n(&e->in_use, 0, __ATOMIC_RELEASE);
	/* Binds moved the key's low byte on (ibv_inc_rkey(3)): the entry's next
	 * user starts past the last key this window had. */
	e->generation = e->rkey & 0xff;
	mw->pd->users--;
	uro_index_give(&ctx->seg.mr_ids, mw->index);
	uro_unlock(ctx);
	free(mw);
	return 0;
}

/* ibv_bind_mw(3), type 1: a BIND_MW request on the QP's send queue; the
 * window's next rkey is chosen here and is the window's once posted. */
int uro_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *b)
{
	struct ibv_send_wr wr, *bad;
	int err;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = b->wr_id;
	wr.send_flags = b->send_flags;
	wr.opcode = IBV_WR_BIND_MW;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = b->bind_info;
	err = uro_post_send(qp, &wr, &bad);
	if (!err)
		mw->rkey = wr.bind_mw.rkey;
	return err;
}
