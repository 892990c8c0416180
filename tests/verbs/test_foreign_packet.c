/* A packet from another RoCE stack reaches a uroce QP: Linux rxe numbers
 * the IPv4 identification of its packets, which the ICRC covers (Annex
 * A17.8) and a UDP socket never shows, so the endpoint finds the ID that
 * makes the ICRC right (icrc.h). Before, every such packet was dropped as
 * a bad ICRC, and no rxe peer could talk to uroce. This test sends, from a
 * raw socket, a UD SEND carrying identification 0x4321 to a UD QP on the
 * wire (UROCE_TRANSPORT=roce on lo) and checks it is received, and that
 * the same packet with a payload byte flipped is not. Needs root for the
 * raw socket; skipped with a message otherwise. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../check.h"
#include "icrc.h"
#include "packet.h"
#include "pair.h"
#include "wire_opcode.h"

#define QKEY	0x11111111u
#define PAYLOAD "a datagram from a RoCE stack that numbers its packets"

static struct side S;
static const struct ibv_qp_cap CAP = {
    .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1};

/* The UD SEND Only, IPv4 header and ICRC included, as rxe would send it. */
static size_t build(uint8_t *buf, int corrupt)
{
	struct uro_roce_packet p = {.opcode = 0x64 /* UD SEND Only */,
				    .pkey = 0xffff,
				    .dest_qp = S.qp->qp_num,
				    .psn = 7,
				    .payload_len = sizeof(PAYLOAD)};
	uint32_t lo = htonl(INADDR_LOOPBACK);
	size_t tlen;

	p.op = uro_wire_opcode(p.opcode);
	p.deth.qkey = QKEY;
	p.deth.src_qp = 0x123;
	p.payload = (const uint8_t *)PAYLOAD;
	tlen = uro_roce_build(&p, buf + URO_ROCE_IPV4_UDP_LEN);
	uro_roce_ipv4_udp(buf, lo, lo, htons(0xc123), tlen + URO_ROCE_ICRC_LEN);
	buf[4] = 0x43; /* the identification */
	buf[5] = 0x21;
	uro_roce_icrc_put(buf, 20, URO_ROCE_IPV4_UDP_LEN + tlen);
	buf[URO_ROCE_IPV4_UDP_LEN + tlen - 1] ^= corrupt ? 0x40 : 0;
	uro_roce_ipv4_checksum(buf);
	return URO_ROCE_IPV4_UDP_LEN + tlen + URO_ROCE_ICRC_LEN;
}

static void send_raw(int fd, int corrupt)
{
	uint8_t buf[512];
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	size_t len = build(buf, corrupt);

	CHECK_EQ(sendto(fd, buf, len, 0, (struct sockaddr *)&to, sizeof(to)), (ssize_t)len);
}

static void receive(int fd)
{
	struct ibv_wc wc;

	CHECK_EQ(post_recv_buf(&S, 1, S.buf, 1024), 0);
	CHECK_EQ(post_recv_buf(&S, 2, S.buf + 1024, 1024), 0);
	send_raw(fd, 1); /* dropped: no ID makes its ICRC right */
	send_raw(fd, 0);
	CHECK_EQ(poll_one(S.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 1); /* the first receive: the corrupt packet took none */
	CHECK_EQ(wc.src_qp, 0x123);
	CHECK_EQ(wc.byte_len, 40 + sizeof(PAYLOAD));
	CHECK_STR((const char *)S.buf + 40, PAYLOAD);
}

int main(void)
{
	int fd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);

	if (fd < 0) {
		printf("SKIP: a raw socket needs root\n");
		return 0;
	}
	setenv("UROCE_TRANSPORT", "roce", 1); /* the UD QP listens on the wire */
	CHECK_EQ(side_open(&S, IBV_QPT_UD, 8, CAP), 0);
	if (check_failed)
		return check_report();
	CHECK_EQ(qp_connect(S.qp, 0, 0, 0), 0);
	RUN(receive(fd), 30);
	close(fd);
	side_close(&S);
	return check_report();
}
