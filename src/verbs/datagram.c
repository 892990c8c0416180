/* UD: one datagram at a time (IBTA 9.8.4, 11.4.1.1). Delivery is
 * unreliable as on the wire: a datagram to a missing QP, with the wrong
 * Q_Key or with no receive posted is dropped and counted; the sender still
 * completes successfully. The receiver finds the 40-byte GRH area first in
 * its buffer. */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "objects.h"
#include "opcode.h"
#include "remote_copy.h"
#include "registry.h"
#include "segment_ops.h"
#include "wire.h"

#define GRH_BYTES    40
#define QKEY_USE_QP  0x80000000u /* IBTA 10.2.5: take the Q_Key from the QP */
#define NEXT_HDR_IBA 0x1b
#define NEXT_HDR_UDP 17
#define ROCE_HDRS    (8 + 12 + 8 + 4) /* UDP, BTH, DETH, ICRC */

static struct uro_ah *to_uah(struct ibv_ah *ah)
{
	return uro_container_of(ah, struct uro_ah, ibah);
}

static uint16_t ip_checksum(const uint8_t *h, size_t n)
{
	uint32_t sum = 0;

	for (size_t i = 0; i < n; i += 2)
		sum += (uint32_t)(h[i] << 8 | h[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* RoCEv2 over IPv4: the IPv4 header sits in the last 20 bytes of the GRH
 * area (IBTA A17.4.5.2). */
static void ipv4_grh(uint8_t *g, uint8_t tos, uint8_t ttl, const void *src, const void *dst,
		     uint64_t len)
{
	uint8_t *ip = g + 20;
	uint16_t total = (uint16_t)(20 + ROCE_HDRS + len);
	uint16_t csum;

	ip[0] = 0x45;
	ip[1] = tos;
	ip[2] = (uint8_t)(total >> 8);
	ip[3] = (uint8_t)total;
	ip[8] = ttl ? ttl : 64;
	ip[9] = NEXT_HDR_UDP;
	memcpy(ip + 12, src, 4);
	memcpy(ip + 16, dst, 4);
	csum = ip_checksum(ip, 20);
	ip[10] = (uint8_t)(csum >> 8);
	ip[11] = (uint8_t)csum;
}

static void ipv6_grh(uint8_t *g, const struct ibv_global_route *r, const union ibv_gid *sgid,
		     const union ibv_gid *dgid, uint64_t len, uint8_t next_hdr)
{
	struct ibv_grh *h = (struct ibv_grh *)g;
	uint32_t vtf = 6u << 28 | (uint32_t)r->traffic_class << 20 | (r->flow_label & 0xfffff);

	h->version_tclass_flow = htonl(vtf);
	h->paylen = htons((uint16_t)(len + (next_hdr == NEXT_HDR_UDP ? ROCE_HDRS : 12 + 8 + 4)));
	h->next_hdr = next_hdr;
	h->hop_limit = r->hop_limit;
	h->sgid = *sgid;
	h->dgid = *dgid;
}

void uro_roce_grh(uint8_t *g, const union ibv_gid *src, const union ibv_gid *dst, uint64_t len)
{
	const struct ibv_global_route r = {.hop_limit = 64};

	memset(g, 0, GRH_BYTES);
	if (uro_gid_is_ipv4_mapped(src))
		ipv4_grh(g, 0, 64, src->raw + 12, dst->raw + 12, len);
	else
		ipv6_grh(g, &r, src, dst, len, NEXT_HDR_UDP);
}

static void build_grh(struct uro_context *ctx, const struct uro_ah *ah, uint64_t len,
		      uint8_t g[GRH_BYTES])
{
	const struct ibv_global_route *r = &ah->attr.grh;
	const union ibv_gid *sgid = &ctx->model.gids[r->sgid_index].gid;

	memset(g, 0, GRH_BYTES);
	if (!ah->attr.is_global)
		return;
	if (ctx->model.link.type == URO_LINK_IB)
		ipv6_grh(g, r, sgid, &r->dgid, len, NEXT_HDR_IBA);
	else if (uro_gid_is_ipv4_mapped(sgid))
		ipv4_grh(g, r->traffic_class, r->hop_limit, sgid->raw + 12, r->dgid.raw + 12, len);
	else
		ipv6_grh(g, r, sgid, &r->dgid, len, NEXT_HDR_UDP);
}

/* What a UD receive reports in its SL. On a RoCE port, the frame's header
 * type as mlx5 reports it for UD over RoCE (its PRM: bit 3 for a frame
 * with a UDP header, RoCEv2; bits 2:0 the L3 header, 1 IPv6, 2 IPv4).
 * UCX's ud_verbs, up to 1.18, reads it to find the destination GID in the
 * 40-byte GRH area. On an IB port, the packet's SL. */
enum { ROCE_SL_UDP = 0x8, ROCE_SL_IPV6 = 0x1, ROCE_SL_IPV4 = 0x2 };

uint8_t uro_roce_received_sl(int ipv4)
{
	return ROCE_SL_UDP | (ipv4 ? ROCE_SL_IPV4 : ROCE_SL_IPV6);
}

static uint8_t received_sl(const struct uro_context *ctx, const struct uro_ah *ah)
{
	const union ibv_gid *sgid = &ctx->model.gids[ah->attr.grh.sgid_index].gid;

	if (ctx->model.link.type == URO_LINK_IB || !ah->attr.is_global)
		return ah->attr.sl;
	return uro_roce_received_sl(uro_gid_is_ipv4_mapped(sgid));
}

static struct uro_seg_qp *ud_qp(struct uro_peer *p, uint32_t qpn)
{
	struct uro_seg_qp *t;
	uint32_t state;

	if (!p)
		return NULL;
	t = &p->qp[qpn & (URO_MAX_QP - 1)];
	state = uro_qp_state(t);
	if (!__atomic_load_n(&t->in_use, __ATOMIC_ACQUIRE) || t->qpn != qpn ||
	    t->type != IBV_QPT_UD ||
	    (state != IBV_QPS_RTR && state != IBV_QPS_RTS && state != IBV_QPS_SQD))
		return NULL;
	return t;
}

/* The destination QP, in the cached process of its slot or, when it is not
 * there, in the slot's current owner (the slot may have been reused). */
static struct uro_seg_qp *ud_target(struct uro_context *ctx, uint32_t qpn, struct uro_peer **pp)
{
	int err;
	struct uro_peer *p = uro_peer_of(ctx, qpn, &err);
	struct uro_seg_qp *t = ud_qp(p, qpn);

	if (!t && p) {
		p = uro_peer_refresh(ctx, qpn, &err);
		t = ud_qp(p, qpn);
	}
	if (t)
		*pp = p;
	return t;
}

static void drop(struct uro_peer *p, uint64_t *counter)
{
	if (p)
		__atomic_add_fetch(counter, 1, __ATOMIC_RELAXED);
}

int uro_ud_land(struct uro_peer *p, const struct uro_seg_qp *t, const struct uro_recv *r,
		const uint8_t *grh, const struct iovec *payload, int n, uint64_t len)
{
	struct iovec siov[URO_MAX_SGE + 1], riov[URO_MAX_SGE];
	struct uro_holds h;
	uint64_t cap;
	int nr, st = IBV_WC_SUCCESS, err;

	/* The receive buffers are held for the copy (key_hold.h). */
	uro_holds_init(&h, 0);
	if (uro_hold_sges(p, r->sge, r->num_sge, &h) ||
	    uro_sge_iov(p, uro_recv_pd(p, t->srq, t->pd), r->sge, r->num_sge, 1, riov, &nr, &cap)) {
		st = IBV_WC_LOC_PROT_ERR;
	} else if (cap < GRH_BYTES + len) {
		st = IBV_WC_LOC_LEN_ERR;
	} else {
		siov[0].iov_base = (void *)grh;
		siov[0].iov_len = GRH_BYTES;
		memcpy(siov + 1, payload, (size_t)n * sizeof(*payload));
		err = uro_remote_copy(p, 1, siov, n + 1, riov, nr, GRH_BYTES + len, &h);
		/* A receiver gone loses the datagram; memory gone under a
		 * valid key is its local protection error. */
		st = !err ? IBV_WC_SUCCESS : p->dead || err == ESRCH ? -1 : IBV_WC_LOC_PROT_ERR;
	}
	uro_release(&h);
	return st;
}

/* One datagram into one receiving QP t of process p. */
static void deliver(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
		    const struct iovec *liov, int nl, uint64_t len, struct uro_peer *p,
		    struct uro_seg_qp *t)
{
	const struct uro_opcode *op = uro_opcode(wr->opcode);
	struct uro_ah *ah = to_uah(wr->wr.ud.ah);
	uint32_t qkey = wr->wr.ud.remote_qkey;
	uint8_t grh[GRH_BYTES];
	struct uro_recv r;
	struct uro_cqe e;
	int st;

	if (qkey & QKEY_USE_QP)
		qkey = qp->attr.qkey;
	if (qkey != t->qkey) {
		drop(p, &p->hdr->counters.qkey_violations);
		return;
	}
	if (uro_take_recv(p, t, &r)) {
		drop(p, &p->hdr->counters.rx_dropped);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.wr_id = r.wr_id;
	e.opcode = IBV_WC_RECV;
	e.qp_num = t->qpn;
	e.src_qp = qp->qpx.qp_base.qp_num;
	e.slid = ctx->model.port.lid;
	e.sl = received_sl(ctx, ah);
	e.wc_flags = ah->attr.is_global ? IBV_WC_GRH : 0;
	if (op->imm) {
		e.imm_data = wr->imm_data;
		e.wc_flags |= IBV_WC_WITH_IMM;
	}
	build_grh(ctx, ah, len, grh);
	st = uro_ud_land(p, t, &r, grh, liov, nl, len);
	if (st < 0)
		return;
	e.status = (uint32_t)st;
	if (st == IBV_WC_SUCCESS)
		e.byte_len = (uint32_t)(GRH_BYTES + len);
	uro_deliver(p, t->recv_cq, &e, (wr->send_flags & IBV_SEND_SOLICITED) != 0);
}

/* A datagram to a multicast group (IBTA 10.5.2.1: DestQP 0xFFFFFF and a
 * multicast DGID) reaches every QP attached to the group in every process
 * on this device (this link of this configuration, not another link of its
 * name), the sender's own QP too, as without
 * IBV_QP_CREATE_BLOCK_SELF_MCAST_LB, and the members on other hosts
 * (wire_mcast.c). Without a multicast DGID it is dropped, as a NIC's
 * responder drops it. */
static void multicast(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
		      const struct iovec *liov, int nl, uint64_t len)
{
	const struct ibv_ah_attr *a = &to_uah(wr->wr.ud.ah)->attr;
	struct uro_slot_owner owners[URO_MAX_SLOTS];
	unsigned n;

	if (!a->is_global || !uro_gid_is_multicast(&a->grh.dgid))
		return;
	n = uro_registry_owners_of(NULL, ctx->dev->link_id, owners, URO_MAX_SLOTS);
	for (unsigned i = 0; i < n; i++) {
		uint32_t qpn = owners[i].slot << URO_QPN_INDEX_BITS;
		int err;
		struct uro_peer *p = uro_peer_of(ctx, qpn, &err);

		/* The cached process may be a previous owner of the slot. */
		if (p && p->pid != owners[i].pid)
			p = uro_peer_refresh(ctx, qpn, &err);

		for (unsigned k = 0; p && k < URO_MAX_MCAST_ATTACH; k++) {
			const struct uro_seg_mcast *m = &p->mcast[k];
			struct uro_seg_qp *t;

			if (!__atomic_load_n(&m->in_use, __ATOMIC_ACQUIRE) ||
			    memcmp(&m->mgid, &a->grh.dgid, sizeof(m->mgid)))
				continue;
			t = ud_qp(p, m->qpn);
			if (t)
				deliver(ctx, qp, wr, liov, nl, len, p, t);
		}
	}
	/* And once on the wire to the group's members on other hosts: lost
	 * there as any datagram may be, never failing the send. */
	if (uro_wire_mcast_carried(ctx))
		uro_wire_ud_send(ctx, qp, wr, a, liov, nl, len);
}

/* A receiver told to take the wire (its trace, its faults) hears its
 * datagrams there, as a connected peer does (wire_qp.c uro_wire_connects):
 * otherwise its trace would lack what this host's processes sent it. The
 * AH must name an IPv4 address the wire can reach. */
static int hears_wire(const struct uro_peer *p, const struct uro_ah *ah)
{
	return __atomic_load_n(&p->hdr->wire_forced, __ATOMIC_ACQUIRE) && ah->own;
}

int uro_ud_send(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
		const struct iovec *liov, int nl, uint64_t len)
{
	struct uro_ah *ah = to_uah(wr->wr.ud.ah);
	struct uro_peer *p = NULL;
	struct uro_seg_qp *t;

	/* A datagram is one packet: no larger than the path MTU. */
	if (len > uro_mtu_bytes(ctx->model.port.active_mtu))
		return IBV_WC_LOC_LEN_ERR;
	if (ah->wire && !ah->own) /* another host's */
		return uro_wire_ud_send(ctx, qp, wr, &ah->attr, liov, nl, len);
	if (wr->wr.ud.remote_qpn == URO_MCAST_QPN) {
		multicast(ctx, qp, wr, liov, nl, len);
		return IBV_WC_SUCCESS;
	}
	t = ud_target(ctx, wr->wr.ud.remote_qpn, &p);
	if (t ? hears_wire(p, ah) : ah->wire)
		return uro_wire_ud_send(ctx, qp, wr, &ah->attr, liov, nl, len);
	if (!t)
		return IBV_WC_SUCCESS;
	deliver(ctx, qp, wr, liov, nl, len, p, t);
	/* This process takes the wire and its peer does not listen there: the
	 * datagram went over shared memory, and this process's trace says so. */
	if (ah->wire)
		uro_wire_ud_trace(ctx, qp, wr, &ah->attr, liov, nl, len);
	return IBV_WC_SUCCESS;
}
