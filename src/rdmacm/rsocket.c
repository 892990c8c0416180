/* The rsocket calls that make, connect and end a stream (rsocket(3)):
 * rsocket, rbind, rlisten, raccept, rconnect, rshutdown, rclose and the
 * address getters, over the CM's own calls. The descriptor table is the
 * one piece of global state: the ABI hands the program plain ints.
 * Datagram rsockets take their own calls (rsocket_dgram.c). */
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm.h"
#include "rsocket.h"

#define RS_RESOLVE_MS	2000
#define RS_ESTABLISH_MS 10000
#define RS_DRAIN_MS	2000
#define RS_BACKLOG_MAX	128
#define RS_CONN_PDATA	(RS_AF_IB_HDR + sizeof(struct rs_conn_data))

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rsock **table;
static int table_len;

static int table_put(struct rsock *rs)
{
	int err = 0;

	pthread_mutex_lock(&table_lock);
	if (rs->fd >= table_len) {
		int n = rs->fd + 64;
		struct rsock **t = realloc(table, sizeof(*t) * (size_t)n);

		if (t) {
			memset(t + table_len, 0, sizeof(*t) * (size_t)(n - table_len));
			table = t;
			table_len = n;
		} else {
			err = ENOMEM;
		}
	}
	if (!err)
		table[rs->fd] = rs;
	pthread_mutex_unlock(&table_lock);
	return err;
}

/* For fork.c only. */
void rs_table_lock(void)
{
	pthread_mutex_lock(&table_lock);
}

void rs_table_unlock(void)
{
	pthread_mutex_unlock(&table_lock);
}

static void table_drop(int fd)
{
	pthread_mutex_lock(&table_lock);
	if (fd >= 0 && fd < table_len)
		table[fd] = NULL;
	pthread_mutex_unlock(&table_lock);
}

struct rsock *rs_find(int fd)
{
	struct rsock *rs = NULL;

	pthread_mutex_lock(&table_lock);
	if (fd >= 0 && fd < table_len)
		rs = table[fd];
	pthread_mutex_unlock(&table_lock);
	return rs;
}

struct rsock *rs_get(int fd)
{
	struct rsock *rs = rs_find(fd);

	if (!rs) {
		errno = EBADF;
		return NULL;
	}
	pthread_mutex_lock(&rs->lock);
	return rs;
}

void rs_put(struct rsock *rs)
{
	pthread_mutex_unlock(&rs->lock);
}

/* An rsocket with its own event channel, whose fd names it. */
static struct rsock *rs_new(void)
{
	struct rsock *rs = calloc(1, sizeof(*rs));

	if (!rs)
		return NULL;
	rs->ch = rdma_create_event_channel();
	if (!rs->ch) {
		free(rs);
		return NULL;
	}
	(void)fcntl(rs->ch->fd, F_SETFL, fcntl(rs->ch->fd, F_GETFL) | O_NONBLOCK);
	rs->fd = rs->ch->fd;
	rs->inline_size = RS_INLINE_DEF;
	pthread_mutex_init(&rs->lock, NULL);
	return rs;
}

static void rs_free(struct rsock *rs)
{
	if (rs->dg || !rs->ch) {
		rs_dgram_free(rs);
		pthread_mutex_destroy(&rs->lock);
		free(rs);
		return;
	}
	for (unsigned i = 0; i < rs->npending; i++) {
		rdma_reject(rs->pending[i].id, NULL, 0);
		rdma_destroy_id(rs->pending[i].id);
	}
	free(rs->pending);
	rs_destroy_resources(rs);
	if (rs->id)
		rdma_destroy_id(rs->id);
	rdma_destroy_event_channel(rs->ch);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
}

static int dgram_socket(int domain, int type)
{
	struct rsock *rs = calloc(1, sizeof(*rs));
	int err;

	if (!rs)
		return -1;
	rs->fd = -1;
	pthread_mutex_init(&rs->lock, NULL);
	rs->nonblock = !!(type & SOCK_NONBLOCK);
	if (domain == AF_IB)
		errno = EAFNOSUPPORT;
	if (domain == AF_IB || rs_dgram_new(rs, domain) || (err = table_put(rs))) {
		err = errno;
		rs_free(rs);
		errno = err;
		return -1;
	}
	return rs->fd;
}

URO_EXPORT int rsocket(int domain, int type, int protocol)
{
	struct rsock *rs;
	int err;

	(void)protocol;
	if (domain != AF_INET && domain != AF_INET6 && domain != AF_IB) {
		errno = EAFNOSUPPORT;
		return -1;
	}
	if ((type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) == SOCK_DGRAM)
		return dgram_socket(domain, type);
	if ((type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) != SOCK_STREAM) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	rs = rs_new();
	if (!rs)
		return -1;
	rs->nonblock = !!(type & SOCK_NONBLOCK);
	if (rdma_create_id(rs->ch, &rs->id, rs, RDMA_PS_TCP) || (err = table_put(rs))) {
		err = errno;
		rs_free(rs);
		errno = err;
		return -1;
	}
	return rs->fd;
}

URO_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rsock *rs = rs_get(socket);
	int ret;

	if (!rs)
		return -1;
	ret = rs->dg ? rs_dgram_bind(rs, addr, addrlen)
		     : rdma_bind_addr(rs->id, (struct sockaddr *)addr);
	rs_put(rs);
	return ret;
}

URO_EXPORT int rlisten(int socket, int backlog)
{
	struct rsock *rs = rs_get(socket);
	int ret;

	if (!rs)
		return -1;
	if (rs->dg) {
		rs_put(rs);
		errno = EOPNOTSUPP; /* as listen(2) on a UDP socket */
		return -1;
	}
	rs->backlog = backlog < 1		 ? 1
		      : backlog > RS_BACKLOG_MAX ? RS_BACKLOG_MAX
						 : (unsigned)backlog;
	rs->pending = calloc(rs->backlog, sizeof(*rs->pending));
	ret = rs->pending ? rdma_listen(rs->id, backlog) : -1;
	if (!ret)
		rs->state = RS_LISTENING;
	rs_put(rs);
	return ret;
}

/* A listener takes the requests that came: an rsocket peer's is held
 * for raccept, anything else (or one past the backlog) is rejected. */
void rs_listen_advance(struct rsock *rs)
{
	struct rdma_cm_event *e;

	while (rdma_get_cm_event(rs->ch, &e) == 0) {
		struct rdma_cm_id *id = e->id;
		struct rs_conn_data peer;
		int take =
		    e->event == RDMA_CM_EVENT_CONNECT_REQUEST &&
		    !rs_conn_data_valid(e->param.conn.private_data, e->param.conn.private_data_len,
					rs_conn_offset(id), &peer) &&
		    rs->npending < rs->backlog;
		int refuse = e->event == RDMA_CM_EVENT_CONNECT_REQUEST && !take;

		rdma_ack_cm_event(e);
		if (take) {
			rs->pending[rs->npending].id = id;
			rs->pending[rs->npending++].peer = peer;
		}
		if (refuse) {
			rdma_reject(id, NULL, 0);
			rdma_destroy_id(id);
		}
	}
}

/* The REQ's or REP's parameters, with our connection data in buf, after
 * rdma_cm's header on AF_IB (offset). */
static void conn_param(struct rsock *rs, struct rdma_conn_param *p, uint8_t *buf, size_t offset)
{
	struct rs_conn_data mine;

	rs_conn_data_of(rs, &mine);
	memset(buf, 0, offset);
	memcpy(buf + offset, &mine, sizeof(mine));
	memset(p, 0, sizeof(*p));
	p->private_data = buf;
	p->private_data_len = (uint8_t)(offset + sizeof(mine));
	p->responder_resources = 1;
	p->initiator_depth = 1;
	p->flow_control = 1;
	p->retry_count = 7;
	p->rnr_retry_count = 7; /* control messages wait for a receive, never fail */
}

/* The accepted side waits for the RTU: data may flow only then. */
static int wait_established(struct rsock *rs)
{
	struct rdma_cm_event *e;
	int waited = 0;

	for (;;) {
		while (rdma_get_cm_event(rs->ch, &e) == 0) {
			enum rdma_cm_event_type t = e->event;

			rdma_ack_cm_event(e);
			if (t == RDMA_CM_EVENT_ESTABLISHED)
				return 0;
			if (t == RDMA_CM_EVENT_CONNECT_ERROR || t == RDMA_CM_EVENT_DISCONNECTED ||
			    t == RDMA_CM_EVENT_UNREACHABLE || t == RDMA_CM_EVENT_REJECTED) {
				errno = ECONNABORTED;
				return -1;
			}
		}
		if (waited >= RS_ESTABLISH_MS) {
			errno = ETIMEDOUT;
			return -1;
		}
		struct pollfd pfd = {.fd = rs->fd, .events = POLLIN};

		pthread_mutex_unlock(&rs->lock);
		(void)poll(&pfd, 1, 100);
		pthread_mutex_lock(&rs->lock);
		waited += 100;
	}
}

static void copy_addr(const struct sockaddr *a, struct sockaddr *out, socklen_t *len)
{
	socklen_t n = a->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
		      : a->sa_family == AF_IB  ? sizeof(struct sockaddr_ib)
					       : sizeof(struct sockaddr_in);

	if (!out || !len)
		return;
	memcpy(out, a, *len < n ? *len : n);
	*len = n;
}

/* An rsocket for a request, with the listener's options (opts). */
static struct rsock *accept_one(const struct rsock *opts, const struct rs_pending *req)
{
	struct rsock *rs = rs_new();
	struct rdma_cm_id *id = req->id;
	struct rdma_conn_param p;
	uint8_t pdata[RS_CONN_PDATA];
	int err;

	if (!rs) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return NULL;
	}
	pthread_mutex_lock(&rs->lock); /* rs_wait lets it go while asleep */
	rs->id = id;
	rs->sndbuf = opts->sndbuf;
	rs->rcvbuf = opts->rcvbuf;
	rs->nodelay = opts->nodelay;
	rs->inline_size = opts->inline_size;
	rs->iomapsize = opts->iomapsize;
	rs->sqsize = opts->sqsize;
	rs->rqsize = opts->rqsize;
	if (rdma_migrate_id(id, rs->ch) || rs_create_resources(rs))
		goto fail;
	id->context = rs;
	rs_set_peer(rs, &req->peer);
	conn_param(rs, &p, pdata, 0); /* a REP's: no header on AF_IB either */
	rs->state = RS_CONNECTING;
	if (rdma_accept(id, &p) || wait_established(rs) || table_put(rs))
		goto fail;
	rs->state = RS_CONNECTED;
	pthread_mutex_unlock(&rs->lock);
	return rs;
fail:
	err = errno;
	pthread_mutex_unlock(&rs->lock);
	rs_free(rs);
	errno = err;
	return NULL;
}

URO_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsock *l = rs_get(socket), *rs, opts;
	struct rs_pending req;

	if (!l)
		return -1;
	if (l->state != RS_LISTENING) {
		rs_put(l);
		errno = EINVAL;
		return -1;
	}
	for (rs_listen_advance(l); !l->npending; rs_listen_advance(l)) {
		if (l->nonblock) {
			rs_put(l);
			errno = EAGAIN;
			return -1;
		}
		rs_wait(l, -1);
	}
	req = l->pending[0];
	memmove(l->pending, l->pending + 1, --l->npending * sizeof(*l->pending));
	opts = *l;
	rs_put(l);
	rs = accept_one(&opts, &req);
	if (!rs)
		return -1;
	copy_addr(rdma_get_peer_addr(rs->id), addr, addrlen);
	return rs->fd;
}

static void connect_failed(struct rsock *rs, int err)
{
	rs->state = RS_FAILED;
	rs->err = err;
}

/* The next step of a connect, for each CM event that came. */
static void connect_event(struct rsock *rs, const struct rdma_cm_event *e)
{
	struct rdma_conn_param p;
	uint8_t pdata[RS_CONN_PDATA];
	struct rs_conn_data peer;

	switch (e->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(rs->id, RS_RESOLVE_MS))
			connect_failed(rs, errno);
		else
			rs->state = RS_RESOLVING_ROUTE;
		return;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (rs_create_resources(rs)) {
			connect_failed(rs, errno);
			return;
		}
		conn_param(rs, &p, pdata, rs_conn_offset(rs->id));
		if (rdma_connect(rs->id, &p))
			connect_failed(rs, errno);
		else
			rs->state = RS_CONNECTING;
		return;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (rs_conn_data_valid(e->param.conn.private_data, e->param.conn.private_data_len,
				       0, &peer)) {
			rdma_disconnect(rs->id);
			connect_failed(rs, EPROTO); /* not an rsocket at the other end */
			return;
		}
		rs_set_peer(rs, &peer);
		rs->state = RS_CONNECTED;
		return;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		connect_failed(rs, EHOSTUNREACH);
		return;
	case RDMA_CM_EVENT_REJECTED:
		connect_failed(rs, ECONNREFUSED);
		return;
	case RDMA_CM_EVENT_UNREACHABLE:
		connect_failed(rs, ETIMEDOUT);
		return;
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_DISCONNECTED:
		connect_failed(rs, ECONNRESET);
		return;
	default:
		return;
	}
}

void rs_connect_advance(struct rsock *rs)
{
	struct rdma_cm_event *e;

	while ((rs->state == RS_RESOLVING_ADDR || rs->state == RS_RESOLVING_ROUTE ||
		rs->state == RS_CONNECTING) &&
	       rdma_get_cm_event(rs->ch, &e) == 0) {
		connect_event(rs, e);
		rdma_ack_cm_event(e);
	}
}

URO_EXPORT int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rsock *rs = rs_get(socket);
	int err = 0;

	if (!rs)
		return -1;
	if (rs->dg) {
		err = rs_dgram_connect(rs, addr, addrlen) ? errno : 0;
		rs_put(rs);
		errno = err;
		return err ? -1 : 0;
	}
	if (rs->state == RS_CONNECTED || rs->state == RS_LISTENING)
		err = rs->state == RS_CONNECTED ? EISCONN : EINVAL;
	else if (rs->state != RS_NEW)
		err = EALREADY;
	else if (rdma_resolve_addr(rs->id, NULL, (struct sockaddr *)addr, RS_RESOLVE_MS))
		err = errno;
	else
		rs->state = RS_RESOLVING_ADDR;
	for (rs_connect_advance(rs); !err && rs->state != RS_CONNECTED; rs_connect_advance(rs)) {
		if (rs->state == RS_FAILED) {
			err = rs->err;
			rs->err = 0;
		} else if (rs->nonblock) {
			err = EINPROGRESS;
		} else {
			rs_wait(rs, -1);
		}
	}
	rs_put(rs);
	errno = err;
	return err ? -1 : 0;
}

/* A control code to the peer, waiting (a second at most) for one of the
 * few control messages that may be in flight. */
static void send_ctrl(struct rsock *rs, enum rs_ctrl code)
{
	for (int tries = 0; !rs->disconnected && !rs->peer_closed && tries < 100; tries++) {
		if (rs_send_ctrl(rs, code) == 0)
			return;
		rs_wait(rs, 10);
	}
}

/* SHUTDOWN, once: the peer reads to the end of the stream, then 0. */
static void send_fin(struct rsock *rs)
{
	if (!rs->fin_sent)
		send_ctrl(rs, RS_CTRL_SHUTDOWN);
	rs->fin_sent = 1;
}

/* DISCONNECT, and what was sent is delivered before the CM moves the QP
 * to ERR. A peer that sent its own DISCONNECT reads nothing more, and may
 * have moved its QP to ERR already (librdmacm's rshutdown does). */
static void disconnect(struct rsock *rs)
{
	if (!rs->peer_closed) {
		send_ctrl(rs, RS_CTRL_DISCONNECT);
		(void)rs_drain_sends(rs, RS_DRAIN_MS);
	}
	rs->fin_sent = 1;
	if (!rs->disconnected)
		rdma_disconnect(rs->id);
	rs->disconnected = 1;
}

URO_EXPORT int rshutdown(int socket, int how)
{
	struct rsock *rs = rs_get(socket);
	int err = 0;

	if (!rs)
		return -1;
	if (rs->dg)
		err = shutdown(rs->fd, how) ? errno : 0;
	else if (rs->state != RS_CONNECTED)
		err = ENOTCONN;
	else if (how == SHUT_RDWR)
		disconnect(rs);
	else if (how == SHUT_WR)
		send_fin(rs);
	else if (how != SHUT_RD)
		err = EINVAL;
	rs_put(rs);
	errno = err;
	return err ? -1 : 0;
}

URO_EXPORT int rclose(int socket)
{
	struct rsock *rs = rs_get(socket);

	if (!rs)
		return -1;
	table_drop(socket);
	if (rs->dg)
		rs_dgram_drain(rs);
	else if (rs->state == RS_CONNECTED)
		disconnect(rs);
	rs_put(rs);
	rs_free(rs);
	return 0;
}

static int names(int socket, struct sockaddr *addr, socklen_t *addrlen, int peer)
{
	struct rsock *rs = rs_get(socket);

	int ret = 0;

	if (!rs)
		return -1;
	if (rs->dg)
		ret = rs_dgram_names(rs, addr, addrlen, peer);
	else
		copy_addr(peer ? rdma_get_peer_addr(rs->id) : rdma_get_local_addr(rs->id), addr,
			  addrlen);
	rs_put(rs);
	return ret;
}

URO_EXPORT int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return names(socket, addr, addrlen, 1);
}

URO_EXPORT int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return names(socket, addr, addrlen, 0);
}
