/* The rsocket calls that move bytes (rsocket(3)): every receive and send
 * form of the socket API, on an rsocket's stream. */
#include <string.h>

#include "cm.h"
#include "rsocket.h"

URO_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	struct rsock *rs = rs_get(socket);
	ssize_t n;

	if (!rs)
		return -1;
	n = rs->dg ? rs_dgram_recvfrom(rs, buf, len, flags, NULL, NULL)
		   : rs_recv(rs, buf, len, flags);
	rs_put(rs);
	return n;
}

URO_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	struct rsock *rs = rs_get(socket);
	ssize_t n;

	if (!rs)
		return -1;
	n = rs->dg ? rs_dgram_sendto(rs, buf, len, flags, NULL) : rs_send(rs, buf, len, flags);
	rs_put(rs);
	return n;
}

/* A stream's source is its peer, as a connected TCP socket's. */
URO_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
			     struct sockaddr *src_addr, socklen_t *addrlen)
{
	struct rsock *rs = rs_get(socket);
	ssize_t n;

	if (rs && rs->dg) {
		n = rs_dgram_recvfrom(rs, buf, len, flags, src_addr, addrlen);
		rs_put(rs);
		return n;
	}
	if (rs)
		rs_put(rs);
	n = rrecv(socket, buf, len, flags);

	if (n >= 0 && src_addr && addrlen)
		(void)rgetpeername(socket, src_addr, addrlen);
	return n;
}

/* A connected stream goes where it is connected (as TCP's sendto). */
URO_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
			   const struct sockaddr *dest_addr, socklen_t addrlen)
{
	struct rsock *rs = rs_get(socket);
	ssize_t n;

	(void)addrlen;
	if (rs && rs->dg) {
		n = rs_dgram_sendto(rs, buf, len, flags, dest_addr);
		rs_put(rs);
		return n;
	}
	if (rs)
		rs_put(rs);
	return rsend(socket, buf, len, flags);
}

URO_EXPORT ssize_t rread(int socket, void *buf, size_t count)
{
	return rrecv(socket, buf, count, 0);
}

URO_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return rsend(socket, buf, count, 0);
}

/* Each buffer in turn, until one is left short: the total, or -1 when
 * the first moved nothing. */
static ssize_t vector(int socket, const struct iovec *iov, int iovcnt, int flags, int out)
{
	ssize_t total = 0;

	for (int i = 0; i < iovcnt; i++) {
		ssize_t n = out ? rsend(socket, iov[i].iov_base, iov[i].iov_len, flags)
				: rrecv(socket, iov[i].iov_base, iov[i].iov_len, flags);

		if (n < 0)
			return total ? total : -1;
		total += n;
		if ((size_t)n < iov[i].iov_len)
			break;
	}
	return total;
}

URO_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	return vector(socket, iov, iovcnt, 0, 0);
}

URO_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	return vector(socket, iov, iovcnt, 0, 1);
}

URO_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	ssize_t n = vector(socket, msg->msg_iov, (int)msg->msg_iovlen, flags, 0);

	msg->msg_controllen = 0;
	msg->msg_flags = 0;
	if (n >= 0 && msg->msg_name)
		(void)rgetpeername(socket, msg->msg_name, &msg->msg_namelen);
	return n;
}

URO_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	return vector(socket, msg->msg_iov, (int)msg->msg_iovlen, flags, 1);
}
