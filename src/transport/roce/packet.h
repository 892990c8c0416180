/* A RoCEv2 packet, parsed from or built into its transport headers
 * (IBTA 9.2 and Annex A17). */
#ifndef URO_ROCE_PACKET_H
#define URO_ROCE_PACKET_H

#include <stddef.h>
#include <stdint.h>

#include "drop_reason.h"
#include "wire_opcode.h"

#define URO_ROCE_PORT	  4791
#define URO_ROCE_BTH_LEN  12
#define URO_ROCE_ICRC_LEN 4

struct uro_roce_packet {
	uint8_t opcode;
	const struct uro_wire_opcode *op;
	/* BTH */
	uint8_t se, migreq, pad;
	uint16_t pkey;
	uint8_t fecn, becn;
	uint32_t dest_qp;
	uint8_t ack_req;
	uint32_t psn;
	/* Extension headers: those op->hdrs names are meaningful. */
	struct {
		uint64_t va;
		uint32_t rkey, len;
	} reth;
	struct {
		uint64_t va;
		uint32_t rkey;
		uint64_t swap_add, compare;
	} atomic;
	struct {
		uint8_t syndrome;
		uint32_t msn;
	} aeth;
	uint64_t atomic_ack; /* the original remote data */
	uint32_t imm;	     /* ImmDt, in host order */
	uint32_t inv_rkey;   /* IETH */
	struct {
		uint32_t qkey, src_qp;
	} deth;
	uint32_t xrc_srqn; /* XRCETH */
	const uint8_t *payload;
	uint32_t payload_len;
};

/* Parses the IP datagram ip[0..len) as a RoCEv2 packet, its ICRC
 * included; p's pointers point into ip. ROCE_OK or why it is dropped. */
enum uro_roce_drop uro_roce_parse(const uint8_t *ip, size_t len, struct uro_roce_packet *p);

/* Writes p's BTH, extension headers, payload and pad to out (room for
 * uro_roce_transport_len(p) bytes); returns that length. With payload
 * NULL, the payload's bytes are left for the caller to write. The ICRC is not
 * included: it covers the IP and UDP headers too (icrc.h). */
size_t uro_roce_build(const struct uro_roce_packet *p, uint8_t *out);

/* The IPv4 and UDP headers Linux writes in front of a RoCEv2 packet of len
 * bytes (BTH to ICRC) sent to port 4791 (DF, TTL 64, identification 0,
 * no UDP checksum), into the URO_ROCE_IPV4_UDP_LEN bytes at h. Addresses
 * and sport in network order. The IP checksum is left 0: the ICRC masks
 * it (Annex A17.8); uro_roce_ipv4_checksum fills it for a reader. */
#define URO_ROCE_IPV4_UDP_LEN 28
void uro_roce_ipv4_udp(uint8_t *h, uint32_t src, uint32_t dst, uint16_t sport, size_t len);
/* The same for a packet between two addresses given as RoCEv2 GIDs (raw,
 * IPv4 as ::ffff:a.b.c.d, IBTA A17.2): IPv4 and UDP headers when dst is
 * IPv4-mapped, otherwise IPv6 (traffic class and flow label 0, hop limit
 * 64, which the ICRC masks) and UDP, into the URO_ROCE_IP_UDP_MAX bytes at
 * h. Returns how many bytes it wrote there. */
#define URO_ROCE_IPV6_UDP_LEN 48
#define URO_ROCE_IP_UDP_MAX   URO_ROCE_IPV6_UDP_LEN
size_t uro_roce_ip_udp(uint8_t *h, const uint8_t src[16], const uint8_t dst[16], uint16_t sport,
		       size_t len);
/* How many bytes uro_roce_ip_udp writes for a packet to dst. */
size_t uro_roce_ip_udp_len(const uint8_t dst[16]);
void uro_roce_ipv4_checksum(uint8_t *h);
size_t uro_roce_transport_len(const struct uro_roce_packet *p);

const char *uro_roce_drop_name(enum uro_roce_drop why);

#endif
