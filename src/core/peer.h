/* Another process's segment, mapped so that this process can act on its
 * objects as its NIC would (docs/design.md, Intra-host: the initiator is
 * the NIC). A context's own segment is a peer too, so loopback takes the
 * same path. */
#ifndef URO_PEER_H
#define URO_PEER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "segment.h"

#define URO_PEER_FDS 16

struct uro_direct_maps;

struct uro_peer {
	unsigned slot;
	pid_t pid;
	int self;	 /* the context's own segment: nothing to unmap */
	int dead;	 /* the process is gone: every request to it fails */
	int attach_told; /* the kernel's refusal to attach to it was explained */
	/* The owner's process as the kernel knows it (pidfd_open(2)), or -1:
	 * readable once it has exited. Looked at once per URO_PEER_ALIVE_NS,
	 * not per request (uro_peer_alive). */
	int pidfd;
	uint64_t alive_until_ns;
	uint8_t *base;
	size_t size;
	uint64_t arena_off; /* where its rings may be */
	struct uro_seg_header *hdr;
	struct uro_seg_qp *qp;
	struct uro_seg_cq *cq;
	struct uro_seg_srq *srq;
	struct uro_seg_mr *mr;
	struct uro_seg_share *share;	/* beside mr, by index */
	struct uro_direct_maps *direct; /* its regions mapped here (direct_map.h) */
	struct uro_seg_mcast *mcast;	/* URO_MAX_MCAST_ATTACH entries */
	struct uro_seg_atomics *atomics;
	/* The owner's pipes (channels, async events) opened through /proc:
	 * looked up without a lock, added under fds_lock. */
	int nfds;
	struct {
		int remote; /* -1: retired, the local number free for reuse */
		int local;
		uint64_t ino; /* the pipe's: the owner may reuse the number */
	} fds[URO_PEER_FDS];
	pthread_mutex_t fds_lock;
};

/* 0, or a negative errno: -ESRCH no such live process, -EACCES it belongs to
 * another user (cross-memory attach would be refused too). p is zeroed
 * first, unless it is attached already: then the slot's current owner
 * replaces the previous one in place, at the same address (the slot may
 * have a new owner, and other threads may still hold p). */
int uro_peer_attach(struct uro_peer *p, const char *registry_dir, unsigned slot);
/* The same, mapped read-only, for a reader that never writes (`uroce
 * stat`): a mistake of its cannot change a running program's segment. */
int uro_peer_observe(struct uro_peer *p, const char *registry_dir, unsigned slot);
void uro_peer_self(struct uro_peer *p, struct uro_segment *own, unsigned slot);
void uro_peer_detach(struct uro_peer *p);

/* Whether p's process may still be running: 0 once it has exited, even
 * without closing its context (a crash, _exit). A request served only
 * from its segment's memory (a staged SEND, an atomic) makes no system
 * call that would say so, and a NIC never completes a request to a QP
 * whose process is gone. Checked at most once per URO_PEER_ALIVE_NS of
 * the coarse clock (uro_coarse_ns: up to a timer tick late, 1-4 ms): the
 * precise clock read on every request was a twentieth of a small WRITE's
 * cost on shared memory. */
#define URO_PEER_ALIVE_NS 1000000ull
int uro_peer_alive(struct uro_peer *p);

/* The descriptor numbered remote_fd in the owner, opened again through
 * /proc (its owner's user may) with flags, if it still names the object
 * whose inode (and device, unless 0) it named when the owner published
 * it: the owner may have reused the number. The fd, or -1. */
int uro_peer_open_fd(const struct uro_peer *p, int remote_fd, int flags, uint64_t dev,
		     uint64_t ino);

/* An fd of this process that writes into the owner's pipe numbered
 * remote_fd whose inode is ino, or -1. */
int uro_peer_pipe(struct uro_peer *p, int remote_fd, uint64_t ino);
/* The inode of the file fd is open on (0 when it cannot be read): what
 * names an owner's pipe for uro_peer_pipe. */
uint64_t uro_fd_ino(int fd);

/* Every index and offset read from a segment is checked before use: the
 * owner's process wrote it, and nothing it writes may make this one read or
 * write outside the mapping (docs/design.md, A process is a function of the
 * device: its trust model). */

/* [off, off+len) of the segment's arena, or NULL. */
static inline void *uro_peer_range(const struct uro_peer *p, uint64_t off, uint64_t len)
{
	if (off < p->arena_off || off > p->size || len > p->size - off)
		return NULL;
	return p->base + off;
}

/* Table entries by index: NULL when the index is out of the table. SRQs
 * are named 1-based, 0 being "none". */
static inline struct uro_seg_cq *uro_peer_cq(const struct uro_peer *p, uint32_t index)
{
	return index < URO_MAX_CQ ? &p->cq[index] : NULL;
}

static inline struct uro_seg_srq *uro_peer_srq(const struct uro_peer *p, uint32_t one_based)
{
	return one_based && one_based <= URO_MAX_SRQ ? &p->srq[one_based - 1] : NULL;
}

static inline struct uro_seg_mr *uro_peer_mr(const struct uro_peer *p, uint32_t index)
{
	return index < URO_MAX_MR ? &p->mr[index] : NULL;
}

#endif
