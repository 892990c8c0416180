/* A program busy-polling one context's CQ lets the process's other uroce
 * threads on its core run: here the progress thread of a second context,
 * the only one to answer the first context's SENDs on the wire.
 *
 * Without that, the answer waited for the scheduler to take the core from
 * the poller: 1.4 to 4 ms on this 2-core VM for about 1 message in 100 of
 * test_counters' ping-pong (perf sched timehist: the responder's thread
 * runnable behind the poller, the other core idle), and in one CI run long
 * enough to spend an ACK timeout of 17 ms. The test makes that wait
 * certain: the whole process on one CPU, under SCHED_FIFO, where a
 * thread of equal priority runs only when the running one blocks or
 * yields (sched(7)). The poller never blocks; it must yield. Before, every
 * SEND ended in IBV_WC_RETRY_EXC_ERR, its ACK never sent.
 *
 * SCHED_FIFO needs CAP_SYS_NICE or an RLIMIT_RTPRIO: without them the test
 * is skipped (77). */
#define _GNU_SOURCE 1
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "../check.h"
#include "pair.h"

#define N 200

static struct side A, B;
static const struct ibv_qp_cap CAP = {
    .max_send_wr = 4, .max_recv_wr = N, .max_send_sge = 1, .max_recv_sge = 1};

static void ping_pong(void)
{
	struct ibv_sge sge = {.addr = (uintptr_t)A.buf, .length = 64, .lkey = A.mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;
	int ok = 0;

	for (int i = 0; i < N; i++)
		CHECK_EQ(post_recv_buf(&B, i, B.buf, 256), 0);
	for (int i = 0; i < N; i++) {
		CHECK_EQ(ibv_post_send(A.qp, &wr, &bad), 0);
		if (poll_one(A.cq, &wc) != 1) {
			fprintf(stderr, "SEND %d: no completion\n", i);
			break;
		}
		if (wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "SEND %d: %s\n", i, ibv_wc_status_str(wc.status));
			break;
		}
		ok++;
	}
	CHECK_EQ(ok, N);
	for (int i = 0; i < ok; i++)
		CHECK(poll_one(B.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
}

/* This thread, and every thread it creates from now on, on one CPU at
 * SCHED_FIFO priority 1 (pthread_create inherits both; with
 * SCHED_RESET_ON_FORK the threads would start as ordinary ones, which a
 * FIFO thread starves whether it yields or not). */
static int one_fifo_cpu(void)
{
	struct sched_param p = {.sched_priority = 1};
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(sched_getcpu(), &one);
	if (sched_setaffinity(0, sizeof(one), &one))
		return -1;
	return sched_setscheduler(0, SCHED_FIFO, &p);
}

int main(void)
{
	if (one_fifo_cpu()) {
		fprintf(stderr, "skipped: SCHED_FIFO on one CPU refused: %s\n", strerror(errno));
		return 77;
	}
	CHECK_EQ(side_open(&A, IBV_QPT_RC, N, CAP), 0);
	CHECK_EQ(side_open(&B, IBV_QPT_RC, N, CAP), 0);
	if (check_failed)
		return 1;
	CHECK_EQ(qp_connect(A.qp, B.qp->qp_num, 0, 1), 0);
	CHECK_EQ(qp_connect(B.qp, A.qp->qp_num, 0, 1), 0);
	RUN(ping_pong(), 60);
	side_close(&A);
	side_close(&B);
	return check_report();
}
