/* The RoCEv2 packet parser, builder and ICRC against real traffic between
 * two Linux Soft-RoCE devices (tests/data/roce-captures; their ICRCs were
 * checked with scapy): every RoCEv2 packet parses, its ICRC matches,
 * building it again from the parsed fields gives the same bytes, and a
 * packet changed where a router may change it still passes while one
 * changed anywhere else is dropped. */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "../pcap_frames.h"
#include "icrc.h"
#include "packet.h"
#include "wire_gso.h"
#include "pcap_trace.h"

#define ETH_LEN 14

static const char *const captures[] = {
    "opcodes.pcap",	  "atomic_lat.pcap",  "atomic_lat_cas.pcap", "read_bw.pcap",
    "read_lat.pcap",	  "rc_pingpong.pcap", "uc_pingpong.pcap",    "ud_pingpong.pcap",
    "write_bw_loss.pcap", "write_lat.pcap",   "rping.pcap",	     "mtu9000_write_bw.pcap",
};

static unsigned seen[256];
static unsigned packets;

/* The IP datagram of an Ethernet frame carrying UDP to 4791, or NULL. */
static const uint8_t *roce_datagram(const uint8_t *frame, size_t len, size_t *ip_len)
{
	size_t hl;
	const uint8_t *ip = frame + ETH_LEN;
	unsigned type;

	if (len < ETH_LEN + 40)
		return NULL;
	type = (unsigned)frame[12] << 8 | frame[13];
	if (type == 0x0800)
		hl = (size_t)(ip[0] & 0x0f) * 4;
	else if (type == 0x86dd)
		hl = 40;
	else
		return NULL;
	if ((type == 0x0800 ? ip[9] : ip[6]) != 17 || len < ETH_LEN + hl + 8 ||
	    ((unsigned)ip[hl + 2] << 8 | ip[hl + 3]) != URO_ROCE_PORT)
		return NULL;
	*ip_len = len - ETH_LEN;
	return ip;
}

static size_t ip_hdr_len(const uint8_t *ip)
{
	return ip[0] >> 4 == 4 ? (size_t)(ip[0] & 0x0f) * 4 : 40;
}

/* What a router may change and the ICRC does not cover (A17.8): the TTL,
 * the UDP checksum and the BTH's FECN/BECN byte. Anything else is caught. */
static void check_mutations(const uint8_t *ip, size_t len)
{
	uint8_t *m = malloc(len);
	size_t hl = ip_hdr_len(ip);
	struct uro_roce_packet p;

	memcpy(m, ip, len);
	m[ip[0] >> 4 == 4 ? 8 : 7] ^= 0x11; /* TTL or hop limit */
	m[hl + 6] ^= 0x5a;		    /* UDP checksum */
	m[hl + 8 + 4] ^= 0xc0;		    /* FECN, BECN */
	CHECK_EQ(uro_roce_parse(m, len, &p), ROCE_OK);
	memcpy(m, ip, len);
	m[len - 5] ^= 1; /* the last byte before the ICRC */
	CHECK_EQ(uro_roce_parse(m, len, &p), ROCE_BAD_ICRC);
	memcpy(m, ip, len);
	m[hl + 8 + 11] ^= 1; /* the PSN */
	CHECK_EQ(uro_roce_parse(m, len, &p), ROCE_BAD_ICRC);
	CHECK(uro_roce_parse(ip, len - 1, &p) != ROCE_OK);
	memcpy(m, ip, len);
	m[hl + 8] = 0x15; /* a reserved RC opcode */
	CHECK_EQ(uro_roce_parse(m, len, &p), ROCE_UNKNOWN_OPCODE);
	free(m);
}

/* Every IPv4 packet of the captures also goes through a trace that keeps
 * 16 bytes of payload (pcap_trace.h); check_trace reads it back. */
#define TRACE_SNAP 16
static struct uro_pcap *trace;
static char trace_path[] = "/tmp/uroce-trace-XXXXXX";
static unsigned traced;

/* A trace rebuilds the IPv4 header as uroce sends it, with the packet's
 * identification: the ICRC on file still checks. */
static void trace_packet(const uint8_t *ip, size_t len)
{
	uint8_t src[16] = {[10] = 0xff, [11] = 0xff}, dst[16] = {[10] = 0xff, [11] = 0xff};
	uint16_t sport;

	if ((ip[0] >> 4) != 4 || (ip[0] & 15) != 5 || !trace)
		return;
	memcpy(src + 12, ip + 12, 4);
	memcpy(dst + 12, ip + 16, 4);
	memcpy(&sport, ip + 20, 2);
	uro_pcap_packet(trace, src, sport, dst, (uint16_t)(ip[4] << 8 | ip[5]),
			ip + URO_ROCE_IPV4_UDP_LEN, len - URO_ROCE_IPV4_UDP_LEN);
	traced++;
}

/* Each captured IPv4 packet is also carried over IPv6 as uroce sends it
 * (IBTA A17.4): its transport bytes behind the IPv6 and UDP headers, its
 * ICRC made for them. It parses; what the ICRC masks there (traffic
 * class, flow label, hop limit: A17.8) may change on the way, an address
 * may not; and it traces (check_trace reads it back). */
static unsigned ipv6_checked;

static void check_ipv6(const uint8_t *ip, size_t len)
{
	static uint8_t v6[65536];
	static const uint8_t a[16] = {[15] = 1}, b[16] = {0xfe, 0x80, [15] = 2};
	size_t tl = len - URO_ROCE_IPV4_UDP_LEN, n = URO_ROCE_IPV6_UDP_LEN + tl;
	struct uro_roce_packet p;
	uint16_t sport;

	if ((ip[0] >> 4) != 4 || (ip[0] & 15) != 5 || n > sizeof(v6))
		return;
	memcpy(&sport, ip + 20, 2);
	CHECK_EQ(uro_roce_ip_udp(v6, a, b, sport, tl), URO_ROCE_IPV6_UDP_LEN);
	CHECK_EQ(uro_roce_ip_udp_len(b), URO_ROCE_IPV6_UDP_LEN);
	memcpy(v6 + URO_ROCE_IPV6_UDP_LEN, ip + URO_ROCE_IPV4_UDP_LEN, tl);
	uro_roce_icrc_put(v6, 40, n - URO_ROCE_ICRC_LEN);
	CHECK_EQ(uro_roce_parse(v6, n, &p), ROCE_OK);
	CHECK_EQ(p.payload_len, (uint32_t)(len - (size_t)(ip_hdr_len(ip) + 8 + URO_ROCE_BTH_LEN +
							  uro_wire_hdrs_len(p.op->hdrs) + p.pad +
							  URO_ROCE_ICRC_LEN)));
	v6[1] ^= 0x5a; /* traffic class and flow label */
	v6[3] ^= 0x77;
	v6[7] = 3; /* hop limit */
	CHECK_EQ(uro_roce_parse(v6, n, &p), ROCE_OK);
	uro_pcap_packet(trace, a, sport, b, 0, v6 + URO_ROCE_IPV6_UDP_LEN, tl);
	traced++;
	v6[8 + 15] ^= 1; /* the source address */
	CHECK_EQ(uro_roce_parse(v6, n, &p), ROCE_BAD_ICRC);
	ipv6_checked++;
}

/* A receiver knows a packet's addresses and ports, not its IPv4
 * identification, which Linux rxe numbers and the ICRC covers: rebuilt
 * with ID 0 as the endpoint does, each captured packet gets its own ID
 * back from its ICRC (icrc.h), and a corrupted one almost never any. */
static struct uro_icrc_id_cache id_cache;
static unsigned ids_found, ids_nonzero, corrupt_accepted, corrupt_tried;

static void check_ip_id(const uint8_t *ip, size_t len)
{
	static uint8_t copy[65536];
	struct uro_roce_packet p;
	uint32_t src, dst;
	uint16_t sport;

	if ((ip[0] >> 4) != 4 || (ip[0] & 15) != 5 || len > sizeof(copy))
		return;
	memcpy(&src, ip + 12, 4);
	memcpy(&dst, ip + 16, 4);
	memcpy(&sport, ip + 20, 2);
	memcpy(copy, ip, len);
	uro_roce_ipv4_udp(copy, src, dst, sport, len - URO_ROCE_IPV4_UDP_LEN);
	ids_nonzero += ip[4] || ip[5];
	if (uro_roce_parse(copy, len, &p) != ROCE_OK) {
		CHECK_EQ(uro_roce_icrc_find_ipv4_id(&id_cache, copy, len - URO_ROCE_ICRC_LEN), 0);
		CHECK_EQ(copy[4] << 8 | copy[5], ip[4] << 8 | ip[5]);
		CHECK_EQ(uro_roce_parse(copy, len, &p), ROCE_OK);
	}
	ids_found++;
	copy[len - URO_ROCE_ICRC_LEN - 1] ^= 0x40; /* the last byte before the ICRC */
	copy[4] = copy[5] = 0;
	corrupt_tried++;
	corrupt_accepted += !uro_roce_icrc_find_ipv4_id(&id_cache, copy, len - URO_ROCE_ICRC_LEN);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The trace is a raw-IP pcap whose every record parses as RoCEv2, its
 * ICRC included: whole, or cut to TRACE_SNAP payload bytes with lengths
 * and ICRC to match and the real length in the record. */
static void check_trace(void)
{
	static uint8_t ip[65536];
	uint8_t hdr[24], rec[16];
	unsigned records = 0, cut = 0;
	FILE *f = fopen(trace_path, "rb");

	CHECK(f != NULL);
	if (!f)
		return;
	CHECK(fread(hdr, 1, 24, f) == 24 && le32(hdr) == 0xa1b2c3d4 && le32(hdr + 20) == 101);
	while (fread(rec, 1, 16, f) == 16) {
		uint32_t incl = le32(rec + 8), orig = le32(rec + 12);
		struct uro_roce_packet p;

		if (incl > sizeof(ip) || fread(ip, 1, incl, f) != incl)
			break;
		records++;
		CHECK_EQ(uro_roce_parse(ip, incl, &p), ROCE_OK);
		if (incl < orig) {
			cut++;
			CHECK_EQ(p.payload_len, TRACE_SNAP);
		}
		CHECK(incl <= orig);
	}
	fclose(f);
	printf("%u packets traced, %u of them cut to %u payload bytes\n", records, cut, TRACE_SNAP);
	CHECK_EQ(records, traced);
	CHECK(cut > 0);
}

static void check_packet(const uint8_t *ip, size_t len)
{
	struct uro_roce_packet p;
	size_t hl = ip_hdr_len(ip), tl;
	uint8_t *out;
	enum uro_roce_drop why = uro_roce_parse(ip, len, &p);

	packets++;
	if (why != ROCE_OK) {
		fprintf(stderr, "packet %u (opcode 0x%02x): %s\n", packets, ip[hl + 8],
			uro_roce_drop_name(why));
		CHECK_EQ(why, ROCE_OK);
		return;
	}
	seen[p.opcode]++;
	trace_packet(ip, len);
	check_ipv6(ip, len);
	check_ip_id(ip, len);
	tl = uro_roce_transport_len(&p);
	out = malloc(tl);
	CHECK_EQ(uro_roce_build(&p, out), tl);
	CHECK_EQ(hl + 8 + tl + URO_ROCE_ICRC_LEN, len);
	CHECK(memcmp(out, ip + hl + 8, tl) == 0);
	free(out);
	check_mutations(ip, len);
}

static void take_frame(const uint8_t *frame, size_t len, void *arg)
{
	size_t ip_len;
	const uint8_t *ip = roce_datagram(frame, len, &ip_len);

	(void)arg;
	if (ip)
		check_packet(ip, ip_len);
}

static void read_capture(const char *dir, const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	CHECK_EQ(pcap_frames(path, take_frame, NULL), 0);
}

/* Every opcode the captures hold (tshark -r FILE -T fields -e
 * infiniband.bth.opcode lists them). */
static void check_census(void)
{
	static const uint8_t expected[] = {
	    0x00, 0x01, 0x02, 0x04, 0x05, 0x06, 0x07, 0x08, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
	    0x10, 0x11, 0x12, 0x13, 0x14, 0x17, 0x20, 0x21, 0x22, 0x26, 0x28, 0x2b, 0x64, 0x65};

	for (size_t i = 0; i < sizeof(expected); i++) {
		if (!seen[expected[i]])
			fprintf(stderr, "no packet with opcode 0x%02x (%s)\n", expected[i],
				uro_wire_opcode(expected[i])->name);
		CHECK(seen[expected[i]] > 0);
	}
	for (int c = 0; c < 256; c++)
		if (seen[c])
			printf("  0x%02x %-36s %u\n", c, uro_wire_opcode((uint8_t)c)->name,
			       seen[c]);
}

/* Garbage and short buffers are dropped without reading past them. */
static void check_garbage(void)
{
	uint8_t buf[128];
	struct uro_roce_packet p;

	memset(buf, 0, sizeof(buf));
	CHECK_EQ(uro_roce_parse(buf, 0, &p), ROCE_NOT_ROCE);
	CHECK_EQ(uro_roce_parse(buf, sizeof(buf), &p), ROCE_NOT_ROCE);
	buf[0] = 0x45;
	buf[9] = 17;
	buf[3] = 200; /* total length beyond the buffer */
	CHECK_EQ(uro_roce_parse(buf, sizeof(buf), &p), ROCE_TRUNCATED);
}

/* The requester's lookup from (operation, transport, place, optional
 * header) finds each opcode the table has, and no other. */
static void check_code_lookup(void)
{
	static const enum uro_wire_qp transports[] = {WIRE_RC, WIRE_UC, WIRE_UD, WIRE_XRC};

	for (int c = 0; c < 256; c++) {
		const struct uro_wire_opcode *o = uro_wire_opcode((uint8_t)c);

		if (!o->name)
			continue;
		for (size_t t = 0; t < sizeof(transports) / sizeof(transports[0]); t++)
			if (o->qp & transports[t])
				CHECK_EQ(uro_wire_code(o->op, transports[t],
						       (enum uro_wire_pos)o->pos,
						       o->hdrs & (HDR_IMMDT | HDR_IETH)),
					 c);
	}
	CHECK_EQ(uro_wire_code(WIRE_READ_REQ, WIRE_UC, WIRE_ONLY, 0), -1);
	CHECK_EQ(uro_wire_code(WIRE_ATOMIC_WRITE, WIRE_XRC, WIRE_ONLY, 0), -1);
	CHECK_EQ(uro_wire_code(WIRE_SEND, WIRE_UD, WIRE_FIRST, 0), -1);
}

/* XRC (IBTA Annex A14): a request carries the XRCETH right after the BTH
 * (reserved byte, then the 24-bit XRC SRQ number), before its RETH; the
 * opcodes are RC's with the transport bits 101; a response has no
 * XRCETH. Checked byte by byte, then parsed back from a whole datagram. */
static void check_xrc(void)
{
	uint8_t ip[URO_ROCE_IPV4_UDP_LEN + 128];
	uint8_t *t = ip + URO_ROCE_IPV4_UDP_LEN;
	struct uro_roce_packet p = {.opcode = 0xa6,
				    .op = uro_wire_opcode(0xa6),
				    .pkey = 0xffff,
				    .dest_qp = 0x2001,
				    .psn = 77,
				    .xrc_srqn = 0xabcdef,
				    .reth = {.va = 0x1122334455667788ull, .rkey = 0x99, .len = 8},
				    .payload = (const uint8_t *)"xrc-data",
				    .payload_len = 8},
			       q;
	size_t tlen = uro_roce_build(&p, t);

	CHECK_STR(p.op->name, "XRC RDMA WRITE first");
	CHECK_EQ(tlen, URO_ROCE_BTH_LEN + 4 + 16 + 8);
	CHECK_EQ(t[12], 0);
	CHECK_EQ((unsigned)t[13] << 16 | (unsigned)t[14] << 8 | t[15], 0xabcdef);
	CHECK_EQ(t[16], 0x11); /* the RETH's VA follows */
	CHECK(!memcmp(t + 32, "xrc-data", 8));
	uro_roce_ipv4_udp(ip, htonl(0xc6120001), htonl(0xc6120002), htons(50000),
			  tlen + URO_ROCE_ICRC_LEN);
	uro_roce_icrc_put(ip, 20 /* the IPv4 header */, URO_ROCE_IPV4_UDP_LEN + tlen);
	CHECK_EQ(uro_roce_parse(ip, URO_ROCE_IPV4_UDP_LEN + tlen + URO_ROCE_ICRC_LEN, &q), ROCE_OK);
	CHECK_EQ(q.xrc_srqn, 0xabcdef);
	CHECK_EQ(q.reth.va, p.reth.va);
	CHECK_EQ(q.payload_len, 8);
	CHECK(uro_wire_opcode(0xb1)->op == WIRE_ACK && !(uro_wire_opcode(0xb1)->hdrs & HDR_XRCETH));
	CHECK(uro_wire_opcode(0xad)->op == WIRE_READ_RESP &&
	      !(uro_wire_opcode(0xad)->hdrs & HDR_XRCETH));
	CHECK(uro_wire_opcode(0xa7)->hdrs & HDR_XRCETH); /* a MIDDLE names its SRQ too */
	CHECK(uro_wire_opcode(0xbd)->name == NULL);	 /* no XRC ATOMIC WRITE */
}

/* A burst cut into GSO messages (wire_gso.h): a WRITE's FIRST (longer,
 * its RETH) alone, its MIDDLEs with the shorter LAST in one; a LAST with
 * immediate data, longer than the MIDDLEs, alone; at most 64 segments and
 * 65,507 bytes a message. */
static void check_gso_messages(void)
{
	size_t len[140];
	struct uro_wire_msg m[140];
	unsigned n;

	len[0] = 1056;
	for (int i = 1; i < 6; i++)
		len[i] = 1040;
	len[6] = 300;
	n = uro_wire_gso_messages(len, 7, m);
	CHECK_EQ(n, 2);
	CHECK_EQ(m[0].first, 0);
	CHECK_EQ(m[0].n, 1);
	CHECK_EQ(m[1].first, 1);
	CHECK_EQ(m[1].n, 6);
	CHECK_EQ(m[1].seg, 1040);
	len[6] = 1044; /* a LAST with ImmDt */
	n = uro_wire_gso_messages(len, 7, m);
	CHECK_EQ(n, 3);
	CHECK_EQ(m[1].n, 5);
	CHECK_EQ(m[2].first, 6);
	CHECK_EQ(m[2].n, 1);
	/* A shorter packet ends a message, unless a run starts with it. */
	len[0] = len[1] = 1040;
	len[2] = 500;
	len[3] = 400;
	len[4] = 400;
	n = uro_wire_gso_messages(len, 5, m);
	CHECK_EQ(n, 2);
	CHECK_EQ(m[0].n, 3);
	CHECK_EQ(m[1].n, 2);
	len[3] = 500;
	n = uro_wire_gso_messages(len, 5, m);
	CHECK_EQ(n, 2);
	CHECK_EQ(m[0].n, 2);
	CHECK_EQ(m[1].first, 2);
	CHECK_EQ(m[1].n, 3);
	/* 140 small packets: 64 a message. */
	for (int i = 0; i < 140; i++)
		len[i] = 20;
	n = uro_wire_gso_messages(len, 140, m);
	CHECK_EQ(n, 3);
	CHECK_EQ(m[0].n, URO_WIRE_GSO_SEGS);
	CHECK_EQ(m[2].n, 140 - 2 * URO_WIRE_GSO_SEGS);
	/* Path MTU 4096: 15 packets of 4112 bytes fit 65,507, 16 do not. */
	for (int i = 0; i < 20; i++)
		len[i] = 4112;
	n = uro_wire_gso_messages(len, 20, m);
	CHECK_EQ(n, 2);
	CHECK_EQ(m[0].n, 15);
	CHECK_EQ(m[1].first, 15);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "tests/data/roce-captures";
	char err[256];
	int fd = mkstemp(trace_path);

	if (fd >= 0)
		close(fd);
	trace = uro_pcap_open(trace_path, TRACE_SNAP, err, sizeof(err));
	CHECK(trace != NULL);
	for (size_t i = 0; i < sizeof(captures) / sizeof(captures[0]); i++)
		read_capture(dir, captures[i]);
	uro_pcap_close(trace);
	check_trace();
	unlink(trace_path);
	printf("%u RoCEv2 packets\n", packets);
	printf(
	    "IPv4 IDs found from the ICRC: %u (%u not 0); corrupted packets given one: %u of %u\n",
	    ids_found, ids_nonzero, corrupt_accepted, corrupt_tried);
	CHECK(ids_nonzero > 100); /* rxe numbers its packets */
	CHECK(corrupt_accepted * 100 <= corrupt_tried);
	CHECK_EQ(packets, 609); /* the captures README.md's RoCEv2 column, summed */
	printf("%u of them also over IPv6\n", ipv6_checked);
	CHECK_EQ(ipv6_checked, packets);
	check_census();
	check_garbage();
	check_code_lookup();
	check_xrc();
	check_gso_messages();
	return check_report();
}
