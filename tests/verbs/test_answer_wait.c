/* A ping-pong on the wire (answer_wait.c). The ACK of a message leaves
 * before its program's answer, as a NIC's does: when the ACK waited for
 * the answer instead, a peer that sleeps on completion events found its
 * request still in its send queue after the answer's event (ib_send_lat -e
 * against a busy-polling peer failed "Couldn't post send"), and the answer
 * went first in 12 of 20 rounds here. And a poll that completes the
 * program's request keeps receiving until the peer's answer comes, once
 * the peer has been seen answering: without it, the answer to a program
 * spinning on memory waits for the progress thread's wake-up.
 *
 * This process plays the peer with a plain UDP socket on PEER_IP (lo)
 * against a uroce RC QP on the wire. */
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "../check.h"
#include "pair.h"
#include "peer_packet.h"

#define PEER_QPN  0x321
#define FIRST_PSN 500 /* the uroce QP's */
#define ROUNDS	  30  /* of the program answering */
#define ANSWERS	  60  /* of the peer answering */
#define SIZE	  8
#define WORD_AT	  2048	   /* where the peer's WRITEs land in S.buf */
#define LAG_NS	  10000ull /* between the peer's ACK and its answer */

enum { SEND_ONLY = 0x04, WRITE_ONLY = 0x0a, ACKNOWLEDGE = 0x11 };

static struct side S;
static const struct ibv_qp_cap CAP = {
    .max_send_wr = 8, .max_recv_wr = ROUNDS + 2, .max_send_sge = 1, .max_recv_sge = 1};
static uint32_t peer_psn;      /* the peer's next request's */
static uint32_t sent;	       /* the uroce QP's requests so far */
static int cpus[2] = {-1, -1}; /* the program's and the peer's, when there are two */

/* The program and its progress thread on one CPU, the peer on another, as
 * perftest pins a process to a core: a peer thread that woke on the
 * program's CPU could hold the program off between the ACK and its look,
 * and the answer was then there without the wait (1 run in 6). */
static void pin_to(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void choose_cpus(void)
{
	cpu_set_t set;
	int n = 0;

	if (sched_getaffinity(0, sizeof(set), &set))
		return;
	for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	if (n < 2)
		cpus[0] = -1;
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int peer_sends(int fd, struct uro_roce_packet *p)
{
	p->pkey = 0xffff;
	p->dest_qp = S.qp->qp_num;
	return peer_send(fd, p, htonl(PEER_IP), htons(URO_ROCE_PORT)) > 0 ? 0 : -1;
}

static void expect_completion(uint64_t wr_id, enum ibv_wc_opcode opcode)
{
	struct ibv_wc wc;

	CHECK_EQ(poll_one(S.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, wr_id);
	CHECK_EQ(wc.opcode, opcode);
}

static void post_send_message(uint64_t wr_id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)S.buf, .length = SIZE, .lkey = S.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = wr_id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	CHECK_EQ(ibv_post_send(S.qp, &wr, &bad), 0);
	sent++;
}

/* The peer sends messages; the program answers each as soon as its
 * receive completes. Each round the message's ACK comes first, then the
 * answer: never the other way round, however soon the program answers. */
static void test_ack_before_answer(int fd)
{
	static const uint8_t payload[SIZE] = "message";

	for (uint32_t i = 0; i < ROUNDS; i++) {
		struct uro_roce_packet msg = {.opcode = SEND_ONLY,
					      .ack_req = 1,
					      .psn = peer_psn++,
					      .payload = payload,
					      .payload_len = SIZE};
		struct uro_roce_packet ack = {.opcode = ACKNOWLEDGE, .psn = FIRST_PSN + sent};
		uint32_t psn;

		CHECK_EQ(post_recv_buf(&S, i, S.buf + 1024, SIZE), 0);
		CHECK_EQ(peer_sends(fd, &msg), 0);
		expect_completion(i, IBV_WC_RECV);
		post_send_message(100 + i);
		CHECK_EQ(peer_next(fd, &psn, 2000), ACKNOWLEDGE);
		CHECK_EQ(psn, msg.psn);
		CHECK_EQ(peer_next(fd, &psn, 2000), SEND_ONLY);
		CHECK_EQ(psn, ack.psn);
		CHECK_EQ(peer_sends(fd, &ack), 0);
		expect_completion(100 + i, IBV_WC_SEND);
		if (check_failed)
			return;
	}
}

/* The peer's side of test_poll_waits_for_answer, in a thread of its own:
 * it acknowledges each of the program's messages, then LAG_NS later
 * WRITEs the round's number into the program's word. 0 when done. */
static void *peer_answers(void *arg)
{
	int fd = *(int *)arg;

	pin_to(cpus[1]);
	for (uint64_t round = 1; round <= ANSWERS; round++) {
		struct uro_roce_packet ack = {.opcode = ACKNOWLEDGE};
		struct uro_roce_packet write = {.opcode = WRITE_ONLY,
						.ack_req = 1,
						.payload = (const uint8_t *)&round,
						.payload_len = sizeof(round)};
		uint64_t until;
		int op;

		while ((op = peer_next(fd, &ack.psn, 2000)) == ACKNOWLEDGE)
			; /* of the peer's WRITEs */
		if (op != SEND_ONLY || peer_sends(fd, &ack))
			return (void *)1;
		for (until = now_ns() + LAG_NS; now_ns() < until;)
			;
		write.psn = peer_psn++;
		write.reth.va = (uintptr_t)(S.buf + WORD_AT);
		write.reth.rkey = S.mr->rkey;
		write.reth.len = sizeof(round);
		if (peer_sends(fd, &write))
			return (void *)2;
	}
	return NULL;
}

/* The program sends a message and polls for its completion, then looks at
 * the word the peer's answer WRITEs, calling nothing, as ib_write_lat
 * spins on memory. Once the peer has answered URO_WIRE_ANSWERED times,
 * the poll that completes the message returns with the answer placed:
 * LAG_NS is far within its URO_WIRE_AWAIT_NS. A preempted peer thread
 * can stretch it past, and the count starts again, so more than half of
 * the rounds must find it. Before, none did: the WRITE waited for the
 * progress thread. */
static void test_poll_waits_for_answer(int fd)
{
	volatile uint64_t *word = (volatile uint64_t *)(S.buf + WORD_AT);
	unsigned there = 0;
	pthread_t peer;
	void *peer_failed = NULL;

	*word = 0;
	CHECK_EQ(pthread_create(&peer, NULL, peer_answers, &fd), 0);
	for (uint64_t round = 1; round <= ANSWERS && !check_failed; round++) {
		uint64_t until = now_ns() + 2000000000ull;

		post_send_message(200 + round);
		expect_completion(200 + round, IBV_WC_SEND);
		there += *word == round;
		while (*word != round && now_ns() < until)
			nanosleep(&(struct timespec){.tv_nsec = 20000}, NULL);
		CHECK_EQ(*word, round);
	}
	CHECK_EQ(pthread_join(peer, &peer_failed), 0);
	CHECK(peer_failed == NULL);
	printf("# the answer was there when the poll returned in %u of %d rounds\n", there,
	       ANSWERS);
	CHECK(there > ANSWERS / 2);
}

int main(void)
{
	int fd = peer_socket();

	CHECK(fd >= 0);
	choose_cpus();
	pin_to(cpus[0]);
	CHECK_EQ(side_open(&S, IBV_QPT_RC, 64, CAP), 0);
	if (check_failed)
		return check_report();
	CHECK_EQ(peer_connect(S.qp, PEER_QPN, FIRST_PSN, IBV_ACCESS_REMOTE_WRITE), 0);
	RUN(test_ack_before_answer(fd), 30);
	RUN(test_poll_waits_for_answer(fd), 30);
	close(fd);
	side_close(&S);
	return check_report();
}
