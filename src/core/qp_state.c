#include "qp_state.h"

#include <errno.h>

/* The columns: one per QP type; XRC's initiator (XRC_SEND) and target
 * (XRC_RECV) halves have their own (IBTA 1.2.1 Annex A14, 14.3). */
enum { T_UD, T_UC, T_RC, T_XRC_INI, T_XRC_TGT, T_N };

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

#define ANY                                                                                        \
	{                                                                                          \
		.valid = 1                                                                         \
	}

/* [current][next]. Any state may go to RESET or ERR with no attributes
 * (10.3.1). An XRC initiator has a send queue only and an XRC target a
 * receive side only, so each takes the half of RC's attributes its half
 * uses. */
static const struct transition table[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1] =
    {
	[IBV_QPS_RESET] =
	    {
		[IBV_QPS_RESET] = ANY,
		[IBV_QPS_ERR] = ANY,
		[IBV_QPS_INIT] = {.valid = 1,
				  .required = {[T_UD] = PKEY | PORT | QKEY,
					       [T_UC] = PKEY | PORT | ACC,
					       [T_RC] = PKEY | PORT | ACC,
					       [T_XRC_INI] = PKEY | PORT | ACC,
					       [T_XRC_TGT] = PKEY | PORT | ACC}},
	    },
	[IBV_QPS_INIT] =
	    {
		[IBV_QPS_RESET] = ANY,
		[IBV_QPS_ERR] = ANY,
		[IBV_QPS_INIT] = {.valid = 1,
				  .optional = {[T_UD] = PKEY | PORT | QKEY,
					       [T_UC] = PKEY | PORT | ACC,
					       [T_RC] = PKEY | PORT | ACC,
					       [T_XRC_INI] = PKEY | PORT | ACC,
					       [T_XRC_TGT] = PKEY | PORT | ACC}},
		[IBV_QPS_RTR] = {.valid = 1,
				 .required = {[T_UC] = AV | MTU | DQPN | RQPSN,
					      [T_RC] = AV | MTU | DQPN | RQPSN | DRDATOM | MINRNR,
					      [T_XRC_INI] = AV | MTU | DQPN | RQPSN,
					      [T_XRC_TGT] =
						  AV | MTU | DQPN | RQPSN | DRDATOM | MINRNR},
				 .optional = {[T_UD] = PKEY | QKEY,
					      [T_UC] = ALT | ACC | PKEY,
					      [T_RC] = ALT | ACC | PKEY,
					      [T_XRC_INI] = ALT | ACC | PKEY,
					      [T_XRC_TGT] = ALT | ACC | PKEY}},
	    },
	[IBV_QPS_RTR] =
	    {
		[IBV_QPS_RESET] = ANY,
		[IBV_QPS_ERR] = ANY,
		[IBV_QPS_RTS] = {.valid = 1,
				 .required = {[T_UD] = SQPSN,
					      [T_UC] = SQPSN,
					      [T_RC] = SQPSN | TMO | RETRY | RNR | RDATOM,
					      [T_XRC_INI] = SQPSN | TMO | RETRY | RNR | RDATOM,
					      [T_XRC_TGT] = SQPSN | TMO},
				 .optional = {[T_UD] = CUR | QKEY,
					      [T_UC] = CUR | ALT | ACC | MIG,
					      [T_RC] = CUR | ALT | ACC | MINRNR | MIG,
					      [T_XRC_INI] = CUR | ALT | ACC | MIG,
					      [T_XRC_TGT] = CUR | ALT | ACC | MINRNR | MIG}},
	    },
	[IBV_QPS_RTS] =
	    {
		[IBV_QPS_RESET] = ANY,
		[IBV_QPS_ERR] = ANY,
		[IBV_QPS_RTS] = {.valid = 1,
				 .optional = {[T_UD] = CUR | QKEY,
					      [T_UC] = CUR | ACC | ALT | MIG,
					      [T_RC] = CUR | ACC | ALT | MIG | MINRNR,
					      [T_XRC_INI] = CUR | ACC | ALT | MIG,
					      [T_XRC_TGT] = CUR | ACC | ALT | MIG | MINRNR}},
		[IBV_QPS_SQD] = {.valid = 1,
				 .optional = {[T_UD] = SQDN,
					      [T_UC] = SQDN,
					      [T_RC] = SQDN,
					      [T_XRC_INI] = SQDN,
					      [T_XRC_TGT] = SQDN}},
	    },
	[IBV_QPS_SQD] =
	    {
		[IBV_QPS_RESET] = ANY,
		[IBV_QPS_ERR] = ANY,
		[IBV_QPS_RTS] = {.valid = 1,
				 .optional = {[T_UD] = CUR | QKEY,
					      [T_UC] = CUR | ALT | ACC | MIG,
					      [T_RC] = CUR | ALT | ACC | MINRNR | MIG,
					      [T_XRC_INI] = CUR | ALT | ACC | MIG,
					      [T_XRC_TGT] = CUR | ALT | ACC | MINRNR | MIG}},
		[IBV_QPS_SQD] =
		    {.valid = 1,
		     .optional = {[T_UD] = PKEY | QKEY,
				  [T_UC] = AV | ALT | ACC | PKEY | MIG,
				  [T_RC] = PORT | AV | TMO | RETRY | RNR | RDATOM | DRDATOM |
					   ALT | ACC | PKEY | MINRNR | MIG,
				  [T_XRC_INI] = PORT | AV | TMO | RETRY | RNR | RDATOM | ALT | ACC |
						PKEY | MIG,
				  [T_XRC_TGT] = PORT | AV | TMO | DRDATOM | ALT | ACC | PKEY |
						MINRNR | MIG}},
	    },
	[IBV_QPS_SQE] =
	    {
		[IBV_QPS_RESET] = ANY,
		[IBV_QPS_ERR] = ANY,
		/* Only UD and UC have SQE: a connected send-queue error is fatal. */
		[IBV_QPS_RTS] = {.valid = 1, .optional = {[T_UD] = CUR | QKEY, [T_UC] = CUR | ACC}},
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
	case IBV_QPT_XRC_SEND:
		return T_XRC_INI;
	case IBV_QPT_XRC_RECV:
		return T_XRC_TGT;
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
	if (!t->valid || (cur == IBV_QPS_SQE && type != IBV_QPT_UD && type != IBV_QPT_UC)) {
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
