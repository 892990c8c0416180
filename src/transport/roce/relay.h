/* How a RoCEv2 packet that the kernel gave to the wrong uroce process of
 * the host reaches the right one (docs/architecture.md, "UDP port 4791
 * shared by many processes"): each process listens on its registry
 * slot's abstract unix name (registry.h), and the process that received a
 * packet for another slot's QP passes it over a connection to that name,
 * kept open while both live.
 *
 * Connected SOCK_SEQPACKET, not unconnected datagrams: the kernel queues
 * at most net.unix.max_dgram_qlen (10 by default, root to change)
 * datagrams for an unconnected receiver, fewer than one window of an RC
 * QP, while a connection is bounded only by its send buffer. */
#ifndef URO_RELAY_H
#define URO_RELAY_H

#include <stddef.h>
#include <sys/uio.h>

/* A local user could open connections without end: past this many, new
 * ones are closed at once. One per process of the host is enough. */
#define URO_RELAY_MAX_IN 256

struct uro_wire_relay {
	int lfd;		  /* listening on the slot's name */
	int efd;		  /* epoll over lfd and the connections accepted */
	int in[URO_RELAY_MAX_IN]; /* the connections accepted, or -1 */
	int *out;		  /* by slot: this process's connection to it, or -1 */
};

/* Listens on the slot's socket (struct uro_slot's sock): 0, or -1 and
 * errno. */
int uro_relay_open(struct uro_wire_relay *r, int slot_sock);
void uro_relay_close(struct uro_wire_relay *r);

/* Passes the packet in iov[0..n) to slot: 0, or -1 when nobody listens
 * there or its connection is full (the packet is lost, as on a wire). */
int uro_relay_send(struct uro_wire_relay *r, unsigned slot, const struct iovec *iov, int n);

/* Takes up to max packets passed to this process, each into iov[0..n)
 * and then to fn with its length (MSG_TRUNC'd ones with 0); returns how
 * many. Never blocks. */
int uro_relay_receive(struct uro_wire_relay *r, const struct iovec *iov, int n, int max,
		      void (*fn)(void *arg, size_t len), void *arg);

#endif
