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

/* Fills s (all but serial) for [addr, addr+len) when it lies in m, one
 * shared mapping of an object a peer can open or attach (m as
 * uro_range_accessible found it at registration): 0, and *fd a descriptor
 * of this process's on the object (-1 for System V) that names it for
 * peers and must stay open while s is published. -1 otherwise (s->kind is
 * then URO_SHARE_NONE). */
int uro_shareable_find(const struct uro_mapping *m, const void *addr, size_t len,
		       struct uro_seg_share *s, int *fd);

/* The direct path is on unless UROCE_DIRECT=0 (the escape hatch, and the
 * comparison bench/run makes). */
int uro_direct_enabled(void);

#endif
