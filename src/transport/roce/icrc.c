/* ICRC: CRC-32 (zlib's: the IEEE 802.3 polynomial, reflected, all-ones
 * initial value and final XOR) over the packet with the fields a router
 * may change set to all ones, after 8 bytes of ones that stand for the
 * LRH a RoCEv2 packet does not have (IBTA Annex A17.8). zlib's crc32 is
 * the well-kept implementation; no table of our own. */
#include "icrc.h"

#include <string.h>
#include <zlib.h>

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
	uLong crc;

	memset(masked, 0xff, 8);
	memcpy(p, ip, head);
	mask_ip(p);
	p[ip_hdr_len + 6] = p[ip_hdr_len + 7] = 0xff; /* UDP checksum */
	p[ip_hdr_len + UDP_LEN + 4] = 0xff;	      /* BTH resv8a: FECN, BECN */
	crc = crc32(0L, masked, (uInt)(8 + head));
	return (uint32_t)crc32(crc, ip + head, (uInt)(len - head));
}
