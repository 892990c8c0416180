/* A sequence-error NAK for a PSN already acknowledged is stale (it was
 * held back behind a later ACK, as the reorder fault does) and costs the
 * requester nothing: no retry spent, nothing sent again. Before, each one
 * spent a retry, and eight of them in a row ended the next request in
 * IBV_WC_RETRY_EXC_ERR with nothing lost; test_stress under heavy faults
 * ended a QP that way now and then.
 *
 * This process plays the responder with a plain UDP socket on 127.0.0.2
 * (lo), to which a uroce RC QP on the wire sends two SENDs. It answers the
 * first with an ACK, then sends eight stale NAKs, then the ACK of the
 * second: both SENDs must complete.
 *
 * A stale request, too: one still on its way to a destroyed QP finds no
 * QP under its number, not the QP created next (index_pool.h). */
#include <unistd.h>

#include "../check.h"
#include "pair.h"
#include "peer_packet.h"

#define PEER_QPN  0x123
#define FIRST_PSN 100
#define STALE	  8 /* retry_cnt 7: the eighth NAK paid ran the budget out */

static struct side S;
static const struct ibv_qp_cap CAP = {
    .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1};

/* An ACK (syndrome 0) or a sequence-error NAK (0x60) for psn, from the
 * peer's socket fd (PEER_IP:4791). */
static void answer(int fd, uint8_t syndrome, uint32_t psn)
{
	struct uro_roce_packet p = {.opcode = 0x11 /* RC Acknowledge */,
				    .pkey = 0xffff,
				    .dest_qp = S.qp->qp_num,
				    .psn = psn,
				    .aeth.syndrome = syndrome};

	CHECK(peer_send(fd, &p, htonl(PEER_IP), htons(URO_ROCE_PORT)) > 0);
}

/* The PSN of the next request that reaches the peer, or -1 after 2 s. */
static int64_t request(int fd)
{
	uint32_t psn;

	return peer_next(fd, &psn, 2000) < 0 ? -1 : (int64_t)psn;
}

static void test_stale_naks_cost_nothing(int fd)
{
	struct ibv_sge sge = {.addr = (uintptr_t)S.buf, .length = 8, .lkey = S.mr->lkey};
	struct ibv_send_wr wr[2] = {{.wr_id = 1,
				     .sg_list = &sge,
				     .num_sge = 1,
				     .opcode = IBV_WR_SEND,
				     .send_flags = IBV_SEND_SIGNALED},
				    {.wr_id = 2,
				     .sg_list = &sge,
				     .num_sge = 1,
				     .opcode = IBV_WR_SEND,
				     .send_flags = IBV_SEND_SIGNALED}},
			   *bad;
	struct ibv_wc wc;

	wr[0].next = &wr[1];
	CHECK_EQ(ibv_post_send(S.qp, wr, &bad), 0);
	CHECK_EQ(request(fd), FIRST_PSN);
	CHECK_EQ(request(fd), FIRST_PSN + 1);
	answer(fd, 0, FIRST_PSN);
	/* Each names a PSN the ACK before it covers, each another, so that
	 * none is taken for a copy of the one before. */
	for (uint32_t i = 0; i < STALE; i++)
		answer(fd, 0x60, FIRST_PSN - STALE + 1 + i);
	answer(fd, 0, FIRST_PSN + 1);
	for (uint64_t id = 1; id <= 2; id++) {
		CHECK_EQ(poll_one(S.cq, &wc), 1);
		CHECK_EQ(wc.wr_id, id);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	}
}

/* A QP of S's connected to the peer, its receive queue at PSN 0 with
 * one receive posted. */
static struct ibv_qp *receiving_qp(void)
{
	struct ibv_qp_init_attr init = {
	    .send_cq = S.cq, .recv_cq = S.cq, .cap = CAP, .qp_type = IBV_QPT_RC};
	struct ibv_qp *qp = ibv_create_qp(S.pd, &init);
	struct ibv_sge sge = {.addr = (uintptr_t)S.buf, .length = 64, .lkey = S.mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = 9, .sg_list = &sge, .num_sge = 1}, *bad;

	if (qp && (peer_connect(qp, PEER_QPN, 0, 0) || ibv_post_recv(qp, &wr, &bad))) {
		ibv_destroy_qp(qp);
		return NULL;
	}
	return qp;
}

/* An 8-byte SEND Only from the peer to qpn, PSN 0. */
static void send_to(int fd, uint32_t qpn)
{
	uint8_t payload[8] = "stale!";
	struct uro_roce_packet p = {.opcode = 0x04 /* RC SEND Only */,
				    .pkey = 0xffff,
				    .dest_qp = qpn,
				    .psn = 0,
				    .payload = payload,
				    .payload_len = sizeof(payload)};

	CHECK(peer_send(fd, &p, htonl(PEER_IP), htons(URO_ROCE_PORT)) > 0);
}

static void test_stale_request_finds_no_new_qp(int fd)
{
	struct ibv_qp *old = receiving_qp(), *now;
	uint32_t gone;
	struct ibv_wc wc;

	CHECK(old != NULL);
	if (!old)
		return;
	gone = old->qp_num;
	CHECK_EQ(ibv_destroy_qp(old), 0);
	now = receiving_qp();
	CHECK(now != NULL);
	if (!now)
		return;
	CHECK(now->qp_num != gone);
	send_to(fd, gone);
	usleep(200 * 1000);
	CHECK_EQ(ibv_poll_cq(S.cq, 1, &wc), 0);
	/* The same SEND to the new QP's own number lands. */
	send_to(fd, now->qp_num);
	CHECK_EQ(poll_one(S.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.qp_num, now->qp_num);
	CHECK_EQ(ibv_destroy_qp(now), 0);
}

int main(void)
{
	int fd = peer_socket();

	CHECK(fd >= 0);
	CHECK_EQ(side_open(&S, IBV_QPT_RC, 8, CAP), 0);
	if (check_failed)
		return check_report();
	CHECK_EQ(peer_connect(S.qp, PEER_QPN, FIRST_PSN, 0), 0);
	RUN(test_stale_naks_cost_nothing(fd), 30);
	RUN(test_stale_request_finds_no_new_qp(fd), 30);
	close(fd);
	side_close(&S);
	return check_report();
}
