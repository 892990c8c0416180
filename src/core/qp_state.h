/* The QP state machine: which transitions exist and which attributes each
 * requires or allows, per QP type (IBTA 1.4 vol 1, 10.3.1 and the Modify QP
 * verb's attribute table, 11.2.5.2). */
#ifndef URO_QP_STATE_H
#define URO_QP_STATE_H

#include <infiniband/verbs.h>

/* 0 when mask may move a QP of this type from cur to next; EINVAL with
 * *why (a static string) otherwise. IBV_QP_STATE itself is not checked. */
int uro_qp_transition_check(enum ibv_qp_type type, enum ibv_qp_state cur, enum ibv_qp_state next,
			    int mask, const char **why);

/* The state a modify moves to: attr->qp_state with IBV_QP_STATE, else cur. */
enum ibv_qp_state uro_qp_next_state(enum ibv_qp_state cur, const struct ibv_qp_attr *attr,
				    int mask);

const char *uro_qp_state_name(enum ibv_qp_state state);

#endif
