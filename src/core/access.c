#include "access.h"

#include <errno.h>
#include <infiniband/verbs.h>

/* Optional-range flags (verbs.h IBV_ACCESS_OPTIONAL_RANGE) are hints a
 * device may ignore; uroce ignores them. */
#define MR_KNOWN                                                                                   \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ON_DEMAND |                    \
	 IBV_ACCESS_HUGETLB | IBV_ACCESS_OPTIONAL_RANGE)

int uro_mr_access_check(unsigned access)
{
	if (access & ~(unsigned)MR_KNOWN)
		return EINVAL;
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return EINVAL;
	return 0;
}

int uro_qp_access_check(unsigned access)
{
	/* Only the remote bits matter to a responder. Hardware accepts the
	 * region-only bits here and ignores them: perftest sets LOCAL_WRITE
	 * and MW_BIND, rdma-core's ODP tests ON_DEMAND. */
	return access & ~(unsigned)MR_KNOWN ? EINVAL : 0;
}
