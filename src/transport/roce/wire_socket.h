/* The sockets of a RoCEv2 endpoint: see wire_socket.c. */
#ifndef URO_WIRE_SOCKET_H
#define URO_WIRE_SOCKET_H

#include <stdint.h>

#include "wire.h"

/* The family of a GID's address (IPv4-mapped or IPv6). */
enum uro_wire_family uro_wire_family_of(const union ibv_gid *gid);

/* The link's first address of family f, as its GID: -1 for none. */
int uro_wire_link_addr(const struct uro_device_model *m, enum uro_wire_family f,
		       union ibv_gid *gid);

/* The socket address of gid's address and port (ifindex for a link-local
 * IPv6 one). */
void uro_wire_dest_of(const union ibv_gid *gid, uint16_t port, unsigned ifindex,
		      struct uro_wire_dest *d);

/* The receiving socket of family f on gid's address, port 4791: an fd, or
 * -1 and errno. */
int uro_wire_udp_socket(enum uro_wire_family f, const union ibv_gid *gid, unsigned ifindex);

/* A receiving socket like uro_wire_udp_socket's, connected to one flow:
 * the peer's address and UDP source port (network order). The kernel
 * gives that flow's datagrams to it before any unconnected socket of the
 * port. An fd, or -1 and errno. */
int uro_wire_flow_socket(enum uro_wire_family f, const union ibv_gid *gid, unsigned ifindex,
			 const union ibv_gid *peer, uint16_t sport);

/* A sending socket from an ephemeral port of gid's address (its port in
 * *port): an fd, or -1 and errno. */
int uro_wire_tx_socket(enum uro_wire_family f, const union ibv_gid *gid, unsigned ifindex,
		       uint16_t *port);

void uro_wire_socks_close(struct uro_wire_socks *s);

/* Adds fd to the endpoint's receive set efd (epoll), reported as what:
 * 0, or -1 and errno. */
int uro_wire_watch(int efd, int fd, uint32_t what);

#endif
