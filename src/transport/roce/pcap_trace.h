/* The packet trace: every RoCEv2 packet a process sends
 * or takes on the wire path, written to a pcap file that Wireshark and
 * tshark decode as RoCEv2 (UDP port 4791). UROCE_PCAP=FILE ("%p" in it
 * becomes the pid) and UROCE_PCAP_SNAP=N (payload bytes kept of each
 * packet, all headers kept) set it; `uroce run --pcap` sets them.
 *
 * Each record goes to the file in one write on a descriptor opened for
 * appending, so threads need no lock, and nothing is buffered: what was
 * traced is in the file when the process exits or is killed. */
#ifndef URO_PCAP_TRACE_H
#define URO_PCAP_TRACE_H

#include <stddef.h>
#include <stdint.h>

/* The longest RoCEv2 packet traced: headers, a 4096-byte MTU's payload,
 * pad and ICRC. */
#define URO_PCAP_MAX_ROCE 4200

struct uro_pcap;

/* The trace the environment asks for: NULL with *err empty when none is
 * asked for, NULL with *err set when it cannot be opened. */
struct uro_pcap *uro_pcap_from_env(char *err, size_t errlen);
/* pattern's file, created or emptied, with its pcap header written. */
struct uro_pcap *uro_pcap_open(const char *pattern, uint32_t snap, char *err, size_t errlen);
void uro_pcap_close(struct uro_pcap *t);
/* Whether pattern's file could be opened by this process, without creating
 * it: 0, or -1 with err saying why not. */
int uro_pcap_check(const char *pattern, char *err, size_t errlen);

/* One RoCEv2 packet (its BTH to its ICRC) from src:sport to dst:4791,
 * the addresses as GIDs and sport in network order: an IPv4 packet with
 * identification id (under the ICRC: icrc.h) when dst is IPv4-mapped, an
 * IPv6 one otherwise. */
void uro_pcap_packet(struct uro_pcap *t, const uint8_t src[16], uint16_t sport,
		     const uint8_t dst[16], uint16_t id, const uint8_t *roce, size_t len);

/* UROCE_PCAP_SNAP's value, payload bytes (0: all): 0, or -1 with err set. */
int uro_pcap_snap_parse(const char *s, uint32_t *snap, char *err, size_t errlen);

#endif
