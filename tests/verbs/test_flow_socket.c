/* Two processes of one host on the wire (UROCE_TRANSPORT=roce, which the
 * test sets itself; on lo): the newer one's port-4791 socket takes the
 * host's packets first and passes the older one's on through the relay.
 * Once a flow has reached the older process that way, it gets a socket of
 * its own connected to that flow, and the rest of the flow costs no
 * forward: of the ACKs for 256 SENDs from the older process to the newer,
 * only those in flight before that socket opened are forwarded (before,
 * each was). Every SEND still arrives, in order. */
#include <sys/wait.h>

#include "../check.h"
#include "pair.h"
#include "stat_read.h"

#define SENDS  256
#define WINDOW 32
/* What may be in flight when the older process opens the flow's socket. */
#define FORWARDS_AT_MOST (2 * WINDOW)

static const struct ibv_qp_cap CAP = {
    .max_send_wr = WINDOW, .max_recv_wr = SENDS, .max_send_sge = 1, .max_recv_sge = 1};

/* The newer process: receives every SEND, then says how many packets it
 * passed on to the older one. */
static int newer(int up, int down)
{
	static struct side B;
	uint32_t qpn;
	char line[4096];
	long long forwarded;
	struct ibv_wc wc;

	if (side_open(&B, IBV_QPT_RC, 2 * SENDS, CAP) || write(up, &B.qp->qp_num, 4) != 4 ||
	    read(down, &qpn, 4) != 4)
		return 1;
	/* On the wire from RTR, after the older one: its socket is the
	 * port's newest. */
	if (qp_connect(B.qp, qpn, 7, 1))
		return 2;
	for (uint32_t i = 0; i < SENDS; i++)
		if (post_recv_buf(&B, i, B.buf + 8 * i, 8))
			return 3;
	if (write(up, "R", 1) != 1)
		return 3;
	for (uint32_t i = 0; i < SENDS; i++)
		if (poll_one(B.cq, &wc) != 1 || wc.status != IBV_WC_SUCCESS || wc.wr_id != i ||
		    *(uint32_t *)(B.buf + 8 * i) != i)
			return 4;
	/* The older one has its last completion too before it asks. */
	if (read(down, &qpn, 4) != 4)
		return 5;
	stat_line("uroce0", "link uroce0/1 ", line, sizeof(line));
	forwarded = field(line, "forwarded_pkts");
	if (write(up, &forwarded, sizeof(forwarded)) != sizeof(forwarded) ||
	    read(down, &qpn, 4) != 4)
		return 6;
	side_close(&B);
	return 0;
}

static int send_one(struct side *A, uint32_t i)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)(A->buf + 8 * i), .length = 4, .lkey = A->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = i,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	*(uint32_t *)(A->buf + 8 * i) = i;
	return ibv_post_send(A->qp, &wr, &bad);
}

int main(void)
{
	static struct side A;
	int up[2], down[2], status;
	uint32_t qpn;
	long long forwarded = -1;
	struct ibv_wc wc;
	char ready;
	pid_t pid;

	/* The relay is the wire's: both processes put their QPs there. */
	setenv("UROCE_TRANSPORT", "roce", 1);
	CHECK_EQ(pipe(up), 0);
	CHECK_EQ(pipe(down), 0);
	/* Forked before either opens a device: a child forked beside the
	 * context's threads may inherit a lock one of them held (the
	 * sanitizer's allocator's, once in 4 runs). */
	pid = fork();
	if (pid == 0)
		_exit(newer(up[1], down[0]));
	close(up[1]); /* a child that fails is then an end of file, not a hang */
	CHECK_EQ(side_open(&A, IBV_QPT_RC, 2 * SENDS, CAP), 0);
	CHECK_EQ(read(up[0], &qpn, 4), 4);
	CHECK_EQ(qp_connect(A.qp, qpn, 7, 1), 0);
	CHECK_EQ(write(down[1], &A.qp->qp_num, 4), 4);
	if (read(up[0], &ready, 1) != 1) {
		waitpid(pid, &status, 0);
		printf("the newer process failed before it was ready: status %d\n", status);
		CHECK(0);
		return check_report();
	}
	for (uint32_t i = 0; i < SENDS; i += WINDOW) {
		for (uint32_t k = i; k < i + WINDOW; k++)
			CHECK_EQ(send_one(&A, k), 0);
		for (uint32_t k = i; k < i + WINDOW; k++) {
			CHECK_EQ(poll_one(A.cq, &wc), 1);
			CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		}
	}
	CHECK_EQ(write(down[1], &qpn, 4), 4);
	CHECK_EQ(read(up[0], &forwarded, sizeof(forwarded)), (ssize_t)sizeof(forwarded));
	printf("%d SENDs: %lld packets forwarded to the older process\n", SENDS, forwarded);
	CHECK(forwarded >= 1); /* the first ACK: the newer socket is the port's */
	CHECK(forwarded <= FORWARDS_AT_MOST);
	CHECK_EQ(write(down[1], &qpn, 4), 4);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	side_close(&A);
	return check_report();
}
