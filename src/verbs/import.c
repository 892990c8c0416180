/* Sharing objects between contexts: ibv_import_device(3), ibv_import_pd(3),
 * ibv_import_mr(3). A context's command fd names its published segment, so
 * a dup of it finds the context again in this process, and an imported
 * context works on the same state (to_uctx). An import from another process
 * would have to write tables only their owner writes (docs/design.md, A
 * process is a function of the device), so it is refused with EOPNOTSUPP.
 * Imported PDs and MRs are handles on the original objects: a PD is its
 * handle wherever keys and QPs are checked, so the copies protect the same
 * memory, and objects made on an imported PD count on the original
 * (to_upd), which cannot go before them. An import's ibv_dealloc_pd or
 * ibv_dereg_mr only unimports it; the original goes with its own. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "verbs_ops.h"

/* Whether fd is a uroce segment, of a context that is not this process's. */
static int foreign_segment(int fd)
{
	char path[64], link[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return 0;
	link[n] = '\0';
	return !strncmp(link, "/memfd:uroce-seg-", strlen("/memfd:uroce-seg-"));
}

URO_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	struct uro_context *orig, *imp;
	int err;

	orig = uro_context_get_by_fd(cmd_fd, &err);
	if (!orig) {
		if (err == EINVAL && foreign_segment(cmd_fd)) {
			uro_warn("ibv_import_device: the context belongs to another process; uroce "
				 "imports only within one");
			err = EOPNOTSUPP;
		}
		return uro_fail_null(err);
	}
	imp = calloc(1, sizeof(*imp));
	if (!imp) {
		uro_context_put(orig);
		return uro_fail_null(ENOMEM);
	}
	imp->vctx = orig->vctx; /* the ops, the device, the async fd */
	imp->vctx.context.cmd_fd = cmd_fd;
	pthread_mutex_init(&imp->vctx.context.mutex, NULL);
	imp->shared = orig;
	return &imp->vctx.context;
}

URO_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	struct uro_context *ctx = to_uctx(context);
	struct uro_pd *pd = calloc(1, sizeof(*pd)), *p;

	if (!pd)
		return uro_fail_null(ENOMEM);
	uro_lock(ctx);
	for (p = ctx->pd_list; p && p->ibpd.handle != pd_handle; p = p->next)
		;
	uro_unlock(ctx);
	if (!p) {
		free(pd);
		return uro_fail_null(EINVAL);
	}
	pd->ibpd.context = context;
	pd->ibpd.handle = pd_handle;
	pd->origin = p;
	return &pd->ibpd;
}

URO_EXPORT void ibv_unimport_pd(struct ibv_pd *ibpd)
{
	struct uro_pd *pd = uro_container_of(ibpd, struct uro_pd, ibpd);

	if (pd->origin != pd)
		free(pd);
}

URO_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	struct uro_context *ctx = to_uctx(pd->context);
	struct uro_mr *mr = calloc(1, sizeof(*mr));
	const struct uro_seg_mr *e = mr_handle < URO_MAX_MR ? &ctx->self.mr[mr_handle] : NULL;

	if (!mr)
		return uro_fail_null(ENOMEM);
	uro_lock(ctx);
	if (!e || !e->in_use || e->kind != URO_KEY_MR || e->pd != pd->handle) {
		uro_unlock(ctx);
		free(mr);
		return uro_fail_null(EINVAL);
	}
	mr->ibmr.context = pd->context;
	mr->ibmr.pd = pd;
	mr->ibmr.addr = (void *)(uintptr_t)e->addr;
	mr->ibmr.length = e->length;
	mr->ibmr.handle = mr_handle;
	mr->ibmr.lkey = e->lkey;
	mr->ibmr.rkey = e->rkey;
	mr->index = mr_handle;
	mr->pub = &ctx->self.mr[mr_handle];
	mr->pd = to_upd(pd);
	mr->imported = 1;
	uro_unlock(ctx);
	return &mr->ibmr;
}

URO_EXPORT void ibv_unimport_mr(struct ibv_mr *ibmr)
{
	struct uro_mr *mr = uro_container_of(ibmr, struct uro_mr, ibmr);

	if (mr->imported)
		free(mr);
}
