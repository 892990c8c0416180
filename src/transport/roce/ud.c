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

/* The datagram's packet in buf, addressed in *to: its length before the
 * ICRC, or 0 when its payload cannot be read. */
static size_t build(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
		    const struct ibv_ah_attr *ah, const struct iovec *liov, int nl, uint64_t len,
		    uint8_t buf[URO_WIRE_BUF], struct uro_wire_dest *to)
{
	const struct uro_opcode *op = uro_opcode(wr->opcode);
	struct uro_roce_packet pkt;
	struct iovec dst;
	size_t tlen;

	uro_wire_dest(ctx->wire, &ah->grh.dgid, to);
	/* uro_ud_send checked the length against the MTU. */
	uro_wire_header(&pkt, uro_wire_code(WIRE_SEND, WIRE_UD, WIRE_ONLY, op->imm ? HDR_IMMDT : 0),
			wr->wr.ud.remote_qpn, qp->sq_posted);
	pkt.se = (wr->send_flags & IBV_SEND_SOLICITED) != 0;
	pkt.deth.qkey =
	    (wr->wr.ud.remote_qkey & QKEY_USE_QP) ? qp->attr.qkey : wr->wr.ud.remote_qkey;
	pkt.deth.src_qp = qp->qpx.qp_base.qp_num;
	pkt.imm = ntohl(wr->imm_data);
	pkt.payload_len = (uint32_t)len;
	tlen = uro_roce_build(&pkt, buf + URO_WIRE_HEAD);
	dst.iov_base = uro_wire_payload(buf, &pkt);
	dst.iov_len = len;
	if (len && uro_remote_copy(&ctx->self, 0, &dst, 1, liov, nl, len, NULL))
		return 0;
	return tlen;
}

int uro_wire_ud_send(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
		     const struct ibv_ah_attr *ah, const struct iovec *liov, int nl, uint64_t len)
{
	struct uro_wire_endpoint *w = uro_wire_open(ctx, &ah->grh.dgid);
	uint8_t buf[URO_WIRE_BUF];
	struct uro_wire_dest to;
	size_t tlen;

	if (!w)
		return IBV_WC_LOC_QP_OP_ERR;
	tlen = build(ctx, qp, wr, ah, liov, nl, len, buf, &to);
	if (!tlen)
		return IBV_WC_LOC_PROT_ERR;
	uro_wire_send(w, &to, buf, tlen);
	return IBV_WC_SUCCESS;
}

void uro_wire_ud_trace(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
		       const struct ibv_ah_attr *ah, const struct iovec *liov, int nl, uint64_t len)
{
	struct uro_wire_endpoint *w = ctx->wire;
	uint8_t buf[URO_WIRE_BUF];
	struct uro_wire_dest to;
	size_t tlen;

	if (!w || !w->pcap || !uro_wire_open(ctx, &ah->grh.dgid))
		return;
	tlen = build(ctx, qp, wr, ah, liov, nl, len, buf, &to);
	if (tlen)
		uro_wire_trace_sent(w, &to, buf, tlen);
}

void uro_wire_ud_receive(struct uro_context *ctx, struct uro_qp *qp,
			 const struct uro_roce_packet *pkt, const union ibv_gid *src,
			 const union ibv_gid *dst)
{
	uint32_t state = uro_qp_state(qp->pub);
	struct iovec payload = {(void *)pkt->payload, pkt->payload_len};
	uint8_t grh[GRH_BYTES] = {0};
	struct uro_recv r;
	struct uro_cqe e;
	int st;

	if (state != IBV_QPS_RTR && state != IBV_QPS_RTS && state != IBV_QPS_SQD) {
		ctx->wire->n->no_qp++;
		return;
	}
	if (pkt->deth.qkey != qp->pub->qkey) {
		__atomic_add_fetch(&ctx->wire->n->qkey_violations, 1, __ATOMIC_RELAXED);
		return;
	}
	if (uro_take_recv(&ctx->self, qp->pub, &r)) {
		__atomic_add_fetch(&ctx->wire->n->rx_dropped, 1, __ATOMIC_RELAXED);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.wr_id = r.wr_id;
	e.opcode = IBV_WC_RECV;
	e.qp_num = qp->qpx.qp_base.qp_num;
	e.src_qp = pkt->deth.src_qp;
	e.slid = ctx->model.port.lid;
	e.sl = uro_roce_received_sl(uro_gid_is_ipv4_mapped(src));
	e.wc_flags = IBV_WC_GRH;
	if (pkt->op->hdrs & HDR_IMMDT) {
		e.imm_data = htonl(pkt->imm);
		e.wc_flags |= IBV_WC_WITH_IMM;
	}
	uro_roce_grh(grh, src, dst, pkt->payload_len);
	st = uro_ud_land(&ctx->self, qp->pub, &r, grh, &payload, 1, pkt->payload_len);
	e.status = (uint32_t)(st < 0 ? IBV_WC_LOC_PROT_ERR : st);
	if (e.status == IBV_WC_SUCCESS)
		e.byte_len = GRH_BYTES + pkt->payload_len;
	uro_deliver(&ctx->self, qp->pub->recv_cq, &e, pkt->se);
}
