/* A buffer the program unmapped or protected after registering it never
 * faults the program inside uroce: a NIC pinned it and keeps using it,
 * uroce pins nothing, so the request completes in error instead and the
 * process, and its other QPs, go on. The requester's own buffer is its
 * local protection error (IBV_WC_LOC_PROT_ERR, ibv_poll_cq(3)); a receive
 * buffer the responder cannot write is a receive it cannot use, completed
 * in error with its QP in ERR, the requester told of a remote operational
 * error (IBTA 9.9.3.1.2 class A, as Soft-RoCE reports it). Runs on shared
 * memory and, with UROCE_TRANSPORT=roce, on the wire. */
#include <stdlib.h>
#include <sys/mman.h>

#include "../check.h"
#include "pair.h"

#define PAGE  4096u
#define SMALL 32u   /* travels in the receiver's completion on shared memory */
#define LARGE 8192u /* crosses with process_vm_writev, or in packets */

static struct side S, R; /* requester, responder */

/* A page-aligned buffer registered in s's PD, with all access. */
struct region {
	uint8_t *buf;
	size_t len;
	struct ibv_mr *mr;
};

#define ALL_ACCESS                                                                                 \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

static int region_make(struct region *g, struct side *s, size_t len, int access)
{
	g->len = len;
	g->buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (g->buf == MAP_FAILED)
		return -1;
	memset(g->buf, 0x5a, len);
	g->mr = ibv_reg_mr(s->pd, g->buf, len, access);
	return g->mr ? 0 : -1;
}

/* The region's memory taken away as the program may: unmapped, or left
 * mapped with fewer rights. */
enum loss { UNMAPPED, NO_ACCESS, READ_ONLY };

static void region_lose(struct region *g, enum loss how)
{
	if (how == UNMAPPED)
		munmap(g->buf, g->len);
	else
		mprotect(g->buf, g->len, how == NO_ACCESS ? PROT_NONE : PROT_READ);
}

static void region_free(struct region *g, enum loss how)
{
	ibv_dereg_mr(g->mr);
	if (how != UNMAPPED)
		munmap(g->buf, g->len);
}

/* A fresh connected RC pair on the sides' contexts: an error leaves a QP
 * in ERR, and each case starts anew. */
static struct ibv_qp *new_qp(struct side *s)
{
	struct ibv_qp_init_attr_ex init = {.qp_type = IBV_QPT_RC,
					   .send_cq = s->cq,
					   .recv_cq = s->cq,
					   .cap = {.max_send_wr = 4,
						   .max_recv_wr = 4,
						   .max_send_sge = 1,
						   .max_recv_sge = 1,
						   .max_inline_data = 64},
					   .comp_mask = IBV_QP_INIT_ATTR_PD |
							IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
					   .pd = s->pd,
					   .send_ops_flags = IBV_QP_EX_WITH_SEND};

	return ibv_create_qp_ex(s->ctx, &init);
}

static int connect_pair(void)
{
	ibv_destroy_qp(S.qp);
	ibv_destroy_qp(R.qp);
	S.qp = new_qp(&S);
	R.qp = new_qp(&R);
	if (!S.qp || !R.qp)
		return -1;
	return qp_connect(S.qp, R.qp->qp_num, 7, 1) || qp_connect(R.qp, S.qp->qp_num, 7, 1);
}

static int post(struct ibv_qp *qp, enum ibv_wr_opcode op, void *addr, uint32_t len, uint32_t lkey,
		unsigned flags)
{
	struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
	struct ibv_send_wr wr = {.wr_id = 7,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED | flags},
			   *bad;

	if (op == IBV_WR_RDMA_READ || op == IBV_WR_RDMA_WRITE) {
		wr.wr.rdma.remote_addr = (uintptr_t)R.buf;
		wr.wr.rdma.rkey = R.mr->rkey;
	} else if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = (uintptr_t)R.buf;
		wr.wr.atomic.rkey = R.mr->rkey;
		wr.wr.atomic.compare_add = 1;
	}
	return ibv_post_send(qp, &wr, &bad);
}

/* The status of the next completion on s's CQ, -1 when none came. */
static int next_status(struct side *s)
{
	struct ibv_wc wc;

	return poll_one(s->cq, &wc) == 1 ? (int)wc.status : -1;
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr init;

	return ibv_query_qp(qp, &a, IBV_QP_STATE, &init) ? IBV_QPS_UNKNOWN : a.qp_state;
}

/* The requester's buffer gone before the post: LOC_PROT_ERR, and the
 * responder's receive and QP untouched (its CQ stays empty, its QP in
 * RTS: the error is the requester's own, IBTA 10.8.3.1). */
static void test_requester_buffer(enum ibv_wr_opcode op, uint32_t len, unsigned flags,
				  enum loss how)
{
	struct region g;
	struct ibv_wc wc;

	if (connect_pair() || region_make(&g, &S, PAGE * 4, ALL_ACCESS)) {
		CHECK(0);
		return;
	}
	CHECK_EQ(post_recv_buf(&R, 1, R.buf, LARGE), 0);
	region_lose(&g, how);
	CHECK_EQ(post(S.qp, op, g.buf, len, g.mr->lkey, flags), 0);
	CHECK_EQ(next_status(&S), IBV_WC_LOC_PROT_ERR);
	CHECK_EQ(ibv_poll_cq(R.cq, 1, &wc), 0);
	CHECK_EQ(qp_state(R.qp), IBV_QPS_RTS);
	region_free(&g, how);
}

/* The responder's receive buffer made read-only (or unmapped) after it
 * was posted: the receive completes in error and the responder's QP is in
 * ERR. The requester's SEND is told of it (REM_OP_ERR), except where the
 * payload rides in the receiver's completion (shared memory, at most
 * URO_STAGED_MAX bytes, into a region no other party can reach): that
 * SEND completed when it was staged, and only the receiver's poll finds
 * the buffer gone. */
static void test_receive_buffer(uint32_t len, enum loss how, int access)
{
	const char *transport = getenv("UROCE_TRANSPORT");
	int staged = !(transport && !strcmp(transport, "roce")) && len == SMALL &&
		     access == IBV_ACCESS_LOCAL_WRITE;
	struct region g;

	if (connect_pair() || region_make(&g, &R, PAGE * 4, access)) {
		CHECK(0);
		return;
	}
	{
		struct ibv_sge sge = {
		    .addr = (uintptr_t)g.buf, .length = LARGE, .lkey = g.mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = 9, .sg_list = &sge, .num_sge = 1}, *bad;

		CHECK_EQ(ibv_post_recv(R.qp, &wr, &bad), 0);
	}
	region_lose(&g, how);
	CHECK_EQ(post(S.qp, IBV_WR_SEND, S.buf, len, S.mr->lkey, 0), 0);
	CHECK_EQ(next_status(&S), staged ? IBV_WC_SUCCESS : IBV_WC_REM_OP_ERR);
	CHECK_EQ(next_status(&R), IBV_WC_LOC_QP_OP_ERR);
	CHECK_EQ(qp_state(R.qp), IBV_QPS_ERR);
	region_free(&g, how);
}

/* An inline SEND that must wait (here behind a SEND waiting for a
 * receive, RNR) is the request's own from the post on: the program may
 * reuse its buffer once ibv_post_send returns (ibv_post_send(3)). One
 * unreadable then is that request's LOC_PROT_ERR whenever it runs: what
 * the program maps at the address afterwards never goes out. */
static void test_deferred_inline(void)
{
	uint8_t *page = mmap(NULL, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_wc wc;

	if (page == MAP_FAILED || connect_pair()) {
		CHECK(0);
		return;
	}
	memset(S.buf, 0xc3, SMALL);
	memset(R.buf, 0, PAGE * 2);
	CHECK_EQ(post(S.qp, IBV_WR_SEND, S.buf, SMALL, S.mr->lkey, 0), 0);
	CHECK_EQ(post(S.qp, IBV_WR_SEND, page, SMALL, 0, IBV_SEND_INLINE), 0);
	CHECK_EQ(mprotect(page, PAGE, PROT_READ | PROT_WRITE), 0);
	memset(page, 0xee, SMALL);
	CHECK_EQ(post_recv_buf(&R, 1, R.buf, LARGE), 0);
	CHECK_EQ(post_recv_buf(&R, 2, R.buf + PAGE, LARGE), 0);
	CHECK_EQ(next_status(&S), IBV_WC_SUCCESS);
	CHECK_EQ(next_status(&S), IBV_WC_LOC_PROT_ERR);
	CHECK(poll_one(R.cq, &wc) == 1 && wc.wr_id == 1 && wc.status == IBV_WC_SUCCESS);
	CHECK_EQ(R.buf[0], 0xc3);
	/* The second receive is flushed or left waiting, never filled. */
	CHECK(ibv_poll_cq(R.cq, 1, &wc) == 0 || wc.status != IBV_WC_SUCCESS);
	CHECK_EQ(R.buf[PAGE], 0);
	munmap(page, PAGE);
}

/* The same through ibv_wr_set_inline_data(3), which copies the data in
 * the call: a buffer it cannot read is the request's LOC_PROT_ERR, not a
 * fault in the program. */
static void test_wr_inline(void)
{
	struct ibv_qp_ex *qpx;
	struct region g;
	struct ibv_wc wc;

	if (connect_pair() || region_make(&g, &S, PAGE, ALL_ACCESS)) {
		CHECK(0);
		return;
	}
	qpx = ibv_qp_to_qp_ex(S.qp);
	CHECK_EQ(post_recv_buf(&R, 1, R.buf, LARGE), 0);
	region_lose(&g, NO_ACCESS);
	ibv_wr_start(qpx);
	qpx->wr_id = 7;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qpx);
	ibv_wr_set_inline_data(qpx, g.buf, SMALL);
	CHECK_EQ(ibv_wr_complete(qpx), 0);
	CHECK_EQ(next_status(&S), IBV_WC_LOC_PROT_ERR);
	CHECK_EQ(ibv_poll_cq(R.cq, 1, &wc), 0);
	region_free(&g, NO_ACCESS);
}

/* After every failure, a new pair on the same contexts still works. */
static void test_others_keep_working(void)
{
	struct ibv_wc wc;

	if (connect_pair()) {
		CHECK(0);
		return;
	}
	memset(S.buf, 0xc3, SMALL);
	CHECK_EQ(post_recv_buf(&R, 1, R.buf + PAGE, LARGE), 0);
	CHECK_EQ(post(S.qp, IBV_WR_SEND, S.buf, SMALL, S.mr->lkey, 0), 0);
	CHECK_EQ(next_status(&S), IBV_WC_SUCCESS);
	CHECK(poll_one(R.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.byte_len == SMALL);
	CHECK_EQ(R.buf[PAGE], 0xc3);
}

int main(void)
{
	static const struct ibv_qp_cap cap = {
	    .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1};

	if (side_open(&S, IBV_QPT_RC, 64, cap) || side_open(&R, IBV_QPT_RC, 64, cap)) {
		fprintf(stderr, "cannot open uroce0\n");
		return 1;
	}
	RUN(test_requester_buffer(IBV_WR_SEND, SMALL, 0, UNMAPPED), 10);
	RUN(test_requester_buffer(IBV_WR_SEND, SMALL, 0, NO_ACCESS), 10);
	RUN(test_requester_buffer(IBV_WR_SEND, LARGE, 0, NO_ACCESS), 10);
	RUN(test_requester_buffer(IBV_WR_SEND, SMALL, IBV_SEND_INLINE, NO_ACCESS), 10);
	RUN(test_requester_buffer(IBV_WR_RDMA_WRITE, LARGE, 0, UNMAPPED), 10);
	RUN(test_requester_buffer(IBV_WR_RDMA_READ, LARGE, 0, READ_ONLY), 10);
	RUN(test_requester_buffer(IBV_WR_ATOMIC_FETCH_AND_ADD, 8, 0, READ_ONLY), 10);
	RUN(test_receive_buffer(SMALL, READ_ONLY, IBV_ACCESS_LOCAL_WRITE), 10);
	RUN(test_receive_buffer(SMALL, UNMAPPED, IBV_ACCESS_LOCAL_WRITE), 10);
	RUN(test_receive_buffer(SMALL, READ_ONLY, ALL_ACCESS), 10);
	RUN(test_receive_buffer(LARGE, READ_ONLY, IBV_ACCESS_LOCAL_WRITE), 10);
	RUN(test_deferred_inline(), 10);
	RUN(test_wr_inline(), 10);
	RUN(test_others_keep_working(), 10);
	side_close(&S);
	side_close(&R);
	return check_report();
}
