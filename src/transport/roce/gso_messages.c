/* A burst cut into the messages UDP GSO sends (wire_gso.h, udp(7)
 * UDP_SEGMENT): the kernel cuts a message's payload every `seg` bytes, so
 * a message holds packets of one length, of which the last may be
 * shorter. */
#include "wire_gso.h"

unsigned uro_wire_gso_messages(const size_t *len, unsigned n, struct uro_wire_msg *out)
{
	unsigned nm = 0;

	for (unsigned i = 0; i < n;) {
		size_t seg = len[i], bytes = len[i];
		unsigned k = i + 1;

		/* udp(7): every segment but the last is seg bytes. A shorter
		 * packet ends the message, unless a run of its own length
		 * starts with it (a FIRST with its RETH, then MIDDLEs). */
		while (k < n && k - i < URO_WIRE_GSO_SEGS && len[k] <= seg &&
		       bytes + len[k] <= URO_WIRE_GSO_BYTES) {
			if (len[k] < seg && k + 1 < n && len[k + 1] == len[k])
				break;
			bytes += len[k];
			if (len[k++] < seg)
				break;
		}
		out[nm].first = i;
		out[nm].n = k - i;
		out[nm].seg = seg;
		nm++;
		i = k;
	}
	return nm;
}
