/* What the soft HCA does to a process's published objects: check keys, take
 * a receive, deliver a completion and wake the CQ's channel, raise an async
 * event, move a QP to the error state. The process may be this one or a
 * peer (docs/design.md, Intra-host: the initiator is the NIC). */
#ifndef URO_SEGMENT_OPS_H
#define URO_SEGMENT_OPS_H

#include <sys/uio.h>

#include "cqe.h"
#include "peer.h"
#include "recv_queue.h"

/* Finds the MR an lkey or rkey names: NULL when none does. */
const struct uro_seg_mr *uro_mr_lookup(const struct uro_peer *p, uint32_t key, int remote);

/* The MR an lkey names when it covers [addr, addr+len): NULL otherwise. */
const struct uro_seg_mr *uro_lkey_region(const struct uro_peer *p, uint32_t lkey, uint64_t addr,
					 uint64_t len);

/* IBV_WC_SUCCESS with *addr the target address of [va, va+len) in the
 * owner's address space, or IBV_WC_REM_ACCESS_ERR (IBTA 9.7.5.1.3, 10.6.3).
 * pd and qpn are the target QP's. */
enum ibv_wc_status uro_rkey_check(const struct uro_peer *p, uint32_t pd, uint32_t qpn,
				  uint32_t rkey, uint64_t va, uint64_t len, unsigned access,
				  uint64_t *addr);

/* Turns an SGE list into iovecs in the owner's address space, checking
 * each lkey, PD, bounds and (need_write) LOCAL_WRITE. Returns
 * IBV_WC_SUCCESS or IBV_WC_LOC_PROT_ERR; *total is the list's length. */
enum ibv_wc_status uro_sge_iov(const struct uro_peer *p, uint32_t pd, const struct ibv_sge *sge,
			       uint32_t n, int need_write, struct iovec *iov, int *niov,
			       uint64_t *total);

/* The PD a receive's buffers must be on: its SRQ's (1-based, 0 none),
 * else its QP's, qp_pd. */
uint32_t uro_recv_pd(const struct uro_peer *p, uint32_t srq_one_based, uint32_t qp_pd);

/* Takes the next receive of a QP (its own queue or its SRQ), or of an SRQ
 * by its 1-based index (an XRC SRQ, named by the request). */
int uro_take_recv(struct uro_peer *p, struct uro_seg_qp *qp, struct uro_recv *out);
int uro_take_srq_recv(struct uro_peer *p, uint32_t srq_one_based, struct uro_recv *out);

/* Adds e to a CQ of p and wakes its channel when armed; a full ring is an
 * overrun, reported as IBV_EVENT_CQ_ERR. */
void uro_deliver(struct uro_peer *p, uint32_t cq_index, const struct uro_cqe *e, int solicited);

/* An asynchronous event on its way to the owner's async_fd. It names its
 * object by table index and serial as well as by the owner's pointer, so
 * that the owner can drop an event whose object was destroyed before the
 * event was read, as the kernel does (ibv_get_async_event(3): destroying
 * an object waits only for the events already reported). */
struct uro_event_record {
	uint64_t token; /* the owner's struct ibv_qp, ibv_cq or ibv_srq */
	uint32_t type;	/* enum ibv_event_type */
	uint32_t index; /* in the owner's QP, CQ or SRQ table */
	uint32_t serial;
	uint32_t reserved;
};

void uro_raise_event(struct uro_peer *p, enum ibv_event_type type, uint32_t index, uint64_t token,
		     uint32_t serial);

/* Moves a QP to ERR; its own receives complete with IBV_WC_WR_FLUSH_ERR,
 * and a QP on an SRQ reports Last WQE Reached (IBTA 10.8.6, 11.6.3). */
void uro_qp_error(struct uro_peer *p, struct uro_seg_qp *qp);
/* Completes every receive on the QP's own queue with IBV_WC_WR_FLUSH_ERR. */
void uro_flush_rq(struct uro_peer *p, struct uro_seg_qp *qp);

static inline uint32_t uro_qp_state(const struct uro_seg_qp *qp)
{
	return __atomic_load_n(&qp->state, __ATOMIC_ACQUIRE);
}

#endif
