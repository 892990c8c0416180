/* A datagram that carries several RoCEv2 packets reaches a uroce QP whole:
 * a peer sends them with UDP GSO (udp(7), UDP_SEGMENT) and the kernel
 * hands them to the endpoint's UDP_GRO socket as one datagram, the size of
 * each in a cmsg. The endpoint splits it: every packet is parsed, checked
 * and delivered on its own, and a malformed one among them is dropped and
 * counted while its neighbours are delivered. This test sends, from a
 * plain UDP socket on lo, one GSO message of 8 UD SEND Only packets to a
 * UD QP on the wire (UROCE_TRANSPORT=roce), the 4th with a payload byte
 * flipped after its ICRC was computed; each ICRC covers the IPv4
 * identification the kernel's segmentation gives its segment (wire_burst.c).
 * It checks that the 7 others arrive, in order, and what `uroce stat`
 * counts: one GRO datagram, 8 packets received, 1 bad ICRC. Before the
 * endpoint split datagrams, its receive buffers held one packet and the
 * coalesced datagram was dropped as truncated. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../check.h"
#include "icrc.h"
#include "packet.h"
#include "pair.h"
#include "stat_read.h"
#include "wire_opcode.h"

#define QKEY	 0x11111111u
#define NPKT	 8
#define BAD	 3
#define PAYLOAD	 200
#define GRH_SIZE 40

static struct side S;
static const struct ibv_qp_cap CAP = {
    .max_send_wr = 4, .max_recv_wr = NPKT, .max_send_sge = 1, .max_recv_sge = 1};

/* Packet k, BTH to ICRC, at out; its ICRC computed over the headers the
 * kernel gives segment k of a message from port sport. Returns its length. */
static size_t build(uint8_t *out, unsigned k, uint16_t sport)
{
	uint8_t ip[URO_ROCE_IPV4_UDP_LEN + 512], payload[PAYLOAD];
	struct uro_roce_packet p = {.opcode = 0x64 /* UD SEND Only */,
				    .pkey = 0xffff,
				    .dest_qp = S.qp->qp_num,
				    .psn = k,
				    .payload_len = PAYLOAD};
	uint32_t lo = htonl(INADDR_LOOPBACK);
	size_t tlen;

	memset(payload, 'a' + (int)k, sizeof(payload));
	p.op = uro_wire_opcode(p.opcode);
	p.deth.qkey = QKEY;
	p.deth.src_qp = 0x123;
	p.payload = payload;
	tlen = uro_roce_build(&p, ip + URO_ROCE_IPV4_UDP_LEN);
	uro_roce_ipv4_udp(ip, lo, lo, sport, tlen + URO_ROCE_ICRC_LEN);
	ip[4] = 0; /* the identification: segment k's */
	ip[5] = (uint8_t)k;
	uro_roce_icrc_put(ip, 20, URO_ROCE_IPV4_UDP_LEN + tlen);
	if (k == BAD)
		ip[URO_ROCE_IPV4_UDP_LEN + tlen - 1] ^= 0x40;
	memcpy(out, ip + URO_ROCE_IPV4_UDP_LEN, tlen + URO_ROCE_ICRC_LEN);
	return tlen + URO_ROCE_ICRC_LEN;
}

/* The 8 packets as one message, cut by the kernel every seg bytes. */
static void send_gso(int fd, uint16_t sport)
{
	static uint8_t data[NPKT * 512];
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons(URO_ROCE_PORT),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	char ctl[CMSG_SPACE(sizeof(uint16_t))] = {0};
	struct iovec iov = {data, 0};
	struct msghdr h = {.msg_name = &to,
			   .msg_namelen = sizeof(to),
			   .msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = ctl,
			   .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&h);
	uint16_t seg = 0;

	for (unsigned k = 0; k < NPKT; k++) {
		seg = (uint16_t)build(data + iov.iov_len, k, sport);
		iov.iov_len += seg;
	}
	c->cmsg_level = SOL_UDP;
	c->cmsg_type = UDP_SEGMENT;
	c->cmsg_len = CMSG_LEN(sizeof(seg));
	memcpy(CMSG_DATA(c), &seg, sizeof(seg));
	CHECK_EQ(sendmsg(fd, &h, 0), (ssize_t)iov.iov_len);
}

static void receive(int fd, uint16_t sport)
{
	char line[4096];
	struct ibv_wc wc;
	unsigned k = 0;

	for (int i = 0; i < NPKT; i++)
		CHECK_EQ(post_recv_buf(&S, (uint64_t)i, S.buf + i * 1024, 1024), 0);
	send_gso(fd, sport);
	for (int i = 0; i < NPKT - 1; i++, k++) {
		const uint8_t *got = S.buf + i * 1024 + GRH_SIZE;

		CHECK_EQ(poll_one(S.cq, &wc), 1);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, (uint64_t)i);
		CHECK_EQ(wc.byte_len, GRH_SIZE + PAYLOAD);
		k += k == BAD; /* the corrupt one took no receive */
		CHECK_EQ(got[0], 'a' + k);
		CHECK_EQ(got[PAYLOAD - 1], 'a' + k);
	}
	stat_line("uroce0", "link uroce0/1 ", line, sizeof(line));
	fputs(line, stdout);
	CHECK_EQ(field(line, "gro_msgs"), 1);
	CHECK_EQ(field(line, "rcvd_pkts"), NPKT);
	CHECK_EQ(field(line, "drop_bad_icrc"), 1);
	CHECK_EQ(field(line, "drop_truncated"), 0);
}

int main(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	CHECK(fd >= 0);
	CHECK_EQ(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	CHECK_EQ(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	setenv("UROCE_TRANSPORT", "roce", 1); /* the UD QP listens on the wire */
	CHECK_EQ(side_open(&S, IBV_QPT_UD, 16, CAP), 0);
	if (check_failed)
		return check_report();
	CHECK_EQ(qp_connect(S.qp, 0, 0, 0), 0);
	RUN(receive(fd, a.sin_port), 30);
	close(fd);
	side_close(&S);
	return check_report();
}
