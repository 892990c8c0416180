/* The frames of a capture (pcap, microseconds, little-endian, Ethernet),
 * as the tests' reference captures are written: each handed to each().
 * 0, or -1 for a file that is missing, of another format or cut short. */
#ifndef URO_TEST_PCAP_FRAMES_H
#define URO_TEST_PCAP_FRAMES_H

#include <stdint.h>
#include <stdio.h>

static int pcap_frames(const char *path, void (*each)(const uint8_t *frame, size_t len, void *arg),
		       void *arg)
{
	static uint8_t frame[65536];
	uint8_t hdr[24], rec[16];
	FILE *f = fopen(path, "rb");
	int rc = 0;

	if (!f)
		return -1;
	if (fread(hdr, 1, 24, f) != 24 || hdr[0] != 0xd4 || hdr[20] != 1)
		rc = -1;
	while (!rc && fread(rec, 1, 16, f) == 16) {
		uint32_t caplen = (uint32_t)rec[8] | (uint32_t)rec[9] << 8 |
				  (uint32_t)rec[10] << 16 | (uint32_t)rec[11] << 24;

		if (caplen > sizeof(frame) || fread(frame, 1, caplen, f) != caplen)
			rc = -1;
		else
			each(frame, caplen, arg);
	}
	fclose(f);
	return rc;
}

#endif
