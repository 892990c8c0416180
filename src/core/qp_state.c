#include "qp_state.h"

#include <errno.h>

enum { T_UD, T_UC, T_RC, T_N };

struct transition {
	unsigned char valid;
	int required[T_N];
	int optional[T_N];
};

#define ACC	IBV_QP_ACCESS_FLAGS
#define PKEY	IBV_QP_PKEY_INDEX
#define PORT	IBV_QP_PORT
#define QKEY	IBV_QP_QKEY
#define AV	IBV_QP_AV
#define MTU	IBV_QP_PATH_MTU
#define TMO	IBV_QP_TIMEOUT
#define RETRY	IBV_QP_RETRY_CNT
#define RNR	IBV_QP_RNR_RETRY
#define RQPSN	IBV_QP_RQ_PSN
#define SQPSN	IBV_QP_SQ_PSN
#define RDATOM	IBV_QP_MAX_QP_RD_ATOMIC
#define DRDATOM IBV_QP_MAX_DEST_RD_ATOMIC
#define ALT	IBV_QP_ALT_PATH
#define MINRNR	IBV_QP_MIN_RNR_TIMER
#define MIG	IBV_QP_PATH_MIG_STATE
#define DQPN	IBV_QP_DEST_QPN
#define CUR	IBV_QP_CUR_STATE
#define SQDN	IBV_QP_EN_SQD_ASYNC_NOTIFY

#define NONE                                                                                       \
	{                                                                                          \
		0, 0, 0                                                                            \
	}
#define ANY                                                                                        \
	{                                                                                          \
		.valid = 1, .required = NONE, .optional = NONE                                     \
	}

/* [current][next]; columns of required/optional are UD, UC, RC. Any state
 * may go to RESET or ERR with no attributes (10.3.1). */
static const struct transition table[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1] = {
    [IBV_QPS_RESET] =
	{
	    [IBV_QPS_RESET] = ANY,
	    [IBV_QPS_ERR] = ANY,
	    [IBV_QPS_INIT] = {1, {PKEY | PORT | QKEY, PKEY | PORT | ACC, PKEY | PORT | ACC}, NONE},
	},
    [IBV_QPS_INIT] =
	{
	    [IBV_QPS_RESET] = ANY,
	    [IBV_QPS_ERR] = ANY,
	    [IBV_QPS_INIT] = {1, NONE, {PKEY | PORT | QKEY, PKEY | PORT | ACC, PKEY | PORT | ACC}},
	    [IBV_QPS_RTR] = {1,
			     {0, AV | MTU | DQPN | RQPSN,
			      AV | MTU | DQPN | RQPSN | DRDATOM | MINRNR},
			     {PKEY | QKEY, ALT | ACC | PKEY, ALT | ACC | PKEY}},
	},
    [IBV_QPS_RTR] =
	{
	    [IBV_QPS_RESET] = ANY,
	    [IBV_QPS_ERR] = ANY,
	    [IBV_QPS_RTS] = {1,
			     {SQPSN, SQPSN, SQPSN | TMO | RETRY | RNR | RDATOM},
			     {CUR | QKEY, CUR | ALT | ACC | MIG, CUR | ALT | ACC | MINRNR | MIG}},
	},
    [IBV_QPS_RTS] =
	{
	    [IBV_QPS_RESET] = ANY,
	    [IBV_QPS_ERR] = ANY,
	    [IBV_QPS_RTS] = {1,
			     NONE,
			     {CUR | QKEY, CUR | ACC | ALT | MIG, CUR | ACC | ALT | MIG | MINRNR}},
	    [IBV_QPS_SQD] = {1, NONE, {SQDN, SQDN, SQDN}},
	},
    [IBV_QPS_SQD] =
	{
	    [IBV_QPS_RESET] = ANY,
	    [IBV_QPS_ERR] = ANY,
	    [IBV_QPS_RTS] = {1,
			     NONE,
			     {CUR | QKEY, CUR | ALT | ACC | MIG, CUR | ALT | ACC | MINRNR | MIG}},
	    [IBV_QPS_SQD] = {1,
			     NONE,
			     {PKEY | QKEY, AV | ALT | ACC | PKEY | MIG,
			      PORT | AV | TMO | RETRY | RNR | RDATOM | DRDATOM | ALT | ACC | PKEY |
				  MINRNR | MIG}},
	},
    [IBV_QPS_SQE] =
	{
	    [IBV_QPS_RESET] = ANY,
	    [IBV_QPS_ERR] = ANY,
	    /* RC has no SQE state: an RC send-queue error is fatal. */
	    [IBV_QPS_RTS] = {1, NONE, {CUR | QKEY, CUR | ACC, 0}},
	},
    [IBV_QPS_ERR] =
	{
	    [IBV_QPS_RESET] = ANY,
	    [IBV_QPS_ERR] = ANY,
	},
};

static int type_column(enum ibv_qp_type type)
{
	switch (type) {
	case IBV_QPT_UD:
		return T_UD;
	case IBV_QPT_UC:
		return T_UC;
	case IBV_QPT_RC:
		return T_RC;
	default:
		return -1;
	}
}

enum ibv_qp_state uro_qp_next_state(enum ibv_qp_state cur, const struct ibv_qp_attr *attr, int mask)
{
	return (mask & IBV_QP_STATE) ? attr->qp_state : cur;
}

int uro_qp_transition_check(enum ibv_qp_type type, enum ibv_qp_state cur, enum ibv_qp_state next,
			    int mask, const char **why)
{
	int col = type_column(type);
	const struct transition *t;
	int attrs = mask & ~IBV_QP_STATE;

	if (col < 0 || cur > IBV_QPS_ERR || next > IBV_QPS_ERR) {
		*why = "unknown QP type or state";
		return EINVAL;
	}
	t = &table[cur][next];
	if (!t->valid || (type == IBV_QPT_RC && cur == IBV_QPS_SQE)) {
		*why = "no such QP state transition";
		return EINVAL;
	}
	if ((attrs & t->required[col]) != t->required[col]) {
		*why = "a required attribute of this transition is missing";
		return EINVAL;
	}
	if (attrs & ~(t->required[col] | t->optional[col])) {
		*why = "an attribute this transition does not allow is set";
		return EINVAL;
	}
	return 0;
}

const char *uro_qp_state_name(enum ibv_qp_state state)
{
	static const char *const names[] = {
	    [IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT", [IBV_QPS_RTR] = "RTR",
	    [IBV_QPS_RTS] = "RTS",     [IBV_QPS_SQD] = "SQD",	[IBV_QPS_SQE] = "SQE",
	    [IBV_QPS_ERR] = "ERR",
	};

	return state <= IBV_QPS_ERR ? names[state] : "UNKNOWN";
}
