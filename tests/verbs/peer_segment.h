/* A context's segment as a peer process maps it, for tests that play a
 * peer caught at a bad moment (killed, stopped, mid-copy). */
#ifndef URO_TEST_PEER_SEGMENT_H
#define URO_TEST_PEER_SEGMENT_H

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "segment.h"

/* The segment of the context qp belongs to, mapped through its memfd. */
static inline void *map_segment(struct ibv_qp *qp)
{
	char want[64], path[64], link[64];

	snprintf(want, sizeof(want), "/memfd:uroce-seg-%u (deleted)", qp->qp_num >> 12);
	for (int fd = 3; fd < 1024; fd++) {
		ssize_t n;
		void *map;
		int mfd;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, link, sizeof(link) - 1);
		if (n < 0)
			continue;
		link[n] = 0;
		if (strcmp(link, want))
			continue;
		mfd = open(path, O_RDWR);
		map = mmap(NULL, uro_seg_size(), PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
		close(mfd);
		return map == MAP_FAILED ? NULL : map;
	}
	return NULL;
}

/* The key table entry a key names, in a mapped segment. */
static inline struct uro_seg_mr *key_entry(void *map, uint32_t key)
{
	struct uro_seg_header *h = map;

	return (struct uro_seg_mr *)((char *)map + h->mr_off) + ((key >> 8) - 1);
}

#endif
