/* What a UD receive holds, whichever transport brought the datagram
 * (IBTA 11.4.1.1): the 40-byte GRH area first, as RoCEv2 fills it with the
 * IP header (Annex A17.4.5.1), then the payload; and the SL the work
 * completion reports. */
#include <arpa/inet.h>
#include <string.h>

#include "objects.h"
#include "remote_copy.h"
#include "segment_ops.h"
#include "ud_receive.h"

#define NEXT_HDR_IBA 0x1b
#define NEXT_HDR_UDP 17
#define ROCE_HDRS    (8 + 12 + 8 + 4) /* UDP, BTH, DETH, ICRC */

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

	memset(g, 0, URO_GRH_BYTES);
	if (uro_gid_is_ipv4_mapped(src))
		ipv4_grh(g, 0, 64, src->raw + 12, dst->raw + 12, len);
	else
		ipv6_grh(g, &r, src, dst, len, NEXT_HDR_UDP);
}

void uro_ah_grh(struct uro_context *ctx, const struct uro_ah *ah, uint64_t len,
		uint8_t g[URO_GRH_BYTES])
{
	const struct ibv_global_route *r = &ah->attr.grh;
	const union ibv_gid *sgid = &ctx->model.gids[r->sgid_index].gid;

	memset(g, 0, URO_GRH_BYTES);
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

uint8_t uro_ah_received_sl(const struct uro_context *ctx, const struct uro_ah *ah)
{
	const union ibv_gid *sgid = &ctx->model.gids[ah->attr.grh.sgid_index].gid;

	if (ctx->model.link.type == URO_LINK_IB || !ah->attr.is_global)
		return ah->attr.sl;
	return uro_roce_received_sl(uro_gid_is_ipv4_mapped(sgid));
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
	} else if (cap < URO_GRH_BYTES + len) {
		st = IBV_WC_LOC_LEN_ERR;
	} else {
		siov[0].iov_base = (void *)grh;
		siov[0].iov_len = URO_GRH_BYTES;
		memcpy(siov + 1, payload, (size_t)n * sizeof(*payload));
		err = uro_remote_copy(p, 1, siov, n + 1, riov, nr, URO_GRH_BYTES + len, &h);
		/* A receiver gone loses the datagram; memory gone under a
		 * valid key is its local protection error. */
		st = !err ? IBV_WC_SUCCESS : p->dead || err == ESRCH ? -1 : IBV_WC_LOC_PROT_ERR;
	}
	uro_release(&h);
	return st;
}
