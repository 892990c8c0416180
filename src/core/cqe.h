/* A completion as it sits in a CQ ring in the segment. A producer (this
 * process or, intra-host, a peer's library acting as the NIC) fills an entry
 * and then publishes it by advancing the ring's tail; the owner consumes
 * from head.
 *
 * The first cache line is the completion. The second carries the payload of
 * a small SEND that the sender did not copy itself: the owner places it in
 * its receive buffer when it polls the entry (staged_payload.h). */
#ifndef URO_CQE_H
#define URO_CQE_H

#include <stdint.h>

struct uro_cqe {
	uint64_t wr_id;
	uint32_t status; /* enum ibv_wc_status */
	uint32_t opcode; /* enum ibv_wc_opcode */
	uint32_t vendor_err;
	uint32_t byte_len;
	uint32_t imm_data; /* network order, as ibv_wc carries it */
	uint32_t qp_num;
	uint32_t src_qp;
	uint32_t wc_flags;
	uint16_t pkey_index;
	uint16_t slid;
	uint8_t sl;
	uint8_t dlid_path_bits;
	uint16_t staged_len; /* payload bytes in staged[]; 0 = none */
	uint32_t sq_seq;     /* send completions: which send WQE this retires */
	uint32_t seq;	     /* ring position + 1 once the entry is written */
	uint32_t staged_lkey;
	/* second cache line: read only when staged_len is set */
	uint64_t staged_addr;
	uint8_t staged[56];
};

#define URO_STAGED_MAX 56

/* The status of an entry its QP's reset purged: the poll skips it, as a
 * provider removes a reset QP's completions from its CQs. */
#define URO_CQE_DISCARDED 0xffffu

_Static_assert(sizeof(struct uro_cqe) == 128, "CQE: the completion, then a staged payload");
_Static_assert(sizeof(((struct uro_cqe *)0)->staged) == URO_STAGED_MAX, "staged payload size");

#endif
