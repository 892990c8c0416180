/* Which path a QP takes, and its wire state's life. A destination GID
 * that is an address of this network namespace keeps the shared-memory
 * path, if cross-memory attach can carry it both ways; any other goes over
 * RoCEv2. UROCE_TRANSPORT=roce sends everything with a GID over RoCEv2, so
 * that the whole suite can run on the wire path over lo; so does
 * UROCE_FAULTS, since its faults are done to packets, and so does a
 * process that cross-memory attach cannot serve (attach_path.h). IPv4 and
 * IPv6 GIDs alike (IBTA A17.4); an IB link's stay local, since no IB
 * fabric carries its packets. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "attach_path.h"
#include "attach_probe.h"
#include "device_model.h"
#include "log.h"
#include "netdev.h"
#include "own_address.h"
#include "registry.h"
#include "wire.h"

int uro_wire_told(void)
{
	const char *t = getenv("UROCE_TRANSPORT"), *faults = getenv("UROCE_FAULTS"),
		   *pcap = getenv("UROCE_PCAP");

	return (t && !strcmp(t, "roce")) || (faults && *faults) || (pcap && *pcap);
}

int uro_wire_forced(void)
{
	return uro_wire_told() || uro_attach_refused();
}

int uro_wire_gid_is_remote(const struct uro_context *ctx, const union ibv_gid *gid)
{
	if (ctx->model.link.type != URO_LINK_ROCE)
		return 0;
	return uro_wire_forced() || !uro_gid_is_own(gid);
}

/* Why cross-memory attach cannot join this process and the one owning
 * dest_qpn in both directions whatever the host allows, or NULL: the owner
 * is another user's (its slot is held and our user's registry has no
 * record of it: registry.h), or one of the two is in a user namespace the
 * other is not in (the kernel lets an attach cross only downwards). Each
 * end finds the same of the other, so both take the wire. The slot's
 * owner is looked up afresh, as qp.c's peer check does. */
static const char *foreign(struct uro_context *ctx, uint32_t dest_qpn, struct uro_peer **peer)
{
	static const char userns[] = "is in a user namespace this one is not in";
	unsigned slot = (dest_qpn & 0xffffff) >> URO_QPN_INDEX_BITS;
	int err = 0;

	*peer = uro_peer_refresh(ctx, dest_qpn, &err);
	if (*peer)
		return !(*peer)->self && uro_userns_differs((*peer)->pid) ? userns : NULL;
	if (err == EPERM)
		return userns;
	if (err == EACCES || (err == ESRCH && uro_registry_held(NULL, slot)))
		return "belongs to another user";
	return NULL;
}

int uro_wire_connects(struct uro_context *ctx, const union ibv_gid *gid, uint32_t dest_qpn,
		      uint32_t qpn)
{
	static int told;
	struct uro_peer *peer;
	const char *why;

	if (ctx->model.link.type != URO_LINK_ROCE)
		return 0;
	if (uro_wire_gid_is_remote(ctx, gid))
		return 1;
	why = foreign(ctx, dest_qpn, &peer);
	if (why) {
		/* Said once a process: which path, and why. */
		if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
			uro_warn("QP 0x%06x: the process owning QP 0x%06x %s, which cross-memory "
				 "attach cannot reach: connections to such processes take RoCEv2 "
				 "over %s",
				 qpn, dest_qpn, why, ctx->model.link.netdev);
		return 1;
	}
	/* Both ends of a connection take one path: the peer's process may
	 * have been told to take the wire (its faults, its trace), or be one
	 * that cross-memory attach cannot serve. */
	return peer && __atomic_load_n(&peer->hdr->wire_forced, __ATOMIC_ACQUIRE);
}

int uro_wire_ud_listens(struct uro_context *ctx)
{
	/* A device on lo hears only this host, which shared memory serves. */
	return ctx->model.link.type == URO_LINK_ROCE &&
	       (uro_wire_forced() || strcmp(ctx->model.link.netdev, "lo") != 0);
}

static struct uro_qp_wire *wire_new(struct uro_qp *qp)
{
	struct uro_qp_wire *wq = calloc(1, sizeof(*wq));
	/* A UD QP builds each datagram on its poster's stack (ud.c). */
	int bursts = qp->qpx.qp_base.qp_type != IBV_QPT_UD;

	if (!wq)
		return NULL;
	wq->cap = qp->cap.max_send_wr ? qp->cap.max_send_wr : 1;
	wq->ring = calloc(wq->cap, sizeof(*wq->ring));
	if (bursts)
		wq->burst = calloc(URO_WIRE_BURST, sizeof(*wq->burst));
	if (!wq->ring || (bursts && !wq->burst)) {
		free(wq->ring);
		free(wq->burst);
		free(wq);
		return NULL;
	}
	return wq;
}

int uro_wire_qp_attach(struct uro_context *ctx, struct uro_qp *qp)
{
	const struct ibv_ah_attr *ah = &qp->attr.ah_attr;
	struct uro_qp_wire *wq = qp->wire;

	int ud = qp->qpx.qp_base.qp_type == IBV_QPT_UD;
	/* A UD QP hears every family its link has; a connected one its peer's. */
	struct uro_wire_endpoint *w = uro_wire_open(ctx, ud ? NULL : &ah->grh.dgid);

	if (!w)
		return errno;
	if (!wq && !(wq = wire_new(qp)))
		return ENOMEM;
	if (qp->index >= w->qp_limit) /* under the context lock: one writer */
		__atomic_store_n(&w->qp_limit, qp->index + 1, __ATOMIC_RELEASE);
	if (ud) {
		__atomic_store_n(&qp->wire, wq, __ATOMIC_RELEASE);
		return 0; /* each datagram names its destination */
	}
	uro_wire_dest(w, &ah->grh.dgid, &wq->peer);
	wq->mtu = 128u << (qp->attr.path_mtu ? qp->attr.path_mtu : IBV_MTU_1024);
	wq->rq.epsn = qp->attr.rq_psn & URO_PSN_MASK;
	/* Published last: the receive path looks at qp->wire. */
	__atomic_store_n(&qp->wire, wq, __ATOMIC_RELEASE);
	return 0;
}

void uro_wire_qp_rts(struct uro_qp *qp)
{
	struct uro_qp_wire *wq = qp->wire;

	wq->psn = qp->attr.sq_psn & URO_PSN_MASK;
	wq->acked = (wq->psn - 1) & URO_PSN_MASK;
	wq->retry_left = qp->attr.retry_cnt;
	wq->rnr_left = qp->attr.rnr_retry;
}

void uro_wire_qp_reset(struct uro_qp *qp)
{
	struct uro_qp_wire *wq = qp->wire;

	wq->head = wq->next = wq->tail = 0;
	wq->deadline = 0;
	wq->rnr_wait = 0;
	wq->rd_out = 0;
	wq->partial = 0;
	wq->nak_psn = 0;
	memset(&wq->rq, 0, sizeof(wq->rq));
}

void uro_wire_qp_free(struct uro_qp *qp)
{
	if (!qp->wire)
		return;
	free(qp->wire->ring);
	free(qp->wire->burst);
	free(qp->wire);
	qp->wire = NULL;
}
