#include "wire_opcode.h"

#include <pthread.h>

#define RC_OP(n)  (0x00 | (n))
#define UC_OP(n)  (0x20 | (n))
#define XRC_OP(n) (0xa0 | (n))

/* IBTA 9.2, Table 35, the RC, UC, UD and XRC rows; bits 7-5 of the code are
 * the transport (000 RC, 001 UC, 011 UD, 101 XRC). One row a line, as the
 * spec's. XRC's are RC's with an XRCETH on every request (IBTA Annex
 * A14); its responses carry none. ATOMIC WRITE is RC's alone, as the
 * kernel's opcode list (include/rdma/ib_pack.h) has it. */
// clang-format off
static const struct uro_wire_opcode table[256] = {
    [RC_OP(0x00)] = {.name = "RC SEND first", .op = WIRE_SEND, .qp = WIRE_RC, .pos = WIRE_FIRST, .payload = 1},
    [RC_OP(0x01)] = {.name = "RC SEND middle", .op = WIRE_SEND, .qp = WIRE_RC, .pos = WIRE_MIDDLE, .payload = 1},
    [RC_OP(0x02)] = {.name = "RC SEND last", .op = WIRE_SEND, .qp = WIRE_RC, .pos = WIRE_LAST, .payload = 1},
    [RC_OP(0x03)] = {.name = "RC SEND last with immediate", .op = WIRE_SEND, .qp = WIRE_RC, .pos = WIRE_LAST, .hdrs = HDR_IMMDT, .payload = 1},
    [RC_OP(0x04)] = {.name = "RC SEND only", .op = WIRE_SEND, .qp = WIRE_RC, .pos = WIRE_ONLY, .payload = 1},
    [RC_OP(0x05)] = {.name = "RC SEND only with immediate", .op = WIRE_SEND, .qp = WIRE_RC, .pos = WIRE_ONLY, .hdrs = HDR_IMMDT, .payload = 1},
    [RC_OP(0x06)] = {.name = "RC RDMA WRITE first", .op = WIRE_WRITE, .qp = WIRE_RC, .pos = WIRE_FIRST, .hdrs = HDR_RETH, .payload = 1},
    [RC_OP(0x07)] = {.name = "RC RDMA WRITE middle", .op = WIRE_WRITE, .qp = WIRE_RC, .pos = WIRE_MIDDLE, .payload = 1},
    [RC_OP(0x08)] = {.name = "RC RDMA WRITE last", .op = WIRE_WRITE, .qp = WIRE_RC, .pos = WIRE_LAST, .payload = 1},
    [RC_OP(0x09)] = {.name = "RC RDMA WRITE last with immediate", .op = WIRE_WRITE, .qp = WIRE_RC, .pos = WIRE_LAST, .hdrs = HDR_IMMDT, .payload = 1},
    [RC_OP(0x0a)] = {.name = "RC RDMA WRITE only", .op = WIRE_WRITE, .qp = WIRE_RC, .pos = WIRE_ONLY, .hdrs = HDR_RETH, .payload = 1},
    [RC_OP(0x0b)] = {.name = "RC RDMA WRITE only with immediate", .op = WIRE_WRITE, .qp = WIRE_RC, .pos = WIRE_ONLY, .hdrs = HDR_RETH | HDR_IMMDT, .payload = 1},
    [RC_OP(0x0c)] = {.name = "RC RDMA READ request", .op = WIRE_READ_REQ, .qp = WIRE_RC, .pos = WIRE_ONLY, .hdrs = HDR_RETH},
    [RC_OP(0x0d)] = {.name = "RC RDMA READ response first", .op = WIRE_READ_RESP, .qp = WIRE_RC, .pos = WIRE_FIRST, .hdrs = HDR_AETH, .payload = 1},
    [RC_OP(0x0e)] = {.name = "RC RDMA READ response middle", .op = WIRE_READ_RESP, .qp = WIRE_RC, .pos = WIRE_MIDDLE, .payload = 1},
    [RC_OP(0x0f)] = {.name = "RC RDMA READ response last", .op = WIRE_READ_RESP, .qp = WIRE_RC, .pos = WIRE_LAST, .hdrs = HDR_AETH, .payload = 1},
    [RC_OP(0x10)] = {.name = "RC RDMA READ response only", .op = WIRE_READ_RESP, .qp = WIRE_RC, .pos = WIRE_ONLY, .hdrs = HDR_AETH, .payload = 1},
    [RC_OP(0x11)] = {.name = "RC Acknowledge", .op = WIRE_ACK, .qp = WIRE_RC, .pos = WIRE_ONLY, .hdrs = HDR_AETH},
    [RC_OP(0x12)] = {.name = "RC ATOMIC Acknowledge", .op = WIRE_ATOMIC_ACK, .qp = WIRE_RC, .pos = WIRE_ONLY, .hdrs = HDR_AETH | HDR_ATOMIC_ACK_ETH},
    [RC_OP(0x13)] = {.name = "RC CmpSwap", .op = WIRE_CMP_SWAP, .qp = WIRE_RC, .pos = WIRE_ONLY, .hdrs = HDR_ATOMIC_ETH},
    [RC_OP(0x14)] = {.name = "RC FetchAdd", .op = WIRE_FETCH_ADD, .qp = WIRE_RC, .pos = WIRE_ONLY, .hdrs = HDR_ATOMIC_ETH},
    [RC_OP(0x16)] = {.name = "RC SEND last with invalidate", .op = WIRE_SEND, .qp = WIRE_RC, .pos = WIRE_LAST, .hdrs = HDR_IETH, .payload = 1},
    [RC_OP(0x17)] = {.name = "RC SEND only with invalidate", .op = WIRE_SEND, .qp = WIRE_RC, .pos = WIRE_ONLY, .hdrs = HDR_IETH, .payload = 1},
    /* IBTA 1.5, 9.4.7: 8 bytes written at once, acknowledged as a WRITE. */
    [RC_OP(0x1d)] = {.name = "RC RDMA ATOMIC WRITE", .op = WIRE_ATOMIC_WRITE, .qp = WIRE_RC, .pos = WIRE_ONLY, .hdrs = HDR_RETH, .payload = 1},
    [UC_OP(0x00)] = {.name = "UC SEND first", .op = WIRE_SEND, .qp = WIRE_UC, .pos = WIRE_FIRST, .payload = 1},
    [UC_OP(0x01)] = {.name = "UC SEND middle", .op = WIRE_SEND, .qp = WIRE_UC, .pos = WIRE_MIDDLE, .payload = 1},
    [UC_OP(0x02)] = {.name = "UC SEND last", .op = WIRE_SEND, .qp = WIRE_UC, .pos = WIRE_LAST, .payload = 1},
    [UC_OP(0x03)] = {.name = "UC SEND last with immediate", .op = WIRE_SEND, .qp = WIRE_UC, .pos = WIRE_LAST, .hdrs = HDR_IMMDT, .payload = 1},
    [UC_OP(0x04)] = {.name = "UC SEND only", .op = WIRE_SEND, .qp = WIRE_UC, .pos = WIRE_ONLY, .payload = 1},
    [UC_OP(0x05)] = {.name = "UC SEND only with immediate", .op = WIRE_SEND, .qp = WIRE_UC, .pos = WIRE_ONLY, .hdrs = HDR_IMMDT, .payload = 1},
    [UC_OP(0x06)] = {.name = "UC RDMA WRITE first", .op = WIRE_WRITE, .qp = WIRE_UC, .pos = WIRE_FIRST, .hdrs = HDR_RETH, .payload = 1},
    [UC_OP(0x07)] = {.name = "UC RDMA WRITE middle", .op = WIRE_WRITE, .qp = WIRE_UC, .pos = WIRE_MIDDLE, .payload = 1},
    [UC_OP(0x08)] = {.name = "UC RDMA WRITE last", .op = WIRE_WRITE, .qp = WIRE_UC, .pos = WIRE_LAST, .payload = 1},
    [UC_OP(0x09)] = {.name = "UC RDMA WRITE last with immediate", .op = WIRE_WRITE, .qp = WIRE_UC, .pos = WIRE_LAST, .hdrs = HDR_IMMDT, .payload = 1},
    [UC_OP(0x0a)] = {.name = "UC RDMA WRITE only", .op = WIRE_WRITE, .qp = WIRE_UC, .pos = WIRE_ONLY, .hdrs = HDR_RETH, .payload = 1},
    [UC_OP(0x0b)] = {.name = "UC RDMA WRITE only with immediate", .op = WIRE_WRITE, .qp = WIRE_UC, .pos = WIRE_ONLY, .hdrs = HDR_RETH | HDR_IMMDT, .payload = 1},
    [0x64] = {.name = "UD SEND only", .op = WIRE_SEND, .qp = WIRE_UD, .pos = WIRE_ONLY, .hdrs = HDR_DETH, .payload = 1},
    [0x65] = {.name = "UD SEND only with immediate", .op = WIRE_SEND, .qp = WIRE_UD, .pos = WIRE_ONLY, .hdrs = HDR_DETH | HDR_IMMDT, .payload = 1},
    [XRC_OP(0x00)] = {.name = "XRC SEND first", .op = WIRE_SEND, .qp = WIRE_XRC, .pos = WIRE_FIRST, .hdrs = HDR_XRCETH, .payload = 1},
    [XRC_OP(0x01)] = {.name = "XRC SEND middle", .op = WIRE_SEND, .qp = WIRE_XRC, .pos = WIRE_MIDDLE, .hdrs = HDR_XRCETH, .payload = 1},
    [XRC_OP(0x02)] = {.name = "XRC SEND last", .op = WIRE_SEND, .qp = WIRE_XRC, .pos = WIRE_LAST, .hdrs = HDR_XRCETH, .payload = 1},
    [XRC_OP(0x03)] = {.name = "XRC SEND last with immediate", .op = WIRE_SEND, .qp = WIRE_XRC, .pos = WIRE_LAST, .hdrs = HDR_XRCETH | HDR_IMMDT, .payload = 1},
    [XRC_OP(0x04)] = {.name = "XRC SEND only", .op = WIRE_SEND, .qp = WIRE_XRC, .pos = WIRE_ONLY, .hdrs = HDR_XRCETH, .payload = 1},
    [XRC_OP(0x05)] = {.name = "XRC SEND only with immediate", .op = WIRE_SEND, .qp = WIRE_XRC, .pos = WIRE_ONLY, .hdrs = HDR_XRCETH | HDR_IMMDT, .payload = 1},
    [XRC_OP(0x06)] = {.name = "XRC RDMA WRITE first", .op = WIRE_WRITE, .qp = WIRE_XRC, .pos = WIRE_FIRST, .hdrs = HDR_XRCETH | HDR_RETH, .payload = 1},
    [XRC_OP(0x07)] = {.name = "XRC RDMA WRITE middle", .op = WIRE_WRITE, .qp = WIRE_XRC, .pos = WIRE_MIDDLE, .hdrs = HDR_XRCETH, .payload = 1},
    [XRC_OP(0x08)] = {.name = "XRC RDMA WRITE last", .op = WIRE_WRITE, .qp = WIRE_XRC, .pos = WIRE_LAST, .hdrs = HDR_XRCETH, .payload = 1},
    [XRC_OP(0x09)] = {.name = "XRC RDMA WRITE last with immediate", .op = WIRE_WRITE, .qp = WIRE_XRC, .pos = WIRE_LAST, .hdrs = HDR_XRCETH | HDR_IMMDT, .payload = 1},
    [XRC_OP(0x0a)] = {.name = "XRC RDMA WRITE only", .op = WIRE_WRITE, .qp = WIRE_XRC, .pos = WIRE_ONLY, .hdrs = HDR_XRCETH | HDR_RETH, .payload = 1},
    [XRC_OP(0x0b)] = {.name = "XRC RDMA WRITE only with immediate", .op = WIRE_WRITE, .qp = WIRE_XRC, .pos = WIRE_ONLY, .hdrs = HDR_XRCETH | HDR_RETH | HDR_IMMDT, .payload = 1},
    [XRC_OP(0x0c)] = {.name = "XRC RDMA READ request", .op = WIRE_READ_REQ, .qp = WIRE_XRC, .pos = WIRE_ONLY, .hdrs = HDR_XRCETH | HDR_RETH},
    [XRC_OP(0x0d)] = {.name = "XRC RDMA READ response first", .op = WIRE_READ_RESP, .qp = WIRE_XRC, .pos = WIRE_FIRST, .hdrs = HDR_AETH, .payload = 1},
    [XRC_OP(0x0e)] = {.name = "XRC RDMA READ response middle", .op = WIRE_READ_RESP, .qp = WIRE_XRC, .pos = WIRE_MIDDLE, .payload = 1},
    [XRC_OP(0x0f)] = {.name = "XRC RDMA READ response last", .op = WIRE_READ_RESP, .qp = WIRE_XRC, .pos = WIRE_LAST, .hdrs = HDR_AETH, .payload = 1},
    [XRC_OP(0x10)] = {.name = "XRC RDMA READ response only", .op = WIRE_READ_RESP, .qp = WIRE_XRC, .pos = WIRE_ONLY, .hdrs = HDR_AETH, .payload = 1},
    [XRC_OP(0x11)] = {.name = "XRC Acknowledge", .op = WIRE_ACK, .qp = WIRE_XRC, .pos = WIRE_ONLY, .hdrs = HDR_AETH},
    [XRC_OP(0x12)] = {.name = "XRC ATOMIC Acknowledge", .op = WIRE_ATOMIC_ACK, .qp = WIRE_XRC, .pos = WIRE_ONLY, .hdrs = HDR_AETH | HDR_ATOMIC_ACK_ETH},
    [XRC_OP(0x13)] = {.name = "XRC CmpSwap", .op = WIRE_CMP_SWAP, .qp = WIRE_XRC, .pos = WIRE_ONLY, .hdrs = HDR_XRCETH | HDR_ATOMIC_ETH},
    [XRC_OP(0x14)] = {.name = "XRC FetchAdd", .op = WIRE_FETCH_ADD, .qp = WIRE_XRC, .pos = WIRE_ONLY, .hdrs = HDR_XRCETH | HDR_ATOMIC_ETH},
    [XRC_OP(0x16)] = {.name = "XRC SEND last with invalidate", .op = WIRE_SEND, .qp = WIRE_XRC, .pos = WIRE_LAST, .hdrs = HDR_XRCETH | HDR_IETH, .payload = 1},
    [XRC_OP(0x17)] = {.name = "XRC SEND only with invalidate", .op = WIRE_SEND, .qp = WIRE_XRC, .pos = WIRE_ONLY, .hdrs = HDR_XRCETH | HDR_IETH, .payload = 1},
};
// clang-format on

const struct uro_wire_opcode *uro_wire_opcode(uint8_t code)
{
	return &table[code];
}

unsigned uro_wire_hdrs_len(uint8_t hdrs)
{
	static const struct {
		uint8_t hdr;
		uint8_t len;
	} sizes[] = {
	    {.hdr = HDR_DETH, .len = 8},  {.hdr = HDR_XRCETH, .len = 4},
	    {.hdr = HDR_RETH, .len = 16}, {.hdr = HDR_ATOMIC_ETH, .len = 28},
	    {.hdr = HDR_AETH, .len = 4},  {.hdr = HDR_ATOMIC_ACK_ETH, .len = 8},
	    {.hdr = HDR_IMMDT, .len = 4}, {.hdr = HDR_IETH, .len = 4},
	};
	unsigned n = 0;

	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		if (hdrs & sizes[i].hdr)
			n += sizes[i].len;
	return n;
}

/* The row a sender wants, found by scanning the transport's 32 rows
 * (bits 7-5 of a code are its transport). */
static int scan(enum uro_wire_op op, enum uro_wire_qp qp, enum uro_wire_pos pos, uint8_t extra)
{
	unsigned base = qp == WIRE_RC ? 0x00 : qp == WIRE_UC ? 0x20 : qp == WIRE_XRC ? 0xa0 : 0x60;

	for (unsigned code = base; code < base + 32; code++) {
		const struct uro_wire_opcode *row = &table[code];

		if (row->name && row->op == op && (row->qp & qp) && row->pos == pos &&
		    (row->hdrs & (HDR_IMMDT | HDR_IETH)) == extra)
			return (int)code;
	}
	return -1;
}

/* The same, looked up: every packet sent names its opcode, and the scan
 * cost each of them about 100 instructions. Built once from the table by
 * scan itself, so that the two cannot disagree. Indexed by transport
 * (RC, UC, UD, XRC), operation, place and optional header (none, IMMDT,
 * IETH). */
#define EXTRAS 3
static int16_t codes[4][WIRE_ATOMIC_WRITE + 1][WIRE_ONLY + 1][EXTRAS];
static pthread_once_t codes_once = PTHREAD_ONCE_INIT;
static int codes_built; /* read first: no call into libc per packet */
static const uint8_t extras[EXTRAS] = {0, HDR_IMMDT, HDR_IETH};
static const enum uro_wire_qp transports[4] = {WIRE_RC, WIRE_UC, WIRE_UD, WIRE_XRC};

static void build_codes(void)
{
	for (unsigned t = 0; t < 4; t++)
		for (unsigned op = 0; op <= WIRE_ATOMIC_WRITE; op++)
			for (unsigned pos = 0; pos <= WIRE_ONLY; pos++)
				for (unsigned x = 0; x < EXTRAS; x++)
					codes[t][op][pos][x] =
					    (int16_t)scan((enum uro_wire_op)op, transports[t],
							  (enum uro_wire_pos)pos, extras[x]);
	__atomic_store_n(&codes_built, 1, __ATOMIC_RELEASE);
}

int uro_wire_code(enum uro_wire_op op, enum uro_wire_qp qp, enum uro_wire_pos pos, uint8_t extra)
{
	unsigned t = qp == WIRE_RC ? 0 : qp == WIRE_UC ? 1 : qp == WIRE_UD ? 2 : 3;
	unsigned x = extra == 0 ? 0 : extra == HDR_IMMDT ? 1 : extra == HDR_IETH ? 2 : EXTRAS;

	if (x == EXTRAS || (unsigned)op > WIRE_ATOMIC_WRITE || (unsigned)pos > WIRE_ONLY ||
	    transports[t] != qp)
		return -1;
	if (!__atomic_load_n(&codes_built, __ATOMIC_ACQUIRE))
		pthread_once(&codes_once, build_codes);
	return codes[t][op][pos][x];
}
