#include "segment_ops.h"

#include "port_counters.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <string.h>
#include <unistd.h>

#include "cq_ring.h"
#include "log.h"

/* A key is (MR index + 1) << 8 | generation (src/verbs/mr.c). */
const struct uro_seg_mr *uro_mr_lookup(const struct uro_peer *p, uint32_t key, int remote)
{
	uint32_t index = (key >> 8) - 1;
	const struct uro_seg_mr *mr;

	if ((key >> 8) == 0 || index >= URO_MAX_MR)
		return NULL;
	mr = uro_peer_mr(p, index);
	if (!__atomic_load_n(&mr->in_use, __ATOMIC_ACQUIRE) ||
	    (remote ? mr->rkey : mr->lkey) != key)
		return NULL;
	/* A window has an rkey only, and names memory only while bound. */
	if (mr->kind != URO_KEY_MR && (!remote || !__atomic_load_n(&mr->bound, __ATOMIC_ACQUIRE)))
		return NULL;
	return mr;
}

static int in_range(uint64_t start, uint64_t len, uint64_t base, uint64_t size)
{
	return start >= base && len <= size && start - base <= size - len;
}

enum ibv_wc_status uro_rkey_check(const struct uro_peer *p, uint32_t pd, uint32_t qpn,
				  uint32_t rkey, uint64_t va, uint64_t len, unsigned access,
				  uint64_t *addr)
{
	const struct uro_seg_mr *mr = uro_mr_lookup(p, rkey, 1);

	/* A type 2 window serves only the QP it is bound to (IBTA 10.6.7.2.4). */
	if (!mr || mr->pd != pd || (mr->access & access) != access ||
	    (mr->kind == URO_KEY_MW2 && mr->qpn != qpn) || !in_range(va, len, mr->iova, mr->length))
		return IBV_WC_REM_ACCESS_ERR;
	*addr = mr->addr + (va - mr->iova);
	return IBV_WC_SUCCESS;
}

const struct uro_seg_mr *uro_lkey_region(const struct uro_peer *p, uint32_t lkey, uint64_t addr,
					 uint64_t len)
{
	const struct uro_seg_mr *mr = uro_mr_lookup(p, lkey, 0);

	return mr && in_range(addr, len, mr->addr, mr->length) ? mr : NULL;
}

enum ibv_wc_status uro_sge_iov(const struct uro_peer *p, uint32_t pd, const struct ibv_sge *sge,
			       uint32_t n, int need_write, struct iovec *iov, int *niov,
			       uint64_t *total)
{
	*niov = 0;
	*total = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct uro_seg_mr *mr;

		if (!sge[i].length)
			continue;
		mr = uro_lkey_region(p, sge[i].lkey, sge[i].addr, sge[i].length);
		if (!mr || mr->pd != pd || (need_write && !(mr->access & IBV_ACCESS_LOCAL_WRITE)))
			return IBV_WC_LOC_PROT_ERR;
		iov[*niov].iov_base = (void *)(uintptr_t)sge[i].addr;
		iov[*niov].iov_len = sge[i].length;
		(*niov)++;
		*total += sge[i].length;
	}
	return IBV_WC_SUCCESS;
}

static void check_srq_limit(struct uro_peer *p, struct uro_seg_srq *srq)
{
	uint32_t limit = __atomic_load_n(&srq->rq.limit, __ATOMIC_ACQUIRE);

	/* The limit event fires once when the queue drops below the limit,
	 * which disarms it (IBTA 10.2.9.3, ibv_modify_srq(3)). */
	if (limit && uro_rq_count(&srq->rq) < limit &&
	    __atomic_compare_exchange_n(&srq->rq.limit, &limit, 0, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE))
		uro_raise_event(p, IBV_EVENT_SRQ_LIMIT_REACHED, (uint32_t)(srq - p->srq),
				srq->token, srq->serial);
}

/* A receive queue's shape, read once and checked: a ring inside the
 * arena, entries wide enough for the SGEs they claim. */
static int rq_view(const struct uro_peer *p, const struct uro_seg_rq *rq, struct uro_rq_view *v)
{
	uint64_t ring = __atomic_load_n(&rq->ring, __ATOMIC_RELAXED);

	v->size = __atomic_load_n(&rq->size, __ATOMIC_RELAXED);
	v->stride = __atomic_load_n(&rq->stride, __ATOMIC_RELAXED);
	v->max_sge = __atomic_load_n(&rq->max_sge, __ATOMIC_RELAXED);
	if (!v->size || v->max_sge > URO_MAX_SGE || v->stride < uro_rq_stride(v->max_sge))
		return -1;
	v->ring = uro_peer_range(p, ring, (uint64_t)v->size * v->stride);
	return v->ring ? 0 : -1;
}

static int take_from(struct uro_peer *p, struct uro_seg_rq *rq, struct uro_recv *out)
{
	struct uro_rq_view v;

	return rq_view(p, rq, &v) ? -1 : uro_rq_take(rq, &v, out);
}

int uro_take_srq_recv(struct uro_peer *p, uint32_t srq_one_based, struct uro_recv *out)
{
	struct uro_seg_srq *srq = uro_peer_srq(p, srq_one_based);

	if (!srq || take_from(p, &srq->rq, out))
		return -1;
	check_srq_limit(p, srq);
	return 0;
}

uint32_t uro_recv_pd(const struct uro_peer *p, uint32_t srq_one_based, uint32_t qp_pd)
{
	const struct uro_seg_srq *srq = uro_peer_srq(p, srq_one_based);

	/* An SRQ that is not there has no PD, and no region matches 0. */
	return srq_one_based ? (srq ? srq->pd : 0) : qp_pd;
}

int uro_take_recv(struct uro_peer *p, struct uro_seg_qp *qp, struct uro_recv *out)
{
	return qp->srq ? uro_take_srq_recv(p, qp->srq, out) : take_from(p, &qp->rq, out);
}

/* A write to the pipe of a process that has just exited must fail with
 * EPIPE, not kill the writer: SIGPIPE is blocked for this thread around it
 * and one it raised is consumed (pipes have no MSG_NOSIGNAL). */
static ssize_t write_nosigpipe(int fd, const void *buf, size_t len)
{
	sigset_t pipe_only, old;
	struct timespec zero = {0, 0};
	ssize_t n;
	int err;

	sigemptyset(&pipe_only);
	sigaddset(&pipe_only, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
	n = write(fd, buf, len);
	err = errno;
	if (n < 0 && err == EPIPE)
		while (sigtimedwait(&pipe_only, NULL, &zero) < 0 && errno == EINTR)
			;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = err;
	return n;
}

static void write_pipe(struct uro_peer *p, int remote_fd, uint64_t ino, const void *buf, size_t len)
{
	int fd = remote_fd >= 0 ? uro_peer_pipe(p, remote_fd, ino) : -1;

	if (fd < 0 || write_nosigpipe(fd, buf, len) != (ssize_t)len)
		uro_debug("cannot notify process %d (fd %d): %s", p->pid, remote_fd,
			  strerror(errno));
}

void uro_raise_event(struct uro_peer *p, enum ibv_event_type type, uint32_t index, uint64_t token,
		     uint32_t serial)
{
	struct uro_event_record r = {
	    .token = token, .type = (uint32_t)type, .index = index, .serial = serial};

	write_pipe(p, p->hdr->async_wfd, p->hdr->async_ino, &r, sizeof(r));
}

/* A completion counts where its QP's owner can read it (`uroce stat`):
 * on its QP, and on the port for the errors rxe counts. */
static void count_completion(struct uro_peer *p, const struct uro_cqe *e)
{
	struct uro_seg_qp *qp = &p->qp[e->qp_num & (URO_MAX_QP - 1)];
	struct uro_seg_counters *port = &p->hdr->counters;

	if (e->status == IBV_WC_RETRY_EXC_ERR)
		uro_count(&port->retry_exceeded, 1);
	else if (e->status == IBV_WC_RNR_RETRY_EXC_ERR)
		uro_count(&port->rnr_retry_exceeded, 1);
	else if (e->status == IBV_WC_SUCCESS && e->opcode == IBV_WC_RECV)
		uro_count(&port->rdma_recvs, 1);
	if (__atomic_load_n(&qp->qpn, __ATOMIC_RELAXED) != e->qp_num)
		return;
	uro_count(e->status != IBV_WC_SUCCESS ? &qp->counters.error_cqes
		  : e->opcode & IBV_WC_RECV   ? &qp->counters.recv_cqes
					      : &qp->counters.send_cqes,
		  1);
}

void uro_deliver(struct uro_peer *p, uint32_t cq_index, const struct uro_cqe *e, int solicited)
{
	struct uro_seg_cq *cq = uro_peer_cq(p, cq_index);
	struct uro_cqe *ring;
	uint32_t pos, size;
	int rc;

	if (!cq)
		return; /* no such CQ: the owner's tables are not a CQ's */
	rc = uro_cq_reserve(cq, &pos);
	if (rc == URO_CQ_BUSY) {
		__atomic_add_fetch(&p->hdr->counters.rx_dropped, 1, __ATOMIC_RELAXED);
		return;
	}
	if (rc == URO_CQ_FULL) {
		if (!cq->ignore_overrun)
			uro_raise_event(p, IBV_EVENT_CQ_ERR, cq_index, cq->token, cq->serial);
		return;
	}
	/* Read once the position is held: the ring cannot move under it. */
	size = __atomic_load_n(&cq->size, __ATOMIC_ACQUIRE);
	ring = size ? uro_peer_range(p, __atomic_load_n(&cq->ring, __ATOMIC_ACQUIRE),
				     (uint64_t)size * sizeof(*ring))
		    : NULL;
	if (!ring)
		return; /* the owner's poll skips the position it never sees */
	uro_cq_publish(ring, size, pos, e);
	count_completion(p, e);
	/* A CQ without a channel wakes nobody: no fence, no arm to take. */
	if (__atomic_load_n(&cq->channel_wfd, __ATOMIC_RELAXED) >= 0 &&
	    uro_cq_take_arm(cq, solicited || e->status != IBV_WC_SUCCESS))
		write_pipe(p, cq->channel_wfd, __atomic_load_n(&cq->channel_ino, __ATOMIC_RELAXED),
			   &cq->token, sizeof(cq->token));
}

void uro_flush_rq(struct uro_peer *p, struct uro_seg_qp *qp)
{
	struct uro_recv r;
	struct uro_cqe e;

	memset(&e, 0, sizeof(e));
	e.status = IBV_WC_WR_FLUSH_ERR;
	e.opcode = IBV_WC_RECV;
	e.qp_num = qp->qpn;
	while (take_from(p, &qp->rq, &r) == 0) {
		e.wr_id = r.wr_id;
		uro_deliver(p, qp->recv_cq, &e, 0);
	}
}

void uro_qp_error(struct uro_peer *p, struct uro_seg_qp *qp)
{
	uint32_t old = __atomic_exchange_n(&qp->state, (uint32_t)IBV_QPS_ERR, __ATOMIC_ACQ_REL);

	if (old == IBV_QPS_ERR)
		return;
	if (qp->srq)
		uro_raise_event(p, IBV_EVENT_QP_LAST_WQE_REACHED, (uint32_t)(qp - p->qp), qp->token,
				qp->serial);
	else if (qp->rq.size)
		uro_flush_rq(p, qp);
}
