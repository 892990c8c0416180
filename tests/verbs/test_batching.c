/* Two processes of one host on the wire (UROCE_TRANSPORT=roce, which the
 * test sets itself; on lo): a stream of small SENDs costs a few system
 * calls, not one per message on each side. 512 SENDs of 8 bytes posted as
 * one list leave in GSO bursts of several messages each (before, each
 * message was a datagram of its own); 32 more, posted one at a time
 * while the first is in flight, wait for each other and leave in bursts
 * too (before, each left alone: they fit in the window, 40 packets at
 * path MTU 4096).
 * The responder acknowledges each received batch once (IBTA 9.7.5.1.2,
 * coalesced acknowledgements), not each message that asked. Every SEND
 * still arrives once, in order, and every completion comes. */
#include "../check.h"
#include "peer_process.h"
#include "stat_read.h"

#define LISTED 512 /* posted as one list */
#define SINGLE 32  /* then one post each: fewer than a window holds */
#define SENDS  (LISTED + SINGLE)
#define SIZE   8
/* A burst carries up to 64 packets: a few dozen datagrams at most. */
#define ACKS_AT_MOST (SENDS / 4)

static const struct ibv_qp_cap CAP = {
    .max_send_wr = SENDS, .max_recv_wr = SENDS, .max_send_sge = 1, .max_recv_sge = 1};

/* The responder: receives every SEND, then says how many packets it sent:
 * its ACKs, since it sends nothing else. */
static int responder(int up, int down)
{
	static struct side B;
	char line[4096];
	long long acks;
	struct ibv_wc wc;

	if (side_open(&B, IBV_QPT_RC, 2 * SENDS, CAP) || peer_child_connect(B.qp, up, down))
		return 1;
	for (uint32_t i = 0; i < SENDS; i++)
		if (post_recv_buf(&B, i, B.buf + SIZE * i, SIZE))
			return 2;
	if (write(up, "R", 1) != 1)
		return 3;
	for (uint32_t i = 0; i < SENDS; i++)
		if (poll_one(B.cq, &wc) != 1 || wc.status != IBV_WC_SUCCESS || wc.wr_id != i ||
		    wc.byte_len != SIZE || *(uint32_t *)(B.buf + SIZE * i) != i)
			return 4;
	/* The requester has its last completion before it asks. */
	if (peer_child_wait(down))
		return 5;
	stat_line("uroce0", "link uroce0/1 ", line, sizeof(line));
	acks = field(line, "sent_pkts");
	if (write(up, &acks, sizeof(acks)) != sizeof(acks) || peer_child_wait(down))
		return 6;
	side_close(&B);
	return 0;
}

/* This process's packets sent and GSO messages so far. */
static void sent_so_far(long long *sent, long long *gso)
{
	char line[4096];

	stat_line("uroce0", "link uroce0/1 ", line, sizeof(line));
	*sent = field(line, "sent_pkts");
	*gso = field(line, "gso_msgs");
}

static void complete(struct side *A, uint32_t from, uint32_t to)
{
	struct ibv_wc wc;

	for (uint32_t i = from; i < to; i++) {
		CHECK_EQ(poll_one(A->cq, &wc), 1);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, i);
	}
}

int main(void)
{
	static struct side A;
	static struct ibv_sge sge[SENDS];
	static struct ibv_send_wr wr[SENDS];
	struct ibv_send_wr *bad;
	struct peer_process resp;
	long long acks, sent, gso, sent1, gso1;

	setenv("UROCE_TRANSPORT", "roce", 1);
	CHECK_EQ(peer_fork(&resp, responder), 0);
	CHECK_EQ(side_open(&A, IBV_QPT_RC, 2 * SENDS, CAP), 0);
	if (peer_connect(&resp, A.qp)) {
		CHECK(0);
		return check_report();
	}
	for (uint32_t i = 0; i < SENDS; i++) {
		*(uint32_t *)(A.buf + SIZE * i) = i;
		sge[i] = (struct ibv_sge){
		    .addr = (uintptr_t)(A.buf + SIZE * i), .length = SIZE, .lkey = A.mr->lkey};
		wr[i] = (struct ibv_send_wr){.wr_id = i,
					     .next = i + 1 < LISTED ? &wr[i + 1] : NULL,
					     .sg_list = &sge[i],
					     .num_sge = 1,
					     .opcode = IBV_WR_SEND,
					     .send_flags = IBV_SEND_SIGNALED};
	}
	CHECK_EQ(ibv_post_send(A.qp, wr, &bad), 0);
	complete(&A, 0, LISTED);
	sent_so_far(&sent1, &gso1);
	printf("%d SENDs of %d bytes in a list: %lld packets in %lld GSO messages\n", LISTED, SIZE,
	       sent1, gso1);
	CHECK_EQ(sent1, LISTED); /* nothing lost on lo, nothing sent twice */
	CHECK(gso1 >= 2);	 /* one datagram per message before */
	for (uint32_t i = LISTED; i < SENDS; i++) {
		wr[i].next = NULL;
		CHECK_EQ(ibv_post_send(A.qp, &wr[i], &bad), 0);
	}
	complete(&A, LISTED, SENDS);
	sent_so_far(&sent, &gso);
	printf("%d SENDs posted one at a time: %lld packets in %lld GSO messages\n", SINGLE,
	       sent - sent1, gso - gso1);
	CHECK_EQ(sent - sent1, SINGLE);
	CHECK(gso - gso1 >= 1);
	acks = peer_ask(&resp);
	printf("%lld ACKs for %d SENDs\n", acks, SENDS);
	CHECK(acks >= 1);
	CHECK(acks <= ACKS_AT_MOST);
	CHECK(peer_end(&resp));
	side_close(&A);
	return check_report();
}
