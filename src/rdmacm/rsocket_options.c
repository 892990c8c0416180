/* rsetsockopt, rgetsockopt and rfcntl (rsocket(3)): the buffer sizes,
 * RDMA_SQSIZE, RDMA_RQSIZE, RDMA_INLINE and RDMA_IOMAPSIZE size the next
 * connection; O_NONBLOCK makes every call return EAGAIN (or EINPROGRESS)
 * where it would wait; SO_ERROR gives a non-blocking connect's outcome.
 * The others are kept and read back, as rdma-core's rsockets keeps them,
 * with no effect on an RC stream that has no Nagle delay and no idle
 * probes. */
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rdma/rsocket.h>
#include <stdarg.h>
#include <string.h>

#include "cm.h"
#include "rsocket.h"

/* The int an option is kept in, or NULL for one not known. */
static int *option(struct rsock *rs, int level, int name)
{
	if (level == SOL_SOCKET) {
		switch (name) {
		case SO_SNDBUF:
			return &rs->sndbuf;
		case SO_RCVBUF:
			return &rs->rcvbuf;
		case SO_KEEPALIVE:
			return &rs->keepalive;
		case SO_REUSEADDR:
			return &rs->reuseaddr;
		}
	} else if (level == IPPROTO_TCP) {
		switch (name) {
		case TCP_NODELAY:
			return &rs->nodelay;
		case TCP_KEEPIDLE:
			return &rs->keepidle;
		}
	} else if (level == SOL_RDMA) {
		switch (name) {
		case RDMA_INLINE:
			return &rs->inline_size;
		case RDMA_IOMAPSIZE:
			return &rs->iomapsize;
		case RDMA_SQSIZE:
			return &rs->sqsize;
		case RDMA_RQSIZE:
			return &rs->rqsize;
		}
	}
	return NULL;
}

/* A connection's queues are made when it starts: the SOL_RDMA sizes are
 * refused from then on, as librdmacm refuses them. */
static int sizes_fixed(const struct rsock *rs)
{
	return rs->state != RS_NEW && rs->state != RS_LISTENING;
}

/* What a stream's buffer option reads back: the size it makes, the one
 * set doubled as a kernel socket's (socket(7)). */
static int effective(const struct rsock *rs, const int *o)
{
	if (!rs->dg && (o == &rs->sndbuf || o == &rs->rcvbuf))
		return (int)rs_buf_size(*o);
	if (o == &rs->iomapsize)
		return (int)rs_iomap_size_of(rs_iomap_scale(*o > 0 ? (unsigned)*o : 0));
	return *o;
}

URO_EXPORT int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t optlen)
{
	struct rsock *rs = rs_get(socket);
	int *o, v, ret = 0;

	if (!rs)
		return -1;
	/* RDMA_ROUTE: the CM's own route stands; it is taken and not used. */
	if (level == SOL_RDMA && optname == RDMA_ROUTE) {
		rs_put(rs);
		return 0;
	}
	o = option(rs, level, optname);
	if (!o || !optval || optlen < sizeof(int) || (level == SOL_RDMA && sizes_fixed(rs))) {
		errno = o ? EINVAL : ENOPROTOOPT;
		ret = -1;
	} else {
		memcpy(&v, optval, sizeof(v));
		*o = v;
		if (o == &rs->reuseaddr)
			ret = rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v,
					      sizeof(v));
	}
	rs_put(rs);
	return ret;
}

URO_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{
	struct rsock *rs = rs_get(socket);
	int *o, v;

	if (!rs)
		return -1;
	if (level == SOL_SOCKET && optname == SO_ERROR) {
		if (rs->state != RS_FAILED)
			rs_connect_advance(rs);
		v = rs->err;
		rs->err = 0;
		o = &v;
	} else {
		o = option(rs, level, optname);
		v = o ? effective(rs, o) : 0;
	}
	if (!o || !optval || !optlen || *optlen < sizeof(int)) {
		rs_put(rs);
		errno = o ? EINVAL : ENOPROTOOPT;
		return -1;
	}
	memcpy(optval, &v, sizeof(int));
	*optlen = sizeof(int);
	rs_put(rs);
	return 0;
}

URO_EXPORT int rfcntl(int socket, int cmd, ...)
{
	struct rsock *rs = rs_get(socket);
	va_list ap;
	int ret = 0;

	if (!rs)
		return -1;
	va_start(ap, cmd);
	if (cmd == F_GETFL) {
		ret = O_RDWR | (rs->nonblock ? O_NONBLOCK : 0);
	} else if (cmd == F_SETFL) {
		rs->nonblock = !!(va_arg(ap, int) & O_NONBLOCK);
	} else {
		errno = EINVAL;
		ret = -1;
	}
	va_end(ap);
	rs_put(rs);
	return ret;
}
