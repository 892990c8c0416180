/* The ibv_wr_* builder (ibv_wr_post(3)) on a QP created with
 * send_ops_flags. A batch is staged between wr_start and wr_complete in
 * per-QP slots allocated with the QP (no allocation per request), checked
 * as a whole, and handed to the same requester as ibv_post_send: if
 * wr_complete fails, nothing of the batch was posted. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "verbs_ops.h"
#include "user_memory.h"

/* The send operations uroce executes. */
#define SUPPORTED_SEND_OPS                                                                         \
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE |          \
	 IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |                           \
	 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |                 \
	 IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV |        \
	 IBV_QP_EX_WITH_ATOMIC_WRITE)

static struct uro_qp *from_qpx(struct ibv_qp_ex *qpx)
{
	return uro_container_of(qpx, struct uro_qp, qpx);
}

/* Starts a new request in the batch; NULL (and the batch failed) when the
 * send queue has no room for it. */
static struct ibv_send_wr *next_wr(struct ibv_qp_ex *qpx, enum ibv_wr_opcode op)
{
	struct uro_qp *qp = from_qpx(qpx);
	struct uro_pending *p;

	if (qp->batch_err)
		return NULL;
	if (qp->sq_posted - qp->sq_retired + qp->batch_n >= qp->cap.max_send_wr) {
		qp->batch_err = ENOMEM;
		return NULL;
	}
	p = &qp->batch[qp->batch_n++];
	memset(&p->wr, 0, sizeof(p->wr));
	p->wr.wr_id = qpx->wr_id;
	p->wr.send_flags = qpx->wr_flags;
	p->wr.opcode = op;
	p->wr.sg_list = p->sge;
	return &p->wr;
}

static struct uro_pending *current(struct ibv_qp_ex *qpx)
{
	struct uro_qp *qp = from_qpx(qpx);

	return qp->batch_n && !qp->batch_err ? &qp->batch[qp->batch_n - 1] : NULL;
}

static void batch_fail(struct ibv_qp_ex *qpx, int err)
{
	from_qpx(qpx)->batch_err = err;
}

static void wr_send(struct ibv_qp_ex *qpx)
{
	next_wr(qpx, IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm)
{
	struct ibv_send_wr *wr = next_wr(qpx, IBV_WR_SEND_WITH_IMM);

	if (wr)
		wr->imm_data = imm;
}

static void rdma(struct ibv_qp_ex *qpx, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr,
		 __be32 imm)
{
	struct ibv_send_wr *wr = next_wr(qpx, op);

	if (!wr)
		return;
	wr->wr.rdma.rkey = rkey;
	wr->wr.rdma.remote_addr = addr;
	wr->imm_data = imm;
}

static void wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr)
{
	rdma(qpx, IBV_WR_RDMA_WRITE, rkey, addr, 0);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, __be32 imm)
{
	rdma(qpx, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr, imm);
}

static void wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr)
{
	rdma(qpx, IBV_WR_RDMA_READ, rkey, addr, 0);
}

static void atomic(struct ibv_qp_ex *qpx, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr,
		   uint64_t compare_add, uint64_t swap)
{
	struct ibv_send_wr *wr = next_wr(qpx, op);

	if (!wr)
		return;
	wr->wr.atomic.rkey = rkey;
	wr->wr.atomic.remote_addr = addr;
	wr->wr.atomic.compare_add = compare_add;
	wr->wr.atomic.swap = swap;
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, uint64_t compare,
			      uint64_t swap)
{
	atomic(qpx, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, addr, compare, swap);
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, uint64_t add)
{
	atomic(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, addr, add, 0);
}

/* The 8 bytes are the request's own, copied now (ibv_wr_atomic_write(3)):
 * the caller may reuse them at once. */
static void wr_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr,
			    const void *atomic_wr)
{
	struct uro_pending *p;

	rdma(qpx, IBV_WR_ATOMIC_WRITE, rkey, addr, 0);
	p = current(qpx);
	if (!p)
		return;
	p->sge[0] = (struct ibv_sge){
	    .addr = uro_user_copy(p->data, atomic_wr, 8) ? URO_USER_NOWHERE : (uintptr_t)p->data,
	    .length = 8};
	p->wr.num_sge = 1;
	p->wr.send_flags |= IBV_SEND_INLINE;
}

static void wr_set_xrc_srqn(struct ibv_qp_ex *qpx, uint32_t remote_srqn)
{
	struct uro_pending *p = current(qpx);

	if (p)
		p->wr.qp_type.xrc.remote_srqn = remote_srqn;
}

static void wr_send_inv(struct ibv_qp_ex *qpx, uint32_t rkey)
{
	struct ibv_send_wr *wr = next_wr(qpx, IBV_WR_SEND_WITH_INV);

	if (wr)
		wr->invalidate_rkey = rkey;
}

static void wr_local_inv(struct ibv_qp_ex *qpx, uint32_t rkey)
{
	struct ibv_send_wr *wr = next_wr(qpx, IBV_WR_LOCAL_INV);

	if (wr)
		wr->invalidate_rkey = rkey;
}

static void wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *info)
{
	struct ibv_send_wr *wr = next_wr(qpx, IBV_WR_BIND_MW);

	if (!wr)
		return;
	wr->bind_mw.mw = mw;
	wr->bind_mw.rkey = rkey;
	wr->bind_mw.bind_info = *info;
}

static void wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct uro_pending *p = current(qpx);

	if (!p)
		return;
	p->wr.wr.ud.ah = ah;
	p->wr.wr.ud.remote_qpn = qpn;
	p->wr.wr.ud.remote_qkey = qkey;
}

static void wr_set_sge_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_sge *sge)
{
	struct uro_pending *p = current(qpx);

	if (!p)
		return;
	if (n > from_qpx(qpx)->cap.max_send_sge) {
		batch_fail(qpx, EINVAL);
		return;
	}
	memcpy(p->sge, sge, n * sizeof(*sge));
	p->wr.num_sge = (int)n;
}

static void wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct ibv_sge sge = {.addr = addr, .length = length, .lkey = lkey};

	wr_set_sge_list(qpx, 1, &sge);
}

/* Inline data is copied now: the caller may reuse its buffers at once. A
 * buffer that cannot be read fails the request when it runs
 * (URO_USER_NOWHERE), as ibv_post_send's does. */
static void wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_data_buf *b)
{
	struct uro_pending *p = current(qpx);
	size_t off = 0;
	int lost = 0;

	if (!p)
		return;
	for (size_t i = 0; i < n; i++) {
		if (b[i].length > from_qpx(qpx)->cap.max_inline_data - off) {
			batch_fail(qpx, EINVAL);
			return;
		}
		lost |= uro_user_copy(p->data + off, b[i].addr, b[i].length);
		off += b[i].length;
	}
	p->sge[0].addr = lost ? URO_USER_NOWHERE : (uintptr_t)p->data;
	p->sge[0].length = (uint32_t)off;
	p->sge[0].lkey = 0;
	p->wr.num_sge = 1;
	p->wr.send_flags |= IBV_SEND_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t length)
{
	struct ibv_data_buf b = {.addr = addr, .length = length};

	wr_set_inline_data_list(qpx, 1, &b);
}

static void wr_start(struct ibv_qp_ex *qpx)
{
	struct uro_qp *qp = from_qpx(qpx);

	qp->batch_n = 0;
	qp->batch_err = 0;
}

static void wr_abort(struct ibv_qp_ex *qpx)
{
	wr_start(qpx);
}

static int wr_complete(struct ibv_qp_ex *qpx)
{
	struct uro_qp *qp = from_qpx(qpx);
	struct ibv_send_wr *bad;
	int err = qp->batch_err;

	if (!err && qp->batch_n) {
		for (uint32_t i = 0; i + 1 < qp->batch_n; i++)
			qp->batch[i].wr.next = &qp->batch[i + 1].wr;
		err = uro_post_send(&qp->qpx.qp_base, &qp->batch[0].wr, &bad);
	}
	wr_start(qpx);
	return err;
}

int uro_qp_ex_init(struct uro_qp *qp, uint64_t send_ops_flags)
{
	struct ibv_qp_ex *x = &qp->qpx;

	if (send_ops_flags & ~(uint64_t)SUPPORTED_SEND_OPS)
		return EOPNOTSUPP;
	qp->batch = calloc(qp->cap.max_send_wr ? qp->cap.max_send_wr : 1, sizeof(*qp->batch));
	if (!qp->batch)
		return ENOMEM;
	qp->extended = 1;
	x->wr_send = wr_send;
	x->wr_send_imm = wr_send_imm;
	x->wr_rdma_write = wr_rdma_write;
	x->wr_rdma_write_imm = wr_rdma_write_imm;
	x->wr_rdma_read = wr_rdma_read;
	x->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	x->wr_atomic_fetch_add = wr_atomic_fetch_add;
	x->wr_atomic_write = wr_atomic_write;
	x->wr_set_xrc_srqn = wr_set_xrc_srqn;
	x->wr_send_inv = wr_send_inv;
	x->wr_local_inv = wr_local_inv;
	x->wr_bind_mw = wr_bind_mw;
	x->wr_set_ud_addr = wr_set_ud_addr;
	x->wr_set_sge = wr_set_sge;
	x->wr_set_sge_list = wr_set_sge_list;
	x->wr_set_inline_data = wr_set_inline_data;
	x->wr_set_inline_data_list = wr_set_inline_data_list;
	x->wr_start = wr_start;
	x->wr_complete = wr_complete;
	x->wr_abort = wr_abort;
	return 0;
}
