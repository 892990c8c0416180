/* The CM's side of a connection whose peer is on another host: its
 * messages as MADs (mad.c) through this process's agent (mad_agent.c),
 * resent until answered and answered again on duplicates, as the kernel's
 * CM does (IBTA 12.9 and 12.10; cm.c in Linux). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm_mad.h"
#include "device_model.h"
#include "limits.h"
#include "own_address.h"

/* A REQ, REP, DREQ or SIDR_REQ is sent this many times more before the
 * CM gives up (the Max CM Retries a REQ asks for: mad.c). */
#define RESENDS 15
/* The MRA's service timeout while the program decides (rdma_cm's 24). */
#define MRA_SERVICE_TIMEOUT 24
#define SIDR_REJECTED	    2 /* IBTA table 111 */

struct uro_cm_mad_conn {
	struct uro_cm_id *id;
	struct uro_cm_mad_conn *next;
	uint32_t local_id, remote_id;
	uint64_t tid;		   /* of the peer's last transaction: answers echo it */
	uint64_t sid;		   /* the service connected to */
	union ibv_gid sgid, dgid;  /* ours, the peer's */
	uint8_t last[URO_MAD_LEN]; /* the message resent until answered */
	int resends_left;
};

static struct uro_cm_mad_conn *conns;
static pid_t conns_pid; /* a forked child's ids are its own */
static uint64_t next_tid;

/* The list is this process's: a forked child starts without its
 * parent's connections. */
static void own_conns(void)
{
	if (conns_pid != getpid()) {
		conns = NULL;
		conns_pid = getpid();
	}
}

static struct uro_cm_mad_conn *find(uint32_t local_id)
{
	own_conns();
	for (struct uro_cm_mad_conn *c = conns; c; c = c->next)
		if (c->local_id == local_id)
			return c;
	return NULL;
}

static struct uro_cm_mad_conn *conn_new(struct uro_cm_id *id)
{
	struct uro_cm_mad_conn *c = calloc(1, sizeof(*c));

	if (!c || uro_mad_agent_fd() < 0) {
		free(c);
		return NULL;
	}
	own_conns();
	c->id = id;
	c->local_id = uro_mad_comm_id();
	c->next = conns;
	conns = c;
	id->mad = c;
	return c;
}

void uro_cm_mad_forget(struct uro_cm_id *id)
{
	struct uro_cm_mad_conn **p = &conns;

	if (!id->mad)
		return;
	while (*p && *p != id->mad)
		p = &(*p)->next;
	if (*p)
		*p = id->mad->next;
	free(id->mad);
	id->mad = NULL;
}

/* An id that goes with its connection up tells its peer, as the kernel's
 * CM does when an id is destroyed (cm.c's cm_destroy_id sends a DREQ), so
 * that the peer's DREQ or its next one is not left to time out. */
void uro_cm_mad_goodbye(struct uro_cm_id *id)
{
	if (id->mad && (id->state == CM_CONNECTED || id->state == CM_ACCEPTING))
		uro_cm_tell(id, MSG_DREQ, NULL, 0, NULL, 0);
}

/* A process that exits with connections up: the kernel destroys a
 * process's ids when its rdma_cm file closes; uroce's library does it
 * for those carried by MADs when the process exits. */
__attribute__((destructor)) static void goodbye_all(void)
{
	uro_cm_lock();
	if (conns_pid == getpid())
		for (struct uro_cm_mad_conn *c = conns; c; c = c->next)
			uro_cm_mad_goodbye(c->id);
	uro_cm_unlock();
}

int uro_cm_peer_is_remote(const struct uro_cm_id *id)
{
	return !uro_gid_is_own(&id->path.dgid);
}

static uint64_t service_of(const struct uro_cm_id *id, const struct sockaddr *listening)
{
	return uro_cm_service_id(id->id.ps, ntohs(uro_cm_port_of(listening)));
}

static void cma_of(const struct uro_cm_id *id, struct uro_cma_hdr *h)
{
	const struct sockaddr *src = &id->id.route.addr.src_addr;

	h->ip_version = src->sa_family == AF_INET6 ? 6 : 4;
	h->port = ntohs(uro_cm_port_of(src));
	uro_cm_addr_gid(src, &h->src);
	uro_cm_addr_gid(&id->id.route.addr.dst_addr, &h->dst);
}

static uint8_t port_mtu(struct ibv_context *ctx)
{
	struct ibv_port_attr port;

	return ctx && !ibv_query_port(ctx, 1, &port) ? (uint8_t)port.active_mtu : IBV_MTU_1024;
}

static uint64_t node_guid(struct ibv_context *ctx)
{
	struct ibv_device_attr d;

	return ctx && !ibv_query_device(ctx, &d) ? be64toh(d.node_guid) : 0;
}

/* The message of this type from the id's side, as mad.c builds it. */
static void compose(struct uro_cm_id *id, enum uro_cm_msg_type type, const struct uro_cm_peer *me,
		    uint16_t status, const void *pdata, uint8_t pdata_len, struct uro_cm_mad *m)
{
	struct uro_cm_mad_conn *c = id->mad;

	memset(m, 0, sizeof(*m));
	m->type = type;
	m->tid = c->tid;
	m->local_id = c->local_id;
	m->remote_id = c->remote_id;
	m->sid = c->sid;
	m->guid = node_guid(id->id.verbs);
	if (me)
		m->peer = *me;
	m->status = status;
	m->pdata_len = pdata_len;
	if (pdata_len)
		memcpy(m->pdata, pdata, pdata_len);
	switch (type) {
	case MSG_REQ:
	case MSG_SIDR_REQ:
		m->transport = id->id.qp_type == IBV_QPT_UC;
		m->mtu = port_mtu(id->id.verbs);
		m->ack_timeout = id->ack_timeout >= 0 ? (uint8_t)id->ack_timeout : 14;
		m->lgid = c->sgid;
		m->rgid = c->dgid;
		cma_of(id, &m->cma);
		break;
	case MSG_REP:
		m->ack_timeout = 15; /* the target ACK delay a soft device has (rxe's) */
		break;
	case MSG_REJ: /* a passive side rejects a REQ, an active one a REP */
		m->msg = id->listener ? 0 : 1;
		break;
	case MSG_MRA:
		m->service_timeout = MRA_SERVICE_TIMEOUT;
		break;
	case MSG_DREQ:
		m->remote_qpn = id->peer.qpn;
		break;
	case MSG_SIDR_REP:
		m->status = status ? SIDR_REJECTED : 0;
		m->peer.qkey = URO_UDP_QKEY;
		break;
	default:
		break;
	}
}

/* Requests and DREQs open a transaction of their own; every other
 * message answers the peer's last one and echoes its TID. */
static int opens_transaction(enum uro_cm_msg_type t)
{
	return t == MSG_REQ || t == MSG_SIDR_REQ || t == MSG_DREQ;
}

static int resent_until_answered(enum uro_cm_msg_type t)
{
	return opens_transaction(t) || t == MSG_REP;
}

int uro_cm_tell(struct uro_cm_id *id, enum uro_cm_msg_type type, const struct uro_cm_peer *peer,
		uint16_t status, const void *pdata, uint8_t pdata_len)
{
	struct uro_cm_mad_conn *c = id->mad;
	uint8_t mad[URO_MAD_LEN];
	struct uro_cm_mad m;

	if (!c)
		return id->sock >= 0 ? uro_cm_send(id->sock, type, peer, status, pdata, pdata_len)
				     : -1;
	if (opens_transaction(type))
		c->tid = (uint64_t)++next_tid << 32 | c->local_id; /* cm.c: cm_form_tid */
	compose(id, type, peer, status, pdata, pdata_len, &m);
	uro_cm_mad_build(&m, mad);
	if (resent_until_answered(type)) {
		memcpy(c->last, mad, sizeof(mad));
		c->resends_left = RESENDS;
	}
	return uro_mad_send(id->id.verbs, &c->sgid, &c->dgid, mad);
}

int uro_cm_mad_resend(struct uro_cm_id *id)
{
	struct uro_cm_mad_conn *c = id->mad;

	if (!c || c->resends_left <= 0)
		return 0;
	c->resends_left--;
	uro_mad_send(id->id.verbs, &c->sgid, &c->dgid, c->last);
	return 1;
}

int uro_cm_mad_connect(struct uro_cm_id *id, const struct uro_cm_peer *me, const void *pdata,
		       uint8_t pdata_len)
{
	struct uro_cm_mad_conn *c = conn_new(id);
	int ud = id->id.qp_type == IBV_QPT_UD;

	if (!c)
		return ENOMEM;
	c->sid = service_of(id, &id->id.route.addr.dst_addr);
	c->sgid = id->path.sgid;
	c->dgid = id->path.dgid;
	if (uro_mad_port_open(id->id.verbs) || uro_cm_watch(id)) {
		uro_cm_mad_forget(id);
		return ENOMEM;
	}
	id->state = CM_CONNECTING;
	if (uro_cm_tell(id, ud ? MSG_SIDR_REQ : MSG_REQ, me, 0, pdata, pdata_len))
		return ENETUNREACH;
	uro_cm_expect_answer(id);
	return 0;
}

/* The links a listener hears requests on from other hosts: its own, or
 * for an id bound to any address every device that is not on lo. */
static int listen_on(struct ibv_context *ctx)
{
	union ibv_gid g;

	if (ibv_query_gid(ctx, 1, 0, &g))
		return 0;
	/* On lo a device's first GID is 127.0.0.1's (or ::1's). */
	return !(g.raw[10] == 0xff && g.raw[11] == 0xff && g.raw[12] == 127) &&
	       !(g.global.subnet_prefix == 0 && g.global.interface_id == htobe64(1));
}

/* Whether other hosts reach the bound id: through its device, or for an
 * id bound to any address through any device off lo, whose QP 1 this
 * process can then answer from. -1: such a device whose QP 1 would not
 * open. */
static int heard_from_other_hosts(struct uro_cm_id *l)
{
	struct ibv_context **list;
	int n = 0;

	if (l->id.verbs)
		return !listen_on(l->id.verbs) ? 0 : uro_mad_port_open(l->id.verbs) ? -1 : 1;
	list = rdma_get_devices(NULL);
	for (int i = 0; list && list[i]; i++)
		if (listen_on(list[i]) && !uro_mad_port_open(list[i]))
			n++;
	rdma_free_devices(list);
	return n > 0;
}

/* An IPv6 socket that takes IPv4 too (IPV6_V6ONLY off: the id's AFONLY,
 * or the system's default). */
static int takes_ipv4_too(int sock)
{
	int v6only = 1;
	socklen_t len = sizeof(v6only);

	return !getsockopt(sock, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &len) && !v6only;
}

int uro_cm_mad_bind(struct uro_cm_id *l)
{
	const struct sockaddr *a = &l->id.route.addr.src_addr;
	uint64_t sid = service_of(l, a);
	struct in_addr any4 = {0};
	union ibv_gid gid;
	int heard;

	/* 127/8 or ::1 of a link on lo: no other host reaches the id.
	 * Without such a link the id is bound as any address (address.c), as
	 * the kernel counts them (cma.c: cma_any_addr, whose listener
	 * cma_match_private_data lets take any request): it names its
	 * family's wildcard. */
	if (uro_cm_is_loopback(a) && l->id.verbs)
		return 0;
	heard = heard_from_other_hosts(l);
	if (heard <= 0)
		return heard ? ENOMEM : 0;
	if (!uro_cm_is_loopback(a))
		uro_cm_addr_gid(a, &gid);
	else if (a->sa_family == AF_INET)
		uro_gid_from_ip(&gid, AF_INET, &any4);
	else
		memset(&gid, 0, sizeof(gid)); /* :: */
	l->svc_fd[0] = uro_mad_service_fd(sid, &gid);
	if (l->svc_fd[0] < 0)
		return errno;
	if (l->id.verbs || a->sa_family != AF_INET6 || !takes_ipv4_too(l->sock))
		return 0;
	uro_gid_from_ip(&gid, AF_INET, &any4);
	l->svc_fd[1] = uro_mad_service_fd(sid, &gid);
	return l->svc_fd[1] < 0 ? errno : 0;
}

int uro_cm_mad_listen(struct uro_cm_id *l)
{
	for (int i = 0; i < 2; i++) {
		if (l->svc_fd[i] < 0 || l->svc_watch[i])
			continue;
		l->svc_watch[i] = uro_cm_watch_fd(l->svc_fd[i], l);
		if (!l->svc_watch[i])
			return ENOMEM;
	}
	return 0;
}

void uro_cm_mad_unlisten(struct uro_cm_id *l)
{
	for (int i = 0; i < 2; i++) {
		if (l->svc_watch[i])
			uro_cm_unwatch_fd(l->svc_watch[i]); /* and closes the fd */
		else if (l->svc_fd[i] >= 0)
			close(l->svc_fd[i]);
		l->svc_watch[i] = NULL;
		l->svc_fd[i] = -1;
	}
}

static void gid_to_sockaddr(const union ibv_gid *g, int ipv, uint16_t port,
			    struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (ipv == 4) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		memcpy(&in->sin_addr, g->raw + 12, 4);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		memcpy(&in6->sin6_addr, g->raw, 16);
	}
}

static void to_msg(const struct uro_cm_mad *m, struct uro_cm_msg *msg)
{
	memset(msg, 0, sizeof(*msg));
	msg->type = (uint8_t)m->type;
	msg->status = m->status;
	msg->peer = m->peer;
	msg->peer.mtu = m->mtu;
	msg->pdata_len = m->pdata_len;
	memcpy(msg->pdata, m->pdata, m->pdata_len < URO_PDATA_MAX ? m->pdata_len : URO_PDATA_MAX);
}

/* A REQ or SIDR_REQ for the listener l. A REQ heard again while the
 * program decides is answered with an MRA (cm.c's cm_dup_req_handler);
 * one whose connection is further along is ignored: its REP is resent on
 * its own timer. */
static void on_request(struct uro_cm_id *l, const struct uro_cm_mad *m)
{
	struct sockaddr_storage src, dst;
	struct uro_cm_msg msg;
	struct uro_cm_id *id;
	struct uro_cm_mad_conn *c;

	for (c = conns; c; c = c->next)
		if (c->remote_id == m->local_id && c->id->listener == l) {
			if (c->id->state == CM_REQ_RCVD && m->type == MSG_REQ)
				uro_cm_tell(c->id, MSG_MRA, NULL, 0, NULL, 0);
			return;
		}
	gid_to_sockaddr(&m->cma.dst, m->cma.ip_version, (uint16_t)m->sid, &src);
	gid_to_sockaddr(&m->cma.src, m->cma.ip_version, m->cma.port, &dst);
	to_msg(m, &msg);
	/* Replies go to the REQ's primary path (as Linux's cm.c sends them); a SIDR_REQ
	 * has none but rdma_cm's addresses. */
	msg.peer.gid = m->type == MSG_REQ ? m->lgid : m->cma.src;
	id = uro_cm_take_request(l, &msg, (struct sockaddr *)&src, (struct sockaddr *)&dst);
	if (!id)
		return; /* not taken: its peer's retries run out (cma.c drops on ENOMEM) */
	c = conn_new(id);
	if (!c || uro_cm_watch(id)) {
		id->state = CM_DISCONNECTED; /* the program's accept fails */
		return;
	}
	c->remote_id = m->local_id;
	c->tid = m->tid;
	c->sid = m->sid;
	c->sgid = m->type == MSG_REQ ? m->rgid : m->cma.dst;
	c->dgid = msg.peer.gid;
}

/* A message of a connection this agent knows by its ID. */
static void on_message(struct uro_cm_mad_conn *c, const struct uro_cm_mad *m)
{
	struct uro_cm_id *id = c->id;
	struct uro_cm_msg msg;

	if (c->remote_id && m->local_id && m->local_id != c->remote_id)
		return; /* another connection's, or stale */
	c->tid = m->tid;
	if (m->type == MSG_REP && !c->remote_id)
		c->remote_id = m->local_id;
	if (m->type == MSG_REP && id->state == CM_CONNECTED) {
		uro_cm_tell(id, MSG_RTU, NULL, 0, NULL, 0); /* our RTU was lost */
		return;
	}
	if (m->type == MSG_DREQ && m->remote_qpn != id->qpn)
		return; /* cm.c ignores a DREQ for another QP */
	if (m->type == MSG_DREQ && !id->watch) {
		uro_cm_tell(id, MSG_DREP, NULL, 0, NULL, 0); /* our DREP was lost */
		return;
	}
	if (m->type == MSG_REP || m->type == MSG_RTU || m->type == MSG_REJ || m->type == MSG_DREP ||
	    m->type == MSG_SIDR_REP)
		c->resends_left = 0; /* answered */
	to_msg(m, &msg);
	msg.peer.gid = c->dgid; /* a REP names no GID: the path is the REQ's */
	uro_cm_deliver(id, &msg);
}

static int has_gid(struct ibv_context *ctx, const union ibv_gid *gid)
{
	union ibv_gid g;

	for (int i = 0; i < URO_GID_TBL_MAX && !ibv_query_gid(ctx, 1, i, &g); i++)
		if (!memcmp(&g, gid, sizeof(g)))
			return 1;
	return 0;
}

/* A DREQ of a connection this agent no longer knows: a DREP, so that the
 * peer lets its end go (cm.c's cm_issue_drep). */
static void answer_unheard(const struct uro_mad_envelope *e)
{
	uint8_t out[URO_MAD_LEN];
	struct ibv_context **list;
	union ibv_gid src, dst;

	if (!uro_mad_unheard(e->mad, out))
		return;
	memcpy(src.raw, e->dst, 16);
	memcpy(dst.raw, e->src, 16);
	list = rdma_get_devices(NULL);
	for (int i = 0; list && list[i]; i++)
		if (has_gid(list[i], &src)) {
			uro_mad_send(list[i], &src, &dst, out);
			break;
		}
	rdma_free_devices(list);
}

static void take(const struct uro_mad_envelope *e, struct uro_cm_id *listener)
{
	struct uro_cm_mad m;
	struct uro_cm_mad_conn *c;

	if (uro_cm_mad_parse(e->mad, &m))
		return; /* malformed: dropped, as a CM drops it */
	if (m.type == MSG_REQ || m.type == MSG_SIDR_REQ) {
		if (listener)
			on_request(listener, &m);
		return;
	}
	c = find(m.remote_id);
	if (c)
		on_message(c, &m);
	else if (m.type == MSG_DREQ)
		answer_unheard(e);
}

void uro_cm_mad_readable(int fd, struct uro_cm_id *listener)
{
	struct uro_mad_envelope e;

	if (recv(fd, &e, sizeof(e), MSG_DONTWAIT) == (ssize_t)sizeof(e))
		take(&e, listener);
}
