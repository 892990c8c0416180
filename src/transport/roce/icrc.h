/* The RoCEv2 invariant CRC (IBTA Annex A17.8). */
#ifndef URO_ICRC_H
#define URO_ICRC_H

#include <stddef.h>
#include <stdint.h>

/* The ICRC of a RoCEv2 packet: ip is its IP datagram (IPv4 or IPv6, then
 * UDP, BTH, the rest), len its length up to and without the ICRC. The
 * caller has checked that the IP, UDP and BTH headers are within len.
 * The value goes on the wire in little-endian byte order. */
uint32_t uro_roce_icrc(const uint8_t *ip, size_t ip_hdr_len, size_t len);
/* Computes the ICRC of ip[0, len) and writes it, little-endian, at ip + len. */
void uro_roce_icrc_put(uint8_t *ip, size_t ip_hdr_len, size_t len);

/* The IPv4 identification is under the ICRC (A17.8 masks only the type of
 * service, TTL and checksum), and a UDP socket never shows it: a receiver
 * that rebuilds the header from recvmsg's addresses has ID 0, which is
 * what Linux sends on a socket like uroce's (DF, unconnected), while
 * Linux rxe numbers its packets. The CRC is linear, so the ID that makes
 * the received ICRC right, if one does, is found by solving 16 unknowns:
 * the solution for each packet length is kept, since a peer's packets
 * come in few lengths. */
#define URO_ICRC_ID_CACHE 8
struct uro_icrc_id_basis {
	uint32_t len;	      /* the packet length it is for; 0: none */
	uint32_t vec[32];     /* by pivot bit: the ICRC change ... */
	uint16_t id_bits[32]; /* ... that these ID bits make */
};
struct uro_icrc_id_cache {
	struct uro_icrc_id_basis b[URO_ICRC_ID_CACHE];
	unsigned next; /* the entry to replace */
};

/* ip is a 20-byte IPv4 header then UDP, BTH and the rest up to len, the
 * received ICRC behind. Writes into ip the identification that makes that
 * ICRC right and returns 0, or -1 when none does (the packet is corrupt). */
int uro_roce_icrc_find_ipv4_id(struct uro_icrc_id_cache *c, uint8_t *ip, size_t len);

#endif
