/* libFuzzer target for the RoCEv2 packet parser (src/transport/roce): an
 * IP datagram as it would arrive on UDP port 4791. The parser never reads
 * outside the buffer; a packet it accepts has its payload inside the
 * buffer and builds back to the same bytes, but for the reserved bits a
 * receiver ignores (IBTA 9.2: BTH resv6a and resv7, DETH's reserved byte;
 * XRCETH's, Annex A14) and the pad's content, which a sender sets to 0. So
 * that the fuzzer gets past the ICRC, an input that fails only its ICRC is
 * parsed a second time with the right one written in. Seeds:
 * tests/fuzz/roce-seeds, one packet per opcode from the Soft-RoCE
 * captures, and three XRC ones made from them (opa4, opaa, opb1: rxe
 * speaks no XRC). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "icrc.h"
#include "packet.h"

static void clear_reserved(uint8_t *t, size_t tl, const struct uro_roce_packet *p)
{
	t[4] &= 0xc0; /* FECN, BECN */
	t[8] &= 0x80; /* AckReq */
	if (p->op->hdrs & HDR_DETH)
		t[URO_ROCE_BTH_LEN + 4] = 0;
	if (p->op->hdrs & HDR_XRCETH) /* right after the BTH: no XRC packet has a DETH */
		t[URO_ROCE_BTH_LEN] = 0;
	memset(t + tl - p->pad, 0, p->pad);
}

static void check_accepted(const uint8_t *ip, size_t len, const struct uro_roce_packet *p)
{
	size_t hl = ip[0] >> 4 == 4 ? (size_t)(ip[0] & 0x0f) * 4 : 40;
	size_t tl = uro_roce_transport_len(p);
	uint8_t *out, *in;

	if (!p->op || !p->op->name || p->payload < ip ||
	    p->payload + p->payload_len > ip + len - URO_ROCE_ICRC_LEN)
		abort();
	if (hl + 8 + tl + URO_ROCE_ICRC_LEN > len)
		abort();
	out = malloc(tl);
	in = malloc(tl);
	if (out && in) {
		memcpy(in, ip + hl + 8, tl);
		clear_reserved(in, tl, p);
		if (uro_roce_build(p, out) != tl || memcmp(out, in, tl))
			abort();
	}
	free(out);
	free(in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct uro_roce_packet p;
	uint8_t *ip;
	size_t hl;
	enum uro_roce_drop why;

	if (size < 4)
		return 0;
	ip = malloc(size);
	if (!ip)
		return 0;
	memcpy(ip, data, size);
	why = uro_roce_parse(ip, size, &p);
	if (why == ROCE_BAD_ICRC) {
		/* Only reached with every header in bounds (packet.c). */
		hl = ip[0] >> 4 == 4 ? (size_t)(ip[0] & 0x0f) * 4 : 40;
		size = ip[0] >> 4 == 4 ? (size_t)(ip[2] << 8 | ip[3])
				       : 40 + (size_t)(ip[4] << 8 | ip[5]);
		uro_roce_icrc_put(ip, hl, size - URO_ROCE_ICRC_LEN);
		why = uro_roce_parse(ip, size, &p);
		if (why == ROCE_BAD_ICRC)
			abort();
	}
	if (why == ROCE_OK)
		check_accepted(ip, size, &p);
	free(ip);
	return 0;
}
