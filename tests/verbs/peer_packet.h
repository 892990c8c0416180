/* A RoCEv2 peer played by the test: a packet built from its fields and
 * sent from a plain UDP socket fd to port 4791 on 127.0.0.1, with the ICRC
 * of the headers the endpoint rebuilds from the socket's address (IPv4
 * identification 0, Annex A17.8). For tests linked with uroce_roce. */
#ifndef URO_TEST_PEER_PACKET_H
#define URO_TEST_PEER_PACKET_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

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

#endif
