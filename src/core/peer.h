/* Another process's segment, mapped so that this process can act on its
 * objects as its NIC would (design.md decision 4). A context's own segment
 * is a peer too, so loopback takes the same path. */
#ifndef URO_PEER_H
#define URO_PEER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "segment.h"

#define URO_PEER_FDS 16

struct uro_peer {
	unsigned slot;
	pid_t pid;
	int self; /* the context's own segment: nothing to unmap */
	int dead; /* the process is gone: every request to it fails */
	uint8_t *base;
	size_t size;
	struct uro_seg_header *hdr;
	struct uro_seg_qp *qp;
	struct uro_seg_cq *cq;
	struct uro_seg_srq *srq;
	struct uro_seg_mr *mr;
	/* The owner's pipes (channels, async events) opened through /proc. */
	int nfds;
	struct {
		int remote;
		int local;
	} fds[URO_PEER_FDS];
};

/* 0, or a negative errno: -ESRCH no such live process, -EACCES it belongs to
 * another user (cross-memory attach would be refused too). */
int uro_peer_attach(struct uro_peer *p, const char *registry_dir, unsigned slot);
void uro_peer_self(struct uro_peer *p, struct uro_segment *own, unsigned slot);
void uro_peer_detach(struct uro_peer *p);

/* An fd of this process that writes into the owner's pipe numbered
 * remote_fd, or -1. */
int uro_peer_pipe(struct uro_peer *p, int remote_fd);

static inline void *uro_peer_ptr(const struct uro_peer *p, uint64_t off)
{
	return p->base + off;
}

#endif
