/* A message cut short on the wire: its first packet took a receive, and a
 * later one is an invalid request (a FIRST in the middle of a message; for
 * an XRC target, a packet naming another SRQ than the message's first).
 * The responder NAKs it and its QP enters ERR, and the receive the message
 * took completes with IBV_WC_REM_INV_REQ_ERR, as Linux rxe's responder
 * completes it (rxe_resp.c: the class C error, then its completion), before
 * the QP's other receives are flushed. Before, that receive was never
 * completed: it was off its queue, so no flush found it, and an XRC SRQ's
 * owner lost it for good. The packets come from a UDP socket of this
 * process to port 4791, as a peer's would (UROCE_TRANSPORT=roce on lo). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../check.h"
#include "pair.h"
#include "peer_packet.h"

#define MTU 1024

static struct side S;
static const struct ibv_qp_cap CAP = {
    .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1};
static int sock;
static struct sockaddr_in from;

/* Sends one request packet of MTU bytes of payload to qpn. */
static void send_packet(uint8_t opcode, uint32_t qpn, uint32_t psn, uint32_t srqn)
{
	static uint8_t payload[MTU];
	struct uro_roce_packet p = {.opcode = opcode,
				    .pkey = 0xffff,
				    .dest_qp = qpn,
				    .psn = psn,
				    .xrc_srqn = srqn,
				    .payload = payload,
				    .payload_len = MTU};

	CHECK(peer_send(sock, &p, from.sin_addr.s_addr, from.sin_port) > 0);
}

static void expect(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status status)
{
	struct ibv_wc wc;

	CHECK_EQ(poll_one(cq, &wc), 1);
	CHECK_EQ(wc.wr_id, wr_id);
	CHECK_EQ(wc.status, status);
}

/* RC: SEND FIRST, then another FIRST where a MIDDLE or LAST must come. */
static void test_rc(void)
{
	CHECK_EQ(post_recv_buf(&S, 1, S.buf, 4096), 0);
	CHECK_EQ(post_recv_buf(&S, 2, S.buf + 4096, 4096), 0);
	send_packet(0x00 /* RC SEND First */, S.qp->qp_num, 0, 0);
	send_packet(0x00, S.qp->qp_num, 1, 0);
	expect(S.cq, 1, IBV_WC_REM_INV_REQ_ERR);
	expect(S.cq, 2, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(state_of(S.qp), IBV_QPS_ERR);
}

static struct ibv_srq *xrc_srq(struct ibv_xrcd *x, struct ibv_cq *cq)
{
	struct ibv_srq_init_attr_ex a = {.attr = {.max_wr = 4, .max_sge = 1},
					 .comp_mask = IBV_SRQ_INIT_ATTR_TYPE |
						      IBV_SRQ_INIT_ATTR_PD |
						      IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
					 .srq_type = IBV_SRQT_XRC,
					 .pd = S.pd,
					 .xrcd = x,
					 .cq = cq};

	return ibv_create_srq_ex(S.ctx, &a);
}

/* XRC: SEND FIRST for one SRQ, then a MIDDLE naming another of the domain. */
static void test_xrc(void)
{
	struct ibv_xrcd_init_attr xa = {.comp_mask =
					    IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
					.fd = -1,
					.oflags = O_CREAT};
	struct ibv_xrcd *x = ibv_open_xrcd(S.ctx, &xa);
	struct ibv_cq *cq = ibv_create_cq(S.ctx, 8, NULL, NULL, 0);
	struct ibv_srq *a = x && cq ? xrc_srq(x, cq) : NULL, *b = x && cq ? xrc_srq(x, cq) : NULL;
	struct ibv_qp_init_attr_ex ta = {
	    .qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = x};
	struct ibv_qp *tgt = x ? ibv_create_qp_ex(S.ctx, &ta) : NULL;
	struct ibv_sge sge = {.addr = (uintptr_t)S.buf, .length = 4096, .lkey = S.mr->lkey};
	struct ibv_recv_wr rw = {.wr_id = 3, .sg_list = &sge, .num_sge = 1}, *bad;
	uint32_t na = 0, nb = 0;
	struct ibv_wc wc;

	CHECK(a && b && tgt);
	if (!a || !b || !tgt)
		return;
	CHECK_EQ(ibv_get_srq_num(a, &na), 0);
	CHECK_EQ(ibv_get_srq_num(b, &nb), 0);
	CHECK_EQ(qp_connect(tgt, 0x777, 7, 1), 0);
	CHECK_EQ(ibv_post_srq_recv(a, &rw, &bad), 0);
	send_packet(0xa0 /* XRC SEND First */, tgt->qp_num, 0, na);
	send_packet(0xa1 /* XRC SEND Middle */, tgt->qp_num, 1, nb);
	expect(cq, 3, IBV_WC_REM_INV_REQ_ERR);
	CHECK_EQ(state_of(tgt), IBV_QPS_ERR);
	CHECK_EQ(ibv_poll_cq(cq, 1, &wc), 0);
	CHECK_EQ(ibv_destroy_qp(tgt), 0);
	CHECK_EQ(ibv_destroy_srq(a), 0);
	CHECK_EQ(ibv_destroy_srq(b), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(ibv_close_xrcd(x), 0);
}

int main(void)
{
	socklen_t len = sizeof(from);

	setenv("UROCE_TRANSPORT", "roce", 1);
	setenv("PAIR_MTU", "1024", 1);
	CHECK_EQ(side_open(&S, IBV_QPT_RC, 16, CAP), 0);
	if (check_failed)
		return check_report();
	CHECK_EQ(qp_connect(S.qp, 0x777, 7, 1), 0);
	sock = socket(AF_INET, SOCK_DGRAM, 0);
	from.sin_family = AF_INET;
	from.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(sock >= 0 && !bind(sock, (struct sockaddr *)&from, sizeof(from)) &&
	      !getsockname(sock, (struct sockaddr *)&from, &len));
	RUN(test_rc(), 30);
	RUN(test_xrc(), 30);
	close(sock);
	side_close(&S);
	return check_report();
}
