/* Memory regions: ibv_reg_mr(3), ibv_rereg_mr(3), ibv_dereg_mr(3).
 *
 * uroce never pins: the bytes are read and written where they are, so a
 * registration records (address, length, access, PD) in the published table
 * and costs the same for 4 KiB and for 1 GiB. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "address_space.h"
#include "key_hold.h"
#include "verbs_ops.h"
#include "segment_ops.h"
#include "shareable.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

/* A key names its table entry and, in its low byte, the entry's
 * generation (the 8 bits ibv_inc_rkey(3) varies for a window). */
uint32_t uro_make_key(uint32_t index, uint32_t generation)
{
	return ((index + 1) << 8) | (generation & 0xff);
}

/* Where a peer may map the region (shareable.h), while it is out of reach:
 * a new serial, so that a peer's mapping of an earlier translation is
 * never taken for this one. */
static void share_out(struct uro_mr *mr, const struct uro_mapping *where)
{
	uint32_t serial = mr->share->serial + 1;

	struct uro_share_fds *fds = &to_uctx(mr->ibmr.context)->share_fds;

	uro_share_fd_put(fds, mr->share_fd);
	uro_shareable_find(fds, where, mr->ibmr.addr, mr->ibmr.length, mr->share, &mr->share_fd);
	mr->share->serial = serial;
	/* On the entry's line too, which every request reads anyway: private
	 * memory's requests then never touch the share table. */
	mr->pub->shared = mr->share->kind != URO_SHARE_NONE;
}

static void share_end(struct uro_mr *mr)
{
	uro_share_fd_put(&to_uctx(mr->ibmr.context)->share_fds, mr->share_fd);
	mr->share_fd = -1;
	mr->share->kind = URO_SHARE_NONE;
	mr->pub->shared = 0;
}

static void publish(struct uro_mr *mr)
{
	struct uro_seg_mr *p = mr->pub;

	p->lkey = mr->ibmr.lkey;
	p->rkey = mr->ibmr.rkey;
	p->pd = mr->pd->ibpd.handle;
	p->addr = (uintptr_t)mr->ibmr.addr;
	p->length = mr->ibmr.length;
	__atomic_store_n(&p->in_use, 1, __ATOMIC_RELEASE);
}

static int range_ok(const void *addr, size_t length)
{
	return (uintptr_t)addr + length >= (uintptr_t)addr;
}

/* uroce does not pin, but answers as a pinning provider does: memory that
 * is not mapped, or not with the access asked for, cannot be registered
 * (EFAULT). Otherwise a peer's key could name whatever the owner maps
 * there later. On-demand paging registers what is not there yet. */
static int pinnable(const void *addr, size_t length, unsigned access, struct uro_mapping *where)
{
	const unsigned writes =
	    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;

	where->start = 0;
	if (access & IBV_ACCESS_ON_DEMAND)
		return 0;
	return uro_range_accessible(addr, length, (access & writes) != 0, where);
}

static struct ibv_mr *reg(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
			  unsigned access)
{
	struct uro_mapping where; /* what holds addr: where a peer may map it */
	struct uro_context *ctx;
	struct uro_mr *mr;
	int err;
	int64_t index;

	if (!pd)
		return uro_fail_null(EINVAL);
	err = uro_mr_access_check(access);
	if (err)
		return uro_fail_null(err);
	if (!range_ok(addr, length) || iova + length < iova)
		return uro_fail_null(EINVAL);
	err = pinnable(addr, length, access, &where);
	if (err)
		return uro_fail_null(err);
	ctx = to_uctx(pd->context);
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return uro_fail_null(ENOMEM);
	uro_lock(ctx);
	index = uro_index_take(&ctx->seg.mr_ids);
	if (index < 0) {
		uro_unlock(ctx);
		free(mr);
		return uro_fail_null(ENOMEM);
	}
	mr->index = (uint32_t)index;
	mr->pub = &ctx->self.mr[index];
	mr->share = &ctx->self.share[index];
	mr->share_fd = -1;
	mr->pub->access = access;
	mr->pub->iova = iova;
	mr->ibmr.context = pd->context;
	mr->ibmr.pd = pd;
	mr->ibmr.addr = addr;
	mr->ibmr.length = length;
	mr->ibmr.handle = (uint32_t)index;
	/* A new generation for every reuse: a stale key never names it. */
	mr->pub->generation++;
	mr->ibmr.lkey = mr->ibmr.rkey = uro_make_key(mr->index, mr->pub->generation);
	mr->pub->kind = URO_KEY_MR;
	mr->pub->bound = 0;
	mr->pub->windows = 0;
	mr->pd = to_upd(pd);
	mr->pd->users++;
	share_out(mr, &where);
	publish(mr);
	uro_unlock(ctx);
	if (access & IBV_ACCESS_REMOTE_ATOMIC)
		uro_atomic_server_start(ctx);
	return &mr->ibmr;
}

URO_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return reg(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}

URO_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
					  uint64_t iova, int access)
{
	return reg(pd, addr, length, iova, (unsigned)access);
}

URO_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					   uint64_t iova, unsigned int access)
{
	return reg(pd, addr, length, iova, access);
}

URO_EXPORT int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct uro_mr *mr = uro_container_of(ibmr, struct uro_mr, ibmr);
	struct uro_context *ctx = to_uctx(ibmr->context);

	if (mr->imported) { /* the original stays its owner's (import.c) */
		ibv_unimport_mr(ibmr);
		return 0;
	}
	uro_lock(ctx);
	/* Windows bound to the region keep it (IBTA 10.6.7.1). */
	if (__atomic_load_n(&mr->pub->windows, __ATOMIC_ACQUIRE)) {
		uro_unlock(ctx);
		return EBUSY;
	}
	__atomic_store_n(&mr->pub->in_use, 0, __ATOMIC_SEQ_CST);
	uro_unlock(ctx);
	/* The region is out of reach once this returns (ibv_dereg_mr(3)):
	 * copies through it that started before are waited for. */
	uro_key_quiesce(mr->pub);
	uro_lock(ctx);
	share_end(mr);
	mr->pd->users--;
	uro_index_give(&ctx->seg.mr_ids, mr->index);
	uro_unlock(ctx);
	free(mr);
	return 0;
}

/* ibv_rereg_mr(3): the keys stay; what the flags name changes. */
URO_EXPORT int ibv_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *pd, void *addr,
			    size_t length, int access)
{
	struct uro_mr *mr = uro_container_of(ibmr, struct uro_mr, ibmr);
	struct uro_context *ctx = to_uctx(ibmr->context);
	struct uro_mapping where = {.start = 0};
	const int known =
	    IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;

	/* An import names its original; only the owner re-registers it. */
	if (!flags || (flags & ~known) || mr->imported)
		goto input;
	if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!length || !range_ok(addr, length)))
		goto input;
	if ((flags & IBV_REREG_MR_CHANGE_PD) && (!pd || pd->context != ibmr->context))
		goto input;
	if ((flags & IBV_REREG_MR_CHANGE_ACCESS) && uro_mr_access_check((unsigned)access))
		goto input;
	if ((flags & (IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS)) &&
	    pinnable(flags & IBV_REREG_MR_CHANGE_TRANSLATION ? addr : ibmr->addr,
		     flags & IBV_REREG_MR_CHANGE_TRANSLATION ? length : ibmr->length,
		     flags & IBV_REREG_MR_CHANGE_ACCESS ? (unsigned)access : mr->pub->access,
		     &where)) {
		errno = EFAULT;
		return IBV_REREG_MR_ERR_INPUT;
	}
	uro_lock(ctx);
	/* Out of reach while it changes, and until copies through the old
	 * translation are done (ibv_rereg_mr(3)). */
	__atomic_store_n(&mr->pub->in_use, 0, __ATOMIC_SEQ_CST);
	uro_key_quiesce(mr->pub);
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		ibmr->addr = addr;
		ibmr->length = length;
		mr->pub->iova = (uintptr_t)addr;
		share_out(mr, &where);
	}
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		mr->pd->users--;
		mr->pd = to_upd(pd);
		mr->pd->users++;
		ibmr->pd = pd;
	}
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		mr->pub->access = (unsigned)access;
	publish(mr);
	uro_unlock(ctx);
	if (mr->pub->access & IBV_ACCESS_REMOTE_ATOMIC)
		uro_atomic_server_start(ctx);
	return 0;
input:
	errno = EINVAL;
	return IBV_REREG_MR_ERR_INPUT;
}

/* Default versions beside the IBVERBS_1.0 compat ones (compat_1_0.c). */
URO_DEFAULT_VERSION(ibv_dereg_mr);
URO_DEFAULT_VERSION(ibv_reg_mr);

/* ibv_advise_mr(3): pages are never pinned nor faulted ahead of use, so a
 * prefetch has nothing to do once its keys and ranges check out. */
int uro_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
		  struct ibv_sge *sg_list, uint32_t num_sge)
{
	struct uro_context *ctx = to_uctx(pd->context);
	struct iovec iov[URO_MAX_SGE];
	uint64_t total;
	int n;

	if (advice > IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT ||
	    (flags & ~IBV_ADVISE_MR_FLAG_FLUSH) || num_sge == 0 || num_sge > URO_MAX_SGE)
		return EINVAL;
	return uro_sge_iov(&ctx->self, pd->handle, sg_list, num_sge, 0, iov, &n, &total) ? EINVAL
											 : 0;
}
