/* The socket buffers that bound the wire path's window: a receiver's UDP
 * socket must hold every packet in flight towards it, or the kernel drops
 * them and the requester goes back on its ACK timeout. */
#ifndef URO_SOCKET_BUFFER_H
#define URO_SOCKET_BUFFER_H

/* Bytes an RC requester sends unacknowledged. An unprivileged process
 * cannot raise its socket buffers past net.core.rmem_max (208 KiB by
 * default), and a datagram costs about twice its size there. */
#define URO_WIRE_WINDOW_BYTES (48u << 10)
/* What a receiving socket asks for, and the least it needs for one
 * window, in the kernel's accounting (SO_RCVBUF as getsockopt reports it). */
#define URO_WIRE_RCVBUF_WANT (4 << 20)
#define URO_WIRE_RCVBUF_NEED (2 * (int)URO_WIRE_WINDOW_BYTES)

struct uro_sockbuf_limits {
	long rmem_max, wmem_max; /* net.core.*; -1 unreadable */
};

void uro_sockbuf_limits(struct uro_sockbuf_limits *l);

/* Asks for want bytes of receive buffer, past rmem_max where the process
 * may (CAP_NET_ADMIN), and returns what the kernel gave, or -1. */
int uro_sockbuf_grow_rcv(int fd, int want);

/* Whether a receive buffer of got bytes (as getsockopt reports it) holds
 * one window. */
int uro_sockbuf_enough(int got);

#endif
