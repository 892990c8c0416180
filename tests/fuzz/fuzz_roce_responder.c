/* libFuzzer target for what stands behind the RoCEv2 parser: the RC
 * responder and completer and the UD receiver (src/transport/roce), in a
 * whole uroce context on the wire path (UROCE_TRANSPORT=roce, uroce0 on
 * lo). Each input is one packet from the network, sent from a UDP socket
 * of this process to the endpoint's port 4791, as a peer's would come:
 *
 *   byte 0   bits 0-1: which QP it goes to (either end of an RC pair,
 *            whose responder takes requests and completer responses, or a
 *            UD QP); bit 2: whether its PSN is made near the one the QP
 *            expects (a request's: the responder's; a response's: the
 *            first unacknowledged) or taken as it is; bit 3: whether the
 *            first RC end posts a request before (bits 4-5: a SEND, a
 *            WRITE, a READ or a FETCH_AND_ADD), so that responses find a
 *            request waiting;
 *   byte 1   a signed offset from the expected PSN;
 *   the rest the BTH and what follows it, without the ICRC, which the
 *            harness writes so that the packet gets past the parser.
 *
 * The BTH's destination QP is replaced by the chosen QP's. Whatever the
 * packet says, the process must not crash, reach memory outside its
 * registered region or hang; a QP the packet sent to ERR is made anew.
 * Each execution ends once the endpoint has taken the packet. Seeds: the
 * packets of tests/fuzz/roce-seeds behind two zero bytes. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "icrc.h"
#include "objects.h"
#include "packet.h"
#include "wire.h"

#include "../verbs/pair.h"

#define REGION (1 << 16)
#define DEPTH  16

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_mr *mr;
static struct ibv_qp *rc[2], *ud;
static uint8_t *region;
static int sock;
static struct sockaddr_in from, to;

static void post_recvs(struct ibv_qp *qp, int n)
{
	struct ibv_sge sge = {(uintptr_t)region, REGION / 2, mr->lkey};
	struct ibv_recv_wr wr = {.sg_list = &sge, .num_sge = 1}, *bad;

	for (int i = 0; i < n; i++)
		if (ibv_post_recv(qp, &wr, &bad))
			return;
}

static struct ibv_qp *create(enum ibv_qp_type type)
{
	struct ibv_qp_init_attr a = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .qp_type = type,
	    .cap = {
		.max_send_wr = DEPTH, .max_recv_wr = DEPTH, .max_send_sge = 1, .max_recv_sge = 1}};

	return ibv_create_qp(pd, &a);
}

/* The RC pair, connected to each other over lo, and the UD QP. */
static void make_qps(void)
{
	for (int i = 0; i < 2; i++) {
		if (rc[i])
			ibv_destroy_qp(rc[i]);
		rc[i] = create(IBV_QPT_RC);
	}
	if (!rc[0] || !rc[1] || qp_connect(rc[0], rc[1]->qp_num, 7, 1) ||
	    qp_connect(rc[1], rc[0]->qp_num, 7, 1))
		abort();
	post_recvs(rc[0], DEPTH);
	post_recvs(rc[1], DEPTH);
}

static void make_ud(void)
{
	if (ud)
		ibv_destroy_qp(ud);
	ud = create(IBV_QPT_UD);
	if (!ud || qp_connect(ud, 0, 0, 0))
		abort();
	post_recvs(ud, DEPTH);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	socklen_t len = sizeof(from);

	(void)argc;
	(void)argv;
	setenv("UROCE_CONFIG", "/nonexistent/uroce.conf", 1);
	setenv("UROCE_TRANSPORT", "roce", 1);
	setenv("PAIR_TIMEOUT", "8", 1); /* 1 ms: a fuzzed packet's stall ends soon */
	ctx = open_dev("uroce0");
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	cq = ctx ? ibv_create_cq(ctx, 4 * DEPTH * 4, NULL, NULL, 0) : NULL;
	region = aligned_alloc(4096, REGION);
	mr = pd && region ? ibv_reg_mr(pd, region, REGION,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
			  : NULL;
	if (!mr)
		abort();
	make_qps();
	make_ud();
	sock = socket(AF_INET, SOCK_DGRAM, 0);
	from.sin_family = to.sin_family = AF_INET;
	from.sin_addr.s_addr = to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	to.sin_port = htons(4791);
	if (sock < 0 || bind(sock, (struct sockaddr *)&from, sizeof(from)) ||
	    getsockname(sock, (struct sockaddr *)&from, &len))
		abort();
	return 0;
}

/* A request from rc[0] to rc[1], which the real responder answers too. */
static void post_request(unsigned kind)
{
	static const enum ibv_wr_opcode op[] = {IBV_WR_SEND, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ,
						IBV_WR_ATOMIC_FETCH_AND_ADD};
	struct ibv_sge sge = {(uintptr_t)region + REGION / 2, kind == 3 ? 8 : 8192, mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = op[kind]}, *bad;

	wr.wr.rdma.remote_addr = (uintptr_t)region;
	wr.wr.rdma.rkey = mr->rkey;
	wr.wr.atomic.remote_addr = (uintptr_t)region;
	wr.wr.atomic.rkey = mr->rkey;
	(void)ibv_post_send(rc[0], &wr, &bad); /* a full queue posts nothing */
}

/* Whether the BTH opcode is one a responder sends (IBTA 9.2: RC 0x0d to
 * 0x12, the READ responses, ACK and atomic ACK). */
static int is_response(uint8_t opcode)
{
	return opcode >= 0x0d && opcode <= 0x12;
}

static uint32_t qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;

	return ibv_query_qp(qp, &a, IBV_QP_STATE, &i) ? IBV_QPS_ERR : a.qp_state;
}

/* Takes the completions the packet caused, receives given back; until the
 * endpoint has counted the packet, for at most about a second. */
static void drain(uint64_t before)
{
	struct uro_wire_endpoint *w = to_uctx(ctx)->wire;
	struct ibv_wc wc[16];

	for (int spins = 0; spins < 100000; spins++) {
		int n = ibv_poll_cq(cq, 16, wc);

		for (int i = 0; i < n; i++)
			if (wc[i].status == IBV_WC_SUCCESS && (wc[i].opcode & IBV_WC_RECV))
				post_recvs(wc[i].qp_num == ud->qp_num	   ? ud
					   : wc[i].qp_num == rc[0]->qp_num ? rc[0]
									   : rc[1],
					   1);
		if (n == 0 && __atomic_load_n(&w->n->received, __ATOMIC_RELAXED) > before)
			return;
		if (n == 0 && spins > 16)
			usleep(10);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t ip[URO_ROCE_IPV4_UDP_LEN + URO_WIRE_BUF];
	size_t tlen;
	struct ibv_qp *qp;
	struct uro_qp *uq;
	uint32_t psn;
	uint64_t before;

	if (size < 2 + URO_ROCE_BTH_LEN || size - 2 > sizeof(ip) - URO_ROCE_IPV4_UDP_LEN - 4)
		return 0;
	qp = (data[0] & 3) == 2 ? ud : rc[data[0] & 1];
	uq = to_uqp(qp);
	tlen = size - 2 + URO_ROCE_ICRC_LEN;
	memcpy(ip + URO_ROCE_IPV4_UDP_LEN, data + 2, size - 2);
	uro_roce_ipv4_udp(ip, from.sin_addr.s_addr, to.sin_addr.s_addr, from.sin_port, tlen);
	/* The BTH: the destination QP at bytes 5-7, the PSN at 9-11. */
	ip[URO_ROCE_IPV4_UDP_LEN + 5] = (uint8_t)(qp->qp_num >> 16);
	ip[URO_ROCE_IPV4_UDP_LEN + 6] = (uint8_t)(qp->qp_num >> 8);
	ip[URO_ROCE_IPV4_UDP_LEN + 7] = (uint8_t)qp->qp_num;
	if (data[0] & 8)
		post_request((data[0] >> 4) & 3);
	if ((data[0] & 4) && uq->wire) {
		psn = (is_response(data[2]) ? uq->wire->acked + 1 : uq->wire->rq.epsn) +
		      (uint32_t)(int8_t)data[1];
		ip[URO_ROCE_IPV4_UDP_LEN + 9] = (uint8_t)(psn >> 16);
		ip[URO_ROCE_IPV4_UDP_LEN + 10] = (uint8_t)(psn >> 8);
		ip[URO_ROCE_IPV4_UDP_LEN + 11] = (uint8_t)psn;
	}
	uro_roce_icrc_put(ip, 20, URO_ROCE_IPV4_UDP_LEN + tlen - URO_ROCE_ICRC_LEN);
	before = __atomic_load_n(&to_uctx(ctx)->wire->n->received, __ATOMIC_RELAXED);
	if (sendto(sock, ip + URO_ROCE_IPV4_UDP_LEN, tlen, 0, (struct sockaddr *)&to, sizeof(to)) ==
	    (ssize_t)tlen)
		drain(before);
	if (qp_state(rc[0]) != IBV_QPS_RTS || qp_state(rc[1]) != IBV_QPS_RTS)
		make_qps();
	if (qp_state(ud) != IBV_QPS_RTS)
		make_ud();
	return 0;
}
