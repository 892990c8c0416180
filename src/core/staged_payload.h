/* Small SENDs travel in the receiver's completion. Between processes on a
 * host, a SEND's bytes cost the sender a process_vm_writev; for a payload
 * that fits in a CQE's second cache line the sender writes it there instead,
 * beside the completion, and the receiver copies it into its receive buffer
 * when it polls that completion: a memcpy in its own address space, and no
 * syscall on either side.
 *
 * A program cannot tell: a receive buffer's contents are defined only once
 * its completion has been polled (ibv_post_recv(3)). What could tell is
 * another reader of that memory, so a buffer in a region open to remote
 * access is always written at once. */
#ifndef URO_STAGED_PAYLOAD_H
#define URO_STAGED_PAYLOAD_H

#include <sys/uio.h>

#include "cqe.h"
#include "peer.h"
#include "recv_queue.h"

/* 1 with the payload of the local iovecs, len bytes, in e, when it may be
 * staged for receive r of target (already checked with uro_sge_iov);
 * 0 when the sender must copy it. The iovecs are read without a guard:
 * they must be the sender's own copy of the program's bytes (the
 * requester's bounce buffer), never the program's memory itself. */
int uro_stage_payload(const struct uro_peer *target, const struct uro_recv *r,
		      const struct iovec *liov, int nl, uint64_t len, struct uro_cqe *e);

/* The receiver's half, for an entry with staged_len set: the bytes go to
 * their receive buffer unless its region has been deregistered since.
 * EFAULT when the program unmapped or write-protected the buffer, else 0. */
int uro_place_payload(struct uro_peer *self, const struct uro_cqe *e);

#endif
