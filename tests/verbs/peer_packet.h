/* A RoCEv2 peer played by the test: a packet built from its fields and
 * sent from a plain UDP socket fd to port 4791 on 127.0.0.1, with the ICRC
 * of the headers the endpoint rebuilds from the socket's address (IPv4
 * identification 0, Annex A17.8); a uroce RC QP connected to it at
 * PEER_IP; and what that QP sends it. For tests linked with uroce_roce. */
#ifndef URO_TEST_PEER_PACKET_H
#define URO_TEST_PEER_PACKET_H

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "icrc.h"
#include "packet.h"
#include "wire_opcode.h"

/* Sends p (its op looked up from its opcode) as from fd, bound to
 * src:sport (network order); the bytes sent, or -1. */
static inline ssize_t peer_send(int fd, struct uro_roce_packet *p, uint32_t src, uint16_t sport)
{
	uint8_t ip[URO_ROCE_IPV4_UDP_LEN + 64 + 4096 + URO_ROCE_ICRC_LEN];
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons(URO_ROCE_PORT),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	size_t tlen;

	p->op = uro_wire_opcode(p->opcode);
	if (p->payload_len > 4096)
		return -1;
	tlen = uro_roce_build(p, ip + URO_ROCE_IPV4_UDP_LEN);
	uro_roce_ipv4_udp(ip, src, to.sin_addr.s_addr, sport, tlen + URO_ROCE_ICRC_LEN);
	uro_roce_icrc_put(ip, 20 /* the IPv4 header */, URO_ROCE_IPV4_UDP_LEN + tlen);
	return sendto(fd, ip + URO_ROCE_IPV4_UDP_LEN, tlen + URO_ROCE_ICRC_LEN, 0,
		      (struct sockaddr *)&to, sizeof(to));
}

#define PEER_IP 0x7f000002 /* 127.0.0.2, on lo */

/* The peer's socket, PEER_IP:4791; -1 if it could not be bound. */
static inline int peer_socket(void)
{
	struct sockaddr_in at = {.sin_family = AF_INET,
				 .sin_port = htons(URO_ROCE_PORT),
				 .sin_addr.s_addr = htonl(PEER_IP)};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd >= 0 && bind(fd, (struct sockaddr *)&at, sizeof(at))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* RTS towards peer_qpn at PEER_IP, first PSN sq_psn, 7 retries, the
 * remote access given (0: none). */
static inline int peer_connect(struct ibv_qp *qp, uint32_t peer_qpn, uint32_t sq_psn,
			       unsigned access)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = access};

	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer_qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.grh.dgid.raw[10] = a.ah_attr.grh.dgid.raw[11] = 0xff;
	a.ah_attr.grh.dgid.raw[12] = PEER_IP >> 24;
	a.ah_attr.grh.dgid.raw[15] = PEER_IP & 0xff;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14; /* 67 ms: the answers here come long before */
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = sq_psn;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* The next packet that reaches the peer's socket fd within ms: its
 * opcode, with its PSN in *psn; -1 if none came. */
static inline int peer_next(int fd, uint32_t *psn, int ms)
{
	uint8_t bth[4200];
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ssize_t n;

	if (poll(&p, 1, ms) != 1 || (n = recv(fd, bth, sizeof(bth), 0)) < URO_ROCE_BTH_LEN)
		return -1;
	*psn = (uint32_t)bth[9] << 16 | bth[10] << 8 | bth[11];
	return bth[0];
}

#endif
