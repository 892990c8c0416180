/* XRC domains: ibv_open_xrcd(3), ibv_close_xrcd(3). A domain is either
 * private (fd -1) or tied to a file: every process of the host that opens
 * the same file has the same domain, so that one process's XRC target can
 * deliver into another's XRC SRQ (ibv_xsrq_pingpong's clients do). The
 * rules are the kernel's: O_CREAT is needed to make a domain (here: to be
 * the first in this context to open the file's), O_EXCL refuses one this
 * context has, and a handle still used by an XRC SRQ or target QP cannot
 * be closed. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "verbs_ops.h"

static struct uro_xrcd *by_id(struct uro_context *ctx, const struct uro_xrcd_id *id)
{
	for (struct uro_xrcd *x = ctx->xrcd_list; x; x = x->next)
		if (uro_xrcd_id_same(&x->id, id))
			return x;
	return NULL;
}

struct ibv_xrcd *uro_open_xrcd(struct ibv_context *c, struct ibv_xrcd_init_attr *attr)
{
	const uint32_t needed = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	struct uro_context *ctx = to_uctx(c);
	struct uro_xrcd_id id = {0};
	struct uro_xrcd *x, *same = NULL;
	struct stat st;

	if ((attr->comp_mask & needed) != needed || (attr->comp_mask & ~needed) ||
	    (attr->oflags & ~(O_CREAT | O_EXCL)))
		return uro_fail_null(EINVAL);
	if (attr->fd >= 0 && fstat(attr->fd, &st))
		return uro_fail_null(EBADF);
	if (attr->fd >= 0)
		id = (struct uro_xrcd_id){.ino = st.st_ino, .dev = (uint32_t)st.st_dev};
	x = calloc(1, sizeof(*x));
	if (!x)
		return uro_fail_null(ENOMEM);
	uro_lock(ctx);
	if (attr->fd >= 0)
		same = by_id(ctx, &id);
	else
		id = (struct uro_xrcd_id){.ino = uro_next_serial(ctx), .owner = ctx->slot.slot};
	if ((!same && !(attr->oflags & O_CREAT)) || (same && (attr->oflags & O_EXCL))) {
		uro_unlock(ctx);
		free(x);
		return uro_fail_null(EINVAL);
	}
	x->id = id;
	x->ibx.context = c;
	x->next = ctx->xrcd_list;
	ctx->xrcd_list = x;
	uro_unlock(ctx);
	return &x->ibx;
}

int uro_close_xrcd(struct ibv_xrcd *ibx)
{
	struct uro_context *ctx = to_uctx(ibx->context);
	struct uro_xrcd *x = to_uxrcd(ibx), **link;

	uro_lock(ctx);
	if (x->users) {
		uro_unlock(ctx);
		return EBUSY;
	}
	for (link = &ctx->xrcd_list; *link != x; link = &(*link)->next)
		;
	*link = x->next;
	uro_unlock(ctx);
	free(x);
	return 0;
}
