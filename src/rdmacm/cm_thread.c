/* The CM's passive side: one thread per process, asleep in epoll, that
 * accepts connection requests on listeners and turns every CM message a
 * peer sends into the event librdmacm delivers (rdma_get_cm_event(3)). A
 * TCP connection that drops is a peer gone: DISCONNECTED, in bounded
 * time, like a CM timeout. */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cm.h"

/* What an epoll entry stands for. */
struct watch {
	struct uro_cm_id *id;	    /* a listener or a connection's id */
	struct uro_cm_id *listener; /* an accepted socket before its REQ */
	int sock;
	int dead; /* dropped: its id may be gone */
	struct watch *next_dead;
};

static pthread_mutex_t cm_lock = PTHREAD_MUTEX_INITIALIZER;
static int epfd = -1;
/* The process whose thread reads epfd: a forked child inherits the fd but
 * not the thread, and must not share its parent's epoll instance. */
static pid_t thread_pid;
/* Dropped watches, freed between epoll batches: an event epoll already
 * returned may still name one, and must find it marked dead, not freed. */
static struct watch *graveyard;

static void arm(struct watch *w)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = w};

	epoll_ctl(epfd, EPOLL_CTL_ADD, w->sock, &ev);
}

static void drop(struct watch *w)
{
	epoll_ctl(epfd, EPOLL_CTL_DEL, w->sock, NULL);
	if (w->id)
		w->id->watch = NULL;
	w->dead = 1;
	w->next_dead = graveyard;
	graveyard = w;
}

static void bury(void)
{
	while (graveyard) {
		struct watch *w = graveyard;

		graveyard = w->next_dead;
		free(w);
	}
}

static void ud_param(struct uro_cm_id *id, struct uro_cm_event *e, const struct uro_cm_msg *m)
{
	struct ibv_ah_attr *ah = &e->ev.param.ud.ah_attr;

	e->ev.param.ud.qp_num = m->peer.qpn;
	e->ev.param.ud.qkey = m->peer.qkey;
	ah->port_num = 1;
	ah->dlid = m->peer.lid;
	ah->is_global = id->path.dgid.global.interface_id != 0 || !m->peer.lid;
	ah->grh.dgid = m->peer.gid;
	ah->grh.hop_limit = 64;
	for (int i = 0; i < 16; i++) {
		union ibv_gid g;

		if (ibv_query_gid(id->id.verbs, 1, i, &g) == 0 &&
		    !memcmp(&g, &id->path.sgid, sizeof(g))) {
			ah->grh.sgid_index = (uint8_t)i;
			break;
		}
	}
}

static void conn_param(struct uro_cm_event *e, const struct uro_cm_msg *m)
{
	struct rdma_conn_param *c = &e->ev.param.conn;

	c->responder_resources = m->peer.responder_resources;
	c->initiator_depth = m->peer.initiator_depth;
	c->retry_count = m->peer.retry_count;
	c->rnr_retry_count = m->peer.rnr_retry;
	c->srq = m->peer.srq;
	c->qp_num = m->peer.qpn;
}

/* A request on an accepted socket makes the id the listener's owner gets
 * in its CONNECT_REQUEST event. */
static void on_request(struct watch *w, const struct uro_cm_msg *m)
{
	struct uro_cm_id *l = w->listener;
	struct uro_cm_id *id;
	struct uro_cm_event *e;
	socklen_t len = sizeof(struct sockaddr_storage);

	if (m->type != MSG_REQ && m->type != MSG_SIDR_REQ)
		goto refuse;
	id = uro_cm_id_new(l->sync ? NULL : &l->chan->ch, l->id.context, l->id.ps, l->id.qp_type);
	if (!id)
		goto refuse;
	id->sock = w->sock;
	id->listener = l;
	id->peer = m->peer;
	id->state = CM_REQ_RCVD;
	getsockname(w->sock, &id->id.route.addr.src_addr, &len);
	len = sizeof(struct sockaddr_storage);
	getpeername(w->sock, &id->id.route.addr.dst_addr, &len);
	/* The listener's port, not the accepted socket's. */
	((struct sockaddr_in *)&id->id.route.addr.src_addr)->sin_port =
	    ((struct sockaddr_in *)&l->id.route.addr.src_addr)->sin_port;
	id->id.verbs = uro_cm_device_for_addr(&id->id.route.addr.src_addr);
	id->id.port_num = 1;
	if (!id->id.verbs || uro_cm_fill_route(id)) {
		uro_cm_id_free(id);
		goto refuse;
	}
	w->id = id;
	w->listener = NULL;
	id->watch = w;
	e = uro_cm_event_new(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, m->pdata, m->pdata_len);
	if (!e)
		return;
	e->ev.listen_id = &l->id;
	if (m->type == MSG_SIDR_REQ)
		ud_param(id, e, m);
	else
		conn_param(e, m);
	uro_cm_queue(l->chan, e);
	return;
refuse:
	uro_cm_send(w->sock, MSG_REJ, NULL, URO_REJ_INVALID_SERVICE_ID, NULL, 0);
	close(w->sock);
	drop(w);
}

/* The connection's QP goes to ERR, flushing its receives, as the CM does
 * on a disconnect. By number, on this process's published segment: a
 * program may have destroyed the QP with ibv_destroy_qp behind the CM's
 * back (rping does), and then there is nothing to move. */
static void to_disconnected(struct uro_cm_id *id, struct watch *w)
{
	int was_connected = id->state == CM_CONNECTED;

	id->state = CM_DISCONNECTED;
	if (id->qpn)
		uro_cm_qp_error_by_num(id->qpn);
	if (was_connected)
		uro_cm_post(id, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0, NULL);
	drop(w);
	close(id->sock);
	id->sock = -1;
}

static void on_reply(struct uro_cm_id *id, const struct uro_cm_msg *m)
{
	id->peer = m->peer;
	if (!id->id.qp) { /* the program moves its own QP, then rdma_establish */
		struct uro_cm_event *e =
		    uro_cm_event_new(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, m->pdata, m->pdata_len);

		if (e) {
			conn_param(e, m);
			uro_cm_queue(id->chan, e);
		}
		return;
	}
	if (uro_cm_qp_to_rtr_rts(id)) {
		uro_cm_send(id->sock, MSG_REJ, NULL, URO_REJ_CONSUMER_DEFINED, NULL, 0);
		uro_cm_post(id, RDMA_CM_EVENT_CONNECT_ERROR, -EINVAL, NULL, 0, NULL);
		return;
	}
	uro_cm_send(id->sock, MSG_RTU, NULL, 0, NULL, 0);
	id->state = CM_CONNECTED;
	struct uro_cm_event *e =
	    uro_cm_event_new(id, RDMA_CM_EVENT_ESTABLISHED, 0, m->pdata, m->pdata_len);
	if (e) {
		conn_param(e, m);
		uro_cm_queue(id->chan, e);
	}
}

static void on_sidr_reply(struct uro_cm_id *id, struct watch *w, const struct uro_cm_msg *m)
{
	struct uro_cm_event *e;

	id->state = CM_CONNECTED;
	if (m->status) {
		uro_cm_post(id, RDMA_CM_EVENT_UNREACHABLE, -ECONNREFUSED, m->pdata, m->pdata_len,
			    NULL);
	} else if ((e = uro_cm_event_new(id, RDMA_CM_EVENT_ESTABLISHED, 0, m->pdata,
					 m->pdata_len))) {
		ud_param(id, e, m);
		uro_cm_queue(id->chan, e);
	}
	drop(w);
	close(id->sock);
	id->sock = -1;
}

static void on_message(struct watch *w, const struct uro_cm_msg *m)
{
	struct uro_cm_id *id = w->id;

	switch (m->type) {
	case MSG_REP:
		if (id->state == CM_CONNECTING)
			on_reply(id, m);
		break;
	case MSG_SIDR_REP:
		if (id->state == CM_CONNECTING)
			on_sidr_reply(id, w, m);
		break;
	case MSG_RTU:
		if (id->state == CM_ACCEPTING) {
			id->state = CM_CONNECTED;
			uro_cm_post(id, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0, NULL);
		}
		break;
	case MSG_REJ:
		id->state = CM_DISCONNECTED;
		uro_cm_post(id, RDMA_CM_EVENT_REJECTED, m->status, m->pdata, m->pdata_len, NULL);
		drop(w);
		close(id->sock);
		id->sock = -1;
		break;
	case MSG_DREQ:
		uro_cm_send(id->sock, MSG_DREP, NULL, 0, NULL, 0);
		to_disconnected(id, w);
		break;
	case MSG_DREP:
		to_disconnected(id, w);
		break;
	default:
		break; /* out of place: ignored, as a CM ignores a stray MAD */
	}
}

/* The connection closed or broke: the peer is gone. */
static void on_hangup(struct watch *w)
{
	struct uro_cm_id *id = w->id;

	if (!id) { /* an accepted socket that never sent its request */
		close(w->sock);
		drop(w);
		return;
	}
	if (id->state == CM_CONNECTING) {
		id->state = CM_DISCONNECTED;
		uro_cm_post(id, RDMA_CM_EVENT_CONNECT_ERROR, -ECONNRESET, NULL, 0, NULL);
		drop(w);
		close(id->sock);
		id->sock = -1;
		return;
	}
	if (id->state == CM_ACCEPTING)
		id->state = CM_CONNECTED; /* so that the owner hears of it */
	to_disconnected(id, w);
}

static void on_listener(struct watch *lw)
{
	int s = accept4(lw->sock, NULL, NULL, SOCK_CLOEXEC);
	struct watch *w;
	int one = 1;

	if (s < 0)
		return;
	w = calloc(1, sizeof(*w));
	if (!w) {
		close(s);
		return;
	}
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	w->sock = s;
	w->listener = lw->id;
	arm(w);
}

static void *loop(void *arg)
{
	struct epoll_event evs[16];

	(void)arg;
	for (;;) {
		int n = epoll_wait(epfd, evs, 16, -1);

		for (int i = 0; i < n; i++) {
			struct watch *w = evs[i].data.ptr;
			struct uro_cm_msg m;

			pthread_mutex_lock(&cm_lock);
			if (w->dead)
				; /* its id was destroyed after epoll returned */
			else if (w->id && w->id->state == CM_LISTEN)
				on_listener(w);
			else if (uro_cm_recv(w->sock, &m))
				on_hangup(w);
			else if (w->listener)
				on_request(w, &m);
			else
				on_message(w, &m);
			pthread_mutex_unlock(&cm_lock);
		}
		pthread_mutex_lock(&cm_lock);
		bury();
		pthread_mutex_unlock(&cm_lock);
	}
	return NULL;
}

/* Called with the CM lock held. */
static void start(void)
{
	pthread_t t;
	pthread_attr_t a;

	if (epfd >= 0 && thread_pid == getpid())
		return;
	if (epfd >= 0)
		close(epfd); /* the parent's; its registrations stay the parent's */
	graveyard = NULL;    /* the parent's too */
	thread_pid = getpid();
	epfd = epoll_create1(EPOLL_CLOEXEC);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (epfd >= 0)
		pthread_create(&t, &a, loop, NULL);
	pthread_attr_destroy(&a);
}

void uro_cm_lock(void)
{
	pthread_mutex_lock(&cm_lock);
}

void uro_cm_unlock(void)
{
	pthread_mutex_unlock(&cm_lock);
}

/* Called with the CM lock held. */
int uro_cm_watch(struct uro_cm_id *id)
{
	struct watch *w;

	start();
	w = calloc(1, sizeof(*w));
	if (epfd < 0 || !w) {
		free(w);
		return -1;
	}
	w->id = id;
	w->sock = id->sock;
	id->watch = w;
	arm(w);
	return 0;
}

/* Called with the CM lock held: the id's socket is no longer read. */
void uro_cm_unwatch(struct uro_cm_id *id)
{
	if (id->watch)
		drop(id->watch);
}
