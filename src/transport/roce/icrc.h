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

#endif
