#include "opcode.h"

static const struct uro_opcode table[] = {
    [IBV_WR_SEND] = {URO_OP_SEND, 1, 1, 1, 0, 1, 0, IBV_WC_SEND, IBV_WC_RECV, 0},
    [IBV_WR_SEND_WITH_IMM] = {URO_OP_SEND, 1, 1, 1, 1, 1, 0, IBV_WC_SEND, IBV_WC_RECV, 0},
    [IBV_WR_RDMA_WRITE] = {URO_OP_WRITE, 1, 1, 0, 0, 0, 0, IBV_WC_RDMA_WRITE, IBV_WC_RECV,
			   IBV_ACCESS_REMOTE_WRITE},
    [IBV_WR_RDMA_WRITE_WITH_IMM] = {URO_OP_WRITE, 1, 1, 0, 1, 1, 0, IBV_WC_RDMA_WRITE,
				    IBV_WC_RECV_RDMA_WITH_IMM, IBV_ACCESS_REMOTE_WRITE},
    [IBV_WR_RDMA_READ] = {URO_OP_READ, 1, 0, 0, 0, 0, 0, IBV_WC_RDMA_READ, IBV_WC_RECV,
			  IBV_ACCESS_REMOTE_READ},
    [IBV_WR_ATOMIC_CMP_AND_SWP] = {URO_OP_ATOMIC, 1, 0, 0, 0, 0, 0, IBV_WC_COMP_SWAP, IBV_WC_RECV,
				   IBV_ACCESS_REMOTE_ATOMIC},
    [IBV_WR_ATOMIC_FETCH_AND_ADD] = {URO_OP_ATOMIC, 1, 0, 0, 0, 0, 0, IBV_WC_FETCH_ADD, IBV_WC_RECV,
				     IBV_ACCESS_REMOTE_ATOMIC},
    /* Send with Invalidate is an RC operation (IBTA 10.6.7.2.3). */
    [IBV_WR_SEND_WITH_INV] = {URO_OP_SEND, 1, 0, 0, 0, 1, 1, IBV_WC_SEND, IBV_WC_RECV, 0},
    [IBV_WR_BIND_MW] = {URO_OP_BIND_MW, 1, 1, 0, 0, 0, 0, IBV_WC_BIND_MW, IBV_WC_RECV, 0},
    [IBV_WR_LOCAL_INV] = {URO_OP_LOCAL_INV, 1, 1, 0, 0, 0, 0, IBV_WC_LOCAL_INV, IBV_WC_RECV, 0},
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
	case IBV_QPT_UC:
		return o->uc;
	case IBV_QPT_UD:
		return o->ud;
	default:
		return 0;
	}
}
