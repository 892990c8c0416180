/* riomap, riounmap and riowrite (riomap(3), riowrite(3)): a program maps
 * part of its memory for the peer to write into, and the peer writes it
 * with RDMA WRITEs, in order with the stream (one RC QP carries both), so
 * that what is sent after a riowrite arrives after the bytes it wrote.
 * The map and unmap go to the peer as control messages. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cm.h"
#include "rsocket.h"

static uint64_t next_offset(const struct rsock *rs)
{
	uint64_t end = 0;

	for (const struct rs_iomap *m = rs->local_maps; m; m = m->next)
		if (m->offset + m->len > end)
			end = m->offset + m->len;
	return end;
}

static unsigned count_maps(const struct rsock *rs)
{
	unsigned n = 0;

	for (const struct rs_iomap *m = rs->local_maps; m; m = m->next)
		n++;
	return n;
}

/* Tells the peer of a map (len > 0) or that the one at offset is gone. */
static int announce(struct rsock *rs, const struct rs_iomap *m, uint64_t len)
{
	struct rs_iomap_msg msg = {
	    .offset = m->offset, .addr = m->addr, .len = len, .rkey = m->mr ? m->mr->rkey : 0};

	for (int tries = 0; tries < 100; tries++) {
		if (rs_send_ctrl(rs, RS_MSG_IOMAP, &msg, sizeof(msg)) == 0)
			return 0;
		if (errno != EAGAIN)
			return -1;
		rs_wait(rs, 10);
	}
	errno = EAGAIN;
	return -1;
}

URO_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	struct rsock *rs = rs_get(socket);
	struct rs_iomap *m;
	int err = 0;

	(void)flags;
	if (!rs)
		return -1;
	if (rs->state != RS_CONNECTED)
		err = ENOTCONN;
	else if (prot != PROT_WRITE || !len || (offset < 0 && offset != -1))
		err = EINVAL;
	else if (rs->iomapsize > 0 && count_maps(rs) >= (unsigned)rs->iomapsize)
		err = ENOMEM;
	if (err)
		goto out;
	m = calloc(1, sizeof(*m));
	if (!m) {
		err = ENOMEM;
		goto out;
	}
	m->offset = offset == -1 ? next_offset(rs) : (uint64_t)offset;
	m->addr = (uintptr_t)buf;
	m->len = len;
	m->mr = ibv_reg_mr(rs->pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!m->mr || announce(rs, m, len)) {
		err = errno;
		if (m->mr)
			ibv_dereg_mr(m->mr);
		free(m);
		goto out;
	}
	m->next = rs->local_maps;
	rs->local_maps = m;
	offset = (off_t)m->offset;
out:
	rs_put(rs);
	errno = err;
	return err ? -1 : offset;
}

URO_EXPORT int riounmap(int socket, void *buf, size_t len)
{
	struct rsock *rs = rs_get(socket);
	struct rs_iomap **p;

	if (!rs)
		return -1;
	for (p = &rs->local_maps; *p; p = &(*p)->next)
		if ((*p)->addr == (uintptr_t)buf && (*p)->len == len)
			break;
	if (!*p) {
		rs_put(rs);
		errno = EINVAL;
		return -1;
	}
	struct rs_iomap *m = *p;

	*p = m->next;
	(void)announce(rs, m, 0);
	ibv_dereg_mr(m->mr);
	free(m);
	rs_put(rs);
	return 0;
}

/* The peer's newest map that holds [offset, offset + len). */
static const struct rs_iomap *peer_map(const struct rsock *rs, uint64_t offset, uint64_t len)
{
	for (const struct rs_iomap *m = rs->peer_maps; m; m = m->next)
		if (offset >= m->offset && offset + len <= m->offset + m->len)
			return m;
	return NULL;
}

URO_EXPORT size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	struct rsock *rs = rs_get(socket);
	const struct rs_iomap *m;
	ssize_t n;

	if (!rs)
		return (size_t)-1;
	if (rs->state == RS_CONNECTED) /* a stream's: a datagram rsocket has none */
		rs_progress(rs);       /* the peer's maps that came */
	m = offset >= 0 ? peer_map(rs, (uint64_t)offset, count) : NULL;
	if (rs->state != RS_CONNECTED || !m) {
		errno = rs->state != RS_CONNECTED ? ENOTCONN : EINVAL;
		rs_put(rs);
		return (size_t)-1;
	}
	n = rs_write_remote(rs, buf, count, m->addr + ((uint64_t)offset - m->offset), m->rkey,
			    flags);
	rs_put(rs);
	return (size_t)n;
}
