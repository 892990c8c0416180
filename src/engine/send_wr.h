/* The engine's part of a send work request, used by both transports
 * (send_wr.c). */
#ifndef URO_SEND_WR_H
#define URO_SEND_WR_H

#include <stdint.h>
#include <sys/uio.h>

#include "objects.h"

/* The checks ibv_post_send(3) makes before accepting a request: 0,
 * EINVAL or ENOMEM. */
int uro_send_validate(struct uro_qp *qp, const struct ibv_send_wr *wr);
/* Completes a request on its QP's send CQ; a successful unsignaled one
 * leaves no entry. */
void uro_send_complete(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
		       uint32_t seq, enum ibv_wc_status status, uint32_t byte_len);
/* The request's local buffers as an iovec, checked against this
 * process's regions (inline data needs no key). */
enum ibv_wc_status uro_send_gather(struct uro_context *ctx, struct uro_qp *qp,
				   const struct ibv_send_wr *wr, int need_write, struct iovec *iov,
				   int *n, uint64_t *len);
/* A copy of the request a retry can run later: its SGEs, and its inline
 * data read now. */
void uro_pending_copy(struct uro_pending *p, const struct ibv_send_wr *wr, uint32_t seq);
/* The QP after a failed request: ERR, or SQE for UD. */
void uro_requester_error(struct uro_context *ctx, struct uro_qp *qp);
/* BIND_MW and LOCAL_INV: a work-completion status. */
int uro_mw_execute(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr);
/* The local ACK timeout and the RNR NAK timer, in nanoseconds. */
uint64_t uro_ack_timeout_ns(uint8_t timeout);
uint64_t uro_rnr_timer_ns(uint8_t field);

#endif
