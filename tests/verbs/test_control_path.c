/* The control-path verbs as a program sees them through
 * <infiniband/verbs.h>: every error case each verb documents, and the QP
 * walk RESET -> INIT -> RTR -> RTS -> SQD -> RTS -> ERR -> RESET. Runs on
 * the embedded default device (uroce0 on lo, RoCE). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/verbs/driver_abi.h"
#include "../check.h"
#include "fixture.h"

/* The IBVERBS_1.1 ibv_query_port() that old binaries call, and that the
 * header's inline falls back to without a verbs_context op: it fills the
 * struct up to, not including, port_cap_flags2. */
static void test_compat_query_port(struct ibv_context *ctx)
{
	struct ibv_port_attr a;

	memset(&a, 0xab, sizeof(a));
	/* The parentheses call the function, not the header's macro. */
	CHECK_EQ((ibv_query_port)(ctx, 1, (struct _compat_ibv_port_attr *)&a), 0);
	CHECK_EQ(a.state, IBV_PORT_ACTIVE);
	CHECK_EQ(a.link_layer, IBV_LINK_LAYER_ETHERNET);
	CHECK_EQ(a.gid_tbl_len, 16);
	CHECK_EQ(a.port_cap_flags2, 0xabab); /* beyond the old struct: untouched */
	CHECK_EQ((ibv_query_port)(ctx, 2, (struct _compat_ibv_port_attr *)&a), EINVAL);
}

static void test_device(struct ibv_context *ctx)
{
	struct ibv_device_attr_ex dx;
	struct ibv_port_attr port;
	struct ibv_gid_entry entries[URO_TEST_GIDS], e;
	union ibv_gid gid;
	__be16 pkey;

	CHECK_EQ(ibv_query_device_ex(ctx, NULL, &dx), 0);
	CHECK_EQ(dx.orig_attr.phys_port_cnt, 1);
	CHECK(dx.orig_attr.max_qp > 0 && dx.orig_attr.max_cqe > 0);
	CHECK_EQ(dx.orig_attr.vendor_id, 0xffffff); /* Soft-RoCE's: no IEEE OUI */
	/* The capabilities uroce has, and no others. */
	CHECK(dx.orig_attr.device_cap_flags & IBV_DEVICE_BAD_QKEY_CNTR);
	CHECK(dx.orig_attr.device_cap_flags & IBV_DEVICE_PORT_ACTIVE_EVENT); /* test_port_events */
	CHECK(!(dx.orig_attr.device_cap_flags & (IBV_DEVICE_BAD_PKEY_CNTR | IBV_DEVICE_SRQ_RESIZE |
						 IBV_DEVICE_MEM_MGT_EXTENSIONS)));
	CHECK_EQ(ibv_query_port(ctx, 1, &port), 0);
	CHECK_EQ(port.state, IBV_PORT_ACTIVE);
	CHECK_EQ(port.link_layer, IBV_LINK_LAYER_ETHERNET);
	CHECK_EQ(port.max_mtu, IBV_MTU_4096);
	CHECK_EQ(port.active_mtu, IBV_MTU_4096); /* lo's MTU is 65536 */
	CHECK_EQ(ibv_query_port(ctx, 2, &port), EINVAL);

	/* GID 0 is lo's IPv4 address as a RoCEv2 IPv4-mapped GID. */
	CHECK_EQ(ibv_query_gid(ctx, 1, 0, &gid), 0);
	CHECK_EQ(gid.raw[10], 0xff);
	CHECK_EQ(gid.raw[12], 127);
	CHECK_EQ(gid.raw[15], 1);
	CHECK_EQ(ibv_query_gid(ctx, 1, port.gid_tbl_len, &gid), -1);
	CHECK_EQ(ibv_query_gid_ex(ctx, 1, 0, &e, 0), 0);
	CHECK_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V2);
	CHECK_EQ(e.port_num, 1);
	CHECK(e.ndev_ifindex > 0);
	CHECK_EQ(ibv_query_gid_ex(ctx, 1, port.gid_tbl_len - 1, &e, 0), ENODATA);
	CHECK_EQ(ibv_query_gid_ex(ctx, 1, 0, &e, 1), EINVAL);
	CHECK_EQ(ibv_query_gid_ex(ctx, 3, 0, &e, 0), EINVAL);
	CHECK(ibv_query_gid_table(ctx, entries, URO_TEST_GIDS, 0) >= 2); /* 127.0.0.1, ::1 */
	CHECK_EQ(ibv_query_gid_table(ctx, entries, 1, 0), -EINVAL);

	CHECK_EQ(ibv_query_pkey(ctx, 1, 0, &pkey), 0);
	CHECK_EQ(ntohs(pkey), 0xffff);
	CHECK_EQ(ibv_query_pkey(ctx, 1, 1, &pkey), -1);
	CHECK_EQ(ibv_get_pkey_index(ctx, 1, htons(0xffff)), 0);
	CHECK_EQ(ibv_get_pkey_index(ctx, 1, htons(0x8001)), -1);
}

static void test_mr(struct ibv_pd *pd)
{
	static char buf[8192];
	struct ibv_mr *mr;
	struct ibv_pd *pd2 = ibv_alloc_pd(pd->context);
	size_t big = (size_t)1 << 30;
	void *huge;

	errno = 0;
	CHECK(ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_WRITE) == NULL);
	CHECK_EQ(errno, EINVAL);
	errno = 0;
	CHECK(ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_ATOMIC) == NULL);
	CHECK_EQ(errno, EINVAL);
	/* On-demand paging, explicit and implicit (the whole address space). */
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr != NULL);
	if (mr) {
		struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 64, .lkey = mr->lkey};

		CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
				       IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1),
			 0);
		sge.lkey ^= 0x100;
		CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1), EINVAL);
		CHECK_EQ(ibv_dereg_mr(mr), 0);
	}
	mr = ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr != NULL);
	if (mr)
		CHECK_EQ(ibv_dereg_mr(mr), 0);

	mr = ibv_reg_mr(pd, buf, sizeof(buf),
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	CHECK(mr != NULL);
	if (!mr)
		return;
	CHECK(mr->lkey != 0);
	CHECK(mr->addr == buf && mr->length == sizeof(buf) && mr->pd == pd);
	CHECK_EQ(ibv_dealloc_pd(pd2), 0);
	pd2 = ibv_alloc_pd(pd->context);
	CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0), 0);
	CHECK(mr->pd == pd2);
	CHECK_EQ(ibv_dealloc_pd(pd2), EBUSY); /* the MR is on it now */
	CHECK_EQ(
	    ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_REMOTE_WRITE),
	    IBV_REREG_MR_ERR_INPUT);
	CHECK_EQ(ibv_rereg_mr(mr, 0, NULL, NULL, 0, 0), IBV_REREG_MR_ERR_INPUT);
	CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD, pd,
			      buf + 4096, 4096, 0),
		 0);
	CHECK(mr->addr == buf + 4096 && mr->length == 4096);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_dealloc_pd(pd2), 0);

	/* A 1 GiB region registers without touching (or pinning) its pages. */
	huge = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		    -1, 0);
	CHECK(huge != MAP_FAILED);
	mr = ibv_reg_mr_iova2(pd, huge, big, 0x1000, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr != NULL);
	if (mr)
		CHECK_EQ(ibv_dereg_mr(mr), 0);
	munmap(huge, big);
}

/* Registration fails with EFAULT where a pinning provider could not pin:
 * nothing mapped, no access, read-only memory asked for write, a length
 * running past the mapping. */
static void expect_efault(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	errno = 0;
	CHECK(ibv_reg_mr(pd, addr, len, access) == NULL);
	CHECK_EQ(errno, EFAULT);
}

static void test_mr_range(struct ibv_pd *pd)
{
	const size_t page = 4096;
	uint8_t *m =
	    mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr;

	CHECK(m != MAP_FAILED);
	CHECK_EQ(munmap(m + 3 * page, page), 0); /* a hole after three pages */
	CHECK_EQ(mprotect(m + page, page, PROT_NONE), 0);
	CHECK_EQ(mprotect(m + 2 * page, page, PROT_READ), 0);
	expect_efault(pd, NULL, page, IBV_ACCESS_LOCAL_WRITE);
	expect_efault(pd, m + 3 * page, page, 0);		       /* unmapped */
	expect_efault(pd, m + page, 16, 0);			       /* PROT_NONE */
	expect_efault(pd, m + 2 * page, page, IBV_ACCESS_LOCAL_WRITE); /* read-only */
	expect_efault(pd, m, (size_t)42 << 40, IBV_ACCESS_LOCAL_WRITE);
	expect_efault(pd, m, (size_t)64 << 40, 0);
	mr = ibv_reg_mr(pd, m + 2 * page, page, IBV_ACCESS_REMOTE_READ);
	CHECK(mr != NULL); /* read-only memory, read access */
	if (mr) {
		CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
				      IBV_ACCESS_LOCAL_WRITE),
			 IBV_REREG_MR_ERR_INPUT);
		CHECK_EQ(errno, EFAULT);
		CHECK_EQ(
		    ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, m + 3 * page, page, 0),
		    IBV_REREG_MR_ERR_INPUT);
		CHECK_EQ(errno, EFAULT);
		CHECK(mr->addr == m + 2 * page);
		ibv_dereg_mr(mr);
	}
	mr = ibv_reg_mr(pd, m, page, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr != NULL);
	if (mr)
		ibv_dereg_mr(mr);
	munmap(m, 3 * page);
}

static void test_cq(struct ibv_context *ctx)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq_init_attr_ex cx = {.cqe = 8, .wc_flags = IBV_WC_STANDARD_FLAGS};
	struct ibv_poll_cq_attr pa = {0};
	struct pollfd pfd;
	struct ibv_cq *cq, *got;
	struct ibv_cq_ex *cqx;
	struct ibv_wc wc;
	void *cq_ctx;

	CHECK(ch != NULL);
	errno = 0;
	CHECK(ibv_create_cq(ctx, 0, NULL, NULL, 0) == NULL);
	CHECK_EQ(errno, EINVAL);
	CHECK(ibv_create_cq(ctx, 1 << 24, NULL, NULL, 0) == NULL);
	CHECK(ibv_create_cq(ctx, 4, NULL, NULL, ctx->num_comp_vectors) == NULL);
	cq = ibv_create_cq(ctx, 16, &pfd, ch, 0);
	CHECK(cq != NULL);
	CHECK(cq->cqe >= 16);
	CHECK_EQ(ibv_poll_cq(cq, 1, &wc), 0);
	CHECK_EQ(ibv_req_notify_cq(cq, 0), 0);
	CHECK_EQ(ibv_resize_cq(cq, 64), 0);
	CHECK(cq->cqe >= 64);
	CHECK_EQ(ibv_resize_cq(cq, 0), EINVAL);
	CHECK_EQ(ibv_destroy_comp_channel(ch), EBUSY);

	/* The channel is a real fd: poll times out, a non-blocking read says
	 * EAGAIN, until a completion event arrives. */
	pfd = (struct pollfd){.fd = ch->fd, .events = POLLIN};
	CHECK_EQ(poll(&pfd, 1, 10), 0);
	CHECK_EQ(fcntl(ch->fd, F_SETFL, O_NONBLOCK), 0);
	errno = 0;
	CHECK_EQ(ibv_get_cq_event(ch, &got, &cq_ctx), -1);
	CHECK_EQ(errno, EAGAIN);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(ibv_destroy_comp_channel(ch), 0);

	cqx = ibv_create_cq_ex(ctx, &cx);
	CHECK(cqx != NULL);
	if (cqx) {
		CHECK_EQ(ibv_start_poll(cqx, &pa), ENOENT);
		CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
	}
	cx.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	errno = 0;
	CHECK(ibv_create_cq_ex(ctx, &cx) == NULL);
	CHECK_EQ(errno, EOPNOTSUPP);
}

static void test_qp_create_errors(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr a = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC};
	struct ibv_qp_init_attr_ex ax;

	a.cap = (struct ibv_qp_cap){.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 64};
	errno = 0;
	CHECK(ibv_create_qp(pd, &a) == NULL);
	CHECK_EQ(errno, EINVAL);
	a.cap = (struct ibv_qp_cap){.max_send_wr = 1 << 20, .max_recv_wr = 1};
	CHECK(ibv_create_qp(pd, &a) == NULL);
	a.cap = (struct ibv_qp_cap){.max_send_wr = 1, .max_inline_data = 1 << 16};
	CHECK(ibv_create_qp(pd, &a) == NULL);
	a.cap = (struct ibv_qp_cap){.max_send_wr = 1, .max_recv_wr = 1};
	a.send_cq = NULL;
	errno = 0;
	CHECK(ibv_create_qp(pd, &a) == NULL);
	CHECK_EQ(errno, EINVAL);
	a.send_cq = cq;
	/* An XRC target needs its domain (ibv_create_qp_ex); raw packet QPs
	 * are not implemented. */
	a.qp_type = IBV_QPT_XRC_RECV;
	errno = 0;
	CHECK(ibv_create_qp(pd, &a) == NULL);
	CHECK_EQ(errno, EINVAL);
	a.qp_type = IBV_QPT_RAW_PACKET;
	errno = 0;
	CHECK(ibv_create_qp(pd, &a) == NULL);
	CHECK_EQ(errno, EOPNOTSUPP);

	/* Send operations uroce does not execute yet are refused. */
	memset(&ax, 0, sizeof(ax));
	ax.qp_type = IBV_QPT_RC;
	ax.send_cq = ax.recv_cq = cq;
	ax.pd = pd;
	ax.cap = a.cap;
	ax.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ax.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_TSO | IBV_QP_EX_WITH_BIND_MW;
	errno = 0;
	CHECK(ibv_create_qp_ex(pd->context, &ax) == NULL);
	CHECK_EQ(errno, EOPNOTSUPP);
	ax.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
	struct ibv_qp *qp = ibv_create_qp_ex(pd->context, &ax);
	CHECK(qp != NULL);
	if (qp) {
		CHECK(ibv_qp_to_qp_ex(qp) != NULL);
		CHECK_EQ(ibv_destroy_qp(qp), 0);
	}
	ax.comp_mask = IBV_QP_INIT_ATTR_PD;
	qp = ibv_create_qp_ex(pd->context, &ax);
	CHECK(qp != NULL);
	if (qp) {
		CHECK(ibv_qp_to_qp_ex(qp) == NULL);
		CHECK_EQ(ibv_destroy_qp(qp), 0);
	}
}

static void to_init(struct ibv_qp *qp, struct ibv_qp_attr *a, int *mask)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_INIT;
	a->port_num = 1;
	a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	a->qkey = 0x11111111;
	*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		(qp->qp_type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
}

static void rtr_attr(struct ibv_context *ctx, struct ibv_qp *qp, struct ibv_qp_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTR;
	a->path_mtu = IBV_MTU_1024;
	a->dest_qp_num = qp->qp_num;
	a->rq_psn = 0x123456;
	a->max_dest_rd_atomic = 1;
	a->min_rnr_timer = 12;
	a->ah_attr.port_num = 1;
	a->ah_attr.is_global = 1;
	a->ah_attr.grh.hop_limit = 1;
	ibv_query_gid(ctx, 1, 0, &a->ah_attr.grh.dgid);
}

static const int RTR_MASK = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
static const int RTS_MASK = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			    IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;

static void rts_attr(struct ibv_qp_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTS;
	a->timeout = 14;
	a->retry_cnt = 7;
	a->rnr_retry = 7;
	a->sq_psn = 0x654321;
	a->max_rd_atomic = 1;
}

static void test_rc_walk(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr init = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 8,
		    .max_recv_wr = 8,
		    .max_send_sge = 2,
		    .max_recv_sge = 2,
		    .max_inline_data = 64},
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	struct ibv_qp_attr a, q;
	struct ibv_qp_init_attr qi;
	struct ibv_send_wr wr = {.opcode = IBV_WR_SEND}, *bad = NULL;
	struct ibv_recv_wr rwr = {0}, *rbad = NULL;
	int mask;

	CHECK(qp != NULL);
	if (!qp)
		return;
	CHECK_EQ(qp->state, IBV_QPS_RESET);
	CHECK(qp->qp_num > 1 && qp->qp_num <= 0xffffff);
	CHECK_EQ(init.cap.max_inline_data, 64);

	/* Work before RTS is refused, with bad_wr on the first request. */
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), EINVAL);
	CHECK(bad == &wr);
	CHECK_EQ(ibv_post_recv(qp, &rwr, &rbad), EINVAL);
	CHECK(rbad == &rwr);

	/* RESET -> INIT: ACCESS_FLAGS is required for RC, Q_Key not allowed. */
	to_init(qp, &a, &mask);
	CHECK_EQ(ibv_modify_qp(qp, &a, mask & ~IBV_QP_ACCESS_FLAGS), EINVAL);
	CHECK_EQ(ibv_modify_qp(qp, &a, mask | IBV_QP_QKEY), EINVAL);
	a.port_num = 2;
	CHECK_EQ(ibv_modify_qp(qp, &a, mask), EINVAL);
	a.port_num = 1;
	a.pkey_index = 1;
	CHECK_EQ(ibv_modify_qp(qp, &a, mask), EINVAL);
	a.pkey_index = 0;
	CHECK_EQ(ibv_modify_qp(qp, &a, mask), 0);
	CHECK_EQ(qp->state, IBV_QPS_INIT);
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_CUR_STATE), EINVAL);

	/* INIT -> RTR: a RoCE path needs a GRH; every required bit counts. */
	rtr_attr(qp->context, qp, &a);
	a.ah_attr.is_global = 0;
	CHECK_EQ(ibv_modify_qp(qp, &a, RTR_MASK), EINVAL);
	rtr_attr(qp->context, qp, &a);
	a.ah_attr.grh.sgid_index = 15;
	CHECK_EQ(ibv_modify_qp(qp, &a, RTR_MASK), EINVAL);
	rtr_attr(qp->context, qp, &a);
	CHECK_EQ(ibv_modify_qp(qp, &a, RTR_MASK & ~IBV_QP_DEST_QPN), EINVAL);
	CHECK_EQ(ibv_modify_qp(qp, &a, RTR_MASK & ~IBV_QP_MIN_RNR_TIMER), EINVAL);
	a.path_mtu = (enum ibv_mtu)6;
	CHECK_EQ(ibv_modify_qp(qp, &a, RTR_MASK), EINVAL);
	a.path_mtu = IBV_MTU_1024;
	a.max_dest_rd_atomic = 129; /* max_qp_rd_atom is rxe's 128 */
	CHECK_EQ(ibv_modify_qp(qp, &a, RTR_MASK), EINVAL);
	a.max_dest_rd_atomic = 128;
	CHECK_EQ(ibv_modify_qp(qp, &a, RTR_MASK | IBV_QP_SQ_PSN), EINVAL);
	CHECK_EQ(ibv_modify_qp(qp, &a, RTR_MASK | IBV_QP_ALT_PATH), EOPNOTSUPP);
	CHECK_EQ(ibv_modify_qp(qp, &a, RTR_MASK), 0);
	CHECK_EQ(qp->state, IBV_QPS_RTR);
	CHECK_EQ(ibv_post_send(qp, &wr, &bad), EINVAL); /* RTR still sends nothing */

	/* RTR -> RTS. */
	rts_attr(&a);
	CHECK_EQ(ibv_modify_qp(qp, &a, RTS_MASK & ~IBV_QP_TIMEOUT), EINVAL);
	a.retry_cnt = 8;
	CHECK_EQ(ibv_modify_qp(qp, &a, RTS_MASK), EINVAL);
	rts_attr(&a);
	a.timeout = 32;
	CHECK_EQ(ibv_modify_qp(qp, &a, RTS_MASK), EINVAL);
	rts_attr(&a);
	a.max_rd_atomic = 129;
	CHECK_EQ(ibv_modify_qp(qp, &a, RTS_MASK), EINVAL);
	a.max_rd_atomic = 128; /* what perftest asks of an rxe peer */
	CHECK_EQ(ibv_modify_qp(qp, &a, RTS_MASK), 0);
	CHECK_EQ(qp->state, IBV_QPS_RTS);

	CHECK_EQ(ibv_query_qp(qp, &q, IBV_QP_STATE, &qi), 0);
	CHECK_EQ(q.qp_state, IBV_QPS_RTS);
	CHECK_EQ(q.cur_qp_state, IBV_QPS_RTS);
	CHECK_EQ(q.sq_psn, 0x654321);
	CHECK_EQ(q.rq_psn, 0x123456);
	CHECK_EQ(q.dest_qp_num, qp->qp_num);
	CHECK_EQ(q.path_mtu, IBV_MTU_1024);
	CHECK_EQ(q.timeout, 14);
	CHECK_EQ(q.ah_attr.is_global, 1);
	CHECK_EQ(q.qp_access_flags, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	CHECK_EQ(qi.cap.max_send_wr, 8);
	CHECK_EQ(qi.qp_type, IBV_QPT_RC);
	CHECK(qi.send_cq == cq);

	/* RTS -> RTS may change optional attributes, never the path. */
	a.min_rnr_timer = 5;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_MIN_RNR_TIMER), 0);
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_DEST_QPN), EINVAL);
	a.cur_qp_state = IBV_QPS_RTS;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_CUR_STATE | IBV_QP_MIN_RNR_TIMER), 0);
	a.cur_qp_state = IBV_QPS_RTR;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_CUR_STATE | IBV_QP_MIN_RNR_TIMER), EINVAL);
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_CAP), EINVAL);

	/* RTS -> ERR -> RESET; no way back to RTS from ERR. */
	a.qp_state = IBV_QPS_ERR;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	CHECK_EQ(qp->state, IBV_QPS_ERR);
	a.qp_state = IBV_QPS_RTS;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL);
	a.qp_state = IBV_QPS_RESET;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	CHECK_EQ(qp->state, IBV_QPS_RESET);
	a.qp_state = IBV_QPS_RTR;
	CHECK_EQ(ibv_modify_qp(qp, &a, RTR_MASK), EINVAL);

	CHECK_EQ(ibv_destroy_cq(cq), EBUSY);
	CHECK_EQ(ibv_dealloc_pd(pd), EBUSY);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
}

static int next_event(struct ibv_context *ctx, struct ibv_async_event *ev)
{
	struct pollfd pfd = {.fd = ctx->async_fd, .events = POLLIN};

	if (poll(&pfd, 1, 1000) != 1)
		return -1;
	return ibv_get_async_event(ctx, ev);
}

static void test_sqd_event(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr init = {.send_cq = cq,
					.recv_cq = cq,
					.qp_type = IBV_QPT_RC,
					.cap = {.max_send_wr = 1, .max_recv_wr = 1}};
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	struct ibv_async_event ev;
	struct ibv_qp_attr a;
	int mask;

	to_init(qp, &a, &mask);
	CHECK_EQ(ibv_modify_qp(qp, &a, mask), 0);
	rtr_attr(pd->context, qp, &a);
	CHECK_EQ(ibv_modify_qp(qp, &a, RTR_MASK), 0);
	rts_attr(&a);
	CHECK_EQ(ibv_modify_qp(qp, &a, RTS_MASK), 0);
	a.qp_state = IBV_QPS_SQD;
	a.en_sqd_async_notify = 1;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY), 0);
	CHECK_EQ(next_event(pd->context, &ev), 0);
	CHECK_EQ(ev.event_type, IBV_EVENT_SQ_DRAINED);
	CHECK(ev.element.qp == qp);
	ibv_ack_async_event(&ev);
	a.qp_state = IBV_QPS_RTS;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
}

static void test_ud(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr init = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .qp_type = IBV_QPT_UD,
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	struct ibv_qp_attr a;
	int mask;

	CHECK(qp != NULL);
	if (!qp)
		return;
	to_init(qp, &a, &mask);
	CHECK_EQ(ibv_modify_qp(qp, &a, mask & ~IBV_QP_QKEY), EINVAL);
	CHECK_EQ(ibv_modify_qp(qp, &a, mask | IBV_QP_ACCESS_FLAGS), EINVAL);
	CHECK_EQ(ibv_modify_qp(qp, &a, mask), 0);
	a.qp_state = IBV_QPS_RTR;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL);
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
}

static void test_srq(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_srq_init_attr si = {.attr = {.max_wr = 16, .max_sge = 1}};
	struct ibv_srq_attr sa;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct ibv_qp_init_attr init = {
	    .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .cap = {.max_send_wr = 1}};
	struct ibv_async_event ev;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	struct ibv_recv_wr rwr = {0}, *bad = NULL;

	si.attr.max_wr = 0;
	errno = 0;
	CHECK(ibv_create_srq(pd, &si) == NULL);
	CHECK_EQ(errno, EINVAL);
	si.attr.max_wr = 16;
	srq = ibv_create_srq(pd, &si);
	CHECK(srq != NULL);
	if (!srq)
		return;
	sa.srq_limit = 17;
	CHECK_EQ(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT), EINVAL);
	sa.srq_limit = 4;
	CHECK_EQ(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT), 0);
	sa.max_wr = 32;
	CHECK_EQ(ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR), EINVAL);
	memset(&sa, 0, sizeof(sa));
	CHECK_EQ(ibv_query_srq(srq, &sa), 0);
	CHECK_EQ(sa.max_wr, 16);
	CHECK_EQ(sa.srq_limit, 4);

	init.srq = srq;
	qp = ibv_create_qp(pd, &init);
	CHECK(qp != NULL);
	CHECK_EQ(ibv_post_recv(qp, &rwr, &bad), EINVAL); /* its receives go to the SRQ */
	CHECK_EQ(ibv_destroy_srq(srq), EBUSY);
	/* A QP on an SRQ entering ERR reports Last WQE Reached. */
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	CHECK_EQ(next_event(pd->context, &ev), 0);
	CHECK_EQ(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
	CHECK(ev.element.qp == qp);
	ibv_ack_async_event(&ev);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_srq(srq), 0);
}

/* A QP destroyed with an event unread: the kernel drops the event with
 * the QP (ibv_destroy_qp(3) waits only for events reported), and so must
 * uroce, whose event names the freed QP otherwise (UCX's rc_verbs moves
 * its QPs on an SRQ to ERR and destroys them at once: ASan saw the read of
 * the freed QP). A new QP at the same place gets no stale event either. */
static void test_unread_event_of_destroyed_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_srq_init_attr si = {.attr = {.max_wr = 4, .max_sge = 1}};
	struct ibv_srq *srq = ibv_create_srq(pd, &si);
	struct ibv_qp_init_attr init = {.send_cq = cq,
					.recv_cq = cq,
					.srq = srq,
					.qp_type = IBV_QPT_RC,
					.cap = {.max_send_wr = 1}};
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	struct ibv_context *ctx = pd->context;
	struct ibv_async_event ev;
	struct ibv_qp *qp;
	int flags = fcntl(ctx->async_fd, F_GETFL);

	CHECK(srq != NULL);
	if (!srq)
		return;
	qp = ibv_create_qp(pd, &init);
	CHECK(qp != NULL);
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0); /* raises Last WQE Reached */
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	qp = ibv_create_qp(pd, &init);
	CHECK(qp != NULL);
	CHECK_EQ(fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
	errno = 0;
	CHECK_EQ(ibv_get_async_event(ctx, &ev), -1);
	CHECK_EQ(errno, EAGAIN);
	CHECK_EQ(fcntl(ctx->async_fd, F_SETFL, flags), 0);
	/* The new QP's own events are still reported. */
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	CHECK_EQ(next_event(ctx, &ev), 0);
	CHECK_EQ(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
	CHECK(ev.element.qp == qp);
	ibv_ack_async_event(&ev);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	CHECK_EQ(ibv_destroy_srq(srq), 0);
}

static void test_ah(struct ibv_pd *pd)
{
	struct ibv_ah_attr aa = {.port_num = 1, .dlid = 1};
	struct ibv_ah *ah;

	errno = 0;
	CHECK(ibv_create_ah(pd, &aa) == NULL); /* RoCE: no GRH, no address */
	CHECK_EQ(errno, EINVAL);
	aa.is_global = 1;
	aa.grh.sgid_index = 15;
	CHECK(ibv_create_ah(pd, &aa) == NULL);
	aa.grh.sgid_index = 0;
	aa.port_num = 2;
	CHECK(ibv_create_ah(pd, &aa) == NULL);
	aa.port_num = 1;
	ibv_query_gid(pd->context, 1, 0, &aa.grh.dgid);
	ah = ibv_create_ah(pd, &aa);
	CHECK(ah != NULL);
	CHECK_EQ(ibv_dealloc_pd(pd), EBUSY);
	if (ah)
		CHECK_EQ(ibv_destroy_ah(ah), 0);
}

/* max_pd and max_ah are what a context really holds, not figures only: one
 * past them fails with ENOMEM and nothing is kept. */
static void test_object_limits(struct ibv_pd *pd)
{
	struct ibv_device_attr da;
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1};
	struct ibv_pd **pds;
	struct ibv_ah **ahs;
	int npd = 0, nah = 0;

	CHECK_EQ(ibv_query_device(pd->context, &da), 0);
	ibv_query_gid(pd->context, 1, 0, &aa.grh.dgid);
	pds = calloc((size_t)da.max_pd, sizeof(*pds));
	ahs = calloc((size_t)da.max_ah, sizeof(*ahs));
	/* The fixture's PD is the first. */
	while (npd < da.max_pd && (pds[npd] = ibv_alloc_pd(pd->context)))
		npd++;
	CHECK_EQ(npd, da.max_pd - 1);
	errno = 0;
	CHECK(ibv_alloc_pd(pd->context) == NULL);
	CHECK_EQ(errno, ENOMEM);
	while (nah < da.max_ah && (ahs[nah] = ibv_create_ah(pd, &aa)))
		nah++;
	CHECK_EQ(nah, da.max_ah);
	errno = 0;
	CHECK(ibv_create_ah(pd, &aa) == NULL);
	CHECK_EQ(errno, ENOMEM);
	while (nah)
		ibv_destroy_ah(ahs[--nah]);
	ahs[0] = ibv_create_ah(pd, &aa);
	CHECK(ahs[0] != NULL);
	if (ahs[0])
		ibv_destroy_ah(ahs[0]);
	while (npd)
		ibv_dealloc_pd(pds[--npd]);
	pds[0] = ibv_alloc_pd(pd->context);
	CHECK(pds[0] != NULL);
	if (pds[0])
		ibv_dealloc_pd(pds[0]);
	free(pds);
	free(ahs);
}

static void test_unsupported(struct ibv_context *ctx, struct ibv_pd *pd)
{
	struct ibv_xrcd_init_attr xa = {0};

	errno = 0;
	CHECK(ibv_alloc_mw(pd, (enum ibv_mw_type)3) == NULL);
	CHECK_EQ(errno, EINVAL);
	/* ibv_open_xrcd(3): the fd and the flags are both needed. */
	errno = 0;
	CHECK(ibv_open_xrcd(ctx, &xa) == NULL);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(ibv_fork_init(), 0);
	CHECK_EQ(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
}

static void test_async_fd(struct ibv_context *ctx)
{
	struct ibv_async_event ev;

	CHECK_EQ(fcntl(ctx->async_fd, F_SETFL, O_NONBLOCK), 0);
	errno = 0;
	CHECK_EQ(ibv_get_async_event(ctx, &ev), -1);
	CHECK_EQ(errno, EAGAIN);
}

static void test_strings(void)
{
	CHECK_STR(ibv_wc_status_str(IBV_WC_SUCCESS), "success");
	CHECK_STR(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR), "remote access error");
	CHECK_STR(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR), "Work Request Flushed Error");
	CHECK_STR(ibv_event_type_str(IBV_EVENT_QP_LAST_WQE_REACHED), "last WQE reached");
	CHECK_STR(ibv_port_state_str(IBV_PORT_ACTIVE), "active");
	CHECK_STR(ibv_node_type_str(IBV_NODE_CA), "InfiniBand channel adapter");
	CHECK_EQ(ibv_rate_to_mult(IBV_RATE_40_GBPS), 16);
	CHECK_EQ(mult_to_ibv_rate(4), IBV_RATE_10_GBPS);
	CHECK_EQ(ibv_rate_to_mbps(IBV_RATE_25_GBPS), 25781);
	CHECK_EQ(mbps_to_ibv_rate(2500), IBV_RATE_2_5_GBPS);
}

/* const char *ibv_get_sysfs_path(void), as rdma-core has it: the sysfs
 * mount point, SYSFS_PATH without its trailing slashes when set. */
static void test_sysfs_path(void)
{
	int status = -1;
	pid_t pid = fork();

	if (pid == 0) {
		setenv("SYSFS_PATH", "/tmp/uroce-sysfs//", 1);
		_exit(strcmp(ibv_get_sysfs_path(), "/tmp/uroce-sysfs") != 0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	unsetenv("SYSFS_PATH");
	CHECK_STR(ibv_get_sysfs_path(), "/sys");
}

int main(void)
{
	struct fixture f;

	/* First: the path is read once, and listing devices reads it. */
	test_sysfs_path();
	if (fixture_open(&f, "uroce0"))
		return 1;
	test_device(f.ctx);
	test_compat_query_port(f.ctx);
	test_mr(f.pd);
	test_mr_range(f.pd);
	test_cq(f.ctx);
	test_qp_create_errors(f.pd, f.cq);
	test_rc_walk(f.pd, f.cq);
	test_sqd_event(f.pd, f.cq);
	test_ud(f.pd, f.cq);
	test_srq(f.pd, f.cq);
	test_unread_event_of_destroyed_qp(f.pd, f.cq);
	test_ah(f.pd);
	test_object_limits(f.pd);
	test_unsupported(f.ctx, f.pd);
	test_async_fd(f.ctx);
	test_strings();
	fixture_close(&f);
	return check_report();
}
