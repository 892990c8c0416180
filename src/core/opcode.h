/* The send opcodes as a table (IBTA 9.2.x and 11.4.1.1; ibv_post_send(3)):
 * which QP types accept each, what each completes as on either side, what
 * access it needs at the target, and whether it consumes a receive. */
#ifndef URO_OPCODE_H
#define URO_OPCODE_H

#include <infiniband/verbs.h>

enum uro_op_kind {
	URO_OP_NONE,
	URO_OP_SEND,
	URO_OP_WRITE,
	URO_OP_READ,
	URO_OP_ATOMIC,
	URO_OP_ATOMIC_WRITE,
	URO_OP_BIND_MW,
	URO_OP_LOCAL_INV,
};

struct uro_opcode {
	enum uro_op_kind kind;
	unsigned char rc, uc, ud;    /* accepted on this QP type */
	unsigned char xrc;	     /* on an XRC initiator, which sends as RC does (IBTA A14) */
	unsigned char imm;	     /* carries immediate data */
	unsigned char consumes_recv; /* completes at the target */
	unsigned char inv;	     /* SEND_WITH_INV */
	enum ibv_wc_opcode wc;	     /* the requester's completion */
	enum ibv_wc_opcode recv_wc;  /* the responder's completion */
	unsigned remote_access;	     /* what the target MR must allow */
};

/* NULL for an opcode uroce does not execute. */
const struct uro_opcode *uro_opcode(enum ibv_wr_opcode op);
int uro_opcode_allowed(const struct uro_opcode *o, enum ibv_qp_type type);

#endif
