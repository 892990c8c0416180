/* Completion queues: ibv_create_cq(3), ibv_create_cq_ex(3),
 * ibv_resize_cq(3), ibv_destroy_cq(3), ibv_poll_cq(3), ibv_req_notify_cq(3).
 *
 * The ring lives in the segment so that the data path can complete into it
 * from any process; polling reads it with no lock and no syscall. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cq_ring.h"
#include "log.h"
#include "verbs_ops.h"
#include "segment_ops.h"
#include "staged_payload.h"
#include "wire.h"

/* What an extended CQ can report per completion (ibv_create_cq_ex(3)). */
#define SUPPORTED_WC_FLAGS                                                                         \
	(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |                    \
	 IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |                         \
	 IBV_WC_EX_WITH_DLID_PATH_BITS)
#define SUPPORTED_CQ_FLAGS (IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN)

static size_t ring_bytes(uint32_t entries)
{
	return (size_t)entries * sizeof(struct uro_cqe);
}

/* Threads polling one CQ take turns: an entry goes to exactly one. */
static int poll_lock(struct uro_cq *cq)
{
	return cq->single_threaded ? 0 : uro_mt_lock(&cq->poll_lock);
}

static struct uro_cqe *peek(struct uro_cq *cq)
{
	return uro_cq_peek(cq->pub, cq->ring);
}

/* Whether the head position, reserved by a producer that has not
 * published it, has waited long enough for its producer to be taken for
 * killed or stopped: later completions, from live producers, must not
 * wait behind it for ever. A live producer publishes within nanoseconds,
 * so the clock is read only every 1024th poll that finds the same head
 * unpublished. */
static __attribute__((noinline)) int head_abandoned(struct uro_cq *cq)
{
	uint64_t now;

	if (!uro_cq_pending(cq->pub))
		return 0;
	if (cq->stall_pos != cq->pub->head || !cq->stall_polls) {
		cq->stall_pos = cq->pub->head;
		cq->stall_polls = 1;
		cq->stall_since_ns = 0;
		return 0;
	}
	if (++cq->stall_polls % 1024)
		return 0;
	now = uro_now_ns();
	if (!cq->stall_since_ns) {
		cq->stall_since_ns = now;
		return 0;
	}
	if (now - cq->stall_since_ns < URO_CQ_WAIT_NS)
		return 0;
	cq->stall_polls = 0;
	uro_log(URO_LOG_WARN,
		"CQ %u: a completion reserved by a process that never wrote it is skipped",
		cq->index);
	return 1;
}

/* A staged payload whose receive buffer the program unmapped or made
 * read-only after posting it: the receive is one its responder could not
 * use, completed in error with the QP moved to ERR, as Soft-RoCE completes
 * a receive its copy fails on (a malformed WQE, IBTA 9.9.3.1.2 class A).
 * The sender, whose SEND completed when it staged the bytes, has already
 * seen success; a NIC that pinned the buffer would have written it. */
static void unplaceable(struct uro_cq *cq, struct uro_cqe *e)
{
	struct uro_context *ctx = to_uctx(cq->cqx.context);
	struct uro_qp *qp = ctx->qps[e->qp_num & (URO_MAX_QP - 1)];

	e->status = IBV_WC_LOC_QP_OP_ERR;
	if (qp && qp->qpx.qp_base.qp_num == e->qp_num) {
		uro_qp_error(&ctx->self, qp->pub);
		qp->qpx.qp_base.state = IBV_QPS_ERR;
	}
}

/* The next entry, once what it carries is in place: the program may read
 * the receive buffer from the moment it sees the completion. */
static struct uro_cqe *take(struct uro_cq *cq)
{
	struct uro_cqe *e;

	for (;;) {
		e = peek(cq);
		if (!e && head_abandoned(cq)) {
			uro_cq_consume(cq->pub);
			e = peek(cq);
		}
		if (!e || e->status != URO_CQE_DISCARDED)
			break;
		uro_cq_consume(cq->pub);
	}
	if (e && e->staged_len && uro_place_payload(&to_uctx(cq->cqx.context)->self, e))
		unplaceable(cq, e);
	return e;
}

/* Polling a send completion frees the send-queue entries up to it, as a
 * hardware driver learns of them (so unsignaled work fills the queue until
 * a signaled completion is polled, ibv_post_send(3)). */
static void advance_head(struct uro_cq *cq)
{
	const struct uro_cqe *e = peek(cq);

	if (e && e->sq_seq) {
		struct uro_context *ctx = to_uctx(cq->cqx.context);
		struct uro_qp *qp = ctx->qps[e->qp_num & (URO_MAX_QP - 1)];

		/* Only within what is outstanding: a completion left from
		 * before the QP was reset retires nothing. */
		if (qp && qp->qpx.qp_base.qp_num == e->qp_num &&
		    e->sq_seq - qp->sq_retired <= qp->sq_posted - qp->sq_retired)
			qp->sq_retired = e->sq_seq;
	}
	uro_cq_consume(cq->pub);
}

static void to_wc(const struct uro_cqe *e, struct ibv_wc *wc)
{
	wc->wr_id = e->wr_id;
	wc->status = (enum ibv_wc_status)e->status;
	wc->opcode = (enum ibv_wc_opcode)e->opcode;
	wc->vendor_err = e->vendor_err;
	wc->byte_len = e->byte_len;
	wc->imm_data = e->imm_data;
	wc->qp_num = e->qp_num;
	wc->src_qp = e->src_qp;
	wc->wc_flags = e->wc_flags;
	wc->pkey_index = e->pkey_index;
	wc->slid = e->slid;
	wc->sl = e->sl;
	wc->dlid_path_bits = e->dlid_path_bits;
}

void uro_cq_discard_qp(struct uro_cq *cq, uint32_t qpn)
{
	int locked = poll_lock(cq);
	uint32_t tail = __atomic_load_n(&cq->pub->tail, __ATOMIC_ACQUIRE) & URO_CQ_POS_MASK;

	/* Published entries between head and tail stay where they are until
	 * polled; one still being written is left to the poll. */
	for (uint32_t p = cq->pub->head; p != tail; p = (p + 1) & URO_CQ_POS_MASK) {
		struct uro_cqe *e = &cq->ring[p % cq->pub->size];

		if (__atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) == p + 1 && e->qp_num == qpn)
			e->status = URO_CQE_DISCARDED;
	}
	uro_mt_unlock(&cq->poll_lock, locked);
}

int uro_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct uro_cq *cq = to_ucq(ibcq);
	struct uro_context *ctx = to_uctx(ibcq->context);
	int got = 0, locked;

	uro_wire_in_poll(ctx, 1);
	uro_progress(ctx); /* RNR retries, the wire; free when there are none */
	locked = poll_lock(cq);
	for (struct uro_cqe *e; got < n && (e = take(cq)); got++) {
		to_wc(e, &wc[got]);
		advance_head(cq);
	}
	uro_mt_unlock(&cq->poll_lock, locked);
	uro_wire_in_poll(ctx, 0);
	return got;
}

int uro_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct uro_cq *cq = to_ucq(ibcq);

	/* 1 = next completion, 2 = next solicited one (IBTA 11.4.2.2).
	 * Sequentially consistent, as is the producer's fence in
	 * uro_cq_take_arm: the program polls after arming, the producer checks
	 * the arm after publishing, and without both orders each could miss
	 * the other (a completion nobody is woken for). */
	__atomic_store_n(&cq->pub->armed, solicited_only ? 2u : 1u, __ATOMIC_SEQ_CST);
	return 0;
}

/* The extended-CQ poll (ibv_create_cq_ex(3)): start_poll takes the first
 * entry, next_poll consumes it and takes the next, end_poll consumes the
 * last one taken. The poll lock is held from a successful start_poll to
 * end_poll (not called after ENOENT). */
static int load_current(struct uro_cq *cq)
{
	cq->cur = take(cq);
	if (!cq->cur)
		return ENOENT;
	cq->cqx.wr_id = cq->cur->wr_id;
	cq->cqx.status = (enum ibv_wc_status)cq->cur->status;
	return 0;
}

static int start_poll(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr)
{
	struct uro_cq *cq = uro_container_of(cqx, struct uro_cq, cqx);
	int locked, err;

	if (attr->comp_mask)
		return EINVAL;
	uro_wire_in_poll(to_uctx(cqx->context), 1);
	uro_progress(to_uctx(cqx->context));
	locked = poll_lock(cq);
	err = load_current(cq);
	if (err) {
		uro_mt_unlock(&cq->poll_lock, locked);
		uro_wire_in_poll(to_uctx(cqx->context), 0);
	} else {
		cq->poll_locked = locked;
	}
	return err;
}

static int next_poll(struct ibv_cq_ex *cqx)
{
	struct uro_cq *cq = uro_container_of(cqx, struct uro_cq, cqx);

	advance_head(cq);
	return load_current(cq);
}

static void end_poll(struct ibv_cq_ex *cqx)
{
	struct uro_cq *cq = uro_container_of(cqx, struct uro_cq, cqx);

	if (cq->cur)
		advance_head(cq);
	cq->cur = NULL;
	uro_mt_unlock(&cq->poll_lock, cq->poll_locked);
	cq->poll_locked = 0;
	uro_wire_in_poll(to_uctx(cqx->context), 0);
}

static const struct uro_cqe *cur(struct ibv_cq_ex *cqx)
{
	return uro_container_of(cqx, struct uro_cq, cqx)->cur;
}

static enum ibv_wc_opcode read_opcode(struct ibv_cq_ex *c)
{
	return (enum ibv_wc_opcode)cur(c)->opcode;
}
static uint32_t read_vendor_err(struct ibv_cq_ex *c)
{
	return cur(c)->vendor_err;
}
static uint32_t read_byte_len(struct ibv_cq_ex *c)
{
	return cur(c)->byte_len;
}
static __be32 read_imm_data(struct ibv_cq_ex *c)
{
	return cur(c)->imm_data;
}
static uint32_t read_qp_num(struct ibv_cq_ex *c)
{
	return cur(c)->qp_num;
}
static uint32_t read_src_qp(struct ibv_cq_ex *c)
{
	return cur(c)->src_qp;
}
static unsigned int read_wc_flags(struct ibv_cq_ex *c)
{
	return cur(c)->wc_flags;
}
static uint32_t read_slid(struct ibv_cq_ex *c)
{
	return cur(c)->slid;
}
static uint8_t read_sl(struct ibv_cq_ex *c)
{
	return cur(c)->sl;
}
static uint8_t read_dlid_path_bits(struct ibv_cq_ex *c)
{
	return cur(c)->dlid_path_bits;
}

static void set_poll_ops(struct ibv_cq_ex *c)
{
	c->start_poll = start_poll;
	c->next_poll = next_poll;
	c->end_poll = end_poll;
	c->read_opcode = read_opcode;
	c->read_vendor_err = read_vendor_err;
	c->read_byte_len = read_byte_len;
	c->read_imm_data = read_imm_data;
	c->read_qp_num = read_qp_num;
	c->read_src_qp = read_src_qp;
	c->read_wc_flags = read_wc_flags;
	c->read_slid = read_slid;
	c->read_sl = read_sl;
	c->read_dlid_path_bits = read_dlid_path_bits;
}

static int alloc_ring(struct uro_context *ctx, struct uro_cq *cq, uint32_t entries)
{
	uint64_t off = uro_arena_alloc(&ctx->seg, ring_bytes(entries));

	if (!off)
		return ENOMEM;
	cq->pub->ring = off;
	cq->pub->size = entries;
	cq->ring = uro_seg_ptr(&ctx->seg, off);
	memset(cq->ring, 0, ring_bytes(entries)); /* no stale seq from a reused range */
	return 0;
}

/* flags: enum ibv_create_cq_attr_flags; SINGLE_THREADED promises one
 * poller, which then takes no lock. */
static struct ibv_cq_ex *cq_create(struct ibv_context *context, int cqe, void *cq_context,
				   struct ibv_comp_channel *channel, int comp_vector,
				   uint32_t flags)
{
	struct uro_context *ctx = to_uctx(context);
	struct uro_cq *cq;
	int64_t index;
	int err;

	if (cqe < 1 || cqe > URO_MAX_CQE || comp_vector < 0 ||
	    comp_vector >= context->num_comp_vectors || (channel && channel->context != context))
		return uro_fail_null(EINVAL);
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return uro_fail_null(ENOMEM);
	uro_lock(ctx);
	index = uro_index_take(&ctx->seg.cq_ids);
	if (index < 0) {
		uro_unlock(ctx);
		free(cq);
		return uro_fail_null(ENOMEM);
	}
	cq->index = (uint32_t)index;
	cq->pub = &ctx->self.cq[index];
	memset(cq->pub, 0, sizeof(*cq->pub));
	err = alloc_ring(ctx, cq, (uint32_t)cqe);
	if (err) {
		uro_index_give(&ctx->seg.cq_ids, cq->index);
		uro_unlock(ctx);
		free(cq);
		return uro_fail_null(err);
	}
	cq->pub->token = (uintptr_t)cq;
	cq->pub->serial = uro_next_serial(ctx);
	cq->pub->channel_wfd = channel ? to_uchannel(channel)->wfd : -1;
	cq->pub->channel_ino = channel ? uro_fd_ino(to_uchannel(channel)->wfd) : 0;
	cq->pub->ignore_overrun = (flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN) != 0;
	__atomic_store_n(&cq->pub->in_use, 1, __ATOMIC_RELEASE);
	if (channel)
		to_uchannel(channel)->users++;
	uro_unlock(ctx);

	cq->cqx.context = context;
	cq->cqx.channel = channel;
	cq->cqx.cq_context = cq_context;
	cq->cqx.handle = cq->index;
	cq->cqx.cqe = cqe;
	pthread_mutex_init(&cq->cqx.mutex, NULL);
	pthread_spin_init(&cq->poll_lock, PTHREAD_PROCESS_PRIVATE);
	cq->single_threaded = (flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED) != 0;
	pthread_cond_init(&cq->cqx.cond, NULL);
	set_poll_ops(&cq->cqx);
	return &cq->cqx;
}

URO_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
					struct ibv_comp_channel *channel, int comp_vector)
{
	struct ibv_cq_ex *cqx = cq_create(context, cqe, cq_context, channel, comp_vector, 0);

	return cqx ? ibv_cq_ex_to_cq(cqx) : NULL;
}

struct ibv_cq_ex *uro_create_cq_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *attr)
{
	const uint32_t known_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;
	uint32_t flags = attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS ? attr->flags : 0;

	if (attr->comp_mask & ~known_mask)
		return uro_fail_null(EINVAL);
	/* uroce has no parent domains, so a PD given here is not one. */
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) && attr->parent_domain)
		return uro_fail_null(EINVAL);
	if (attr->wc_flags & ~(uint64_t)SUPPORTED_WC_FLAGS)
		return uro_fail_null(EOPNOTSUPP);
	if (flags & ~(uint32_t)SUPPORTED_CQ_FLAGS)
		return uro_fail_null(EOPNOTSUPP);
	if (attr->cqe > (uint32_t)URO_MAX_CQE)
		return uro_fail_null(EINVAL);
	return cq_create(c, (int)attr->cqe, attr->cq_context, attr->channel, (int)attr->comp_vector,
			 flags);
}

/* Resizing copies what is waiting into a new ring (ibv_resize_cq(3)).
 * Producers in other processes are kept out while it moves (cq_ring.h):
 * none writes into the old ring after the copy, so nothing is lost. */
URO_EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct uro_cq *cq = to_ucq(ibcq);
	struct uro_context *ctx = to_uctx(ibcq->context);
	struct uro_cqe *old = cq->ring;
	uint64_t old_off = cq->pub->ring;
	uint32_t old_size = cq->pub->size;
	uint32_t head, tail, n = 0;
	int err, all_published, locked;

	if (cqe < 1 || cqe > URO_MAX_CQE)
		return EINVAL;
	uro_lock(ctx);
	locked = poll_lock(cq);
	head = cq->pub->head;
	tail = uro_cq_freeze(cq->pub, old, &all_published);
	/* Shrinking below what is waiting would lose completions. */
	if ((uint32_t)cqe < ((tail - head) & URO_CQ_POS_MASK)) {
		err = EINVAL;
		goto thaw;
	}
	err = alloc_ring(ctx, cq, (uint32_t)cqe);
	if (err) {
		cq->ring = old;
		cq->pub->ring = old_off;
		cq->pub->size = old_size;
		goto thaw;
	}
	for (uint32_t p = head; p != tail; p = (p + 1) & URO_CQ_POS_MASK) {
		const struct uro_cqe *e = &old[p % old_size];

		/* An entry a dead producer never wrote is left behind. */
		if (__atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) != p + 1)
			continue;
		cq->ring[n] = *e;
		cq->ring[n].seq = n + 1;
		n++;
	}
	cq->pub->head = 0;
	tail = n;
	/* A producer that died holding a position might still write there:
	 * the old ring is then not reused. */
	if (all_published)
		uro_arena_free(&ctx->seg, old_off, ring_bytes(old_size));
	ibcq->cqe = cqe;
thaw:
	uro_cq_thaw(cq->pub, tail);
	uro_mt_unlock(&cq->poll_lock, locked);
	uro_unlock(ctx);
	return err;
}

URO_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct uro_cq *cq = to_ucq(ibcq);
	struct uro_context *ctx = to_uctx(ibcq->context);

	uro_lock(ctx);
	if (cq->users) {
		uro_unlock(ctx);
		return EBUSY;
	}
	uro_unlock(ctx);
	uro_forget_events(ctx, &cq->pub->serial);
	uro_wait_acked(&cq->cqx.mutex, &cq->cqx.cond, &cq->cqx.comp_events_completed,
		       &cq->comp_events);
	uro_wait_acked(&cq->cqx.mutex, &cq->cqx.cond, &cq->cqx.async_events_completed,
		       &cq->async_events);
	uro_lock(ctx);
	if (cq->cqx.channel)
		to_uchannel(cq->cqx.channel)->users--;
	uro_arena_free(&ctx->seg, cq->pub->ring, ring_bytes(cq->pub->size));
	memset(cq->pub, 0, sizeof(*cq->pub));
	uro_index_give(&ctx->seg.cq_ids, cq->index);
	uro_unlock(ctx);
	pthread_cond_destroy(&cq->cqx.cond);
	pthread_mutex_destroy(&cq->cqx.mutex);
	pthread_spin_destroy(&cq->poll_lock);
	free(cq);
	return 0;
}

/* Default versions beside the IBVERBS_1.0 compat ones (compat_1_0.c). */
URO_DEFAULT_VERSION(ibv_create_cq);
URO_DEFAULT_VERSION(ibv_destroy_cq);
URO_DEFAULT_VERSION(ibv_resize_cq);
