/* RoCEv2 packets: the parser trusts nothing of what arrives (every length
 * is checked before it is used, the ICRC last), and the builder writes the
 * same headers from the same opcode table. */
#include "packet.h"

#include <string.h>

#include "big_endian.h"
#include "icrc.h"

#define IPV4_MIN_LEN 20
#define IPV6_LEN     40
#define UDP_LEN	     8
#define IPPROTO_UDP_ 17

void uro_roce_ipv4_udp(uint8_t *h, uint32_t src, uint32_t dst, uint16_t sport, size_t len)
{
	memset(h, 0, URO_ROCE_IPV4_UDP_LEN);
	h[0] = 0x45;
	uro_put16(h + 2, (uint16_t)(URO_ROCE_IPV4_UDP_LEN + len));
	uro_put16(h + 6, 0x4000); /* DF */
	h[8] = 64;
	h[9] = IPPROTO_UDP_;
	memcpy(h + 12, &src, 4);
	memcpy(h + 16, &dst, 4);
	memcpy(h + 20, &sport, 2);
	uro_put16(h + 22, URO_ROCE_PORT);
	uro_put16(h + 24, (uint16_t)(UDP_LEN + len));
}

static const uint8_t ipv4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

size_t uro_roce_ip_udp_len(const uint8_t dst[16])
{
	return memcmp(dst, ipv4_mapped, sizeof(ipv4_mapped)) ? URO_ROCE_IPV6_UDP_LEN
							     : URO_ROCE_IPV4_UDP_LEN;
}

size_t uro_roce_ip_udp(uint8_t *h, const uint8_t src[16], const uint8_t dst[16], uint16_t sport,
		       size_t len)
{
	uint32_t s4, d4;

	if (uro_roce_ip_udp_len(dst) == URO_ROCE_IPV4_UDP_LEN) {
		memcpy(&s4, src + 12, 4);
		memcpy(&d4, dst + 12, 4);
		uro_roce_ipv4_udp(h, s4, d4, sport, len);
		return URO_ROCE_IPV4_UDP_LEN;
	}
	memset(h, 0, URO_ROCE_IPV6_UDP_LEN);
	h[0] = 0x60;
	uro_put16(h + 4, (uint16_t)(UDP_LEN + len));
	h[6] = IPPROTO_UDP_;
	h[7] = 64;
	memcpy(h + 8, src, 16);
	memcpy(h + 24, dst, 16);
	memcpy(h + IPV6_LEN, &sport, 2);
	uro_put16(h + IPV6_LEN + 2, URO_ROCE_PORT);
	uro_put16(h + IPV6_LEN + 4, (uint16_t)(UDP_LEN + len));
	return URO_ROCE_IPV6_UDP_LEN;
}

/* RFC 791: the ones' complement of the ones' complement sum. */
void uro_roce_ipv4_checksum(uint8_t *h)
{
	uint32_t sum = 0;

	uro_put16(h + 10, 0);
	for (int i = 0; i < IPV4_MIN_LEN; i += 2)
		sum += uro_get16(h + i);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	uro_put16(h + 10, (uint16_t)~sum);
}

/* The IP header's length and the datagram's, from the header itself; 0
 * when it is not an IPv4 or IPv6 header carrying UDP within len. */
static size_t ip_header(const uint8_t *ip, size_t len, size_t *datagram)
{
	if (len >= IPV4_MIN_LEN && ip[0] >> 4 == 4) {
		size_t hl = (size_t)(ip[0] & 0x0f) * 4;

		*datagram = uro_get16(ip + 2);
		if (hl < IPV4_MIN_LEN || ip[9] != IPPROTO_UDP_ || *datagram < hl)
			return 0;
		return hl;
	}
	if (len >= IPV6_LEN && ip[0] >> 4 == 6) {
		*datagram = IPV6_LEN + (size_t)uro_get16(ip + 4);
		return ip[6] == IPPROTO_UDP_ ? IPV6_LEN : 0;
	}
	return 0;
}

static void parse_bth(const uint8_t *b, struct uro_roce_packet *p)
{
	p->opcode = b[0];
	p->op = uro_wire_opcode(b[0]);
	p->se = b[1] >> 7;
	p->migreq = (b[1] >> 6) & 1;
	p->pad = (b[1] >> 4) & 3;
	p->pkey = uro_get16(b + 2);
	p->fecn = b[4] >> 7;
	p->becn = (b[4] >> 6) & 1;
	p->dest_qp = uro_get24(b + 5);
	p->ack_req = b[8] >> 7;
	p->psn = uro_get24(b + 9);
}

/* The extension headers, in their order (wire_opcode.h); returns the
 * bytes read. The caller has checked that they are all there. */
static size_t parse_ext(const uint8_t *b, uint8_t hdrs, struct uro_roce_packet *p)
{
	const uint8_t *start = b;

	if (hdrs & HDR_DETH) {
		p->deth.qkey = uro_get32(b);
		p->deth.src_qp = uro_get24(b + 5);
		b += 8;
	}
	if (hdrs & HDR_XRCETH) {
		p->xrc_srqn = uro_get24(b + 1);
		b += 4;
	}
	if (hdrs & HDR_RETH) {
		p->reth.va = uro_get64(b);
		p->reth.rkey = uro_get32(b + 8);
		p->reth.len = uro_get32(b + 12);
		b += 16;
	}
	if (hdrs & HDR_ATOMIC_ETH) {
		p->atomic.va = uro_get64(b);
		p->atomic.rkey = uro_get32(b + 8);
		p->atomic.swap_add = uro_get64(b + 12);
		p->atomic.compare = uro_get64(b + 20);
		b += 28;
	}
	if (hdrs & HDR_AETH) {
		p->aeth.syndrome = b[0];
		p->aeth.msn = uro_get24(b + 1);
		b += 4;
	}
	if (hdrs & HDR_ATOMIC_ACK_ETH) {
		p->atomic_ack = uro_get64(b);
		b += 8;
	}
	if (hdrs & HDR_IMMDT) {
		p->imm = uro_get32(b);
		b += 4;
	}
	if (hdrs & HDR_IETH) {
		p->inv_rkey = uro_get32(b);
		b += 4;
	}
	return (size_t)(b - start);
}

enum uro_roce_drop uro_roce_parse(const uint8_t *ip, size_t len, struct uro_roce_packet *p)
{
	size_t datagram = 0, hl = ip_header(ip, len, &datagram);
	const uint8_t *udp = ip + hl, *bth = udp + UDP_LEN, *end;
	size_t ext, body;

	memset(p, 0, sizeof(*p));
	if (!hl)
		return ROCE_NOT_ROCE;
	if (datagram > len || datagram < hl + UDP_LEN)
		return ROCE_TRUNCATED;
	if (uro_get16(udp + 2) != URO_ROCE_PORT)
		return ROCE_NOT_ROCE;
	if (uro_get16(udp + 4) != datagram - hl ||
	    datagram < hl + UDP_LEN + URO_ROCE_BTH_LEN + URO_ROCE_ICRC_LEN)
		return ROCE_TRUNCATED;
	parse_bth(bth, p);
	if (bth[1] & 0x0f)
		return ROCE_BAD_VERSION;
	if (!p->op->name)
		return ROCE_UNKNOWN_OPCODE;
	end = ip + datagram - URO_ROCE_ICRC_LEN;
	ext = uro_wire_hdrs_len(p->op->hdrs);
	if ((size_t)(end - bth) < URO_ROCE_BTH_LEN + ext)
		return ROCE_TRUNCATED;
	parse_ext(bth + URO_ROCE_BTH_LEN, p->op->hdrs, p);
	body = (size_t)(end - bth) - URO_ROCE_BTH_LEN - ext;
	if (body < p->pad || (!p->op->payload && body) || (body & 3))
		return ROCE_BAD_PAYLOAD;
	p->payload = bth + URO_ROCE_BTH_LEN + ext;
	p->payload_len = (uint32_t)(body - p->pad);
	/* Last, over what the checks above have bounded; little-endian on
	 * the wire, as the captures of Linux rxe show. */
	if (uro_roce_icrc(ip, hl, datagram - URO_ROCE_ICRC_LEN) !=
	    ((uint32_t)end[0] | (uint32_t)end[1] << 8 | (uint32_t)end[2] << 16 |
	     (uint32_t)end[3] << 24))
		return ROCE_BAD_ICRC;
	return ROCE_OK;
}

size_t uro_roce_transport_len(const struct uro_roce_packet *p)
{
	return URO_ROCE_BTH_LEN + uro_wire_hdrs_len(p->op->hdrs) + p->payload_len +
	       ((4 - (p->payload_len & 3)) & 3);
}

static size_t build_ext(uint8_t *b, uint8_t hdrs, const struct uro_roce_packet *p)
{
	uint8_t *start = b;

	if (hdrs & HDR_DETH) {
		uro_put32(b, p->deth.qkey);
		b[4] = 0;
		uro_put24(b + 5, p->deth.src_qp);
		b += 8;
	}
	if (hdrs & HDR_XRCETH) {
		b[0] = 0;
		uro_put24(b + 1, p->xrc_srqn);
		b += 4;
	}
	if (hdrs & HDR_RETH) {
		uro_put64(b, p->reth.va);
		uro_put32(b + 8, p->reth.rkey);
		uro_put32(b + 12, p->reth.len);
		b += 16;
	}
	if (hdrs & HDR_ATOMIC_ETH) {
		uro_put64(b, p->atomic.va);
		uro_put32(b + 8, p->atomic.rkey);
		uro_put64(b + 12, p->atomic.swap_add);
		uro_put64(b + 20, p->atomic.compare);
		b += 28;
	}
	if (hdrs & HDR_AETH) {
		b[0] = p->aeth.syndrome;
		uro_put24(b + 1, p->aeth.msn);
		b += 4;
	}
	if (hdrs & HDR_ATOMIC_ACK_ETH) {
		uro_put64(b, p->atomic_ack);
		b += 8;
	}
	if (hdrs & HDR_IMMDT) {
		uro_put32(b, p->imm);
		b += 4;
	}
	if (hdrs & HDR_IETH) {
		uro_put32(b, p->inv_rkey);
		b += 4;
	}
	return (size_t)(b - start);
}

size_t uro_roce_build(const struct uro_roce_packet *p, uint8_t *out)
{
	uint8_t pad = (uint8_t)((4 - (p->payload_len & 3)) & 3);
	uint8_t *b = out;

	b[0] = p->opcode;
	b[1] = (uint8_t)(p->se << 7 | p->migreq << 6 | pad << 4); /* TVer 0 */
	uro_put16(b + 2, p->pkey);
	b[4] = (uint8_t)(p->fecn << 7 | p->becn << 6);
	uro_put24(b + 5, p->dest_qp);
	b[8] = (uint8_t)(p->ack_req << 7);
	uro_put24(b + 9, p->psn);
	b += URO_ROCE_BTH_LEN;
	b += build_ext(b, p->op->hdrs, p);
	if (p->payload_len && p->payload) /* NULL: the caller writes it there */
		memcpy(b, p->payload, p->payload_len);
	b += p->payload_len;
	memset(b, 0, pad);
	return (size_t)(b + pad - out);
}

const char *uro_roce_drop_name(enum uro_roce_drop why)
{
	static const char *const names[ROCE_DROP_REASONS] = {
	    [ROCE_OK] = "ok",
	    [ROCE_TRUNCATED] = "truncated",
	    [ROCE_NOT_ROCE] = "not RoCEv2",
	    [ROCE_BAD_VERSION] = "bad transport version",
	    [ROCE_UNKNOWN_OPCODE] = "unknown opcode",
	    [ROCE_BAD_PAYLOAD] = "payload or pad an opcode cannot carry",
	    [ROCE_BAD_ICRC] = "bad ICRC",
	};
	return (unsigned)why < ROCE_DROP_REASONS ? names[why] : "?";
}
