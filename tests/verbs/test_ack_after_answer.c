/* ACKs after the answer (rc_responder.c). A program that answers each
 * one-packet message with a request of its own has the ACK of the message
 * follow its answer out, so that a ping-pong's peer, polling for its
 * request's completion, takes the answer in the same poll. Before, the
 * ACK left when the batch that brought the message ended, always before
 * the program could answer: not once in ROUNDS did the answer go first.
 * Whatever waits, every ACK comes, for the right PSN, and before any other
 * answer of the QP's (a READ response); one the program leaves unanswered
 * comes without the program's help, and so does one whose QP the program
 * destroys, or whose program exits, right after the message's receive
 * (ibv_rc_pingpong's last message: its peer's SEND ended in
 * IBV_WC_RETRY_EXC_ERR when such an ACK was lost with the QP).
 *
 * This process plays the requester with a plain UDP socket on PEER_IP
 * (lo) and sends SENDs to a uroce RC QP on the wire, which answers each
 * with a SEND of its own. */
#include <sys/wait.h>
#include <unistd.h>

#include "../check.h"
#include "pair.h"
#include "peer_packet.h"

#define PEER_QPN  0x321
#define FIRST_PSN 500 /* the uroce QP's */
#define ROUNDS	  20
#define SIZE	  8

enum { SEND_ONLY = 0x04, READ_REQUEST = 0x0c, READ_RESPONSE_ONLY = 0x10, ACKNOWLEDGE = 0x11 };

static struct side S;
static const struct ibv_qp_cap CAP = {
    .max_send_wr = 8, .max_recv_wr = 2 * ROUNDS + 4, .max_send_sge = 1, .max_recv_sge = 1};
static uint32_t peer_psn; /* the next request's */

static void peer_sends_to(int fd, uint32_t qpn, struct uro_roce_packet *p)
{
	p->pkey = 0xffff;
	p->dest_qp = qpn;
	CHECK(peer_send(fd, p, htonl(PEER_IP), htons(URO_ROCE_PORT)) > 0);
}

static void peer_sends(int fd, struct uro_roce_packet *p)
{
	peer_sends_to(fd, S.qp->qp_num, p);
}

static void peer_send_message_to(int fd, uint32_t qpn)
{
	static const uint8_t payload[SIZE] = "message";
	struct uro_roce_packet p = {.opcode = SEND_ONLY,
				    .ack_req = 1,
				    .psn = peer_psn++,
				    .payload = payload,
				    .payload_len = SIZE};

	peer_sends_to(fd, qpn, &p);
}

static void peer_send_message(int fd)
{
	peer_send_message_to(fd, S.qp->qp_num);
}

/* The peer acknowledges the request psn of the uroce QP qpn. */
static void peer_ack_to(int fd, uint32_t qpn, uint32_t psn)
{
	struct uro_roce_packet p = {.opcode = ACKNOWLEDGE, .psn = psn};

	peer_sends_to(fd, qpn, &p);
}

static void peer_ack(int fd, uint32_t psn)
{
	peer_ack_to(fd, S.qp->qp_num, psn);
}

static void expect_completion(uint64_t wr_id, enum ibv_wc_opcode opcode)
{
	struct ibv_wc wc;

	CHECK_EQ(poll_one(S.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, wr_id);
	CHECK_EQ(wc.opcode, opcode);
}

static int answer_on(struct side *s, uint64_t wr_id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf, .length = SIZE, .lkey = s->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = wr_id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	return ibv_post_send(s->qp, &wr, &bad);
}

static void answer(uint64_t wr_id)
{
	CHECK_EQ(answer_on(&S, wr_id), 0);
}

static uint32_t received; /* the messages this side received so far */
static uint32_t sent;	  /* its answers so far */

/* The peer sends a message; the program answers it as soon as its receive
 * completes. Whether the answer reaches the peer before the message's
 * ACK: 1 if it did. Either way both come, for their PSNs. */
static int round_trip(int fd)
{
	uint32_t msg = peer_psn, psn[2], req = FIRST_PSN + sent;
	uint64_t id = 100 + sent++;
	int op[2];

	peer_send_message(fd);
	expect_completion(received++, IBV_WC_RECV);
	answer(id);
	op[0] = peer_next(fd, &psn[0], 2000);
	op[1] = peer_next(fd, &psn[1], 2000);
	if (op[0] == SEND_ONLY) {
		CHECK_EQ(psn[0], req);
		CHECK_EQ(op[1], ACKNOWLEDGE);
		CHECK_EQ(psn[1], msg);
	} else {
		CHECK_EQ(op[0], ACKNOWLEDGE);
		CHECK_EQ(psn[0], msg);
		CHECK_EQ(op[1], SEND_ONLY);
		CHECK_EQ(psn[1], req);
	}
	peer_ack(fd, req);
	expect_completion(id, IBV_WC_SEND);
	return op[0] == SEND_ONLY;
}

/* Whether the answer goes first depends on how soon the program answers
 * (within URO_WIRE_ACK_WAIT_NS); under load it may not, but over ROUNDS
 * (more than the URO_WIRE_ANSWERED a QP takes to count as answering) it
 * does at least once. */
static void test_answer_goes_first(int fd)
{
	unsigned answer_first = 0;

	for (uint32_t i = 0; i < ROUNDS; i++)
		answer_first += round_trip(fd);
	printf("# the answer went first in %u of %d rounds\n", answer_first, ROUNDS);
	CHECK(answer_first > 0);
}

/* A message the program leaves unanswered, after a ping-pong: its ACK
 * comes while the program sleeps and calls nothing. */
static void test_unanswered_acked(int fd)
{
	uint32_t msg = peer_psn, psn;

	peer_send_message(fd);
	expect_completion(received++, IBV_WC_RECV);
	CHECK_EQ(peer_next(fd, &psn, 2000), ACKNOWLEDGE);
	CHECK_EQ(psn, msg);
}

/* A READ after a message whose ACK may wait: the ACK comes first, then the
 * READ's data (an answer never overtakes an ACK due before it). */
static void test_ack_before_read_response(int fd)
{
	uint32_t msg, psn;
	struct uro_roce_packet read = {.opcode = READ_REQUEST, .ack_req = 1};

	/* A ping-pong again, so that the next message's ACK waits. */
	for (uint32_t i = 0; i < ROUNDS; i++)
		round_trip(fd);
	msg = peer_psn;
	peer_send_message(fd);
	read.psn = peer_psn++;
	read.reth.va = (uintptr_t)S.buf;
	read.reth.rkey = S.mr->rkey;
	read.reth.len = SIZE;
	peer_sends(fd, &read);
	expect_completion(received++, IBV_WC_RECV);
	CHECK_EQ(peer_next(fd, &psn, 2000), ACKNOWLEDGE);
	CHECK_EQ(psn, msg);
	CHECK_EQ(peer_next(fd, &psn, 2000), READ_RESPONSE_ONLY);
	CHECK_EQ(psn, read.psn);
}

/* A side in a child process of its own, connected to the peer as
 * PEER_QPN + 1: it answers ROUNDS messages, then receives one more and
 * ends as `how` says: destroys its QP and ends without running the
 * library's exit handlers, or exits without destroying anything. */
enum end { DESTROY_QP, EXIT };

static int child(int qpn_out, enum end how)
{
	static struct side C;
	struct ibv_wc wc;
	uint32_t qpn;

	if (side_open(&C, IBV_QPT_RC, 64, CAP) || peer_connect(C.qp, PEER_QPN + 1, FIRST_PSN, 0))
		return 2;
	for (uint32_t i = 0; i <= ROUNDS; i++)
		if (post_recv_buf(&C, i, C.buf + SIZE * i, SIZE))
			return 3;
	qpn = C.qp->qp_num;
	if (write(qpn_out, &qpn, sizeof(qpn)) != sizeof(qpn))
		return 4;
	for (uint32_t i = 0; i <= ROUNDS; i++) {
		do
			if (ibv_poll_cq(C.cq, 1, &wc) < 0)
				return 5;
		while (!(wc.opcode == IBV_WC_RECV && wc.wr_id == i) || wc.status != IBV_WC_SUCCESS);
		if (i < ROUNDS && answer_on(&C, 100 + i))
			return 6;
	}
	/* The last message received: the program is done with it. */
	if (how == DESTROY_QP && ibv_destroy_qp(C.qp))
		return 7;
	return 0; /* exit(3), with the context open */
}

/* The peer's side of child(): a ping-pong, then a last message whose ACK
 * must come though the program answers it no more. */
static void test_last_message_acked(int fd, enum end how)
{
	int pipefd[2];
	uint32_t qpn = 0, psn;
	pid_t pid;
	int status;

	peer_psn = 0;
	CHECK_EQ(pipe(pipefd), 0);
	pid = fork();
	if (pid == 0) {
		int r = child(pipefd[1], how);

		if (how == DESTROY_QP)
			_exit(r); /* the ACK left with the QP, or never */
		exit(r);
	}
	CHECK_EQ(read(pipefd[0], &qpn, sizeof(qpn)), (ssize_t)sizeof(qpn));
	for (uint32_t i = 0; i < ROUNDS; i++) {
		peer_send_message_to(fd, qpn);
		for (int k = 0; k < 2; k++)
			CHECK(peer_next(fd, &psn, 2000) >= 0);
		peer_ack_to(fd, qpn, FIRST_PSN + i);
	}
	peer_send_message_to(fd, qpn);
	CHECK_EQ(peer_next(fd, &psn, 2000), ACKNOWLEDGE);
	CHECK_EQ(psn, ROUNDS);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(pipefd[0]);
	close(pipefd[1]);
}

int main(void)
{
	int fd = peer_socket();

	CHECK(fd >= 0);
	CHECK_EQ(side_open(&S, IBV_QPT_RC, 64, CAP), 0);
	if (check_failed)
		return check_report();
	CHECK_EQ(peer_connect(S.qp, PEER_QPN, FIRST_PSN, IBV_ACCESS_REMOTE_READ), 0);
	for (uint32_t i = 0; i < 2 * ROUNDS + 2; i++)
		CHECK_EQ(post_recv_buf(&S, i, S.buf + 1024 + SIZE * i, SIZE), 0);
	RUN(test_answer_goes_first(fd), 30);
	RUN(test_unanswered_acked(fd), 30);
	RUN(test_ack_before_read_response(fd), 30);
	RUN(test_last_message_acked(fd, DESTROY_QP), 30);
	RUN(test_last_message_acked(fd, EXIT), 30);
	close(fd);
	side_close(&S);
	return check_report();
}
