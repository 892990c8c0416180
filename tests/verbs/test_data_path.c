/* The intra-host data path: every opcode, and every error with the exact
 * status or errno a NIC reports. Two contexts on uroce0 stand for two
 * processes (separate registry slots and segments, the same
 * cross-memory-attach path); a forked child plays the peer that dies. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../check.h"
#include "pair.h"

static struct side A, B;
/* UROCE_TRANSPORT=roce: the same tests over RoCEv2 on lo (CTest's
 * verbs_data_path_roce), where the few behaviours of the shared-memory
 * path alone are skipped. */
static int on_wire;
static const struct ibv_qp_cap CAP = {.max_send_wr = 16,
				      .max_recv_wr = 16,
				      .max_send_sge = 4,
				      .max_recv_sge = 4,
				      .max_inline_data = 64};

static void drain(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	while (ibv_poll_cq(cq, 1, &wc) > 0)
		;
}

static void reconnect(uint8_t rnr_retry, uint8_t timer)
{
	CHECK_EQ(qp_connect(A.qp, B.qp->qp_num, rnr_retry, timer), 0);
	CHECK_EQ(qp_connect(B.qp, A.qp->qp_num, rnr_retry, timer), 0);
	drain(A.cq);
	drain(B.cq);
}

static int post(struct side *s, enum ibv_wr_opcode op, void *local, uint32_t len, uint32_t lkey,
		uint64_t raddr, uint32_t rkey, uint64_t wr_id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)local, .length = len, .lkey = lkey};
	struct ibv_send_wr wr = {.wr_id = wr_id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(s->qp, &wr, &bad);
}

static void test_send_recv(void)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge = {.addr = (uintptr_t)A.buf, .length = 100, .lkey = A.mr->lkey};
	struct ibv_wc wc;

	reconnect(7, 1);
	for (int i = 0; i < 100; i++)
		A.buf[i] = (uint8_t)(i * 7);
	CHECK_EQ(post_recv_buf(&B, 77, B.buf, 256), 0);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 5;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(0x1234);
	CHECK_EQ(ibv_post_send(A.qp, &wr, &bad), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_SEND);
	CHECK_EQ(wc.wr_id, 5);
	CHECK_EQ(poll_one(B.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_RECV);
	CHECK_EQ(wc.wr_id, 77);
	CHECK_EQ(wc.byte_len, 100);
	CHECK_EQ(wc.qp_num, B.qp->qp_num);
	CHECK_EQ(wc.src_qp, A.qp->qp_num);
	CHECK(wc.wc_flags & IBV_WC_WITH_IMM);
	CHECK_EQ(ntohl(wc.imm_data), 0x1234);
	CHECK(memcmp(A.buf, B.buf, 100) == 0);
}

static void test_rdma_and_atomics(void)
{
	uint64_t *target = (uint64_t *)(B.buf + 8192);
	uint64_t *result = (uint64_t *)(A.buf + 8192);
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge = {.addr = (uintptr_t)result, .length = 8, .lkey = A.mr->lkey};
	struct ibv_wc wc;

	reconnect(7, 1);
	memset(A.buf, 0xab, 64);
	CHECK_EQ(post(&A, IBV_WR_RDMA_WRITE, A.buf, 64, A.mr->lkey, (uintptr_t)B.buf + 1024,
		      B.mr->rkey, 1),
		 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
	CHECK_EQ(B.buf[1024], 0xab);
	CHECK_EQ(B.buf[1087], 0xab);
	CHECK_EQ(ibv_poll_cq(B.cq, 1, &wc), 0); /* the target ran nothing, saw nothing */

	/* A WRITE with immediate data places nothing through the receive: one
	 * with no SGE list at all takes it (librdmacm's rsockets post them so;
	 * the copy of its NULL list was undefined behaviour, UBSan's error). */
	{
		struct ibv_recv_wr rw = {.wr_id = 9, .sg_list = NULL, .num_sge = 0}, *rbad;

		CHECK_EQ(ibv_post_recv(B.qp, &rw, &rbad), 0);
	}
	CHECK_EQ(post(&A, IBV_WR_RDMA_WRITE_WITH_IMM, A.buf, 32, A.mr->lkey,
		      (uintptr_t)B.buf + 2048, B.mr->rkey, 2),
		 0);
	CHECK_EQ(poll_one(B.cq, &wc), 1);
	CHECK_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	CHECK_EQ(wc.byte_len, 32);
	CHECK_EQ(wc.wr_id, 9);
	CHECK_EQ(poll_one(A.cq, &wc), 1); /* on the wire, its ACK may come later */

	memset(B.buf + 4096, 0x5c, 128);
	CHECK_EQ(post(&A, IBV_WR_RDMA_READ, A.buf + 4096, 128, A.mr->lkey, (uintptr_t)B.buf + 4096,
		      B.mr->rkey, 3),
		 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.opcode, IBV_WC_RDMA_READ);
	CHECK_EQ(wc.byte_len, 128);
	CHECK(memcmp(A.buf + 4096, B.buf + 4096, 128) == 0);

	*target = 5;
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr.wr.atomic.remote_addr = (uintptr_t)target;
	wr.wr.atomic.rkey = B.mr->rkey;
	wr.wr.atomic.compare_add = 5;
	wr.wr.atomic.swap = 9;
	CHECK_EQ(ibv_post_send(A.qp, &wr, &bad), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_COMP_SWAP);
	CHECK_EQ(*result, 5);
	CHECK_EQ(*target, 9);
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.wr.atomic.compare_add = 3;
	CHECK_EQ(ibv_post_send(A.qp, &wr, &bad), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_FETCH_ADD);
	CHECK_EQ(*result, 9);
	CHECK_EQ(*target, 12);
	/* A misaligned atomic is an invalid request (IBTA 9.4.5). */
	wr.wr.atomic.remote_addr = (uintptr_t)target + 4;
	CHECK_EQ(ibv_post_send(A.qp, &wr, &bad), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR);
}

static void test_inline_and_sge_lists(void)
{
	char msg[48] = "inline data needs no memory region";
	struct ibv_sge s[2] = {{(uintptr_t)msg, 20, 0}, {(uintptr_t)msg + 20, 28, 0}};
	struct ibv_sge r[2] = {{(uintptr_t)B.buf, 10, B.mr->lkey},
			       {(uintptr_t)B.buf + 500, 100, B.mr->lkey}};
	struct ibv_send_wr wr = {.sg_list = s,
				 .num_sge = 2,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_recv_wr rw = {.wr_id = 4, .sg_list = r, .num_sge = 2}, *rbad;
	struct ibv_wc wc;

	reconnect(7, 1);
	CHECK_EQ(ibv_post_recv(B.qp, &rw, &rbad), 0);
	CHECK_EQ(ibv_post_send(A.qp, &wr, &bad), 0);
	memset(msg, 0, sizeof(msg)); /* inline: the buffer is free at once */
	CHECK_EQ(poll_one(B.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 48);
	CHECK(memcmp(B.buf, "inline dat", 10) == 0);
	CHECK(memcmp(B.buf + 500, "a needs no memory region", 24) == 0);
	/* An empty SGE may name no memory at all, as UCX's short active
	 * messages with no payload do: nothing is read from it (memcpy from
	 * NULL was undefined behaviour, which the sanitizer build stopped at,
	 * in Open MPI's barrier across hosts). */
	s[1] = (struct ibv_sge){0, 0, 0};
	CHECK_EQ(ibv_post_recv(B.qp, &rw, &rbad), 0);
	CHECK_EQ(ibv_post_send(A.qp, &wr, &bad), 0);
	CHECK_EQ(poll_one(B.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 20);
}

/* A WRITE gathered from SGEs of odd sizes, and a READ scattered over
 * others, each many packets long: on the wire their packets are copied
 * and sent in bursts (rc_requester.c, rc_responder.c) whose bounds fall
 * anywhere in an SGE. Every byte lands where the lists say. */
static void test_gathered_rdma(void)
{
	static const uint32_t lens[4] = {7001, 13, 20000, 9000}, back[4] = {1, 30000, 4095, 1918};
	struct ibv_sge s[4], r[4];
	struct ibv_send_wr wr = {.wr_id = 9,
				 .sg_list = s,
				 .num_sge = 4,
				 .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	uint32_t off = 0, total = 0;
	struct ibv_wc wc;

	reconnect(7, 1);
	for (int i = 0; i < SIDE_BUF; i++)
		A.buf[i] = (uint8_t)(i * 7 + i / 251);
	memset(B.buf, 0, SIDE_BUF);
	for (int i = 0; i < 4; i++) { /* gaps of 100 bytes between SGEs */
		s[i] = (struct ibv_sge){(uintptr_t)A.buf + off, lens[i], A.mr->lkey};
		off += lens[i] + 100;
		total += lens[i];
	}
	wr.wr.rdma.remote_addr = (uintptr_t)B.buf + 3;
	wr.wr.rdma.rkey = B.mr->rkey;
	CHECK_EQ(ibv_post_send(A.qp, &wr, &bad), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	for (int i = 0, at = 3; i < 4; at += (int)lens[i++])
		CHECK(memcmp(B.buf + at, (void *)(uintptr_t)s[i].addr, lens[i]) == 0);

	memset(A.buf, 0, SIDE_BUF);
	off = 0;
	for (int i = 0; i < 4; i++) {
		r[i] = (struct ibv_sge){(uintptr_t)A.buf + off, back[i], A.mr->lkey};
		off += back[i] + 50;
	}
	wr.sg_list = r;
	wr.opcode = IBV_WR_RDMA_READ;
	CHECK_EQ(ibv_post_send(A.qp, &wr, &bad), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(back[0] + back[1] + back[2] + back[3], total);
	for (int i = 0, at = 3; i < 4; at += (int)back[i++])
		CHECK(memcmp((void *)(uintptr_t)r[i].addr, B.buf + at, back[i]) == 0);
	CHECK_EQ(A.buf[back[0]], 0); /* nothing in the gaps */
}

/* Sends B a message from A's gathered SGEs into one receive of B's: the
 * receive's status, or -1 when a completion is missing. */
static int send_into(const struct ibv_sge *s, int ns, const struct ibv_sge *r, int nr)
{
	struct ibv_send_wr wr = {.sg_list = (struct ibv_sge *)s,
				 .num_sge = ns,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_recv_wr rw = {.wr_id = 6, .sg_list = (struct ibv_sge *)r, .num_sge = nr}, *rbad;
	struct ibv_wc wc;

	if (ibv_post_recv(B.qp, &rw, &rbad) || ibv_post_send(A.qp, &wr, &bad) ||
	    poll_one(A.cq, &wc) != 1 || wc.status != IBV_WC_SUCCESS || poll_one(B.cq, &wc) != 1)
		return -1;
	return wc.status == IBV_WC_SUCCESS && wc.byte_len == 0 ? -1 : (int)wc.status;
}

/* Small SENDs into a receive buffer that only its owner can reach travel in
 * the completion and are placed when it is polled (staged_payload.h); the
 * program sees the same bytes either way, at the size limit and around it,
 * gathered from several SGEs or scattered over several. */
static void test_staged_sends(void)
{
	static uint8_t rbuf[4096];
	struct ibv_mr *local = ibv_reg_mr(B.pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	static const uint32_t lens[] = {1, 8, 55, 56, 57, 200};
	struct ibv_sge r = {(uintptr_t)rbuf, sizeof(rbuf), 0};
	struct ibv_wc wc;

	CHECK(local != NULL);
	r.lkey = local->lkey;
	reconnect(7, 1);
	for (int i = 0; i < 256; i++)
		A.buf[i] = (uint8_t)(i * 13 + 1);
	for (unsigned i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct ibv_sge s[2] = {
		    {(uintptr_t)A.buf, lens[i] / 2, A.mr->lkey},
		    {(uintptr_t)A.buf + lens[i] / 2, lens[i] - lens[i] / 2, A.mr->lkey}};

		memset(rbuf, 0, sizeof(rbuf));
		CHECK_EQ(send_into(s, 2, &r, 1), IBV_WC_SUCCESS);
		CHECK(memcmp(rbuf, A.buf, lens[i]) == 0);
		CHECK_EQ(rbuf[lens[i]], 0);
	}
	/* Scattered: the first SGE is too short to take it all. */
	struct ibv_sge s = {(uintptr_t)A.buf, 20, A.mr->lkey};
	struct ibv_sge rs[2] = {{(uintptr_t)rbuf, 4, local->lkey},
				{(uintptr_t)rbuf + 100, 100, local->lkey}};
	memset(rbuf, 0, sizeof(rbuf));
	CHECK_EQ(send_into(&s, 1, rs, 2), IBV_WC_SUCCESS);
	CHECK(memcmp(rbuf, A.buf, 4) == 0 && memcmp(rbuf + 100, A.buf + 4, 16) == 0);

	/* Memory open to remote access holds the bytes before the receive is
	 * polled, since a peer could read it then. */
	struct ibv_sge rr = {(uintptr_t)B.buf, 64, B.mr->lkey};
	struct ibv_recv_wr rw = {.wr_id = 7, .sg_list = &rr, .num_sge = 1}, *rbad;
	memset(B.buf, 0, 64);
	CHECK_EQ(ibv_post_recv(B.qp, &rw, &rbad), 0);
	CHECK_EQ(post(&A, IBV_WR_SEND, A.buf, 8, A.mr->lkey, 0, 0, 1), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK(memcmp(B.buf, A.buf, 8) == 0);
	CHECK_EQ(poll_one(B.cq, &wc), 1);

	/* A region deregistered before the poll is not written any more: the
	 * completion still reports what arrived. */
	memset(rbuf, 0xee, 64);
	CHECK_EQ(ibv_post_recv(B.qp, &(struct ibv_recv_wr){.wr_id = 8, .sg_list = &r, .num_sge = 1},
			       &rbad),
		 0);
	CHECK_EQ(post(&A, IBV_WR_SEND, A.buf, 8, A.mr->lkey, 0, 0, 2), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(ibv_dereg_mr(local), 0);
	CHECK_EQ(poll_one(B.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 8);
	/* The wire path places a SEND as it arrives, before its ACK, as a
	 * NIC does: there is nothing left to hold back at the poll. */
	if (!on_wire)
		CHECK_EQ(rbuf[0], 0xee);
}

#define THREAD_RECVS 2000

struct poster {
	struct side *s;
	uint64_t first;
	int failed;
};

static void *post_recvs(void *arg)
{
	struct poster *p = arg;

	for (uint64_t i = 0; i < THREAD_RECVS; i++)
		p->failed += post_recv_buf(p->s, p->first + i, p->s->buf, 8) != 0;
	return NULL;
}

struct poller {
	struct ibv_cq *cq;
	uint8_t *seen;
	int got, bad;
};

/* Polls until the CQ has been empty for a while. */
static void *poll_recvs(void *arg)
{
	struct poller *p = arg;
	struct ibv_wc wc;

	for (int idle = 0; idle < 100000;) {
		if (ibv_poll_cq(p->cq, 1, &wc) != 1) {
			idle++;
			continue;
		}
		idle = 0;
		p->got++;
		if (wc.status != IBV_WC_SUCCESS || wc.wr_id >= 2 * THREAD_RECVS ||
		    __atomic_fetch_add(&p->seen[wc.wr_id], 1, __ATOMIC_RELAXED))
			p->bad++;
	}
	return NULL;
}

/* Two threads posting receives to one queue at once, then two threads
 * polling their completions from one CQ: each receive is there exactly
 * once, and each completion is returned once (posting and polling are
 * thread-safe, ibv_post_recv(3), ibv_poll_cq(3)). */
static void test_threaded_post_recv(void)
{
	static struct side C, D;
	static uint8_t seen[2 * THREAD_RECVS];
	const struct ibv_qp_cap cap = {.max_send_wr = 16,
				       .max_recv_wr = 2 * THREAD_RECVS,
				       .max_send_sge = 1,
				       .max_recv_sge = 1};
	struct poster p[2] = {{&D, 0, 0}, {&D, THREAD_RECVS, 0}};
	pthread_t th[2];
	struct poller q[2] = {{NULL, seen, 0, 0}, {NULL, seen, 0, 0}};
	struct ibv_wc wc;
	int sent = 0;

	CHECK_EQ(side_open(&C, IBV_QPT_RC, 32, cap), 0);
	CHECK_EQ(side_open(&D, IBV_QPT_RC, 2 * THREAD_RECVS + 32, cap), 0);
	CHECK_EQ(qp_connect(C.qp, D.qp->qp_num, 0, 1), 0);
	CHECK_EQ(qp_connect(D.qp, C.qp->qp_num, 0, 1), 0);
	for (int i = 0; i < 2; i++)
		CHECK_EQ(pthread_create(&th[i], NULL, post_recvs, &p[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ(p[0].failed + p[1].failed, 0);
	for (int i = 0; i < 2 * THREAD_RECVS; i++)
		sent += post(&C, IBV_WR_SEND, C.buf, 8, C.mr->lkey, 0, 0, 1) == 0 &&
			poll_one(C.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS;
	CHECK_EQ(sent, 2 * THREAD_RECVS);
	for (int i = 0; i < 2; i++) {
		q[i].cq = D.cq;
		CHECK_EQ(pthread_create(&th[i], NULL, poll_recvs, &q[i]), 0);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ(q[0].got + q[1].got, 2 * THREAD_RECVS);
	CHECK_EQ(q[0].bad + q[1].bad, 0);
	side_close(&C);
	side_close(&D);
}

/* ATOMIC WRITE (IBTA 1.5 9.4.6), by ibv_post_send and by ibv_wr_atomic_write:
 * 8 bytes land at once; misaligned is an invalid request; it needs Remote
 * Write access. */
static void test_atomic_write(void)
{
	uint64_t *target = (uint64_t *)(B.buf + 8192);
	uint64_t value = 0x1122334455667788ull;
	struct ibv_qp_init_attr_ex ia = {.qp_type = IBV_QPT_RC,
					 .send_cq = A.cq,
					 .recv_cq = A.cq,
					 .cap = CAP,
					 .comp_mask =
					     IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
					 .pd = A.pd,
					 .send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE};
	struct ibv_mr *ro = ibv_reg_mr(B.pd, B.buf, 4096, IBV_ACCESS_REMOTE_READ);
	struct ibv_qp *xq = ibv_create_qp_ex(A.ctx, &ia);
	struct ibv_qp_ex *qpx = xq ? ibv_qp_to_qp_ex(xq) : NULL;
	struct ibv_wc wc;

	CHECK(ro && qpx);
	reconnect(7, 1);
	*target = 0;
	memcpy(A.buf, &value, 8);
	CHECK_EQ(
	    post(&A, IBV_WR_ATOMIC_WRITE, A.buf, 8, A.mr->lkey, (uintptr_t)target, B.mr->rkey, 1),
	    0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_ATOMIC_WRITE);
	CHECK(*target == value);
	CHECK_EQ(ibv_poll_cq(B.cq, 1, &wc), 0); /* no completion at the target */

	/* The builder: its 8 bytes are copied at the call. */
	CHECK_EQ(qp_connect(xq, B.qp->qp_num, 7, 1), 0);
	CHECK_EQ(qp_connect(B.qp, xq->qp_num, 7, 1), 0);
	value = ~value;
	ibv_wr_start(qpx);
	qpx->wr_id = 2;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(qpx, B.mr->rkey, (uintptr_t)target, &value);
	value = 0;
	CHECK_EQ(ibv_wr_complete(qpx), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_ATOMIC_WRITE);
	CHECK(*target == ~0x1122334455667788ull);

	/* Misaligned: an invalid request; without Remote Write: an access error. */
	reconnect(7, 1);
	CHECK_EQ(post(&A, IBV_WR_ATOMIC_WRITE, A.buf, 8, A.mr->lkey, (uintptr_t)target + 4,
		      B.mr->rkey, 3),
		 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR);
	reconnect(7, 1);
	CHECK_EQ(post(&A, IBV_WR_ATOMIC_WRITE, A.buf, 8, A.mr->lkey, (uintptr_t)B.buf, ro->rkey, 4),
		 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
	CHECK_EQ(ibv_destroy_qp(xq), 0);
	ibv_dereg_mr(ro);
	reconnect(7, 1);
}

/* XRC (IBTA A14; ibv_open_xrcd(3), ibv_create_srq_ex(3), ibv_create_qp_ex(3)):
 * A's initiator sends through B's target to the XRC SRQ the request names;
 * the receive completes on the SRQ's CQ, the target QP named in it. A
 * second handle on the same file is the same domain; an SRQ of another
 * domain is an invalid request. */
static struct ibv_srq *xrc_srq(struct ibv_xrcd *x)
{
	struct ibv_srq_init_attr_ex sa = {.attr = {.max_wr = 8, .max_sge = 1},
					  .comp_mask =
					      IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
					      IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
					  .srq_type = IBV_SRQT_XRC,
					  .pd = B.pd,
					  .xrcd = x,
					  .cq = B.cq};

	return ibv_create_srq_ex(B.ctx, &sa);
}

/* The request's completion status, or minus ibv_post_send's error. */
static int xrc_send(struct ibv_qp *ini, uint32_t srqn, enum ibv_wr_opcode op, uint64_t raddr)
{
	struct ibv_sge sge = {.addr = (uintptr_t)A.buf,
			      .length = op == IBV_WR_ATOMIC_FETCH_AND_ADD ? 8 : 32,
			      .lkey = A.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 7,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;
	int err;

	wr.qp_type.xrc.remote_srqn = srqn;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.compare_add = 5;
		wr.wr.atomic.rkey = B.mr->rkey;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = B.mr->rkey;
	}
	if ((err = ibv_post_send(ini, &wr, &bad)))
		return -err;
	if (poll_one(A.cq, &wc) != 1)
		return -1;
	return (int)wc.status;
}

static void test_xrc(void)
{
	char path[] = "/tmp/uroce-xrcd-XXXXXX";
	int fd = mkstemp(path);
	struct ibv_xrcd_init_attr xa = {.comp_mask =
					    IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
					.fd = fd,
					.oflags = O_CREAT};
	struct ibv_xrcd *x1 = ibv_open_xrcd(B.ctx, &xa), *x2 = ibv_open_xrcd(B.ctx, &xa), *other;
	struct ibv_qp_init_attr_ex ta = {
	    .qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = x2};
	struct ibv_qp_init_attr_ex ia = {.qp_type = IBV_QPT_XRC_SEND,
					 .comp_mask = IBV_QP_INIT_ATTR_PD,
					 .pd = A.pd,
					 .send_cq = A.cq,
					 .cap = CAP};
	struct ibv_srq *srq = x1 ? xrc_srq(x1) : NULL, *stranger;
	struct ibv_qp *tgt = x2 ? ibv_create_qp_ex(B.ctx, &ta) : NULL;
	struct ibv_qp *ini = ibv_create_qp_ex(A.ctx, &ia);
	struct ibv_sge rs = {.addr = (uintptr_t)B.buf, .length = 64, .lkey = B.mr->lkey};
	struct ibv_recv_wr rw = {.wr_id = 70, .sg_list = &rs, .num_sge = 1}, *rbad;
	uint32_t srqn, stranger_n;
	struct ibv_device_attr da;
	struct ibv_wc wc;

	CHECK(fd >= 0 && x1 && x2 && srq && tgt && ini);
	CHECK_EQ(ibv_query_device(A.ctx, &da), 0);
	CHECK(da.device_cap_flags & IBV_DEVICE_XRC);
	/* O_EXCL refuses a domain the file already has. */
	xa.oflags = O_CREAT | O_EXCL;
	errno = 0;
	CHECK(ibv_open_xrcd(B.ctx, &xa) == NULL);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(ibv_get_srq_num(srq, &srqn), 0);
	CHECK_EQ(qp_connect(tgt, ini->qp_num, 7, 1), 0);
	CHECK_EQ(qp_connect(ini, tgt->qp_num, 7, 1), 0);
	CHECK_EQ(ibv_post_recv(tgt, &rw, &rbad), EINVAL); /* its receives are its SRQs' */
	CHECK_EQ(ibv_post_srq_recv(srq, &rw, &rbad), 0);
	drain(B.cq);
	memset(A.buf, 0x7e, 32);
	CHECK_EQ(xrc_send(ini, srqn, IBV_WR_SEND, 0), IBV_WC_SUCCESS);
	CHECK_EQ(poll_one(B.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 70);
	CHECK_EQ(wc.byte_len, 32);
	CHECK_EQ(wc.qp_num, tgt->qp_num);
	CHECK_EQ(B.buf[31], 0x7e);
	/* RDMA through the target: keys are checked against the SRQ's PD. */
	CHECK_EQ(xrc_send(ini, srqn, IBV_WR_RDMA_WRITE, (uintptr_t)B.buf + 512), IBV_WC_SUCCESS);
	CHECK_EQ(B.buf[512 + 31], 0x7e);
	memset(B.buf + 1024, 0x5a, 32);
	CHECK_EQ(xrc_send(ini, srqn, IBV_WR_RDMA_READ, (uintptr_t)B.buf + 1024), IBV_WC_SUCCESS);
	CHECK_EQ(A.buf[31], 0x5a);
	memset(B.buf + 2048, 0, 8);
	B.buf[2048] = 40;
	CHECK_EQ(xrc_send(ini, srqn, IBV_WR_ATOMIC_FETCH_AND_ADD, (uintptr_t)B.buf + 2048),
		 IBV_WC_SUCCESS);
	CHECK_EQ(A.buf[0], 40); /* the value before */
	CHECK_EQ(B.buf[2048], 45);
	/* ATOMIC WRITE is RC's alone: no XRC opcode carries it. */
	CHECK_EQ(xrc_send(ini, srqn, IBV_WR_ATOMIC_WRITE, (uintptr_t)B.buf + 2048), -EINVAL);
	CHECK_EQ(ibv_close_xrcd(x1), EBUSY);

	/* An SRQ of another domain: an invalid request, and both sides in ERR. */
	xa.fd = -1;
	xa.oflags = O_CREAT;
	other = ibv_open_xrcd(B.ctx, &xa);
	stranger = other ? xrc_srq(other) : NULL;
	CHECK(stranger != NULL);
	CHECK_EQ(ibv_get_srq_num(stranger, &stranger_n), 0);
	CHECK_EQ(xrc_send(ini, stranger_n, IBV_WR_SEND, 0), IBV_WC_REM_INV_REQ_ERR);
	CHECK_EQ(state_of(tgt), IBV_QPS_ERR);

	CHECK_EQ(ibv_destroy_qp(ini), 0);
	CHECK_EQ(ibv_destroy_qp(tgt), 0);
	CHECK_EQ(ibv_destroy_srq(stranger), 0);
	CHECK_EQ(ibv_destroy_srq(srq), 0);
	CHECK_EQ(ibv_close_xrcd(other), 0);
	CHECK_EQ(ibv_close_xrcd(x2), 0);
	CHECK_EQ(ibv_close_xrcd(x1), 0);
	close(fd);
	unlink(path);
	drain(A.cq);
	drain(B.cq);
}

static void expect_remote_access_error(uint64_t raddr, uint32_t rkey, uint32_t len)
{
	struct ibv_wc wc;

	reconnect(7, 1);
	CHECK_EQ(post(&A, IBV_WR_RDMA_WRITE, A.buf, len, A.mr->lkey, raddr, rkey, 11), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
	CHECK_EQ(wc.wr_id, 11);
	CHECK_EQ(state_of(B.qp), IBV_QPS_ERR); /* the responder's QP too */
	CHECK_EQ(state_of(A.qp), IBV_QPS_ERR);
}

static void test_remote_access_errors(void)
{
	struct ibv_pd *other = ibv_alloc_pd(B.ctx);
	struct ibv_mr *ro = ibv_reg_mr(B.pd, B.buf, 4096, IBV_ACCESS_REMOTE_READ);
	struct ibv_mr *foreign =
	    ibv_reg_mr(other, B.buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);

	expect_remote_access_error((uintptr_t)B.buf, B.mr->rkey ^ 0x700, 8);	    /* bad rkey */
	expect_remote_access_error((uintptr_t)B.buf + SIDE_BUF - 4, B.mr->rkey, 8); /* bounds */
	expect_remote_access_error((uintptr_t)B.buf, ro->rkey, 8);		    /* no access */
	expect_remote_access_error((uintptr_t)B.buf, foreign->rkey, 8);		    /* other PD */
	ibv_dereg_mr(foreign);
	ibv_dereg_mr(ro);
	ibv_dealloc_pd(other);
}

static void test_local_errors(void)
{
	struct ibv_wc wc;

	reconnect(7, 1);
	CHECK_EQ(post(&A, IBV_WR_RDMA_WRITE, A.buf, 8, A.mr->lkey + 0x100, (uintptr_t)B.buf,
		      B.mr->rkey, 1),
		 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_LOC_PROT_ERR);
	reconnect(7, 1);
	CHECK_EQ(post(&A, IBV_WR_RDMA_WRITE, A.buf + SIDE_BUF - 4, 8, A.mr->lkey, (uintptr_t)B.buf,
		      B.mr->rkey, 2),
		 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_LOC_PROT_ERR);

	/* A receive buffer too small: the responder reports a local length
	 * error, the requester a remote invalid request (IBTA 9.9.3.1.2). */
	reconnect(7, 1);
	CHECK_EQ(post_recv_buf(&B, 1, B.buf, 16), 0);
	CHECK_EQ(post(&A, IBV_WR_SEND, A.buf, 100, A.mr->lkey, 0, 0, 3), 0);
	CHECK_EQ(poll_one(B.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_LOC_LEN_ERR);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR);
	CHECK_EQ(state_of(B.qp), IBV_QPS_ERR);
}

/* A WRITE of many packets into a region whose last pages the owner
 * unmapped after registering it: a remote access error, and nothing
 * acknowledged, although its first packets could land (on the wire they
 * are placed together, rc_responder.c's runs: the one that fails is
 * NAKed, not ACKed). */
static void test_unplaceable_write(void)
{
	const size_t page = 4096;
	uint8_t *m =
	    mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr =
	    ibv_reg_mr(B.pd, m, 4 * page, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_wc wc;

	CHECK(mr != NULL);
	reconnect(7, 1);
	munmap(m + 2 * page, 2 * page);
	CHECK_EQ(post(&A, IBV_WR_RDMA_WRITE, A.buf, 4 * page, A.mr->lkey, (uintptr_t)m,
		      mr ? mr->rkey : 0, 73),
		 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.wr_id, 73);
	CHECK_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
	if (mr)
		ibv_dereg_mr(mr);
	munmap(m, 2 * page);
	reconnect(7, 1);
}

/* A SEND whose receive buffer is no longer mapped (the owner unmapped it
 * after registering) fails on both sides: the requester sees a remote
 * operational error, the responder's receive completes in error and its QP
 * enters ERR; no receive is lost. */
static void test_unplaceable_send(void)
{
	const size_t page = 4096;
	uint8_t *m = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr = ibv_reg_mr(B.pd, m, page, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge sge = {.addr = (uintptr_t)m, .length = 256, .lkey = mr ? mr->lkey : 0};
	struct ibv_recv_wr rwr = {.wr_id = 71, .sg_list = &sge, .num_sge = 1}, *rbad;
	struct ibv_wc wc;

	CHECK(mr != NULL);
	reconnect(7, 1);
	munmap(m, page);
	CHECK_EQ(ibv_post_recv(B.qp, &rwr, &rbad), 0);
	CHECK_EQ(post(&A, IBV_WR_SEND, A.buf, 200, A.mr->lkey, 0, 0, 72), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_REM_OP_ERR);
	CHECK_EQ(poll_one(B.cq, &wc), 1);
	CHECK_EQ(wc.wr_id, 71);
	CHECK_EQ(wc.status, IBV_WC_LOC_QP_OP_ERR);
	CHECK_EQ(state_of(B.qp), IBV_QPS_ERR);
	if (mr)
		ibv_dereg_mr(mr);
	reconnect(7, 1);
}

static void test_rnr(void)
{
	struct ibv_wc wc;

	/* No receive posted: retried rnr_retry times, then reported. */
	reconnect(2, 1);
	CHECK_EQ(post(&A, IBV_WR_SEND, A.buf, 8, A.mr->lkey, 0, 0, 21), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_RNR_RETRY_EXC_ERR);
	CHECK_EQ(wc.wr_id, 21);

	/* rnr_retry 0: the first RNR NAK ends the SEND (IBTA 9.7.5.2.8), a
	 * receive posted within the responder's RNR timer (491 ms) too late:
	 * no retry is left to find it. Before, shared memory sent it once
	 * more when the timer ran out, and it landed. */
	reconnect(0, 31);
	CHECK_EQ(post(&A, IBV_WR_SEND, A.buf, 8, A.mr->lkey, 0, 0, 23), 0);
	usleep(20000);
	CHECK_EQ(post_recv_buf(&B, 6, B.buf, 64), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_RNR_RETRY_EXC_ERR);
	CHECK_EQ(wc.wr_id, 23);

	/* retry_cnt 0: a SEND nobody answers ends at its first ACK timeout
	 * (67 ms, IBTA 9.7.6.1.3), its target made ready before that too
	 * late: no retry is left to send it again. Before, shared memory sent
	 * it once more when the timeout ran out, and it landed. */
	pair_retry_cnt = 0;
	reconnect(7, 1);
	pair_retry_cnt = 7;
	CHECK_EQ(
	    ibv_modify_qp(B.qp, &(struct ibv_qp_attr){.qp_state = IBV_QPS_RESET}, IBV_QP_STATE), 0);
	CHECK_EQ(post(&A, IBV_WR_SEND, A.buf, 8, A.mr->lkey, 0, 0, 24), 0);
	usleep(10000);
	CHECK_EQ(qp_connect(B.qp, A.qp->qp_num, 7, 1), 0);
	CHECK_EQ(post_recv_buf(&B, 7, B.buf, 64), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_RETRY_EXC_ERR);
	CHECK_EQ(wc.wr_id, 24);

	/* rnr_retry 7 retries for ever: the send lands once a receive is. */
	reconnect(7, 1);
	CHECK_EQ(post(&A, IBV_WR_SEND, A.buf, 8, A.mr->lkey, 0, 0, 22), 0);
	usleep(20000);
	CHECK_EQ(ibv_poll_cq(A.cq, 1, &wc), 0);
	CHECK_EQ(post_recv_buf(&B, 5, B.buf, 64), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 22);
	CHECK_EQ(poll_one(B.cq, &wc), 1);
	CHECK_EQ(wc.wr_id, 5);
}

static void test_flush(void)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	struct ibv_wc wc;

	reconnect(7, 1);
	CHECK_EQ(post_recv_buf(&B, 31, B.buf, 64), 0);
	CHECK_EQ(post_recv_buf(&B, 32, B.buf, 64), 0);
	CHECK_EQ(ibv_modify_qp(B.qp, &a, IBV_QP_STATE), 0);
	CHECK_EQ(poll_one(B.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc.wr_id, 31);
	CHECK_EQ(poll_one(B.cq, &wc), 1);
	CHECK_EQ(wc.wr_id, 32);
	/* Later work on a QP in error is flushed too, signaled or not. */
	CHECK_EQ(post_recv_buf(&B, 33, B.buf, 64), 0);
	CHECK_EQ(poll_one(B.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc.wr_id, 33);
	CHECK_EQ(ibv_modify_qp(A.qp, &a, IBV_QP_STATE), 0);
	CHECK_EQ(post(&A, IBV_WR_RDMA_WRITE, A.buf, 8, A.mr->lkey, 0, 0, 34), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc.wr_id, 34);
}

static void test_post_errors(void)
{
	struct ibv_sge sge = {.addr = (uintptr_t)A.buf, .length = 8, .lkey = A.mr->lkey};
	struct ibv_sge many[5] = {sge, sge, sge, sge, sge};
	struct ibv_send_wr w2 = {.wr_id = 2, .sg_list = many, .num_sge = 5, .opcode = IBV_WR_SEND};
	struct ibv_send_wr w1 = {.wr_id = 1,
				 .next = &w2,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE},
			   *bad = NULL;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RESET};
	uint8_t big[128];

	CHECK_EQ(ibv_modify_qp(A.qp, &a, IBV_QP_STATE), 0);
	CHECK_EQ(ibv_post_send(A.qp, &w1, &bad), EINVAL); /* not RTS */
	CHECK(bad == &w1);
	reconnect(7, 1);
	w1.wr.rdma.remote_addr = (uintptr_t)B.buf;
	w1.wr.rdma.rkey = B.mr->rkey;
	CHECK_EQ(ibv_post_send(A.qp, &w1, &bad), EINVAL); /* too many SGEs */
	CHECK(bad == &w2);
	w2.num_sge = 1;
	w2.sg_list = &sge;
	w2.opcode = (enum ibv_wr_opcode)99;
	CHECK_EQ(ibv_post_send(A.qp, &w1, &bad), EINVAL); /* unknown opcode */
	CHECK(bad == &w2);
	sge.addr = (uintptr_t)big;
	sge.length = sizeof(big);
	w1.send_flags = IBV_SEND_INLINE;
	w1.next = NULL;
	CHECK_EQ(ibv_post_send(A.qp, &w1, &bad), EINVAL); /* inline beyond max_inline_data */
	CHECK(bad == &w1);
	/* Unsignaled requests hold their send-queue entries until a later
	 * signaled completion is polled: the 17th of 16 finds it full. */
	reconnect(7, 1);
	sge.addr = (uintptr_t)A.buf;
	sge.length = 8;
	w1.send_flags = 0;
	for (unsigned i = 0; i < CAP.max_send_wr; i++)
		CHECK_EQ(ibv_post_send(A.qp, &w1, &bad), 0);
	CHECK_EQ(ibv_post_send(A.qp, &w1, &bad), ENOMEM);
	CHECK(bad == &w1);
}

static int wait_event(struct ibv_context *ctx, struct ibv_async_event *ev)
{
	struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};

	return poll(&p, 1, 1000) == 1 ? ibv_get_async_event(ctx, ev) : -1;
}

/* The next event is of type t on object element (a CQ, an SRQ), within
 * 10 s. Only an event received is acknowledged: one acknowledged that was
 * never received would leave its object's destroy waiting for ever
 * (verbs_data_path_roce once hung so, in ibv_destroy_cq). */
static void expect_event(struct ibv_context *ctx, enum ibv_event_type t, const void *element)
{
	struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};
	struct ibv_async_event ev;

	if (poll(&p, 1, 10000) != 1 || ibv_get_async_event(ctx, &ev)) {
		CHECK(!"the event came");
		return;
	}
	CHECK_EQ(ev.event_type, t);
	CHECK(ev.element.cq == element);
	ibv_ack_async_event(&ev);
}

static void test_cq_overrun(void)
{
	struct side C;
	struct ibv_async_event ev;
	struct ibv_wc wc;

	memset(&C, 0, sizeof(C));
	CHECK_EQ(side_open(&C, IBV_QPT_RC, 1, CAP), 0);
	CHECK_EQ(qp_connect(A.qp, C.qp->qp_num, 7, 1), 0);
	CHECK_EQ(qp_connect(C.qp, A.qp->qp_num, 7, 1), 0);
	drain(A.cq);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(post_recv_buf(&C, (uint64_t)i, C.buf, 64), 0);
		CHECK_EQ(post(&A, IBV_WR_SEND, A.buf, 8, A.mr->lkey, 0, 0, (uint64_t)i), 0);
	}
	/* All three are acknowledged, so all three reached C's full CQ
	 * before it is polled (on the wire, C's thread places them). */
	for (int i = 0; i < 3; i++)
		CHECK_EQ(poll_one(A.cq, &wc), 1);
	expect_event(C.ctx, IBV_EVENT_CQ_ERR, C.cq);
	CHECK_EQ(ibv_poll_cq(C.cq, 1, &wc), 1);

	/* A CQ created to ignore overruns raises no event for one (the
	 * first CQ's second overrun is still to be read). */
	expect_event(C.ctx, IBV_EVENT_CQ_ERR, C.cq);
	struct ibv_cq_init_attr_ex cx = {.cqe = 1,
					 .comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
					 .flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN};
	struct ibv_cq_ex *quiet = ibv_create_cq_ex(C.ctx, &cx);
	struct ibv_qp_init_attr init = {.send_cq = ibv_cq_ex_to_cq(quiet),
					.recv_cq = ibv_cq_ex_to_cq(quiet),
					.cap = CAP,
					.qp_type = IBV_QPT_RC};
	struct ibv_qp *qp = quiet ? ibv_create_qp(C.pd, &init) : NULL;

	CHECK(qp != NULL);
	CHECK_EQ(qp_connect(A.qp, qp->qp_num, 7, 1), 0);
	CHECK_EQ(qp_connect(qp, A.qp->qp_num, 7, 1), 0);
	drain(A.cq);
	for (int i = 0; i < 3; i++) {
		struct ibv_sge sge = {(uintptr_t)C.buf, 64, C.mr->lkey};
		struct ibv_recv_wr rw = {.sg_list = &sge, .num_sge = 1}, *rbad;

		CHECK_EQ(ibv_post_recv(qp, &rw, &rbad), 0);
		CHECK_EQ(post(&A, IBV_WR_SEND, A.buf, 8, A.mr->lkey, 0, 0, (uint64_t)i), 0);
	}
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wait_event(C.ctx, &ev), -1);
	drain(A.cq);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(ibv_cq_ex_to_cq(quiet));
	side_close(&C);
}

static void test_srq_limit(void)
{
	struct ibv_srq_init_attr si = {.attr = {.max_wr = 8, .max_sge = 1}};
	struct ibv_srq *srq = ibv_create_srq(B.pd, &si);
	struct ibv_qp_init_attr qi = {
	    .send_cq = B.cq, .recv_cq = B.cq, .srq = srq, .qp_type = IBV_QPT_RC, .cap = CAP};
	struct ibv_qp *q = ibv_create_qp(B.pd, &qi);
	struct ibv_srq_attr sa = {.srq_limit = 3};
	struct ibv_sge sge = {.addr = (uintptr_t)B.buf, .length = 64, .lkey = B.mr->lkey};
	struct ibv_recv_wr rw = {.sg_list = &sge, .num_sge = 1}, *bad;
	struct ibv_wc wc;

	CHECK(srq && q);
	for (int i = 0; i < 4; i++) {
		rw.wr_id = 100 + (uint64_t)i;
		CHECK_EQ(ibv_post_srq_recv(srq, &rw, &bad), 0);
	}
	CHECK_EQ(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT), 0);
	CHECK_EQ(qp_connect(A.qp, q->qp_num, 7, 1), 0);
	CHECK_EQ(qp_connect(q, A.qp->qp_num, 7, 1), 0);
	drain(A.cq);
	CHECK_EQ(post(&A, IBV_WR_SEND, A.buf, 8, A.mr->lkey, 0, 0, 1), 0);
	CHECK_EQ(poll_one(B.cq, &wc), 1);
	CHECK_EQ(wc.wr_id, 100); /* SRQ receives are taken in order */
	CHECK_EQ(wc.qp_num, q->qp_num);
	CHECK_EQ(post(&A, IBV_WR_SEND, A.buf, 8, A.mr->lkey, 0, 0, 2), 0);
	/* 2 left < limit 3: the limit event, once, and the limit disarms. */
	expect_event(B.ctx, IBV_EVENT_SRQ_LIMIT_REACHED, srq);
	CHECK_EQ(ibv_query_srq(srq, &sa), 0);
	CHECK_EQ(sa.srq_limit, 0);
	drain(A.cq);
	drain(B.cq);
	CHECK_EQ(ibv_destroy_qp(q), 0);
	CHECK_EQ(ibv_destroy_srq(srq), 0);
}

static void test_ud(void)
{
	struct side U1, U2;
	struct ibv_ah_attr aa = {
	    .is_global = 1, .port_num = 1, .grh = {.hop_limit = 1, .sgid_index = pair_gid_index()}};
	struct ibv_ah *ah;
	struct ibv_sge sge;
	struct ibv_send_wr wr = {.wr_id = 1,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;

	memset(&U1, 0, sizeof(U1));
	memset(&U2, 0, sizeof(U2));
	CHECK_EQ(side_open(&U1, IBV_QPT_UD, 16, CAP), 0);
	CHECK_EQ(side_open(&U2, IBV_QPT_UD, 16, CAP), 0);
	CHECK_EQ(qp_connect(U1.qp, 0, 0, 0), 0);
	CHECK_EQ(qp_connect(U2.qp, 0, 0, 0), 0);
	ibv_query_gid(U1.ctx, 1, pair_gid_index(), &aa.grh.dgid);
	ah = ibv_create_ah(U1.pd, &aa);
	CHECK(ah != NULL);
	sge = (struct ibv_sge){(uintptr_t)U1.buf, 100, U1.mr->lkey};
	memset(U1.buf, 0x3c, 100);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = U2.qp->qp_num;
	wr.wr.ud.remote_qkey = 0x11111111;
	CHECK_EQ(post_recv_buf(&U2, 8, U2.buf, 1024), 0);
	CHECK_EQ(ibv_post_send(U1.qp, &wr, &bad), 0);
	CHECK_EQ(poll_one(U2.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 140); /* the 40-byte GRH area, then the payload */
	CHECK(wc.wc_flags & IBV_WC_GRH);
	CHECK_EQ(wc.src_qp, U1.qp->qp_num);
	if (aa.grh.dgid.raw[10] == 0xff) {
		/* mlx5's RoCE header type: UDP (8) | IPv4 (2) */
		CHECK_EQ(wc.sl, 0xa);
		CHECK_EQ(U2.buf[20], 0x45); /* RoCEv2 over IPv4: the IPv4 header */
		CHECK_EQ(U2.buf[32], 127);
	} else {
		CHECK_EQ(wc.sl, 0x9);	     /* UDP (8) | IPv6 (1) */
		CHECK_EQ(U2.buf[0] >> 4, 6); /* RoCEv2 over IPv6: the IPv6 header is the GRH */
		CHECK_EQ(U2.buf[6], 17);     /* UDP */
		CHECK(!memcmp(U2.buf + 8, aa.grh.dgid.raw, 16)); /* from this host's GID */
		CHECK(!memcmp(U2.buf + 24, aa.grh.dgid.raw, 16));
	}
	CHECK_EQ(U2.buf[40], 0x3c);
	CHECK_EQ(poll_one(U1.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);

	/* A wrong Q_Key: dropped at the receiver, counted, and the sender
	 * still completes (IBTA 10.2.5). */
	wr.wr.ud.remote_qkey = 0x22222222;
	CHECK_EQ(ibv_post_send(U1.qp, &wr, &bad), 0);
	CHECK_EQ(poll_one(U1.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(ibv_poll_cq(U2.cq, 1, &wc), 0);
	/* Counted when the receiver takes the datagram: at once on shared
	 * memory, on the wire once its poll or progress thread has (an ASan
	 * run queried first). */
	struct ibv_port_attr pa = {0};
	for (int i = 0; i < 2000 && !pa.qkey_viol_cntr; i++) {
		CHECK_EQ(ibv_poll_cq(U2.cq, 1, &wc), 0);
		CHECK_EQ(ibv_query_port(U2.ctx, 1, &pa), 0);
		if (!pa.qkey_viol_cntr)
			usleep(1000);
	}
	CHECK_EQ(pa.qkey_viol_cntr, 1);

	/* No larger than the MTU; RDMA is not for UD. */
	sge.length = 4097;
	wr.wr.ud.remote_qkey = 0x11111111;
	CHECK_EQ(ibv_post_send(U1.qp, &wr, &bad), 0);
	CHECK_EQ(poll_one(U1.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_LOC_LEN_ERR);
	wr.opcode = IBV_WR_RDMA_WRITE;
	CHECK_EQ(ibv_post_send(U1.qp, &wr, &bad), EINVAL);
	ibv_destroy_ah(ah);
	side_close(&U1);
	side_close(&U2);
}

/* Sends one datagram of 16 bytes from S to group or QPN dest. */
static void send_ud(struct side *S, struct ibv_ah *ah, uint32_t dest)
{
	struct ibv_sge sge = {(uintptr_t)S->buf, 16, S->mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = dest;
	wr.wr.ud.remote_qkey = 0x11111111;
	CHECK_EQ(ibv_post_send(S->qp, &wr, &bad), 0);
	CHECK_EQ(poll_one(S->cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
}

/* s on uroce0 of another configuration file: another device of that
 * name, as a program started with another UROCE_CONFIG has. */
static int side_open_elsewhere(struct side *s, enum ibv_qp_type type, int cqe,
			       struct ibv_qp_cap cap)
{
	const char *was = getenv("UROCE_CONFIG");
	char saved[4096];
	int rc;

	snprintf(saved, sizeof(saved), "%s", was ? was : "");
	setenv("UROCE_CONFIG", "/nonexistent/another-uroce.conf", 1);
	rc = side_open(s, type, cqe, cap);
	if (was)
		setenv("UROCE_CONFIG", saved, 1);
	else
		unsetenv("UROCE_CONFIG");
	return rc;
}

/* Multicast (ibv_attach_mcast(3), IBTA 10.5.2.1): a datagram to the
 * group's GID and QPN 0xFFFFFF reaches each attached QP of each context
 * on the device, and no other (not one on a device of the same name from
 * another configuration); detach and destroy follow the kernel's uverbs. */
static void test_ud_multicast(void)
{
	struct side S, M1, M2, O, X;
	struct side *all[] = {&S, &M1, &M2, &O, &X};
	union ibv_gid group = {.raw = {[10] = 0xff, [11] = 0xff, [12] = 230, [15] = 7}};
	union ibv_gid unicast;
	struct ibv_ah_attr aa = {
	    .is_global = 1, .port_num = 1, .grh = {.hop_limit = 1, .sgid_index = pair_gid_index()}};
	struct ibv_device_attr da;
	struct ibv_ah *ah;
	struct ibv_wc wc;

	for (int i = 0; i < 5; i++) {
		memset(all[i], 0, sizeof(*all[i]));
		CHECK_EQ(all[i] == &X ? side_open_elsewhere(&X, IBV_QPT_UD, 16, CAP)
				      : side_open(all[i], IBV_QPT_UD, 16, CAP),
			 0);
		CHECK_EQ(qp_connect(all[i]->qp, 0, 0, 0), 0);
		CHECK_EQ(post_recv_buf(all[i], 8, all[i]->buf + 1024, 1024), 0);
	}
	CHECK_EQ(ibv_query_device(S.ctx, &da), 0);
	CHECK(da.max_mcast_grp > 0 && da.max_mcast_qp_attach > 0 &&
	      da.max_total_mcast_qp_attach > 0);
	/* Only a UD QP, only a multicast GID (ff00::/8, ::ffff:224.0.0.0/4). */
	ibv_query_gid(S.ctx, 1, pair_gid_index(), &unicast);
	CHECK_EQ(ibv_attach_mcast(M1.qp, &unicast, 0), EINVAL);
	CHECK_EQ(ibv_attach_mcast(A.qp, &group, 0), EINVAL);
	CHECK_EQ(ibv_attach_mcast(M1.qp, &group, 0), 0);
	CHECK_EQ(ibv_attach_mcast(M1.qp, &group, 0), 0); /* one attachment still */
	CHECK_EQ(ibv_attach_mcast(M2.qp, &group, 0), 0);
	CHECK_EQ(ibv_attach_mcast(X.qp, &group, 0), 0);

	aa.grh.dgid = group;
	ah = ibv_create_ah(S.pd, &aa);
	CHECK(ah != NULL);
	memset(S.buf, 0x5a, 16);
	send_ud(&S, ah, 0xffffff);
	for (int i = 1; i <= 2; i++) {
		CHECK_EQ(poll_one(all[i]->cq, &wc), 1);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.byte_len, 40 + 16);
		CHECK_EQ(wc.src_qp, S.qp->qp_num);
		CHECK_EQ(all[i]->buf[1024 + 40], 0x5a);
		/* The IPv4 header in the GRH area names the group. */
		CHECK_EQ(all[i]->buf[1024 + 20 + 16], 230);
		CHECK_EQ(post_recv_buf(all[i], 8, all[i]->buf + 1024, 1024), 0);
	}
	CHECK_EQ(ibv_poll_cq(O.cq, 1, &wc), 0); /* not a member */
	CHECK_EQ(ibv_poll_cq(X.cq, 1, &wc), 0); /* a member of another device */
	CHECK_EQ(ibv_poll_cq(S.cq, 1, &wc), 0);

	/* A group's QPN to a unicast GID reaches no one. */
	ibv_destroy_ah(ah);
	aa.grh.dgid = unicast;
	ah = ibv_create_ah(S.pd, &aa);
	send_ud(&S, ah, 0xffffff);
	CHECK_EQ(ibv_poll_cq(M1.cq, 1, &wc), 0);
	CHECK_EQ(ibv_poll_cq(M2.cq, 1, &wc), 0);

	/* Detached, M1 hears no more; detaching twice is EINVAL. An attached
	 * QP cannot be destroyed (EBUSY). */
	ibv_destroy_ah(ah);
	aa.grh.dgid = group;
	ah = ibv_create_ah(S.pd, &aa);
	CHECK_EQ(ibv_detach_mcast(M1.qp, &group, 0), 0);
	CHECK_EQ(ibv_detach_mcast(M1.qp, &group, 0), EINVAL);
	CHECK_EQ(ibv_destroy_qp(M2.qp), EBUSY);
	send_ud(&S, ah, 0xffffff);
	CHECK_EQ(poll_one(M2.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(ibv_poll_cq(M1.cq, 1, &wc), 0);
	CHECK_EQ(ibv_detach_mcast(M2.qp, &group, 0), 0);
	CHECK_EQ(ibv_detach_mcast(X.qp, &group, 0), 0);
	ibv_destroy_ah(ah);
	for (int i = 0; i < 5; i++)
		side_close(all[i]);
}

static int write_with(uint32_t rkey, uint64_t addr, uint64_t wr_id)
{
	struct ibv_wc wc;

	if (post(&A, IBV_WR_RDMA_WRITE, A.buf, 64, A.mr->lkey, addr, rkey, wr_id))
		return -1;
	return poll_one(A.cq, &wc) == 1 ? (int)wc.status : -1;
}

static int post_bind(struct ibv_mw *mw, uint32_t rkey, struct ibv_mr *mr, void *addr, uint64_t len,
		     enum ibv_wr_opcode op)
{
	struct ibv_send_wr wr = {.wr_id = 70, .opcode = op, .send_flags = IBV_SEND_SIGNALED}, *bad;
	struct ibv_wc wc;

	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info =
	    (struct ibv_mw_bind_info){mr, (uintptr_t)addr, len, IBV_ACCESS_REMOTE_WRITE};
	wr.invalidate_rkey = rkey;
	if (ibv_post_send(B.qp, &wr, &bad))
		return -1;
	return poll_one(B.cq, &wc) == 1 ? (int)wc.status : -1;
}

static void test_memory_windows(void)
{
	struct ibv_mr *mr =
	    ibv_reg_mr(B.pd, B.buf, SIDE_BUF,
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND);
	struct ibv_mr *nobind = ibv_reg_mr(B.pd, B.buf, SIDE_BUF, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mw *mw1 = ibv_alloc_mw(B.pd, IBV_MW_TYPE_1);
	struct ibv_mw *mw2 = ibv_alloc_mw(B.pd, IBV_MW_TYPE_2);
	/* LOCAL_WRITE in a window's flags is ignored, as Soft-RoCE ignores
	 * it (rdma-core's MW tests set it). */
	struct ibv_mw_bind b = {.wr_id = 61,
				.send_flags = IBV_SEND_SIGNALED,
				.bind_info = {mr, (uintptr_t)B.buf + 256, 256,
					      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE}};
	uint32_t old, key2;
	struct ibv_wc wc;

	CHECK(mr && nobind && mw1 && mw2);
	reconnect(7, 1);
	/* Type 1: bound with ibv_bind_mw; the rkey changes with each bind. */
	old = mw1->rkey;
	CHECK_EQ(ibv_bind_mw(B.qp, mw1, &b), 0);
	CHECK(mw1->rkey != old);
	CHECK_EQ(poll_one(B.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_BIND_MW);
	CHECK_EQ(write_with(mw1->rkey, (uintptr_t)B.buf + 256, 1), IBV_WC_SUCCESS);
	CHECK_EQ(ibv_dereg_mr(mr), EBUSY); /* a window is bound to it */
	CHECK_EQ(write_with(old, (uintptr_t)B.buf + 256, 2), IBV_WC_REM_ACCESS_ERR);
	reconnect(7, 1);
	CHECK_EQ(write_with(mw1->rkey, (uintptr_t)B.buf, 3), IBV_WC_REM_ACCESS_ERR); /* outside */

	/* Type 2: bound by a work request, served to this QP only, and
	 * invalidated remotely (Send with Invalidate) or locally. */
	reconnect(7, 1);
	key2 = ibv_inc_rkey(mw2->rkey);
	CHECK_EQ(post_bind(mw2, key2, mr, B.buf + 1024, 512, IBV_WR_BIND_MW), IBV_WC_SUCCESS);
	CHECK_EQ(write_with(key2, (uintptr_t)B.buf + 1024, 4), IBV_WC_SUCCESS);
	CHECK_EQ(post_recv_buf(&B, 80, B.buf + 4096, 64), 0);
	struct ibv_sge sge = {(uintptr_t)A.buf, 8, A.mr->lkey};
	struct ibv_send_wr inv = {.wr_id = 81,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_SEND_WITH_INV,
				  .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	inv.invalidate_rkey = key2;
	CHECK_EQ(ibv_post_send(A.qp, &inv, &bad), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(poll_one(B.cq, &wc), 1);
	CHECK(wc.wc_flags & IBV_WC_WITH_INV);
	CHECK_EQ(wc.invalidated_rkey, key2);
	CHECK_EQ(write_with(key2, (uintptr_t)B.buf + 1024, 5), IBV_WC_REM_ACCESS_ERR);

	reconnect(7, 1);
	key2 = ibv_inc_rkey(key2);
	CHECK_EQ(post_bind(mw2, key2, mr, B.buf, 512, IBV_WR_BIND_MW), IBV_WC_SUCCESS);
	CHECK_EQ(post_bind(mw2, key2, mr, B.buf, 512, IBV_WR_LOCAL_INV), IBV_WC_SUCCESS);
	CHECK_EQ(write_with(key2, (uintptr_t)B.buf, 6), IBV_WC_REM_ACCESS_ERR);

	/* Binding needs MW_BIND access on the region. */
	reconnect(7, 1);
	CHECK_EQ(post_bind(mw2, ibv_inc_rkey(key2), nobind, B.buf, 64, IBV_WR_BIND_MW),
		 IBV_WC_MW_BIND_ERR);
	reconnect(7, 1);
	CHECK_EQ(ibv_dealloc_mw(mw1), 0);
	CHECK_EQ(ibv_dealloc_mw(mw2), 0);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_dereg_mr(nobind), 0);
}

/* A deregistered region's key stays dead when its table entry serves a
 * window in between and then a new region. A fresh pair, so the entry's
 * first key is the one a reset generation would hand out again. */
static void test_stale_key_after_window(void)
{
	static struct side C, D;
	unsigned access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct ibv_mr *mr;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	uint32_t stale;

	if (side_open(&C, IBV_QPT_RC, 16, CAP) || side_open(&D, IBV_QPT_RC, 16, CAP)) {
		CHECK(!"two fresh contexts");
		return;
	}
	CHECK_EQ(qp_connect(C.qp, D.qp->qp_num, 7, 1), 0);
	CHECK_EQ(qp_connect(D.qp, C.qp->qp_num, 7, 1), 0);
	mr = ibv_reg_mr(D.pd, D.buf, 4096, access);
	stale = mr->rkey;
	ibv_dereg_mr(mr);
	mw = ibv_alloc_mw(D.pd, IBV_MW_TYPE_2);
	CHECK(mw != NULL);
	if (mw)
		ibv_dealloc_mw(mw);
	mr = ibv_reg_mr(D.pd, D.buf + 8192, 4096, access);
	CHECK(mr->rkey != stale);
	memset(D.buf + 8192, 0, 64);
	memset(C.buf, 0x77, 64);
	CHECK_EQ(
	    post(&C, IBV_WR_RDMA_WRITE, C.buf, 64, C.mr->lkey, (uintptr_t)D.buf + 8192, stale, 1),
	    0);
	CHECK_EQ(poll_one(C.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
	CHECK_EQ(D.buf[8192], 0);
	ibv_dereg_mr(mr);
	side_close(&C);
	side_close(&D);
}

/* A zero-length RDMA WRITE or READ names no memory, so its R_Key and
 * address are not checked (IBTA C9-88); the QP's access is. */
static void test_zero_length_rdma(void)
{
	struct ibv_wc wc;

	reconnect(7, 1);
	CHECK_EQ(post(&A, IBV_WR_RDMA_WRITE, A.buf, 0, A.mr->lkey, 0xdead0000, 0x7777, 1), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(post(&A, IBV_WR_RDMA_READ, A.buf, 0, A.mr->lkey, 0, 0, 2), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_RDMA_READ);
	CHECK_EQ(state_of(B.qp), IBV_QPS_RTS);
}

/* A forked child that closes its copy of the parent's context
 * (ibv_close_device) leaves the parent's device as it was: its peers still
 * reach it, through the registry and their caches. */
/* A target whose only way to take atomics is a window, on a QP granted
 * Remote Atomic access after RTR (RTS->RTS, ibv_modify_qp(3)): its
 * process's atomic server must run from that grant, or atomics aimed at
 * it go unanswered. A child plays it, with a fresh context and no region
 * registered for remote atomics; it answers the parent's QP number with
 * its own, the window's key and address. */
struct window_target {
	uint32_t qpn, rkey;
	uint64_t addr;
};

static void window_atomic_target(int to_parent, int from_parent)
{
	static uint64_t counter[512] __attribute__((aligned(4096)));
	struct ibv_context *ctx = open_dev("uroce0");
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_cq *cq = ctx ? ibv_create_cq(ctx, 8, NULL, NULL, 0) : NULL;
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, counter, sizeof(counter),
					    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND)
			       : NULL;
	struct ibv_qp_init_attr init = {
	    .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .cap = CAP};
	struct ibv_qp *qp = mr && cq ? ibv_create_qp(pd, &init) : NULL;
	struct ibv_mw *mw = pd ? ibv_alloc_mw(pd, IBV_MW_TYPE_2) : NULL;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS,
				.qp_access_flags =
				    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC};
	struct ibv_send_wr bind = {.opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED}, *bad;
	struct window_target answer;
	uint32_t peer;
	struct ibv_wc wc;
	char done;

	if (!qp || !mw || read(from_parent, &peer, 4) != 4)
		_exit(2);
	answer.qpn = qp->qp_num;
	pair_access = IBV_ACCESS_REMOTE_WRITE;
	if (qp_connect(qp, peer, 7, 1) || ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS))
		_exit(3);
	bind.bind_mw.mw = mw;
	bind.bind_mw.rkey = answer.rkey = ibv_inc_rkey(mw->rkey);
	bind.bind_mw.bind_info = (struct ibv_mw_bind_info){mr, (uintptr_t)counter, sizeof(counter),
							   IBV_ACCESS_REMOTE_ATOMIC};
	if (ibv_post_send(qp, &bind, &bad) || poll_one(cq, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
		_exit(4);
	answer.addr = (uintptr_t)counter;
	counter[0] = 40;
	if (write(to_parent, &answer, sizeof(answer)) != sizeof(answer) ||
	    read(from_parent, &done, 1) != 1)
		_exit(5);
	_exit(counter[0] == 42 ? 0 : 6);
}

static void test_atomic_through_window_granted_late(void)
{
	int down[2], up[2], status = -1;
	struct window_target answer;
	uint64_t *old = (uint64_t *)(A.buf + 2048);
	struct ibv_sge sge = {(uintptr_t)old, 8, A.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 91,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;
	pid_t pid;

	if (pipe(down) || pipe(up)) {
		CHECK(0);
		return;
	}
	pid = fork();
	if (pid == 0)
		window_atomic_target(up[1], down[0]);
	CHECK_EQ(write(down[1], &A.qp->qp_num, 4), 4);
	CHECK_EQ(read(up[0], &answer, sizeof(answer)), (long)sizeof(answer));
	CHECK_EQ(qp_connect(A.qp, answer.qpn, 7, 1), 0);
	wr.wr.atomic.remote_addr = answer.addr;
	wr.wr.atomic.rkey = answer.rkey;
	wr.wr.atomic.compare_add = 2;
	CHECK_EQ(ibv_post_send(A.qp, &wr, &bad), 0);
	CHECK(poll_one(A.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
	CHECK_EQ(*old, 40);
	CHECK_EQ(write(down[1], "d", 1), 1);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(down[0]);
	close(down[1]);
	close(up[0]);
	close(up[1]);
	reconnect(7, 1);
}

static void test_forked_child_closes(void)
{
	struct ibv_wc wc;
	pid_t pid = fork();

	if (pid == 0) {
		ibv_close_device(A.ctx);
		_exit(0);
	}
	waitpid(pid, NULL, 0);
	reconnect(7, 1);
	memset(B.buf, 0x3c, 64);
	CHECK_EQ(post(&B, IBV_WR_RDMA_WRITE, B.buf, 64, B.mr->lkey, (uintptr_t)A.buf + 512,
		      A.mr->rkey, 1),
		 0);
	CHECK_EQ(poll_one(B.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(A.buf[512], 0x3c);
	CHECK_EQ(post(&A, IBV_WR_RDMA_WRITE, A.buf, 64, A.mr->lkey, (uintptr_t)B.buf + 512,
		      B.mr->rkey, 2),
		 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
}

/* The peer process dies mid-connection: its partner's requests go
 * unacknowledged and complete with a transport retry error once the
 * timeout x retry_cnt budget is spent (14 and 7: about half a second),
 * and what follows is flushed. */
static void test_peer_killed(void)
{
	int up[2], down[2];
	uint32_t info[2];
	uint64_t addr;
	pid_t pid;
	struct ibv_wc wc;

	CHECK_EQ(pipe(up), 0);
	CHECK_EQ(pipe(down), 0);
	pid = fork();
	if (pid == 0) {
		static struct side P;
		uint32_t mine[2];
		uint64_t a;

		if (side_open(&P, IBV_QPT_RC, 16, CAP))
			_exit(1);
		mine[0] = P.qp->qp_num;
		mine[1] = P.mr->rkey;
		a = (uintptr_t)P.buf;
		if (write(up[1], mine, sizeof(mine)) != sizeof(mine) ||
		    write(up[1], &a, sizeof(a)) != sizeof(a) || read(down[0], mine, 4) != 4 ||
		    qp_connect(P.qp, mine[0], 7, 1))
			_exit(1);
		if (write(up[1], "R", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(up[1]); /* a child that fails is then an end of file, not a hang */
	CHECK_EQ(read(up[0], info, sizeof(info)), (ssize_t)sizeof(info));
	CHECK_EQ(read(up[0], &addr, sizeof(addr)), (ssize_t)sizeof(addr));
	CHECK_EQ(write(down[1], &A.qp->qp_num, 4), 4);
	char r;
	CHECK_EQ(read(up[0], &r, 1), 1);
	CHECK_EQ(qp_connect(A.qp, info[0], 7, 1), 0);
	drain(A.cq);
	CHECK_EQ(post(&A, IBV_WR_RDMA_WRITE, A.buf, 64, A.mr->lkey, addr, info[1], 1), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK_EQ(post(&A, IBV_WR_RDMA_WRITE, A.buf, 64, A.mr->lkey, addr, info[1], 2), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK_EQ(wc.status, IBV_WC_RETRY_EXC_ERR);
	/* The budget is 8 attempts of 4.096 us << 14 = 536.9 ms: never less (a
	 * requester gives up only once retry_cnt retries went unanswered,
	 * IBTA 9.7.6.1.3), nor much more. Each attempt's timer wakes a thread
	 * that a loaded machine may leave waiting for a CPU (two sanitizer
	 * suites at once on 2 cores took it past 1.5 s), so "much more" is 3 s. */
	long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	printf("retry error %ld ms after the peer was killed\n", ms);
	CHECK(ms >= 536);
	CHECK(ms < 3000);
	CHECK_EQ(post(&A, IBV_WR_RDMA_WRITE, A.buf, 64, A.mr->lkey, addr, info[1], 3), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
	close(up[0]);
	close(down[0]);
	close(down[1]);
}

static int channel_ready(struct ibv_comp_channel *ch, int ms)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};

	return poll(&p, 1, ms) == 1;
}

/* A completion added by another process wakes an armed CQ's channel; an
 * arm for solicited events ignores unsolicited ones (IBTA 11.4.2.2). The
 * extended CQ reads the same completions. */
static void test_channel_and_cq_ex(void)
{
	struct ibv_context *ctx = open_dev("uroce0");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq_init_attr_ex cx = {.cqe = 16,
					 .channel = ch,
					 .wc_flags = IBV_WC_EX_WITH_BYTE_LEN |
						     IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP};
	struct ibv_cq_ex *cq = ibv_create_cq_ex(ctx, &cx);
	struct ibv_qp_init_attr init = {.send_cq = ibv_cq_ex_to_cq(cq),
					.recv_cq = ibv_cq_ex_to_cq(cq),
					.cap = CAP,
					.qp_type = IBV_QPT_RC};
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	struct ibv_mr *mr = ibv_reg_mr(pd, B.buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_poll_cq_attr pa = {0};
	struct ibv_sge sge = {(uintptr_t)B.buf, 64, 0};
	struct ibv_recv_wr rw = {.wr_id = 90, .sg_list = &sge, .num_sge = 1}, *rbad;
	struct ibv_cq *got;
	void *cq_ctx;

	CHECK(qp && mr && cq);
	sge.lkey = mr->lkey;
	CHECK_EQ(qp_connect(A.qp, qp->qp_num, 7, 1), 0);
	CHECK_EQ(qp_connect(qp, A.qp->qp_num, 7, 1), 0);
	drain(A.cq);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(ibv_post_recv(qp, &rw, &rbad), 0);

	CHECK_EQ(ibv_req_notify_cq(ibv_cq_ex_to_cq(cq), 0), 0);
	CHECK_EQ(channel_ready(ch, 20), 0);
	memcpy(A.buf, "8 bytes!", 8);
	memset(B.buf, 0, 8);
	CHECK_EQ(post(&A, IBV_WR_SEND, A.buf, 8, A.mr->lkey, 0, 0, 1), 0);
	CHECK_EQ(channel_ready(ch, 1000), 1);
	CHECK_EQ(ibv_get_cq_event(ch, &got, &cq_ctx), 0);
	CHECK(got == ibv_cq_ex_to_cq(cq));
	ibv_ack_cq_events(got, 1);
	CHECK_EQ(ibv_start_poll(cq, &pa), 0);
	CHECK_EQ(cq->status, IBV_WC_SUCCESS);
	CHECK_EQ(cq->wr_id, 90);
	CHECK(memcmp(B.buf, "8 bytes!", 8) == 0); /* in place once polled */
	CHECK_EQ(ibv_wc_read_opcode(cq), IBV_WC_RECV);
	CHECK_EQ(ibv_wc_read_byte_len(cq), 8);
	CHECK_EQ(ibv_wc_read_qp_num(cq), qp->qp_num);
	CHECK_EQ(ibv_wc_read_src_qp(cq), A.qp->qp_num);
	CHECK_EQ(ibv_next_poll(cq), ENOENT);
	ibv_end_poll(cq);

	/* Armed for solicited completions only. */
	CHECK_EQ(ibv_req_notify_cq(ibv_cq_ex_to_cq(cq), 1), 0);
	CHECK_EQ(post(&A, IBV_WR_SEND, A.buf, 8, A.mr->lkey, 0, 0, 2), 0);
	CHECK_EQ(channel_ready(ch, 50), 0);
	struct ibv_sge s2 = {(uintptr_t)A.buf, 8, A.mr->lkey};
	struct ibv_send_wr sw = {.sg_list = &s2,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SOLICITED},
			   *bad;
	CHECK_EQ(ibv_post_send(A.qp, &sw, &bad), 0);
	CHECK_EQ(channel_ready(ch, 1000), 1);
	CHECK_EQ(ibv_get_cq_event(ch, &got, &cq_ctx), 0);
	ibv_ack_cq_events(got, 1);
	drain(A.cq);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	ibv_destroy_comp_channel(ch);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
}

/* A peer that belongs to another user cannot be reached by cross-memory
 * attach, nor can it reach this process: both ends meet on the wire, as
 * two users' programs meet on a NIC, and the responder checks the keys
 * (docs/architecture.md, Trust model). Both ways: this process (root)
 * WRITEs into the peer's region, then the peer (nobody) SENDs back; the
 * peer's region took the bytes. Needs root to make such a peer. */
static void other_user_peer(int up, int down)
{
	static struct side P;
	uint32_t mine[2];
	uint64_t a;
	struct ibv_wc wc;
	char ok;

	if (setgid(65534) || setuid(65534) || side_open(&P, IBV_QPT_RC, 16, CAP))
		_exit(1);
	mine[0] = P.qp->qp_num;
	mine[1] = P.mr->rkey;
	a = (uintptr_t)P.buf;
	if (write(up, mine, sizeof(mine)) != sizeof(mine) ||
	    write(up, &a, sizeof(a)) != sizeof(a) || read(down, mine, 4) != 4 ||
	    qp_connect(P.qp, mine[0], 7, 1) || write(up, "R", 1) != 1)
		_exit(1);
	/* The WRITE has completed at the requester when it says so. */
	if (read(down, &ok, 1) != 1)
		_exit(1);
	ok = P.buf[0] == 0x5c && P.buf[63] == 0x5c;
	if (post(&P, IBV_WR_SEND, P.buf, 64, P.mr->lkey, 0, 0, 1) || poll_one(P.cq, &wc) != 1 ||
	    wc.status != IBV_WC_SUCCESS || write(up, &ok, 1) != 1)
		_exit(1);
	_exit(0);
}

static void test_other_user(void)
{
	int up[2], down[2];
	uint32_t info[2];
	uint64_t addr;
	pid_t pid;
	struct ibv_wc wc;
	char r, ok = 0;

	if (getuid() != 0) {
		printf("other-user peer: skipped, needs root to create one\n");
		return;
	}
	/* Under valgrind the WRITE below completes, successfully, but only
	 * after 4 to 36 s (5 runs alone), where the normal and ASan builds
	 * take microseconds: the parent's port-4791 socket is the newest, so
	 * it receives its own request and forwards it to the child; the
	 * counters, read seconds in, show 2 forwarded, one ACK timeout, one
	 * retransmission and the completion. Why the first is not answered
	 * and why the retransmission takes seconds is not understood yet: an
	 * open defect, skipped there, and said so, until it is. */
	if (getenv("LD_PRELOAD") && strstr(getenv("LD_PRELOAD"), "vgpreload")) {
		printf("other-user peer: skipped under valgrind (an open defect)\n");
		return;
	}
	CHECK_EQ(pipe(up), 0);
	CHECK_EQ(pipe(down), 0);
	pid = fork();
	if (pid == 0)
		other_user_peer(up[1], down[0]);
	close(up[1]); /* a child that fails is then an end of file, not a hang */
	CHECK_EQ(read(up[0], info, sizeof(info)), (ssize_t)sizeof(info));
	CHECK_EQ(read(up[0], &addr, sizeof(addr)), (ssize_t)sizeof(addr));
	CHECK_EQ(write(down[1], &A.qp->qp_num, 4), 4);
	CHECK_EQ(read(up[0], &r, 1), 1);
	/* Was EACCES at RTR: "belongs to another user". */
	CHECK_EQ(qp_connect(A.qp, info[0], 7, 1), 0);
	drain(A.cq);
	memset(A.buf, 0x5c, 64);
	CHECK_EQ(post_recv_buf(&A, 7, A.buf + 64, 64), 0);
	CHECK_EQ(post(&A, IBV_WR_RDMA_WRITE, A.buf, 64, A.mr->lkey, addr, info[1], 1), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(write(down[1], "w", 1), 1);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 7);
	CHECK_EQ(read(up[0], &ok, 1), 1);
	CHECK_EQ(ok, 1);
	waitpid(pid, NULL, 0);
	/* The made-up user's registry, removed as the shell tests remove
	 * theirs: the host is left as it was. */
	unlink("/dev/shm/uroce-registry-65534");
	close(up[0]);
	close(down[0]);
	close(down[1]);
}

/* A QP moved to RESET takes its completions out of its CQ, as providers
 * purge them; the peer's CQ keeps its own. */
static void test_reset_purges_completions(void)
{
	struct ibv_qp_attr reset = {.qp_state = IBV_QPS_RESET};
	struct ibv_wc wc;

	reconnect(7, 1);
	CHECK_EQ(post_recv_buf(&B, 1, B.buf, 64), 0);
	CHECK_EQ(post_recv_buf(&B, 2, B.buf + 64, 64), 0);
	CHECK_EQ(post(&A, IBV_WR_SEND, A.buf, 8, A.mr->lkey, 0, 0, 11), 0);
	CHECK_EQ(post(&A, IBV_WR_SEND, A.buf, 8, A.mr->lkey, 0, 0, 12), 0);
	CHECK_EQ(ibv_modify_qp(A.qp, &reset, IBV_QP_STATE), 0);
	CHECK_EQ(ibv_poll_cq(A.cq, 1, &wc), 0);
	CHECK_EQ(poll_one(B.cq, &wc), 1);
	CHECK_EQ(wc.wr_id, 1);
	CHECK_EQ(poll_one(B.cq, &wc), 1);
	CHECK_EQ(wc.wr_id, 2);
	/* Completions that come after the reset are the QP's again. */
	reconnect(7, 1);
	CHECK_EQ(post_recv_buf(&B, 3, B.buf, 64), 0);
	CHECK_EQ(post(&A, IBV_WR_SEND, A.buf, 8, A.mr->lkey, 0, 0, 13), 0);
	CHECK_EQ(poll_one(A.cq, &wc), 1);
	CHECK_EQ(wc.wr_id, 13);
	CHECK_EQ(poll_one(B.cq, &wc), 1);
}

/* A context imported from a dup of another's command fd works on the same
 * device state (ibv_import_device(3)); a PD and an MR imported by handle
 * name the same objects (ibv_import_pd(3), ibv_import_mr(3)). A QP created
 * on the imports talks to A, A writes into B's region through the imported
 * key, and B's own context is untouched when the imports go. */
static void test_import(void)
{
	struct ibv_qp_init_attr init = {.qp_type = IBV_QPT_RC, .cap = CAP};
	struct ibv_context *ic = ibv_import_device(dup(B.ctx->cmd_fd));
	struct ibv_pd *ipd = ic ? ibv_import_pd(ic, B.pd->handle) : NULL;
	struct ibv_mr *imr = ipd ? ibv_import_mr(ipd, B.mr->handle) : NULL;
	struct ibv_cq *icq = ic ? ibv_create_cq(ic, 16, NULL, NULL, 0) : NULL;
	struct ibv_qp *iqp;
	struct ibv_wc wc;

	CHECK(ic && ipd && imr && icq);
	if (!ic || !ipd || !imr || !icq)
		return;
	CHECK(ic != B.ctx);
	CHECK_EQ(ipd->handle, B.pd->handle);
	CHECK_EQ(imr->rkey, B.mr->rkey);
	CHECK_EQ(imr->lkey, B.mr->lkey);
	CHECK_EQ(ibv_import_pd(ic, 0xfffffff0) == NULL && errno == EINVAL, 1);
	CHECK_EQ(ibv_import_mr(ipd, A.mr->handle + 4000) == NULL && errno == EINVAL, 1);
	CHECK_EQ(ibv_import_device(-1) == NULL && errno == EBADF, 1);
	init.send_cq = init.recv_cq = icq;
	iqp = ibv_create_qp(ipd, &init);
	CHECK(iqp != NULL);
	if (iqp) {
		CHECK_EQ(qp_connect(iqp, A.qp->qp_num, 7, 1), 0);
		CHECK_EQ(qp_connect(A.qp, iqp->qp_num, 7, 1), 0);
		memset(A.buf, 0x5a, 64);
		CHECK_EQ(post(&A, IBV_WR_RDMA_WRITE, A.buf, 64, A.mr->lkey, (uintptr_t)B.buf + 512,
			      imr->rkey, 21),
			 0);
		CHECK_EQ(poll_one(A.cq, &wc), 1);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(B.buf[512 + 63], 0x5a);
		/* B's imported QP reads A's buffer into B's region by its lkey. */
		struct ibv_sge sge = {(uintptr_t)B.buf + 1024, 64, imr->lkey};
		struct ibv_send_wr rd = {.wr_id = 22,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = IBV_WR_RDMA_READ,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;
		rd.wr.rdma.remote_addr = (uintptr_t)A.buf;
		rd.wr.rdma.rkey = A.mr->rkey;
		CHECK_EQ(ibv_post_send(iqp, &rd, &bad), 0);
		CHECK_EQ(poll_one(icq, &wc), 1);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(B.buf[1024 + 63], 0x5a);
		CHECK_EQ(ibv_destroy_qp(iqp), 0);
	}
	CHECK_EQ(
	    ibv_rereg_mr(imr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE),
	    IBV_REREG_MR_ERR_INPUT);
	CHECK_EQ(ibv_dereg_mr(imr), 0); /* an import: B's region stays */
	ibv_unimport_pd(ipd);
	/* A QP made on an imported PD keeps the original, and outlives the
	 * import (pyverbs unimports first). */
	struct ibv_pd *pd2 = ibv_alloc_pd(B.ctx);
	struct ibv_pd *ipd2 = pd2 ? ibv_import_pd(ic, pd2->handle) : NULL;
	CHECK(ipd2 != NULL);
	iqp = ipd2 ? ibv_create_qp(ipd2, &init) : NULL;
	CHECK(iqp != NULL);
	CHECK_EQ(ibv_dealloc_pd(pd2), EBUSY);
	ibv_unimport_pd(ipd2);
	CHECK_EQ(ibv_destroy_qp(iqp), 0);
	CHECK_EQ(ibv_dealloc_pd(pd2), 0);
	CHECK_EQ(ibv_destroy_cq(icq), 0);
	CHECK_EQ(ibv_close_device(ic), 0);
	reconnect(7, 1);
	CHECK_EQ(post_recv_buf(&B, 30, B.buf, 64), 0);
	CHECK_EQ(post(&A, IBV_WR_SEND, A.buf, 8, A.mr->lkey, 0, 0, 31), 0);
	CHECK_EQ(poll_one(B.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
}

int main(void)
{
	const char *t = getenv("UROCE_TRANSPORT");

	on_wire = t && strcmp(t, "roce") == 0;
	if (side_open(&A, IBV_QPT_RC, 64, CAP) || side_open(&B, IBV_QPT_RC, 64, CAP)) {
		fprintf(stderr, "cannot open two contexts on uroce0\n");
		return 1;
	}
	test_send_recv();
	test_rdma_and_atomics();
	test_atomic_write();
	test_xrc();
	test_inline_and_sge_lists();
	test_gathered_rdma();
	test_staged_sends();
	test_remote_access_errors();
	test_local_errors();
	test_unplaceable_send();
	test_unplaceable_write();
	test_rnr();
	test_flush();
	test_reset_purges_completions();
	test_import();
	test_post_errors();
	test_cq_overrun();
	test_srq_limit();
	test_ud();
	test_ud_multicast();
	test_memory_windows();
	test_stale_key_after_window();
	test_zero_length_rdma();
	test_channel_and_cq_ex();
	test_threaded_post_recv();
	if (!on_wire)
		test_atomic_through_window_granted_late();
	test_forked_child_closes();
	test_peer_killed();
	test_other_user();
	side_close(&A);
	side_close(&B);
	return check_report();
}
