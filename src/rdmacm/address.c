/* Addresses and routes: rdma_bind_addr(3), rdma_resolve_addr(3),
 * rdma_resolve_route(3). An address is a uroce device's when the netdev
 * that carries it is the device's (device.c). */
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cm.h"
#include "cm_mad.h"
#include "log.h"

static int is_wildcard(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
	return !memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, &in6addr_any, 16);
}

/* The CM's TCP socket for an id, bound to its source address: this is
 * what owns the port (port 0 picks a free one). */
int uro_cm_bind_socket(struct uro_cm_id *cm, const struct sockaddr *addr)
{
	socklen_t len = sizeof(struct sockaddr_storage);
	int one = 1;
	int s = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		return -1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (addr->sa_family == AF_INET6 && cm->afonly >= 0)
		setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &cm->afonly, sizeof(cm->afonly));
	if (bind(s, addr, sa_len(addr)) || getsockname(s, &cm->id.route.addr.src_addr, &len)) {
		int err = errno;

		close(s);
		return uro_cm_err(err);
	}
	cm->sock = s;
	return 0;
}

/* The kernel's CM counts a loopback address as "any" (cma.c,
 * cma_any_addr): bound to one, an id has no device, takes requests for
 * every address of its family and holds the port on all of them. Here that
 * is so when no uroce device carries the address (a link on lo does):
 * libfabric's verbs provider binds "localhost" for a server given no
 * address, on hosts whose only RDMA device is on another netdev. The
 * socket takes the port on the wildcard, the id shows the address given. */
static int bind_as_any(struct uro_cm_id *cm, const struct sockaddr *addr)
{
	struct sockaddr_storage any, *src = &cm->id.route.addr.src_storage;
	__be16 port;

	memcpy(&any, addr, sa_len(addr));
	if (addr->sa_family == AF_INET)
		((struct sockaddr_in *)&any)->sin_addr.s_addr = htonl(INADDR_ANY);
	else
		((struct sockaddr_in6 *)&any)->sin6_addr = in6addr_any;
	if (uro_cm_bind_socket(cm, (struct sockaddr *)&any))
		return -1;
	port = uro_cm_port_of((struct sockaddr *)src);
	memcpy(src, addr, sa_len(addr));
	/* The port sits at the same offset in both families. */
	((struct sockaddr_in *)src)->sin_port = port;
	return 0;
}

URO_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct uro_cm_id *cm = to_cm(id);
	struct ibv_context *verbs = NULL;
	int any, rc;

	if (!addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) ||
	    cm->state != CM_IDLE || cm->sock >= 0)
		return uro_cm_err(EINVAL);
	/* A wildcard belongs to every device; any other address must be one
	 * a uroce device carries (rdma_bind_addr(3): ENODEV otherwise). */
	any = is_wildcard(addr) || !(verbs = uro_cm_device_for_addr(addr));
	if (any && !is_wildcard(addr) && !uro_cm_is_loopback(addr))
		return uro_cm_err(ENODEV);
	if (any && !is_wildcard(addr) ? bind_as_any(cm, addr) : uro_cm_bind_socket(cm, addr)) {
		if (errno == EADDRINUSE)
			uro_warn("rdma_bind_addr: uroce's CM carries RDMA port %u on TCP port %u, "
				 "which another socket holds on this address",
				 ntohs(uro_cm_port_of(addr)), ntohs(uro_cm_port_of(addr)));
		return -1;
	}
	uro_cm_set_device(id, verbs);
	id->port_num = verbs ? 1 : 0;
	/* Ready to take connections from now on: a request that arrives
	 * before rdma_listen waits in the kernel's queue until the CM thread
	 * takes it, instead of being refused (qperf publishes its port between
	 * the two calls). From other hosts too, and before the TCP port
	 * listens, which whoever watches the host takes for "ready". A
	 * connect on this id dials from a fresh socket. */
	uro_cm_lock();
	rc = uro_cm_mad_bind(cm);
	if (rc)
		uro_cm_mad_unlisten(cm);
	uro_cm_unlock();
	if (rc) {
		close(cm->sock);
		cm->sock = -1;
		uro_cm_set_device(id, NULL);
		id->port_num = 0;
		memset(&id->route.addr.src_storage, 0, sizeof(id->route.addr.src_storage));
		return uro_cm_err(rc);
	}
	listen(cm->sock, URO_CM_BACKLOG);
	return 0;
}

/* The local address the kernel would send to dst from. */
static int source_for(const struct sockaddr *dst, struct sockaddr_storage *src)
{
	socklen_t len = sizeof(*src);
	int s = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int rc;

	if (s < 0)
		return -1;
	rc = connect(s, dst, sa_len(dst)) || getsockname(s, (struct sockaddr *)src, &len);
	close(s);
	return rc ? -1 : 0;
}

URO_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
				 struct sockaddr *dst_addr, int timeout_ms)
{
	struct uro_cm_id *cm = to_cm(id);
	struct sockaddr_storage src;
	int err = 0;

	(void)timeout_ms; /* resolution is immediate: it never outlasts it */
	if (!dst_addr || (dst_addr->sa_family != AF_INET && dst_addr->sa_family != AF_INET6))
		return uro_cm_err(EINVAL);
	if (src_addr && cm->sock < 0 && rdma_bind_addr(id, src_addr))
		return -1;
	memcpy(&id->route.addr.dst_storage, dst_addr, sa_len(dst_addr));
	if (cm->sock < 0) {
		if (source_for(dst_addr, &src)) {
			err = errno ? errno : ENETUNREACH;
		} else {
			((struct sockaddr_in *)&src)->sin_port = 0;
			memcpy(&id->route.addr.src_storage, &src, sizeof(src));
		}
	}
	if (!err && !id->verbs) {
		uro_cm_set_device(id, uro_cm_device_for_local(&id->route.addr.src_addr));
		err = id->verbs ? 0 : ENODEV;
		/* The kernel fails the call itself when a loopback address finds
		 * no device at all (cma.c, cma_resolve_loopback). */
		if (err && uro_cm_is_loopback(dst_addr))
			return uro_cm_err(err);
	}
	/* An address no uroce device reaches is an ADDR_ERROR event, as the
	 * kernel reports one it cannot resolve. */
	if (err) {
		uro_cm_post(cm, RDMA_CM_EVENT_ADDR_ERROR, -err, NULL, 0, NULL);
		return uro_cm_wait(cm, RDMA_CM_EVENT_ADDR_RESOLVED);
	}
	id->port_num = 1;
	cm->state = CM_ADDR_RESOLVED;
	uro_cm_post(cm, RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, 0, NULL);
	return uro_cm_wait(cm, RDMA_CM_EVENT_ADDR_RESOLVED);
}

URO_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct uro_cm_id *cm = to_cm(id);

	(void)timeout_ms;
	if (cm->state != CM_ADDR_RESOLVED)
		return uro_cm_err(EINVAL);
	if (uro_cm_fill_route(cm)) {
		uro_cm_post(cm, RDMA_CM_EVENT_ROUTE_ERROR, -EHOSTUNREACH, NULL, 0, NULL);
		return uro_cm_wait(cm, RDMA_CM_EVENT_ROUTE_RESOLVED);
	}
	cm->state = CM_ROUTE_RESOLVED;
	uro_cm_post(cm, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, 0, NULL);
	return uro_cm_wait(cm, RDMA_CM_EVENT_ROUTE_RESOLVED);
}
