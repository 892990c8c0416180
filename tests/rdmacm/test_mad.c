/* The CM's MADs (src/rdmacm/mad.c, src/core/mad_route.c) against what two
 * Linux kernels' rdma_cm sent each other (tests/data/roce-captures/cm: rping,
 * ucmatose, udaddy's SIDR, cmtime, a REJ for a port nobody listens on):
 * every MAD parses, builds back to a MAD that parses the same, routes to
 * the agent or listener it names, and a malformed one is refused. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../check.h"
#include "../pcap_frames.h"
#include "big_endian.h"
#include "mad_codec.h"
#include "mad_route.h"

#define MAD_AT 62 /* Ethernet 14, IPv4 20, UDP 8, BTH 12, DETH 8 */

static unsigned seen[MSG_MRA + 1];
static uint8_t first_req[URO_MAD_LEN], kernel_rej[URO_MAD_LEN];
static int have_req, have_rej;

static int same(const struct uro_cm_mad *a, const struct uro_cm_mad *b)
{
	return a->type == b->type && a->tid == b->tid && a->local_id == b->local_id &&
	       a->remote_id == b->remote_id && a->sid == b->sid && a->status == b->status &&
	       a->peer.qpn == b->peer.qpn && a->peer.psn == b->peer.psn &&
	       a->pdata_len == b->pdata_len && !memcmp(a->pdata, b->pdata, a->pdata_len);
}

static void check_mad(const char *name, const uint8_t *mad)
{
	struct uro_cm_mad m, again;
	uint8_t built[URO_MAD_LEN];
	struct sockaddr_un a[2];
	socklen_t len[2];

	CHECK(uro_mad_is_cm(mad));
	CHECK_EQ(uro_cm_mad_parse(mad, &m), 0);
	if (m.type > MSG_MRA)
		return;
	seen[m.type]++;
	uro_cm_mad_build(&m, built);
	CHECK_EQ(uro_cm_mad_parse(built, &again), 0);
	if (!same(&m, &again))
		fprintf(stderr, "%s: type %d differs once built again\n", name, m.type);
	CHECK(same(&m, &again));
	/* Requests route by service and address, the rest by the comm ID
	 * that is the receiver's. */
	if (m.type == MSG_REQ || m.type == MSG_SIDR_REQ) {
		static const uint8_t any4[16] = {[10] = 0xff, [11] = 0xff};
		struct sockaddr_un want;
		socklen_t want_len;

		CHECK_EQ(uro_mad_route(NULL, mad, a, len), 2);
		CHECK_EQ(m.cma.ip_version, 4);
		CHECK(!memcmp(m.cma.dst.raw + 12, "\xc6\x12\x00\x02", 4)); /* 198.18.0.2 */
		/* The listener on 198.18.0.2, then the one on 0.0.0.0 (not ::'s
		 * with AFONLY, which may listen beside it on the same port). */
		want_len = uro_mad_service_name(NULL, m.sid, m.cma.dst.raw, &want);
		CHECK(len[0] == want_len && !memcmp(&a[0], &want, want_len));
		want_len = uro_mad_service_name(NULL, m.sid, any4, &want);
		CHECK(len[1] == want_len && !memcmp(&a[1], &want, want_len));
	}
	if (m.type == MSG_REQ && !have_req) {
		memcpy(first_req, mad, URO_MAD_LEN);
		have_req = 1;
		CHECK_EQ(m.mtu, IBV_MTU_1024); /* Ethernet MTU 1500 */
		CHECK(m.lgid.raw[10] == 0xff && m.lgid.raw[11] == 0xff);
	}
	if (m.type == MSG_REJ && !strcmp(name, "reject_no_listener.pcap")) {
		memcpy(kernel_rej, mad, URO_MAD_LEN);
		have_rej = 1;
		CHECK_EQ(m.status, 8);
		CHECK_EQ(m.msg, 0);
	}
	if (m.type == MSG_REQ && !strcmp(name, "rping_cm.pcap"))
		CHECK_EQ(m.sid, 0x0000000001061c06ull); /* RDMA_PS_TCP, port 7174 */
	if (m.type == MSG_SIDR_REQ)
		CHECK_EQ(m.sid >> 16, RDMA_PS_UDP);
}

/* IPv4, UDP to 4791, BTH destination QP 1, a whole MAD. */
static void take_frame(const uint8_t *frame, size_t len, void *name)
{
	if (len >= MAD_AT + URO_MAD_LEN && frame[12] == 0x08 && frame[23] == 17 &&
	    frame[36] == 0x12 && frame[37] == 0xb7 && !frame[47] && !frame[48] && frame[49] == 1)
		check_mad(name, frame + MAD_AT);
}

static void read_capture(const char *dir, const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	CHECK_EQ(pcap_frames(path, take_frame, (void *)name), 0);
}

/* The answer to a REQ nobody listens for is the kernel's own (its fields:
 * the TID, the comm IDs, Message REJected and the reason). */
static void check_unheard(void)
{
	uint8_t rej[URO_MAD_LEN];
	struct uro_cm_mad ours, kernels;

	CHECK(have_req && have_rej);
	CHECK_EQ(uro_mad_unheard(first_req, rej), 1);
	CHECK_EQ(uro_cm_mad_parse(rej, &ours), 0);
	CHECK_EQ(uro_cm_mad_parse(kernel_rej, &kernels), 0);
	CHECK_EQ(ours.type, MSG_REJ);
	CHECK_EQ(ours.status, kernels.status);
	CHECK_EQ(ours.msg, kernels.msg);
	CHECK_EQ(ours.local_id, 0);
	CHECK_EQ(ours.remote_id, uro_get32(first_req + 24));
	CHECK_EQ(ours.tid, uro_get64(first_req + 8));
}

/* What the kernel drops, we drop: every mutation below is refused. */
static void check_malformed(void)
{
	static const struct {
		unsigned off;
		uint8_t value;
	} bad[] = {
	    {.off = 0, .value = 2},	 /* base version */
	    {.off = 2, .value = 1},	 /* class version 1: no agent takes it */
	    {.off = 3, .value = 0x81},	 /* a response method */
	    {.off = 17, .value = 0x19},	 /* LAP: unused on RoCE */
	    {.off = 164, .value = 0x10}, /* cma_hdr version */
	    {.off = 165, .value = 0x50}, /* IP version 5 */
	    {.off = 74, .value = 0x77},	 /* path MTU 7 */
	    {.off = 67, .value = 0xa6},	 /* transport type 3 */
	};
	uint8_t mad[URO_MAD_LEN];
	struct uro_cm_mad m;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(mad, first_req, sizeof(mad));
		mad[bad[i].off] = bad[i].value;
		CHECK_EQ(uro_cm_mad_parse(mad, &m), -1);
	}
	memcpy(mad, first_req, sizeof(mad));
	mad[56] = mad[57] = 0, mad[58] = 1; /* QP 1 is no data QP */
	CHECK_EQ(uro_cm_mad_parse(mad, &m), -1);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "tests/data/roce-captures/cm";
	static const char *const names[] = {"rping_cm.pcap", "ucmatose.pcap", "udaddy.pcap",
					    "cmtime.pcap", "reject_no_listener.pcap"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		read_capture(dir, names[i]);
	for (int t = MSG_REQ; t <= MSG_SIDR_REP; t++) {
		if (!seen[t])
			fprintf(stderr, "no message of type %d in the captures\n", t);
		CHECK(seen[t] > 0);
	}
	check_unheard();
	check_malformed();
	printf("%d passed, %d failed\n", check_passed, check_failed);
	return check_failed != 0;
}
