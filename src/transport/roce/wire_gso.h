/* UDP GSO for a burst of RoCEv2 packets: see gso_messages.c and wire_burst.c. */
#ifndef URO_WIRE_GSO_H
#define URO_WIRE_GSO_H

#include <stddef.h>

/* At most this many segments and bytes in one message: the kernel's
 * UDP_MAX_SEGMENTS (64 for years; recent kernels allow more) and an IPv4
 * datagram's largest UDP payload (65,535 - 20 - 8). */
#define URO_WIRE_GSO_SEGS  64
#define URO_WIRE_GSO_BYTES 65507

/* One message of a burst: packets [first, first + n), each seg bytes but
 * the last, which may be shorter. */
struct uro_wire_msg {
	unsigned first, n;
	size_t seg;
};

/* Cuts a burst of n packets of len[i] bytes (BTH to ICRC) into messages:
 * runs of one length, each closed by a shorter packet, by the limits or by
 * a longer one. Returns how many it wrote to out (at most n). */
unsigned uro_wire_gso_messages(const size_t *len, unsigned n, struct uro_wire_msg *out);

#endif
