/* The QP state-transition table against IBTA 10.3.1 / 11.2.5.2. */
#include <errno.h>

#include "../check.h"
#include "qp_state.h"

static int check(enum ibv_qp_type t, enum ibv_qp_state from, enum ibv_qp_state to, int mask)
{
	const char *why;

	return uro_qp_transition_check(t, from, to, mask, &why);
}

static const int rc_init = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
static const int ud_init = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
static const int rc_rtr = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
static const int uc_rtr = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
static const int rc_rts =
    IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;

/* Dropping any one required bit must fail. */
static void each_required(enum ibv_qp_type t, enum ibv_qp_state from, enum ibv_qp_state to,
			  int required)
{
	CHECK_EQ(check(t, from, to, required | IBV_QP_STATE), 0);
	for (int bit = 1; bit < (1 << 21); bit <<= 1)
		if (required & bit)
			CHECK_EQ(check(t, from, to, (required & ~bit) | IBV_QP_STATE), EINVAL);
}

static void test_connection_path(void)
{
	each_required(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, rc_init);
	each_required(IBV_QPT_UC, IBV_QPS_RESET, IBV_QPS_INIT, rc_init);
	each_required(IBV_QPT_UD, IBV_QPS_RESET, IBV_QPS_INIT, ud_init);
	each_required(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, rc_rtr);
	each_required(IBV_QPT_UC, IBV_QPS_INIT, IBV_QPS_RTR, uc_rtr);
	each_required(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, rc_rts);
	each_required(IBV_QPT_UC, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_SQ_PSN);
	each_required(IBV_QPT_UD, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_SQ_PSN);
	CHECK_EQ(check(IBV_QPT_UD, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QP_STATE), 0);
}

static void test_forbidden_attributes(void)
{
	/* UD has no access flags; RC has no Q_Key. */
	CHECK_EQ(check(IBV_QPT_UD, IBV_QPS_RESET, IBV_QPS_INIT, ud_init | IBV_QP_ACCESS_FLAGS),
		 EINVAL);
	CHECK_EQ(check(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, rc_init | IBV_QP_QKEY), EINVAL);
	CHECK_EQ(check(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, rc_init | IBV_QP_AV), EINVAL);
	/* Path attributes belong to INIT->RTR, not to RTR->RTS... */
	CHECK_EQ(check(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, rc_rts | IBV_QP_AV), EINVAL);
	CHECK_EQ(check(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, rc_rts | IBV_QP_DEST_QPN), EINVAL);
	/* ...but MIN_RNR_TIMER and ACCESS_FLAGS are optional there. */
	CHECK_EQ(check(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS,
		       rc_rts | IBV_QP_MIN_RNR_TIMER | IBV_QP_ACCESS_FLAGS | IBV_QP_CUR_STATE),
		 0);
	/* UC has no RNR, timeout or atomics. */
	CHECK_EQ(check(IBV_QPT_UC, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_SQ_PSN | IBV_QP_TIMEOUT),
		 EINVAL);
	CHECK_EQ(check(IBV_QPT_UC, IBV_QPS_INIT, IBV_QPS_RTR, uc_rtr | IBV_QP_MIN_RNR_TIMER),
		 EINVAL);
	/* Going to RESET or ERR carries no attributes. */
	CHECK_EQ(check(IBV_QPT_RC, IBV_QPS_RTS, IBV_QPS_ERR, IBV_QP_STATE | IBV_QP_SQ_PSN), EINVAL);
}

static void test_transitions(void)
{
	const enum ibv_qp_type types[] = {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD};

	for (size_t i = 0; i < 3; i++) {
		enum ibv_qp_type t = types[i];

		for (enum ibv_qp_state s = IBV_QPS_RESET; s <= IBV_QPS_ERR; s++) {
			if (t == IBV_QPT_RC && s == IBV_QPS_SQE)
				continue;
			CHECK_EQ(check(t, s, IBV_QPS_RESET, IBV_QP_STATE), 0);
			CHECK_EQ(check(t, s, IBV_QPS_ERR, IBV_QP_STATE), 0);
		}
		CHECK_EQ(check(t, IBV_QPS_RESET, IBV_QPS_RTR, IBV_QP_STATE), EINVAL);
		CHECK_EQ(check(t, IBV_QPS_RESET, IBV_QPS_RTS, IBV_QP_STATE), EINVAL);
		CHECK_EQ(check(t, IBV_QPS_INIT, IBV_QPS_RTS, IBV_QP_STATE), EINVAL);
		CHECK_EQ(check(t, IBV_QPS_RTR, IBV_QPS_RTR, IBV_QP_STATE), EINVAL);
		CHECK_EQ(check(t, IBV_QPS_RTR, IBV_QPS_INIT, IBV_QP_STATE), EINVAL);
		CHECK_EQ(check(t, IBV_QPS_ERR, IBV_QPS_RTS, IBV_QP_STATE), EINVAL);
		CHECK_EQ(check(t, IBV_QPS_RTS, IBV_QPS_SQD, IBV_QP_STATE), 0);
		CHECK_EQ(check(t, IBV_QPS_SQD, IBV_QPS_RTS, IBV_QP_STATE), 0);
		CHECK_EQ(check(t, IBV_QPS_RTS, IBV_QPS_RTS, 0), 0);
		CHECK_EQ(check(t, IBV_QPS_INIT, IBV_QPS_INIT, 0), 0);
	}
	/* SQE exists for UD and UC only; RC errors are fatal (IBTA 10.3.1). */
	CHECK_EQ(check(IBV_QPT_UD, IBV_QPS_SQE, IBV_QPS_RTS, IBV_QP_STATE), 0);
	CHECK_EQ(check(IBV_QPT_UC, IBV_QPS_SQE, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS),
		 0);
	CHECK_EQ(check(IBV_QPT_RC, IBV_QPS_SQE, IBV_QPS_RTS, IBV_QP_STATE), EINVAL);
}

/* XRC's halves (IBTA A14): the initiator takes RC's send-side attributes
 * only, the target RC's receive side and a timeout and SQ PSN only. */
static void test_xrc(void)
{
	const int init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	const int rtr =
	    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	const int rd = IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	const int ini_rts = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			    IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;

	for (enum ibv_qp_type t = IBV_QPT_XRC_SEND; t <= IBV_QPT_XRC_RECV; t++) {
		CHECK_EQ(check(t, IBV_QPS_RESET, IBV_QPS_INIT, init), 0);
		CHECK_EQ(check(t, IBV_QPS_RESET, IBV_QPS_INIT, init | IBV_QP_QKEY), EINVAL);
		CHECK_EQ(check(t, IBV_QPS_RTS, IBV_QPS_ERR, IBV_QP_STATE), 0);
		CHECK_EQ(check(t, IBV_QPS_SQE, IBV_QPS_RTS, IBV_QP_STATE), EINVAL);
	}
	CHECK_EQ(check(IBV_QPT_XRC_SEND, IBV_QPS_INIT, IBV_QPS_RTR, rtr), 0);
	CHECK_EQ(check(IBV_QPT_XRC_SEND, IBV_QPS_INIT, IBV_QPS_RTR, rtr | rd), EINVAL);
	CHECK_EQ(check(IBV_QPT_XRC_RECV, IBV_QPS_INIT, IBV_QPS_RTR, rtr), EINVAL);
	CHECK_EQ(check(IBV_QPT_XRC_RECV, IBV_QPS_INIT, IBV_QPS_RTR, rtr | rd), 0);
	CHECK_EQ(check(IBV_QPT_XRC_SEND, IBV_QPS_RTR, IBV_QPS_RTS, ini_rts), 0);
	CHECK_EQ(check(IBV_QPT_XRC_RECV, IBV_QPS_RTR, IBV_QPS_RTS, ini_rts), EINVAL);
	CHECK_EQ(check(IBV_QPT_XRC_RECV, IBV_QPS_RTR, IBV_QPS_RTS,
		       IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT),
		 0);
}

static void test_next_state(void)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT};

	CHECK_EQ(uro_qp_next_state(IBV_QPS_RESET, &a, IBV_QP_STATE), IBV_QPS_INIT);
	CHECK_EQ(uro_qp_next_state(IBV_QPS_RTS, &a, IBV_QP_QKEY), IBV_QPS_RTS);
	CHECK_STR(uro_qp_state_name(IBV_QPS_SQD), "SQD");
}

int main(void)
{
	test_connection_path();
	test_forbidden_attributes();
	test_transitions();
	test_xrc();
	test_next_state();
	return check_report();
}
