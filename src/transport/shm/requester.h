/* What the shared-memory requester's parts share (requester.c, which
 * checks, orders and retries requests and moves the bytes of SEND, WRITE
 * and READ; atomic_requester.c, which hands atomics to their target). */
#ifndef URO_REQUESTER_H
#define URO_REQUESTER_H

#include <stdint.h>
#include <sys/uio.h>

#include "key_hold.h"
#include "objects.h"

/* Results of an attempt besides a work-completion status: it must wait. */
/* A request that waits: RNR NAKed, unanswered (its ACK timeout then
 * runs, and a retry is spent), or an atomic the target holds and has not
 * answered yet (looked at again soon, its ACK timeout still running). */
enum { RESULT_RNR = -1, RESULT_NO_ACK = -2, RESULT_UNANSWERED = -3 };

/* Where a request lands: the QP, and the receive side it uses. For RC and
 * UC that is the QP's own (its RQ or SRQ, its PD, its CQ, its process's
 * memory); for XRC it is the SRQ the request names, in whichever process
 * of the domain owns it: its PD checks keys, its CQ completes the receives,
 * its process's memory is read and written (IBTA A14.4). */
struct target {
	struct uro_peer *qp_peer; /* the QP's process */
	struct uro_seg_qp *qp;
	struct uro_peer *peer; /* the receive side's process */
	uint32_t srq;	       /* 1-based, 0 = the QP's own queue */
	uint32_t key_pd;       /* the PD remote keys and windows must be on */
	uint32_t recv_cq;      /* where receives complete */
};

/* The target's memory under rkey for [va, va + len) with access, held in
 * *h: IBV_WC_SUCCESS with *riov, or the responder's error status. */
int uro_remote_range(struct target *t, uint32_t rkey, uint64_t va, uint64_t len, unsigned access,
		     struct iovec *riov, struct uro_holds *h);

/* Moves len bytes between liov and riov (to_peer: towards the target) and
 * lets h go: IBV_WC_SUCCESS, a status, or RESULT_NO_ACK. */
int uro_remote_move(struct target *t, int to_peer, const struct iovec *liov, int nl,
		    const struct iovec *riov, uint64_t len, struct uro_holds *h);

/* FETCH_AND_ADD and CMP_AND_SWP (atomic_requester.c): a status, or
 * RESULT_NO_ACK while the target has not answered. */
int uro_atomic_op(struct uro_qp *qp, const struct ibv_send_wr *wr, struct target *t,
		  const struct iovec *liov, int nl, uint64_t len);

/* ATOMIC WRITE, likewise. */
int uro_atomic_write(struct uro_qp *qp, const struct ibv_send_wr *wr, struct target *t,
		     const struct iovec *liov, int nl, uint64_t len);

/* The head's atomic ends without its answer: its slot goes back. */
void uro_atomic_forget(struct uro_qp *qp);

#endif
