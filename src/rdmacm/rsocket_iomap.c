/* riomap, riounmap and riowrite (riomap(3), riowrite(3)): a program maps
 * part of its memory for the peer to write into, and the peer writes it
 * with RDMA WRITEs, in order with the stream (one RC QP carries both), so
 * that what is sent after a riowrite arrives after the bytes it wrote.
 *
 * A map is an entry of the peer's iomap table, as in librdmacm: the peer
 * says at connect how many entries it holds (RDMA_IOMAPSIZE, none unless
 * set), and each entry goes to it as a write into the table before the
 * next bytes of the stream (rsocket_stream.c, rs_flush_maps). */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cm.h"
#include "rsocket.h"

/* The lowest entry of the peer's table no map of ours holds, or -1. */
static int free_index(const struct rsock *rs)
{
	for (uint32_t i = 0; i < rs->st.peer_iomap.length; i++) {
		const struct rs_local_map *m = rs->st.maps;

		while (m && m->index != i)
			m = m->next;
		if (!m)
			return (int)i;
	}
	return -1;
}

static int map(struct rsock *rs, void *buf, size_t len, off_t *offset)
{
	struct rs_local_map *m;
	int index = free_index(rs);

	if (index < 0 || len > UINT32_MAX) {
		errno = index < 0 ? ENOMEM : EINVAL;
		return -1;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return -1;
	/* Offset -1: the buffer's address names it (riomap(3)). */
	m->offset = *offset == -1 ? (uintptr_t)buf : (uint64_t)*offset;
	m->index = (uint32_t)index;
	m->mr = ibv_reg_mr(rs->pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!m->mr ||
	    rs_queue_map(rs, m->index, m->offset, (uintptr_t)buf, m->mr->rkey, (uint32_t)len)) {
		if (m->mr)
			ibv_dereg_mr(m->mr);
		free(m);
		return -1;
	}
	m->next = rs->st.maps;
	rs->st.maps = m;
	*offset = (off_t)m->offset;
	/* Sent now if it can be; else before the next bytes of the stream. */
	(void)rs_flush_maps(rs, MSG_DONTWAIT);
	return 0;
}

URO_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	struct rsock *rs = rs_get(socket);
	int err = 0;

	(void)flags;
	if (!rs)
		return -1;
	if (rs->state != RS_CONNECTED)
		err = ENOTCONN;
	else if (prot != PROT_WRITE || !len || (offset < 0 && offset != -1))
		err = EINVAL;
	else if (map(rs, buf, len, &offset))
		err = errno;
	rs_put(rs);
	errno = err;
	return err ? -1 : offset;
}

/* The peer is told the entry is empty, so that its riowrite there fails
 * with EINVAL rather than with a remote access error that ends the
 * connection (librdmacm tells it nothing). */
URO_EXPORT int riounmap(int socket, void *buf, size_t len)
{
	struct rsock *rs = rs_get(socket);
	struct rs_local_map **p, *m;

	if (!rs)
		return -1;
	for (p = &rs->st.maps; *p; p = &(*p)->next)
		if ((*p)->mr->addr == buf && (*p)->mr->length == len)
			break;
	m = *p;
	if (!m) {
		rs_put(rs);
		errno = EINVAL;
		return -1;
	}
	*p = m->next;
	if (!rs_queue_map(rs, m->index, 0, 0, 0, 0))
		(void)rs_flush_maps(rs, MSG_DONTWAIT);
	ibv_dereg_mr(m->mr);
	free(m);
	rs_put(rs);
	return 0;
}

URO_EXPORT size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	struct rsock *rs = rs_get(socket);
	ssize_t n;

	if (!rs)
		return (size_t)-1;
	/* A datagram rsocket is never RS_CONNECTED: ENOTCONN. */
	if (offset < 0) {
		rs_put(rs);
		errno = EINVAL;
		return (size_t)-1;
	}
	n = rs_write_direct(rs, buf, count, (uint64_t)offset, flags);
	rs_put(rs);
	return (size_t)n;
}
