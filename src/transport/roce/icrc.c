/* ICRC: CRC-32 (the IEEE 802.3 polynomial, reflected, all-ones initial
 * value and final XOR: gzip's) over the packet with the fields a router may
 * change set to all ones, after 8 bytes of ones that stand for the LRH a
 * RoCEv2 packet does not have (IBTA Annex A17.8). ISA-L computes it, not a
 * table of our own: bench/icrc_speed measured it 10 to 20 times faster
 * than zlib's crc32 from 64 B to 9000 B on this project's machine, with
 * equal results. */
#include "icrc.h"

#include <string.h>
#include <isa-l/crc.h>

#define UDP_LEN	   8
#define BTH_LEN	   12
#define MASKED_MAX (8 + 60 + UDP_LEN + BTH_LEN) /* 60: IPv4 with options */

/* IPv4: type of service (1), TTL (8) and header checksum (10-11). IPv6:
 * traffic class and flow label (the low nibble of 0, and 1-3) and hop
 * limit (7). The version nibble stays. */
static void mask_ip(uint8_t *h)
{
	if ((h[0] >> 4) == 4) {
		h[1] = 0xff;
		h[8] = 0xff;
		h[10] = h[11] = 0xff;
		return;
	}
	h[0] |= 0x0f;
	h[1] = h[2] = h[3] = 0xff;
	h[7] = 0xff;
}

uint32_t uro_roce_icrc(const uint8_t *ip, size_t ip_hdr_len, size_t len)
{
	uint8_t masked[MASKED_MAX];
	size_t head = ip_hdr_len + UDP_LEN + BTH_LEN;
	uint8_t *p = masked + 8;
	uint32_t crc;

	memset(masked, 0xff, 8);
	memcpy(p, ip, head);
	mask_ip(p);
	p[ip_hdr_len + 6] = p[ip_hdr_len + 7] = 0xff; /* UDP checksum */
	p[ip_hdr_len + UDP_LEN + 4] = 0xff;	      /* BTH resv8a: FECN, BECN */
	crc = crc32_gzip_refl(0, masked, 8 + head);
	return crc32_gzip_refl(crc, ip + head, len - head);
}

/* The CRC of the ICRC's input for a packet of len bytes (from the IPv4
 * header to the ICRC) that is all zeros but the ID. Two such CRCs differ
 * by the change the ID bits between them make in any packet of that
 * length (the CRC is linear). ISA-L's CRC goes on over the zeros. */
static uint32_t crc_of_id(uint16_t id, size_t len)
{
	static const uint8_t zeros[1024];
	uint8_t head[8 + 6] = {0};
	size_t left = 8 + len - sizeof(head);
	uint32_t crc;

	head[12] = (uint8_t)(id >> 8);
	head[13] = (uint8_t)id;
	crc = crc32_gzip_refl(0, head, sizeof(head));
	for (size_t n; left; left -= n) {
		n = left < sizeof(zeros) ? left : sizeof(zeros);
		crc = crc32_gzip_refl(crc, zeros, n);
	}
	return crc;
}

/* Gaussian elimination over GF(2): the 16 ID bits' changes, each reduced
 * by the vectors already kept and kept under its highest bit. */
static void basis_build(struct uro_icrc_id_basis *b, size_t len)
{
	uint32_t none = crc_of_id(0, len);

	memset(b, 0, sizeof(*b));
	b->len = (uint32_t)len;
	for (int j = 0; j < 16; j++) {
		uint32_t v = crc_of_id((uint16_t)(1u << j), len) ^ none;
		uint16_t bits = (uint16_t)(1u << j);

		for (int k = 31; k >= 0 && v; k--) {
			if (!(v >> k & 1))
				continue;
			if (!b->vec[k]) {
				b->vec[k] = v;
				b->id_bits[k] = bits;
				break;
			}
			v ^= b->vec[k];
			bits ^= b->id_bits[k];
		}
	}
}

static const struct uro_icrc_id_basis *basis_for(struct uro_icrc_id_cache *c, size_t len)
{
	struct uro_icrc_id_basis *b;

	for (int i = 0; i < URO_ICRC_ID_CACHE; i++)
		if (c->b[i].len == len)
			return &c->b[i];
	b = &c->b[c->next];
	c->next = (c->next + 1) % URO_ICRC_ID_CACHE;
	basis_build(b, len);
	return b;
}

int uro_roce_icrc_find_ipv4_id(struct uro_icrc_id_cache *c, uint8_t *ip, size_t len)
{
	const struct uro_icrc_id_basis *b;
	uint32_t want = 0, diff;
	uint16_t id = 0;

	if ((ip[0] >> 4) != 4 || (ip[0] & 0x0f) != 5)
		return -1;
	for (int i = 0; i < 4; i++)
		want |= (uint32_t)ip[len + (size_t)i] << (8 * i);
	ip[4] = ip[5] = 0;
	diff = want ^ uro_roce_icrc(ip, 20, len);
	b = basis_for(c, len);
	for (int k = 31; k >= 0 && diff; k--) {
		if (!(diff >> k & 1))
			continue;
		if (!b->vec[k])
			return -1;
		diff ^= b->vec[k];
		id ^= b->id_bits[k];
	}
	ip[4] = (uint8_t)(id >> 8);
	ip[5] = (uint8_t)id;
	return 0;
}

void uro_roce_icrc_put(uint8_t *ip, size_t ip_hdr_len, size_t len)
{
	uint32_t crc = uro_roce_icrc(ip, ip_hdr_len, len);

	for (int i = 0; i < 4; i++)
		ip[len + (size_t)i] = (uint8_t)(crc >> (8 * i));
}
