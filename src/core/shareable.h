/* Whether memory the program registers can be mapped by another process
 * of the same user (the direct path, direct_map.h): memory a NIC's users
 * share between processes anyway (a MAP_SHARED mapping of a memfd, a POSIX
 * or System V shared-memory segment, a tmpfs or hugetlbfs file; perftest's
 * --use_hugepages takes System V huge pages). Private memory, what malloc
 * returns, is not: its pages exist in this process only, and the peer
 * reaches them with cross-memory attach. */
#ifndef URO_SHAREABLE_H
#define URO_SHAREABLE_H

#include <stddef.h>

#include "address_space.h"
#include "segment_layout.h"

/* The descriptors a context holds on the objects its regions lie in: one
 * an object, however many regions lie in it, so that a program that
 * registers many regions of one pool does not spend its own descriptors
 * on uroce's. Used under the context's lock. */
struct uro_share_fd {
	uint64_t dev, ino;
	int fd;
	unsigned refs;
};

struct uro_share_fds {
	struct uro_share_fd *e;
	unsigned n;
};

/* Fills s (all but serial) for [addr, addr+len) when it lies in m, one
 * shared mapping of an object a peer can open or attach (m as
 * uro_range_accessible found it at registration): 0, and *fd a descriptor
 * of t's on the object (-1 for System V) that names it for peers, held
 * until uro_share_fd_put. -1 otherwise (s->kind is then URO_SHARE_NONE). */
int uro_shareable_find(struct uro_share_fds *t, const struct uro_mapping *m, const void *addr,
		       size_t len, struct uro_seg_share *s, int *fd);

/* One region fewer on fd's object: its descriptor is closed with the last. */
void uro_share_fd_put(struct uro_share_fds *t, int fd);

/* Closes every descriptor: the context goes. */
void uro_share_fds_close(struct uro_share_fds *t);

/* The direct path is on unless UROCE_DIRECT=0 (the escape hatch, and the
 * comparison bench/run makes). */
int uro_direct_enabled(void);

#endif
