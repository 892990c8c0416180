/* The shared-memory transport (docs/architecture.md, The data path on
 * shared memory): what the layer above calls. A request runs against its
 * target process's published tables, its bytes moved with cross-memory
 * attach or, on memory the initiator maps, with a copy; atomics by the
 * target process's atomic server, or on memory the initiator maps, with
 * CPU atomics. */
#ifndef URO_SHM_H
#define URO_SHM_H

#include <stdint.h>
#include <sys/uio.h>

#include "objects.h"

/* Runs a QP's requests from wr on, in order, each completing or waiting
 * behind the ones that wait (requester.c): 0, or an errno with *bad. */
int uro_shm_post_send(struct uro_context *ctx, struct uro_qp *qp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad);
/* Retries what waits behind RNR NAKs and ACK timeouts: the nanoseconds
 * until the next retry is due, the sooner of that and next (0: none). */
uint64_t uro_shm_progress(struct uro_context *ctx, uint64_t next);
/* Destroying or resetting a QP drops what waits (IBTA 10.3.1). */
void uro_qp_drop_pending(struct uro_qp *qp);

/* The atomic server (atomic_server.c): started once this process may be
 * the target of atomics; idempotent, and cheap once running. */
void uro_atomic_server_init(struct uro_context *ctx);
void uro_atomic_server_start(struct uro_context *ctx);
void uro_atomic_server_stop(struct uro_context *ctx);

/* UD over shared memory (datagram.c): the receiving QP a QPN names, in the
 * process that holds its slot now (NULL: none, or not a UD QP ready to
 * receive), with its process in *p; one datagram into it; and one to a
 * multicast group, into every attached QP of this host's processes on
 * this device: 0 when the address names no group (the datagram is
 * dropped, as a NIC's responder drops it). */
struct uro_seg_qp *uro_shm_ud_target(struct uro_context *ctx, uint32_t qpn, struct uro_peer **p);
void uro_shm_ud_deliver(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
			const struct iovec *liov, int nl, uint64_t len, struct uro_peer *p,
			struct uro_seg_qp *t);
int uro_shm_ud_multicast(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
			 const struct iovec *liov, int nl, uint64_t len);

#endif
