/* The RoCEv2 wire opcodes (IBTA 9.2, Table 35; Annex A17): for each BTH
 * opcode, the operation, the transports that may carry it, its place in a
 * message, the extension headers that follow the BTH and whether it
 * carries payload. One table drives both the packet builder and the
 * parser (packet.c). */
#ifndef URO_WIRE_OPCODE_H
#define URO_WIRE_OPCODE_H

#include <stdint.h>

enum uro_wire_qp { WIRE_RC = 1 << 0, WIRE_UC = 1 << 1, WIRE_UD = 1 << 2, WIRE_XRC = 1 << 3 };

enum uro_wire_op {
	WIRE_SEND,
	WIRE_WRITE,
	WIRE_READ_REQ,
	WIRE_READ_RESP,
	WIRE_ACK,
	WIRE_ATOMIC_ACK,
	WIRE_CMP_SWAP,
	WIRE_FETCH_ADD,
	WIRE_ATOMIC_WRITE,
};

/* A packet's place in its message (IBTA 9.8.3): ONLY is FIRST and LAST. */
enum uro_wire_pos {
	WIRE_FIRST = 1 << 0,
	WIRE_MIDDLE = 1 << 1,
	WIRE_LAST = 1 << 2,
	WIRE_ONLY = WIRE_FIRST | WIRE_LAST,
};

/* Extension headers, in the order they follow the BTH (IBTA 9.2). */
enum uro_wire_hdr {
	HDR_DETH = 1 << 0,	     /* 8: Q_Key, source QP */
	HDR_XRCETH = 1 << 1,	     /* 4: the XRC SRQ a request is for (Annex A14) */
	HDR_RETH = 1 << 2,	     /* 16: VA, R_Key, DMA length */
	HDR_ATOMIC_ETH = 1 << 3,     /* 28: VA, R_Key, swap/add, compare */
	HDR_AETH = 1 << 4,	     /* 4: syndrome, MSN */
	HDR_ATOMIC_ACK_ETH = 1 << 5, /* 8: original remote data */
	HDR_IMMDT = 1 << 6,	     /* 4: immediate data */
	HDR_IETH = 1 << 7,	     /* 4: R_Key to invalidate */
};

struct uro_wire_opcode {
	const char *name; /* NULL: not an opcode uroce speaks */
	enum uro_wire_op op;
	uint8_t qp;	 /* enum uro_wire_qp: the transport bits 7-5 name */
	uint8_t pos;	 /* enum uro_wire_pos */
	uint8_t hdrs;	 /* enum uro_wire_hdr */
	uint8_t payload; /* may carry payload */
};

/* The row of a BTH opcode; its name is NULL when uroce does not speak it. */
const struct uro_wire_opcode *uro_wire_opcode(uint8_t code);

/* The opcode of the row with this operation, transport and place whose
 * optional headers (HDR_IMMDT, HDR_IETH) are exactly extra; -1 if none. */
int uro_wire_code(enum uro_wire_op op, enum uro_wire_qp qp, enum uro_wire_pos pos, uint8_t extra);

/* Bytes of the extension headers in hdrs. */
unsigned uro_wire_hdrs_len(uint8_t hdrs);

#endif
