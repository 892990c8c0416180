/* Two processes of one host on the wire (UROCE_TRANSPORT=roce, which the
 * test sets itself; on lo): the newer one's port-4791 socket takes the
 * host's packets first and passes the older one's on through the relay.
 * Once a flow has reached the older process that way, it gets a socket of
 * its own connected to that flow, and the rest of the flow costs no
 * forward: of the ACKs for 256 SENDs from the older process to the newer,
 * only those in flight before that socket opened are forwarded (before,
 * each was). Every SEND still arrives, in order. */
#include "../check.h"
#include "peer_process.h"
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
	char line[4096];
	long long forwarded;
	struct ibv_wc wc;

	/* On the wire from RTR, after the older one: its socket is the
	 * port's newest. */
	if (side_open(&B, IBV_QPT_RC, 2 * SENDS, CAP) || peer_child_connect(B.qp, up, down))
		return 1;
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
	if (peer_child_wait(down))
		return 5;
	stat_line("uroce0", "link uroce0/1 ", line, sizeof(line));
	forwarded = field(line, "forwarded_pkts");
	if (write(up, &forwarded, sizeof(forwarded)) != sizeof(forwarded) || peer_child_wait(down))
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
	struct peer_process newer_one;
	long long forwarded;
	struct ibv_wc wc;

	/* The relay is the wire's: both processes put their QPs there. */
	setenv("UROCE_TRANSPORT", "roce", 1);
	CHECK_EQ(peer_fork(&newer_one, newer), 0);
	CHECK_EQ(side_open(&A, IBV_QPT_RC, 2 * SENDS, CAP), 0);
	if (peer_connect(&newer_one, A.qp)) {
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
	forwarded = peer_ask(&newer_one);
	printf("%d SENDs: %lld packets forwarded to the older process\n", SENDS, forwarded);
	CHECK(forwarded >= 1); /* the first ACK: the newer socket is the port's */
	CHECK(forwarded <= FORWARDS_AT_MOST);
	CHECK(peer_end(&newer_one));
	side_close(&A);
	return check_report();
}
