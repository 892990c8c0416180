/* Posting work requests. The intra-host data path (issue 3) is not built
 * yet: what needs no data path is checked as hardware checks it, and a
 * request that would move data fails with EOPNOTSUPP and bad_wr set, never
 * silently. */
#include <errno.h>

#include "objects.h"

int uro_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	*bad = wr;
	if (!wr)
		return 0;
	/* Only an RTS or SQD QP's send queue accepts work (IBTA 10.8.2). */
	if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD)
		return EINVAL;
	return EOPNOTSUPP;
}

int uro_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	*bad = wr;
	if (!wr)
		return 0;
	/* A QP on an SRQ has no receive queue of its own; a RESET QP accepts
	 * no receives (IBTA 10.8.2). */
	if (qp->srq || qp->state == IBV_QPS_RESET)
		return EINVAL;
	return EOPNOTSUPP;
}

int uro_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)srq;
	*bad = wr;
	return wr ? EOPNOTSUPP : 0;
}
