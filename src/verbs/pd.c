/* ibv_alloc_pd(3), ibv_dealloc_pd(3). */
#include <errno.h>
#include <stdlib.h>

#include "verbs_ops.h"

URO_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct uro_context *ctx = to_uctx(context);
	struct uro_pd *pd = calloc(1, sizeof(*pd));

	if (!pd)
		return uro_fail_null(ENOMEM);
	uro_lock(ctx);
	/* max_pd is what ibv_query_device(3) promises, and no more. */
	if (ctx->pds == URO_MAX_PD) {
		uro_unlock(ctx);
		free(pd);
		return uro_fail_null(ENOMEM);
	}
	ctx->pds++;
	pd->ibpd.context = context;
	pd->ibpd.handle = ++ctx->next_handle;
	pd->origin = pd;
	pd->next = ctx->pd_list;
	ctx->pd_list = pd;
	uro_unlock(ctx);
	return &pd->ibpd;
}

URO_EXPORT int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
	struct uro_pd *pd = uro_container_of(ibpd, struct uro_pd, ibpd);
	struct uro_context *ctx = to_uctx(ibpd->context);

	if (pd->origin != pd) { /* an import: the original stays its owner's */
		ibv_unimport_pd(ibpd);
		return 0;
	}
	/* A PD still holding MRs, QPs, SRQs or AHs, its imports' included,
	 * cannot go (ibv_alloc_pd(3)). */
	if (pd->users)
		return EBUSY;
	uro_lock(ctx);
	for (struct uro_pd **p = &ctx->pd_list; *p; p = &(*p)->next)
		if (*p == pd) {
			*p = pd->next;
			break;
		}
	ctx->pds--;
	uro_unlock(ctx);
	free(pd);
	return 0;
}

/* Default versions beside the IBVERBS_1.0 compat ones (compat_1_0.c). */
URO_DEFAULT_VERSION(ibv_alloc_pd);
URO_DEFAULT_VERSION(ibv_dealloc_pd);
