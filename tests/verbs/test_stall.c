/* A peer that stops answering (UROCE_FAULTS stall=T/P), as a NIC's
 * requester meets a hung host (IBTA 9.7.6.1.3): a stall shorter than the
 * retries is ridden out, every SEND delivered once and in order; one longer
 * ends the SEND in IBV_WC_RETRY_EXC_ERR while the stall lasts, not after
 * it, and the QP in ERR. STALL_EXPECT says which: "recover"
 * (stall=60ms/400ms, 1.5 s of traffic) or "exceed" (stall=1500ms/2s). Both
 * QPs are in this process, so both are silent together. */
#include <stdlib.h>
#include <time.h>

#include "../check.h"
#include "pair.h"

static struct side A, B;
static const struct ibv_qp_cap CAP = {
    .max_send_wr = 16, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1};

static double seconds(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static int send_one(uint32_t seq, struct ibv_wc *wc)
{
	struct ibv_sge sge = {.addr = (uintptr_t)A.buf, .length = 4, .lkey = A.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = seq,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	double until = seconds() + 5;

	memcpy(A.buf, &seq, sizeof(seq));
	if (ibv_post_send(A.qp, &wr, &bad))
		return -1;
	while (ibv_poll_cq(A.cq, 1, wc) == 0)
		if (seconds() > until)
			return -1;
	return 0;
}

/* The receive for seq, and that it carries seq: exactly once, in order. */
static int received(uint32_t seq)
{
	struct ibv_wc wc;
	uint32_t got;

	if (poll_one(B.cq, &wc) != 1 || wc.status != IBV_WC_SUCCESS || wc.wr_id != seq)
		return 0;
	memcpy(&got, B.buf + 1024 * (seq % 32), sizeof(got));
	return got == seq && post_recv_buf(&B, seq + 32, B.buf + 1024 * (seq % 32), 1024) == 0;
}

static void recover(void)
{
	double end = seconds() + 1.5, longest = 0;
	uint32_t seq = 0;
	struct ibv_wc wc;

	while (seconds() < end) {
		double t0 = seconds();

		CHECK_EQ(send_one(seq, &wc), 0);
		if (seconds() - t0 > longest)
			longest = seconds() - t0;
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK(received(seq));
		if (check_failed)
			return;
		seq++;
	}
	printf("%u SENDs through stalls, every one received once; the longest took %.0f ms\n", seq,
	       longest * 1e3);
	CHECK(seq > 0);
	/* Three stalls went by: some SEND waited one out, an ACK timeout at
	 * least. */
	CHECK(longest > 0.015);
}

static void exceed(void)
{
	double start = seconds(), failed_at;
	uint32_t seq = 0;
	struct ibv_wc wc;
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;

	for (;; seq++) {
		CHECK_EQ(send_one(seq, &wc), 0);
		if (check_failed || wc.status != IBV_WC_SUCCESS)
			break;
		CHECK(received(seq));
	}
	failed_at = seconds() - start;
	printf("SEND %u ended in %s %.2f s after the first\n", seq, ibv_wc_status_str(wc.status),
	       failed_at);
	CHECK_EQ(wc.status, IBV_WC_RETRY_EXC_ERR);
	/* Silent from 0.5 s to 2 s: the retries ran out in there. */
	CHECK(failed_at > 0.4 && failed_at < 2.0);
	CHECK_EQ(ibv_query_qp(A.qp, &attr, IBV_QP_STATE, &init), 0);
	CHECK_EQ(attr.qp_state, IBV_QPS_ERR);
}

int main(void)
{
	const char *expect = getenv("STALL_EXPECT");

	if (!expect || !getenv("UROCE_FAULTS")) {
		fprintf(stderr, "STALL_EXPECT=recover|exceed and UROCE_FAULTS=stall=... please\n");
		return 2;
	}
	CHECK_EQ(side_open(&A, IBV_QPT_RC, 64, CAP), 0);
	CHECK_EQ(side_open(&B, IBV_QPT_RC, 64, CAP), 0);
	if (check_failed)
		return 1;
	CHECK_EQ(qp_connect(A.qp, B.qp->qp_num, 7, 1), 0);
	CHECK_EQ(qp_connect(B.qp, A.qp->qp_num, 7, 1), 0);
	for (uint32_t i = 0; i < 32; i++)
		CHECK_EQ(post_recv_buf(&B, i, B.buf + 1024 * i, 1024), 0);
	if (!strcmp(expect, "recover"))
		RUN(recover(), 60);
	else
		RUN(exceed(), 60);
	side_close(&A);
	side_close(&B);
	return check_report();
}
