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
	/* Hardware accepts LOCAL_WRITE and MW_BIND here (perftest sets them);
	 * only remote bits matter to the responder. */
	const unsigned allowed = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
				 IBV_ACCESS_MW_BIND;

	return access & ~allowed ? EINVAL : 0;
}
