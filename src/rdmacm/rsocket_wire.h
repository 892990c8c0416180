/* What an rsocket puts on the wire: rdma-core's librdmacm protocol
 * (its rsocket.c), so that an rsocket here and one on any other host with
 * rdma-core talk. docs/rsockets.md, "The protocol", says how it runs.
 *
 * Every message is an RDMA WRITE with immediate data; the immediate's top
 * three bits say what it is and the other 29 carry a number: a data
 * message's length, the sequence number up to which the sender may send
 * (credits), an iomap entry's index, or a control code. */
#ifndef URO_RSOCKET_WIRE_H
#define URO_RSOCKET_WIRE_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#define RS_WIRE_VERSION 1
#define RS_CONN_NET	(1u << 0) /* the sender's table entries are big-endian */
#define RS_CONN_IOMAP	(1u << 1) /* the sender has an iomap table after its SGL */
#define RS_SGL_ENTRIES	2	  /* grants a sender holds: the halves of the ring */
#define RS_CTRL_MAX	4	  /* control messages in flight at most */
#define RS_SNDLOWAT	2048	  /* send room a data message waits for */
#define RS_OLAP_START	2048	  /* a send's first message; each next one doubles */
#define RS_MAX_TRANSFER (64u << 10)
#define RS_IMM_DATA	0x1fffffffu
/* On AF_IB, librdmacm puts rdma_cm's own header (its cma.h, struct
 * ib_connect_hdr) ahead of a REQ's connection data. */
#define RS_AF_IB_HDR 36

enum rs_op {
	RS_OP_DATA = 0,	     /* stream bytes at the granted place; data: their length */
	RS_OP_SGL = 4,	     /* a grant (16 bytes, or none); data: the send limit */
	RS_OP_IOMAP_SGL = 6, /* an iomap entry (24 bytes); data: its index */
	RS_OP_CTRL = 7,	     /* data: enum rs_ctrl */
};

enum rs_ctrl {
	RS_CTRL_DISCONNECT = 0, /* the sender neither sends nor receives any more */
	RS_CTRL_KEEPALIVE = 1,
	RS_CTRL_SHUTDOWN = 2, /* the sender sends no more */
};

static inline uint32_t rs_imm(enum rs_op op, uint32_t data)
{
	return (uint32_t)op << 29 | (data & RS_IMM_DATA);
}

/* A piece of memory the peer may write. In the connection data its fields
 * are big-endian; in a grant or an iomap entry, in the reader's order
 * (the writer swaps when the RS_CONN_NET flags differ). */
struct rs_sge {
	uint64_t addr;
	uint32_t key;
	uint32_t length;
};

/* The private data of the CM's REQ and REP (after a struct ib_connect_hdr
 * on AF_IB). */
struct rs_conn_data {
	uint8_t version;
	uint8_t flags;
	uint16_t credits; /* data messages the sender takes before it grants more */
	uint8_t reserved[3];
	uint8_t iomap_size;	  /* the sender's iomap table: rs_iomap_size_of() */
	struct rs_sge target_sgl; /* its table: grants go there; length: their number */
	struct rs_sge data_buf;	  /* the first grant: its ring's first half */
};

/* An iomap table entry: the region riowrite's offset names. */
struct rs_iomap_entry {
	uint64_t offset;
	struct rs_sge sge;
};

static_assert(sizeof(struct rs_sge) == 16, "rs_sge is 16 bytes on the wire");
static_assert(sizeof(struct rs_conn_data) == 40, "rs_conn_data is 40 bytes on the wire");
static_assert(sizeof(struct rs_iomap_entry) == 24, "an iomap entry is 24 bytes");

/* The iomap table's size in one byte: exact to 128, then in steps of 256
 * (the top bit set, the rest the multiple). */
static inline uint8_t rs_iomap_scale(unsigned n)
{
	return n <= 128 ? (uint8_t)n : (uint8_t)(0x80 | ((n >> 8) & 0x7f));
}

static inline unsigned rs_iomap_size_of(uint8_t scale)
{
	return scale <= 128 ? scale : (unsigned)(scale & 0x7f) << 8;
}

/* Datagram rsockets (librdmacm's ds_* and udp_svc_*): a datagram to an
 * address whose QP is not known goes over UDP behind a ds_udp_header
 * (RS_OP_DATA; the answer, RS_OP_CTRL, is the header alone), then as a UD
 * SEND behind a ds_header. */
#define RSD_UDP_TAG 0x55555555u /* DS_UDP_TAG: a ds_udp_header's first word */
#define RSD_HDR4    8		/* DS_IPV4_HDR_LEN */
#define RSD_HDR6    24		/* DS_IPV6_HDR_LEN */
#define RSD_UDP4    16		/* DS_UDP_IPV4_HDR_LEN */
#define RSD_UDP6    28		/* DS_UDP_IPV6_HDR_LEN */
#define RSD_MSG	    RS_SNDLOWAT /* a peer's UD receive, after the GRH, and its UDP read */

/* ds_header: ahead of each datagram a UD SEND carries, its sender's UDP
 * address, which the receiver reports and answers to. */
struct rsd_hdr {
	uint8_t version; /* 4 or 6 */
	uint8_t length;	 /* RSD_HDR4 or RSD_HDR6 */
	uint16_t port;	 /* network order */
	union {
		uint32_t ipv4;
		struct {
			uint32_t flowinfo;
			uint8_t addr[16];
		} ipv6;
	} addr;
};

/* ds_udp_header: ahead of a datagram over UDP (RS_OP_DATA), or alone as
 * the answer (RS_OP_CTRL); qpn is the sender's UD QP. */
struct rsd_udp_hdr {
	uint32_t tag;
	uint8_t version, op, length, reserved;
	uint32_t qpn; /* the low 24 bits */
	uint8_t addr[16];
};

static_assert(offsetof(struct rsd_hdr, addr) == 4 && sizeof(struct rsd_hdr) == RSD_HDR6,
	      "ds_header's layout");
static_assert(offsetof(struct rsd_udp_hdr, addr) == 12 && sizeof(struct rsd_udp_hdr) == RSD_UDP6,
	      "ds_udp_header's layout");

#endif
