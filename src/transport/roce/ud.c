/* UD on the wire (IBTA 9.8.4): one packet a datagram, SEND only, with a
 * DETH naming the Q_Key and the source QP. As unreliable as UDP: a
 * datagram with the wrong Q_Key, to a QP not ready or with no receive
 * posted is dropped and counted, as on the shared-memory path
 * (datagram.c). */
#include <arpa/inet.h>
#include <string.h>

#include "device_model.h"
#include "opcode.h"
#include "remote_copy.h"
#include "segment_ops.h"
#include "wire.h"

#define GRH_BYTES   40
#define QKEY_USE_QP 0x80000000u /* IBTA 10.2.5: take the Q_Key from the QP */

int uro_wire_ud_send(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
		     const struct ibv_ah_attr *ah, const struct iovec *liov, int nl, uint64_t len)
{
	struct uro_wire_endpoint *w = uro_wire_open(ctx);
	const struct uro_opcode *op = uro_opcode(wr->opcode);
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(URO_ROCE_PORT)};
	uint8_t buf[URO_WIRE_BUF];
	struct uro_roce_packet pkt;
	struct iovec dst;
	size_t tlen;

	if (!w)
		return IBV_WC_LOC_QP_OP_ERR;
	if (!uro_gid_is_ipv4_mapped(&ah->grh.dgid) || len > 4096)
		return IBV_WC_LOC_LEN_ERR;
	memcpy(&to.sin_addr.s_addr, ah->grh.dgid.raw + 12, 4);
	memset(&pkt, 0, sizeof(pkt));
	pkt.opcode = (uint8_t)uro_wire_code(WIRE_SEND, WIRE_UD, WIRE_ONLY, op->imm ? HDR_IMMDT : 0);
	pkt.op = uro_wire_opcode(pkt.opcode);
	pkt.pkey = URO_DEFAULT_PKEY;
	pkt.dest_qp = wr->wr.ud.remote_qpn & URO_PSN_MASK;
	pkt.psn = qp->sq_posted & URO_PSN_MASK;
	pkt.se = (wr->send_flags & IBV_SEND_SOLICITED) != 0;
	pkt.deth.qkey =
	    (wr->wr.ud.remote_qkey & QKEY_USE_QP) ? qp->attr.qkey : wr->wr.ud.remote_qkey;
	pkt.deth.src_qp = qp->qpx.qp_base.qp_num;
	pkt.imm = ntohl(wr->imm_data);
	pkt.payload_len = (uint32_t)len;
	tlen = uro_roce_build(&pkt, buf + URO_WIRE_HEAD);
	dst.iov_base = buf + URO_WIRE_HEAD + URO_ROCE_BTH_LEN + uro_wire_hdrs_len(pkt.op->hdrs);
	dst.iov_len = len;
	if (len && uro_remote_copy(&ctx->self, 0, &dst, 1, liov, nl, len, NULL))
		return IBV_WC_LOC_PROT_ERR;
	uro_wire_send(w, &to, buf, tlen);
	return IBV_WC_SUCCESS;
}

/* The GRH area then the payload, into the receive's buffers. */
static enum ibv_wc_status land(struct uro_context *ctx, struct uro_qp *qp, const struct uro_recv *r,
			       const struct uro_roce_packet *pkt, uint32_t src_ip, uint32_t dst_ip)
{
	const struct uro_seg_srq *srq = uro_peer_srq(&ctx->self, qp->pub->srq);
	uint32_t pd = qp->pub->srq ? (srq ? srq->pd : 0) : qp->pub->pd;
	struct iovec riov[URO_MAX_SGE], src[2];
	uint8_t grh[GRH_BYTES] = {0};
	struct uro_holds h;
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	uint64_t cap;
	int nr;

	uro_holds_init(&h, 0);
	if (uro_hold_sges(&ctx->self, r->sge, r->num_sge, &h) ||
	    uro_sge_iov(&ctx->self, pd, r->sge, r->num_sge, 1, riov, &nr, &cap))
		st = IBV_WC_LOC_PROT_ERR;
	else if (cap < GRH_BYTES + pkt->payload_len)
		st = IBV_WC_LOC_LEN_ERR;
	if (st == IBV_WC_SUCCESS) {
		uro_ipv4_grh(grh, 0, 64, &src_ip, &dst_ip, pkt->payload_len);
		src[0].iov_base = grh;
		src[0].iov_len = GRH_BYTES;
		src[1].iov_base = (void *)pkt->payload;
		src[1].iov_len = pkt->payload_len;
		if (uro_remote_copy(&ctx->self, 1, src, 2, riov, nr, GRH_BYTES + pkt->payload_len,
				    &h))
			st = IBV_WC_LOC_PROT_ERR;
	}
	uro_release(&h);
	return st;
}

void uro_wire_ud_receive(struct uro_context *ctx, struct uro_qp *qp,
			 const struct uro_roce_packet *pkt, uint32_t src_ip, uint32_t dst_ip)
{
	uint32_t state = uro_qp_state(qp->pub);
	struct uro_recv r;
	struct uro_cqe e;

	if (state != IBV_QPS_RTR && state != IBV_QPS_RTS && state != IBV_QPS_SQD) {
		ctx->wire->n.no_qp++;
		return;
	}
	if (pkt->deth.qkey != qp->pub->qkey) {
		ctx->wire->n.bad_qkey++;
		__atomic_add_fetch(&ctx->self.hdr->counters.qkey_violations, 1, __ATOMIC_RELAXED);
		return;
	}
	if (uro_take_recv(&ctx->self, qp->pub, &r)) {
		ctx->wire->n.no_receive++;
		__atomic_add_fetch(&ctx->self.hdr->counters.rx_dropped, 1, __ATOMIC_RELAXED);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.wr_id = r.wr_id;
	e.opcode = IBV_WC_RECV;
	e.qp_num = qp->qpx.qp_base.qp_num;
	e.src_qp = pkt->deth.src_qp;
	e.slid = ctx->model.port.lid;
	e.sl = uro_roce_received_sl(1);
	e.wc_flags = IBV_WC_GRH;
	if (pkt->op->hdrs & HDR_IMMDT) {
		e.imm_data = htonl(pkt->imm);
		e.wc_flags |= IBV_WC_WITH_IMM;
	}
	e.status = land(ctx, qp, &r, pkt, src_ip, dst_ip);
	if (e.status == IBV_WC_SUCCESS)
		e.byte_len = GRH_BYTES + pkt->payload_len;
	uro_deliver(&ctx->self, qp->pub->recv_cq, &e, pkt->se);
}
