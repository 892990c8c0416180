/* The socket buffers that bound the wire path's window: a receiver's UDP
 * socket must hold every packet in flight towards it, or the kernel drops
 * them and the requester goes back on its ACK timeout. */
#ifndef URO_SOCKET_BUFFER_H
#define URO_SOCKET_BUFFER_H

/* Bytes an RC requester sends unacknowledged: half of what the peer's
 * receive buffer holds of them. An unprivileged process cannot raise its
 * socket buffers past net.core.rmem_max (208 KiB by default; the kernel
 * doubles it, SO_RCVBUF reads 425,984), and the kernel charges each
 * datagram its truesize. bench/rcvbuf_hold measured what such a buffer
 * holds: 191 KB of packets of path MTU 1024 (1,040 bytes) sent one a
 * datagram, 2.2 bytes of buffer a byte (205 KB at MTU 4096); 387 KB when
 * they were sent with UDP GSO and arrive GRO coalesced, 1.1 a byte (370 KB
 * at MTU 4096), and 236 KB when a receiver without UDP_GRO has the kernel
 * cut them again (354 KB at MTU 4096). So a requester whose bursts leave
 * as GSO messages keeps 160 KiB in flight, one that sends each packet
 * alone (faults, a trace, GSO refused) 48 KiB: either fits twice into the
 * buffer of a receiver that coalesces, and once into one that does not.
 * Wider was faster still for one QP (256 KiB: ib_write_bw 64 KiB at MTU
 * 9000 3.6 GB/s against 2.6) but leaves a second flow into the same
 * buffer nothing. */
#define URO_WIRE_WINDOW_BYTES	  (48u << 10)
#define URO_WIRE_GSO_WINDOW_BYTES (160u << 10)
/* What a receiving socket asks for, and the least it needs for one
 * window, in the kernel's accounting (SO_RCVBUF as getsockopt reports it). */
#define URO_WIRE_RCVBUF_WANT (4 << 20)
#define URO_WIRE_RCVBUF_NEED (2 * (int)URO_WIRE_GSO_WINDOW_BYTES)

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
