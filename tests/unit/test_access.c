/* Access-flag validation (ibv_reg_mr(3), ibv_modify_qp(3)). */
#include <errno.h>
#include <infiniband/verbs.h>

#include "../check.h"
#include "access.h"

int main(void)
{
	CHECK_EQ(uro_mr_access_check(0), 0);
	CHECK_EQ(uro_mr_access_check(IBV_ACCESS_LOCAL_WRITE), 0);
	CHECK_EQ(uro_mr_access_check(IBV_ACCESS_REMOTE_READ), 0);
	CHECK_EQ(uro_mr_access_check(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC),
		 0);
	/* Remote write or atomic needs local write. */
	CHECK_EQ(uro_mr_access_check(IBV_ACCESS_REMOTE_WRITE), EINVAL);
	CHECK_EQ(uro_mr_access_check(IBV_ACCESS_REMOTE_ATOMIC), EINVAL);
	CHECK_EQ(uro_mr_access_check(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ), EINVAL);
	/* Optional-range hints are ignored; unknown bits are not. */
	CHECK_EQ(uro_mr_access_check(IBV_ACCESS_RELAXED_ORDERING), 0);
	CHECK_EQ(uro_mr_access_check(1u << 12), EINVAL);
	CHECK_EQ(uro_mr_access_check(IBV_ACCESS_ZERO_BASED), EINVAL);
	CHECK_EQ(uro_mr_access_check(IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE), 0);

	CHECK_EQ(uro_qp_access_check(0), 0);
	CHECK_EQ(uro_qp_access_check(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				     IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE),
		 0);
	/* Region-only bits are ignored on a QP, as hardware ignores them
	 * (rdma-core's ODP tests set ON_DEMAND there). */
	CHECK_EQ(uro_qp_access_check(IBV_ACCESS_ON_DEMAND | IBV_ACCESS_MW_BIND), 0);
	CHECK_EQ(uro_qp_access_check(1u << 15), EINVAL);
	return check_report();
}
