/* ibv_open_device(3) / ibv_close_device(3): a context is one registry slot
 * and one published segment (docs/design.md, A process is a function of the
 * device). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attach_path.h"
#include "log.h"
#include "verbs_ops.h"
#include "wire.h"

/* Which path this process's connections on the host take, said once a
 * process where cross-memory attach cannot serve it (attach_path.h): its
 * peers read wire_forced in its header and meet it on the wire. A type ib
 * link has no wire: there each connection meets the refusal, explained
 * per peer (remote_copy.c). */
static void tell_path(const struct uro_context *ctx)
{
	static int told;
	struct uro_diagnosis d;

	if (uro_wire_told() || !uro_attach_refused() ||
	    __atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
		return;
	uro_attach_refused_why(&d);
	if (ctx->model.link.type == URO_LINK_ROCE)
		uro_warn("cross-memory attach is refused here (%s): connections between this "
			 "host's processes take RoCEv2 over %s instead of shared memory",
			 d.why, ctx->model.link.netdev);
}

static int publish(struct uro_context *ctx)
{
	struct uro_slot_record rec;

	memset(&rec, 0, sizeof(rec));
	rec.magic = URO_REGISTRY_MAGIC;
	rec.pid = (int32_t)getpid();
	rec.seg_fd = ctx->seg.fd;
	rec.seg_size = ctx->seg.size;
	rec.netns = uro_registry_netns();
	snprintf(rec.device, sizeof(rec.device), "%s", ctx->dev->link.name);
	rec.link_id = ctx->dev->link_id;
	return uro_registry_publish(&ctx->slot, &rec);
}

/* The event pipe, and the async fd around it (port_watch.c). Neither end
 * blocks: the writer must never stall the control path, and the reader
 * blocks, when the async fd is not O_NONBLOCK, in epoll_wait on the async
 * fd, as ibv_get_async_event(3) allows either. */
static int open_async_pipe(struct uro_context *ctx)
{
	int fds[2];

	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK))
		return -1;
	ctx->async_wfd = fds[1];
	if (uro_port_watch_open(ctx, fds[0])) {
		close(fds[0]);
		return -1;
	}
	return 0;
}

/* A forked child holds a copy of its parent's context: the segment and the
 * registry record it shares are the parent's, and the child's close
 * releases only its own copies (ibv_fork_init(3): the device stays the
 * parent's). */
static int owned_here(const struct uro_context *ctx)
{
	return ctx->owner_pid == getpid();
}

/* This process's open contexts: ibv_import_device(3) finds one by its
 * command fd (the ABI gives it nothing else). refs counts the context and
 * its imports; the state goes with the last of them. */
static pthread_mutex_t contexts_lock = PTHREAD_MUTEX_INITIALIZER;
static struct uro_context *contexts;

/* For fork.c only. */
void uro_contexts_lock(void)
{
	pthread_mutex_lock(&contexts_lock);
}

void uro_contexts_unlock(void)
{
	pthread_mutex_unlock(&contexts_lock);
}

static void context_free(struct uro_context *ctx)
{
	uro_atomic_server_stop(ctx);
	uro_progress_stop(ctx);
	uro_wire_close(ctx);
	/* Peers that cached this segment must look again: the slot may soon
	 * name another process. */
	if (ctx->seg.base && owned_here(ctx))
		__atomic_store_n(&uro_seg_header(&ctx->seg)->closed, 1, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < URO_MAX_SLOTS; i++) {
		if (!ctx->peers[i] || ctx->peers[i] == &ctx->self)
			continue;
		uro_peer_detach(ctx->peers[i]);
		free(ctx->peers[i]);
	}
	if (ctx->vctx.context.async_fd >= 0)
		close(ctx->vctx.context.async_fd);
	if (ctx->async_rfd >= 0)
		close(ctx->async_rfd);
	uro_port_watch_close(ctx);
	if (ctx->async_wfd >= 0)
		close(ctx->async_wfd);
	uro_share_fds_close(&ctx->share_fds);
	uro_segment_destroy(&ctx->seg);
	if (owned_here(ctx))
		uro_registry_release(&ctx->slot);
	else if (ctx->slot.fd >= 0) {
		/* The lock is the open file's and the name the socket's: the
		 * parent keeps both. */
		close(ctx->slot.fd);
		close(ctx->slot.sock);
	}
	if (ctx->vctx.context.cmd_fd >= 0)
		close(ctx->vctx.context.cmd_fd);
	pthread_mutex_destroy(&ctx->peers_lock);
	pthread_mutex_destroy(&ctx->vctx.context.mutex);
	free(ctx);
}

static void context_list_add(struct uro_context *ctx)
{
	pthread_mutex_lock(&contexts_lock);
	ctx->next_open = contexts;
	contexts = ctx;
	pthread_mutex_unlock(&contexts_lock);
}

/* Drops a reference; the last one frees the context's state. */
void uro_context_put(struct uro_context *ctx)
{
	int last;

	pthread_mutex_lock(&contexts_lock);
	last = --ctx->refs == 0;
	for (struct uro_context **p = &contexts; last && *p; p = &(*p)->next_open)
		if (*p == ctx) {
			*p = ctx->next_open;
			break;
		}
	pthread_mutex_unlock(&contexts_lock);
	if (last)
		context_free(ctx);
}

static int same_file(int a, int b)
{
	struct stat sa, sb;

	return !fstat(a, &sa) && !fstat(b, &sb) && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

struct uro_context *uro_context_get_by_fd(int cmd_fd, int *err)
{
	struct uro_context *found = NULL;
	struct stat st;

	if (fstat(cmd_fd, &st)) {
		*err = EBADF;
		return NULL;
	}
	pthread_mutex_lock(&contexts_lock);
	for (struct uro_context *c = contexts; c && !found; c = c->next_open)
		if (owned_here(c) && same_file(c->vctx.context.cmd_fd, cmd_fd))
			found = c;
	if (found)
		found->refs++;
	pthread_mutex_unlock(&contexts_lock);
	*err = found ? 0 : EINVAL;
	return found;
}

URO_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct uro_device *dev = (struct uro_device *)device;
	struct uro_context *ctx = calloc(1, sizeof(*ctx));
	struct ibv_context *c;
	int err;

	if (!ctx)
		return uro_fail_null(ENOMEM);
	c = &ctx->vctx.context;
	ctx->dev = dev;
	ctx->owner_pid = getpid();
	ctx->slot.fd = ctx->slot.sock = -1;
	ctx->seg.fd = -1;
	ctx->async_wfd = ctx->async_rfd = ctx->netlink_fd = -1;
	c->async_fd = -1;
	c->cmd_fd = -1;
	ctx->shared = ctx;
	ctx->refs = 1;
	c->device = device;
	c->num_comp_vectors = URO_NUM_COMP_VEC;
	c->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ctx->vctx.sz = sizeof(ctx->vctx);
	pthread_mutex_init(&c->mutex, NULL);
	pthread_mutex_init(&ctx->peers_lock, NULL);
	uro_progress_thread_init(ctx);
	ctx->ud_send = uro_ud_route;
	uro_atomic_server_init(ctx);
	uro_device_model_build(&dev->link, &ctx->model);
	if (!ctx->model.netdev_present)
		uro_warn("%s: netdev %s is missing; its port is down", dev->link.name,
			 dev->link.netdev);
	if (uro_registry_claim(NULL, &ctx->slot))
		goto fail;
	if (uro_segment_create(&ctx->seg, ctx->slot.slot) || open_async_pipe(ctx) || publish(ctx))
		goto fail;
	uro_peer_self(&ctx->self, &ctx->seg, ctx->slot.slot);
	ctx->self.hdr->async_wfd = ctx->async_wfd;
	ctx->self.hdr->async_ino = uro_fd_ino(ctx->async_wfd);
	ctx->self.hdr->wire_forced = (uint32_t)uro_wire_forced();
	tell_path(ctx);
	ctx->peers[ctx->slot.slot] = &ctx->self;
	uro_context_set_ops(ctx);
	/* No kernel to ioctl: the command fd names the context, so that
	 * ibv_import_device(3) can find it from a dup. */
	c->cmd_fd = fcntl(ctx->seg.fd, F_DUPFD_CLOEXEC, 0);
	if (c->cmd_fd < 0)
		goto fail;
	context_list_add(ctx);
	return c;
fail:
	err = errno ? errno : ENOMEM;
	uro_warn("%s: cannot open device: %s", dev->link.name, strerror(err));
	context_free(ctx);
	return uro_fail_null(err);
}

URO_EXPORT int ibv_close_device(struct ibv_context *context)
{
	struct uro_context *own = uro_container_of(context, struct uro_context, vctx.context);
	struct uro_context *ctx = own->shared;

	if (own != ctx) { /* an import: its own command fd, and a reference */
		close(context->cmd_fd);
		pthread_mutex_destroy(&context->mutex);
		free(own);
	}
	uro_context_put(ctx);
	return 0;
}

/* ibv_context_ops members that only a pre-1.1 libibverbs called through;
 * nothing in this library or the headers' inlines reaches them. */
static void *compat_op(void)
{
	errno = EOPNOTSUPP;
	return NULL;
}

void uro_context_set_ops(struct uro_context *ctx)
{
	struct ibv_context_ops *ops = &ctx->vctx.context.ops;
	struct verbs_context *v = &ctx->vctx;

	ops->_compat_alloc_pd = compat_op;
	ops->_compat_dealloc_pd = compat_op;
	ops->_compat_reg_mr = compat_op;
	ops->_compat_rereg_mr = compat_op;
	ops->_compat_dereg_mr = compat_op;
	ops->_compat_create_cq = compat_op;
	ops->_compat_cq_event = compat_op;
	ops->_compat_resize_cq = compat_op;
	ops->_compat_destroy_cq = compat_op;
	ops->_compat_create_srq = compat_op;
	ops->_compat_modify_srq = compat_op;
	ops->_compat_query_srq = compat_op;
	ops->_compat_destroy_srq = compat_op;
	ops->_compat_create_qp = compat_op;
	ops->_compat_query_qp = compat_op;
	ops->_compat_modify_qp = compat_op;
	ops->_compat_destroy_qp = compat_op;
	ops->_compat_create_ah = compat_op;
	ops->_compat_destroy_ah = compat_op;
	ops->_compat_attach_mcast = compat_op;
	ops->_compat_detach_mcast = compat_op;
	ops->_compat_async_event = compat_op;
	ops->alloc_mw = uro_alloc_mw;
	ops->dealloc_mw = uro_dealloc_mw;
	ops->bind_mw = uro_bind_mw;
	ops->poll_cq = uro_poll_cq;
	ops->req_notify_cq = uro_req_notify_cq;
	ops->post_send = uro_post_send;
	ops->post_recv = uro_post_recv;
	ops->post_srq_recv = uro_post_srq_recv;

	/* verbs_context ops left NULL make the header's inline wrappers fail
	 * with EOPNOTSUPP/ENOSYS: opening a shared XRC QP, WQ/RSS, flows, DM, counters, TD and
	 * parent domains, CQ moderation, rate limits. */
	v->query_port = uro_query_port;
	v->advise_mr = uro_advise_mr;
	v->query_device_ex = uro_query_device_ex;
	v->create_cq_ex = uro_create_cq_ex;
	v->create_qp_ex = uro_create_qp_ex;
	v->create_srq_ex = uro_create_srq_ex;
	v->open_xrcd = uro_open_xrcd;
	v->close_xrcd = uro_close_xrcd;
	v->get_srq_num = uro_get_srq_num;
}

/* Default versions beside the IBVERBS_1.0 compat ones (compat_1_0.c). */
URO_DEFAULT_VERSION(ibv_close_device);
URO_DEFAULT_VERSION(ibv_open_device);
