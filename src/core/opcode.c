#include "opcode.h"

/* One row per work-request opcode, as IBTA 9.2's opcode table and 11.4.1.1
 * list them. */
static const struct uro_opcode table[] = {
    [IBV_WR_SEND] = {.kind = URO_OP_SEND,
		     .rc = 1,
		     .xrc = 1,
		     .uc = 1,
		     .ud = 1,
		     .consumes_recv = 1,
		     .wc = IBV_WC_SEND,
		     .recv_wc = IBV_WC_RECV},
    [IBV_WR_SEND_WITH_IMM] = {.kind = URO_OP_SEND,
			      .rc = 1,
			      .xrc = 1,
			      .uc = 1,
			      .ud = 1,
			      .imm = 1,
			      .consumes_recv = 1,
			      .wc = IBV_WC_SEND,
			      .recv_wc = IBV_WC_RECV},
    [IBV_WR_RDMA_WRITE] = {.kind = URO_OP_WRITE,
			   .rc = 1,
			   .xrc = 1,
			   .uc = 1,
			   .wc = IBV_WC_RDMA_WRITE,
			   .recv_wc = IBV_WC_RECV,
			   .remote_access = IBV_ACCESS_REMOTE_WRITE},
    [IBV_WR_RDMA_WRITE_WITH_IMM] = {.kind = URO_OP_WRITE,
				    .rc = 1,
				    .xrc = 1,
				    .uc = 1,
				    .imm = 1,
				    .consumes_recv = 1,
				    .wc = IBV_WC_RDMA_WRITE,
				    .recv_wc = IBV_WC_RECV_RDMA_WITH_IMM,
				    .remote_access = IBV_ACCESS_REMOTE_WRITE},
    [IBV_WR_RDMA_READ] = {.kind = URO_OP_READ,
			  .rc = 1,
			  .xrc = 1,
			  .wc = IBV_WC_RDMA_READ,
			  .recv_wc = IBV_WC_RECV,
			  .remote_access = IBV_ACCESS_REMOTE_READ},
    [IBV_WR_ATOMIC_CMP_AND_SWP] = {.kind = URO_OP_ATOMIC,
				   .rc = 1,
				   .xrc = 1,
				   .wc = IBV_WC_COMP_SWAP,
				   .recv_wc = IBV_WC_RECV,
				   .remote_access = IBV_ACCESS_REMOTE_ATOMIC},
    [IBV_WR_ATOMIC_FETCH_AND_ADD] = {.kind = URO_OP_ATOMIC,
				     .rc = 1,
				     .xrc = 1,
				     .wc = IBV_WC_FETCH_ADD,
				     .recv_wc = IBV_WC_RECV,
				     .remote_access = IBV_ACCESS_REMOTE_ATOMIC},
    /* Send with Invalidate is an RC operation (IBTA 10.6.7.2.3). */
    [IBV_WR_SEND_WITH_INV] = {.kind = URO_OP_SEND,
			      .rc = 1,
			      .xrc = 1,
			      .consumes_recv = 1,
			      .inv = 1,
			      .wc = IBV_WC_SEND,
			      .recv_wc = IBV_WC_RECV},
    [IBV_WR_BIND_MW] = {.kind = URO_OP_BIND_MW,
			.rc = 1,
			.xrc = 1,
			.uc = 1,
			.wc = IBV_WC_BIND_MW,
			.recv_wc = IBV_WC_RECV},
    [IBV_WR_LOCAL_INV] = {.kind = URO_OP_LOCAL_INV,
			  .rc = 1,
			  .xrc = 1,
			  .uc = 1,
			  .wc = IBV_WC_LOCAL_INV,
			  .recv_wc = IBV_WC_RECV},
    /* ATOMIC WRITE (IBTA 1.5, 9.4.6): 8 bytes written as one, an RC
     * operation that needs Remote Write access, as Soft-RoCE checks it;
     * RC's alone, as the kernel's opcode list (include/rdma/ib_pack.h)
     * has it: no XRC opcode carries it. */
    [IBV_WR_ATOMIC_WRITE] = {.kind = URO_OP_ATOMIC_WRITE,
			     .rc = 1,
			     .wc = IBV_WC_ATOMIC_WRITE,
			     .recv_wc = IBV_WC_RECV,
			     .remote_access = IBV_ACCESS_REMOTE_WRITE},
};

const struct uro_opcode *uro_opcode(enum ibv_wr_opcode op)
{
	if ((unsigned)op >= sizeof(table) / sizeof(table[0]) || table[op].kind == URO_OP_NONE)
		return NULL;
	return &table[op];
}

int uro_opcode_allowed(const struct uro_opcode *o, enum ibv_qp_type type)
{
	switch (type) {
	case IBV_QPT_RC:
		return o->rc;
	case IBV_QPT_XRC_SEND:
		return o->xrc;
	case IBV_QPT_UC:
		return o->uc;
	case IBV_QPT_UD:
		return o->ud;
	default:
		return 0;
	}
}
