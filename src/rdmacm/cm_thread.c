/* The CM's passive side: one thread per process, asleep in epoll, that
 * accepts connection requests on listeners and turns every CM message a
 * peer sends into the event librdmacm delivers (rdma_get_cm_event(3)). A
 * TCP connection that drops is a peer gone: DISCONNECTED, in bounded
 * time, like a CM timeout; a peer that stays silent is timed out as a CM
 * times out an unanswered message. No peer can hold the thread: sockets
 * are read without blocking, each into its own buffer. */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cm_mad.h"
#include "library_thread.h"

/* With the fd table full, a listener is left alone this long before it
 * accepts again: its pending connection would wake epoll at once. */
#define ACCEPT_PAUSE_MS 100

/* What an epoll entry stands for. */
struct watch {
	struct uro_cm_id *id;	    /* a listener or a connection's id */
	struct uro_cm_id *listener; /* an accepted socket before its REQ */
	int sock;		    /* -1 for an id whose CM speaks MADs: it has deadlines only */
	int mad;		    /* enum mad_watch */
	int dead;		    /* dropped: its id may be gone */
	struct watch *next_dead;
	struct watch *next_live;
	uint64_t deadline_ms;  /* 0: none */
	struct uro_cm_msg msg; /* the message being received */
	size_t have;	       /* its bytes so far */
};

/* The MADs a process's endpoints pass its CM (cm_mad.h): the agent's and
 * listeners' names are listening sockets, and each MAD comes on a
 * connection of its own. */
enum mad_watch { NOT_MAD, MAD_LISTENER, MAD_ONE };

static pthread_mutex_t cm_lock = PTHREAD_MUTEX_INITIALIZER;
static int epfd = -1;
static int wake_fd = -1; /* tells the thread that a deadline moved */
static struct watch *live;
/* The process whose thread reads epfd: a forked child inherits the fd but
 * not the thread, and must not share its parent's epoll instance. */
static pid_t thread_pid;
/* Dropped watches, freed between epoll batches: an event epoll already
 * returned may still name one, and must find it marked dead, not freed. */
static struct watch *graveyard;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void set_deadline(struct watch *w, uint64_t ms)
{
	uint64_t one = 1;
	ssize_t r;

	w->deadline_ms = ms ? now_ms() + ms : 0;
	/* A full counter means the thread is waking anyway. */
	r = ms && wake_fd >= 0 ? write(wake_fd, &one, sizeof(one)) : 0;
	(void)r;
}

static void arm(struct watch *w)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = w};

	if (w->sock >= 0)
		epoll_ctl(epfd, EPOLL_CTL_ADD, w->sock, &ev);
	w->next_live = live;
	live = w;
}

static void drop(struct watch *w)
{
	struct watch **p = &live;

	if (w->sock >= 0)
		epoll_ctl(epfd, EPOLL_CTL_DEL, w->sock, NULL);
	while (*p && *p != w)
		p = &(*p)->next_live;
	if (*p)
		*p = w->next_live;
	if (w->id)
		w->id->watch = NULL;
	w->dead = 1;
	w->next_dead = graveyard;
	graveyard = w;
}

/* Closes a connection's socket and stops reading it. */
static void hang_up(struct uro_cm_id *id, struct watch *w)
{
	drop(w);
	if (id->sock >= 0)
		close(id->sock);
	id->sock = -1;
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
	ah->grh.sgid_index = (uint8_t)uro_cm_gid_index(id->id.verbs, &id->path.sgid);
}

static void conn_param(struct uro_cm_event *e, const struct uro_cm_msg *m)
{
	struct rdma_conn_param *c = &e->ev.param.conn;

	/* As this side counts them: the peer's initiator depth is the reads
	 * this side answers at once (Linux's cm_format_req_event and
	 * cm_format_rep_event). */
	c->responder_resources = m->peer.initiator_depth;
	c->initiator_depth = m->peer.responder_resources;
	c->retry_count = m->peer.retry_count;
	c->rnr_retry_count = m->peer.rnr_retry;
	c->srq = m->peer.srq;
	c->qp_num = m->peer.qpn;
}

struct uro_cm_id *uro_cm_take_request(struct uro_cm_id *l, const struct uro_cm_msg *m,
				      const struct sockaddr *src, const struct sockaddr *dst)
{
	struct uro_cm_id *id;
	struct uro_cm_event *e;

	/* A datagram listener resolves SIDR requests; a connected one takes
	 * REQs (IBTA 12.11, 12.6.5). */
	if (m->type != (l->id.qp_type == IBV_QPT_UD ? MSG_SIDR_REQ : MSG_REQ))
		return NULL;
	id = uro_cm_id_new(l->sync ? NULL : &l->chan->ch, l->id.context, l->id.ps, l->id.qp_type);
	if (!id)
		return NULL;
	id->listener = l;
	id->peer = m->peer;
	id->state = CM_REQ_RCVD;
	memcpy(&id->id.route.addr.src_addr, src, sa_len(src));
	memcpy(&id->id.route.addr.dst_addr, dst, sa_len(dst));
	uro_cm_set_device(&id->id, uro_cm_device_for_local(&id->id.route.addr.src_addr));
	id->id.port_num = 1;
	if (!id->id.verbs || uro_cm_fill_route(id)) {
		uro_cm_id_free(id);
		return NULL;
	}
	e = uro_cm_event_new(id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, m->pdata, m->pdata_len);
	if (!e)
		return id;
	e->ev.listen_id = &l->id;
	if (m->type == MSG_SIDR_REQ)
		ud_param(id, e, m);
	else
		conn_param(e, m);
	uro_cm_queue(l->chan, e);
	return id;
}

/* A request on an accepted socket makes the id the listener's owner gets
 * in its CONNECT_REQUEST event. The passive CM answers with an MRA at
 * once, so that the active side knows its peer is alive. */
static void on_request(struct watch *w, const struct uro_cm_msg *m)
{
	struct uro_cm_id *l = w->listener;
	struct sockaddr_storage src, dst;
	socklen_t len = sizeof(src);
	struct uro_cm_id *id;

	getsockname(w->sock, (struct sockaddr *)&src, &len);
	len = sizeof(dst);
	getpeername(w->sock, (struct sockaddr *)&dst, &len);
	/* The listener's port, not the accepted socket's. */
	((struct sockaddr_in *)&src)->sin_port =
	    ((struct sockaddr_in *)&l->id.route.addr.src_addr)->sin_port;
	id = uro_cm_take_request(l, m, (struct sockaddr *)&src, (struct sockaddr *)&dst);
	if (!id) {
		uro_cm_send(w->sock, MSG_REJ, NULL, URO_REJ_INVALID_SERVICE_ID, NULL, 0);
		close(w->sock);
		drop(w);
		return;
	}
	id->sock = w->sock;
	w->id = id;
	w->listener = NULL;
	id->watch = w;
	set_deadline(w, 0); /* the program decides in its own time */
	if (m->type == MSG_REQ)
		uro_cm_send(w->sock, MSG_MRA, NULL, 0, NULL, 0);
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
	hang_up(id, w);
}

/* The connection never came up (librdmacm: CONNECT_ERROR or UNREACHABLE
 * with the reason as a negative errno); a QP it moved goes to ERR. */
static void failed(struct uro_cm_id *id, struct watch *w, enum rdma_cm_event_type type, int err)
{
	id->state = CM_DISCONNECTED;
	if (id->qpn)
		uro_cm_qp_error_by_num(id->qpn);
	uro_cm_post(id, type, -err, NULL, 0, NULL);
	hang_up(id, w);
}

static void on_reply(struct uro_cm_id *id, const struct uro_cm_msg *m)
{
	set_deadline(id->watch, 0);
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
		uro_cm_tell(id, MSG_REJ, NULL, URO_REJ_CONSUMER_DEFINED, NULL, 0);
		uro_cm_post(id, RDMA_CM_EVENT_CONNECT_ERROR, -EINVAL, NULL, 0, NULL);
		return;
	}
	uro_cm_tell(id, MSG_RTU, NULL, 0, NULL, 0);
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
	hang_up(id, w);
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
	case MSG_MRA:
		if (id->state == CM_CONNECTING)
			set_deadline(w, URO_CM_SERVICE_MS);
		break;
	case MSG_RTU:
		if (id->state == CM_ACCEPTING) {
			set_deadline(w, 0);
			id->state = CM_CONNECTED;
			uro_cm_post(id, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0, NULL);
		}
		break;
	case MSG_REJ:
		id->state = CM_DISCONNECTED;
		uro_cm_post(id, RDMA_CM_EVENT_REJECTED, m->status, m->pdata, m->pdata_len, NULL);
		hang_up(id, w);
		break;
	case MSG_DREQ:
		uro_cm_tell(id, MSG_DREP, NULL, 0, NULL, 0);
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
	/* Before the RTU, the connection was never established: the passive
	 * side hears CONNECT_ERROR, as from a CM whose REP went unanswered. */
	if (id->state == CM_CONNECTING || id->state == CM_ACCEPTING) {
		failed(id, w, RDMA_CM_EVENT_CONNECT_ERROR, ECONNRESET);
		return;
	}
	to_disconnected(id, w);
}

/* A listener whose accept failed for want of fds sleeps a moment rather
 * than spin on the connection it cannot take (the kernel keeps it
 * queued). */
static void pause_listener(struct watch *lw)
{
	struct epoll_event ev = {.events = 0, .data.ptr = lw};

	epoll_ctl(epfd, EPOLL_CTL_MOD, lw->sock, &ev);
	set_deadline(lw, ACCEPT_PAUSE_MS);
}

/* A watch of fd for the id (or a listener's MADs), armed; NULL without
 * memory. */
static struct watch *watch_new(int fd, struct uro_cm_id *id, struct uro_cm_id *listener,
			       enum mad_watch mad)
{
	struct watch *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	w->sock = fd;
	w->id = id;
	w->listener = listener;
	w->mad = mad;
	arm(w);
	return w;
}

/* One connection from a listening socket, watched for what it brings
 * for a response timeout; NULL when none waits (with the fd table full,
 * the listener pauses). */
static struct watch *accept_one(struct watch *lw, int flags, struct uro_cm_id *listener,
				enum mad_watch mad)
{
	int s = accept4(lw->sock, NULL, NULL, SOCK_CLOEXEC | flags);
	struct watch *w;

	if (s < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
			pause_listener(lw);
		return NULL;
	}
	w = watch_new(s, NULL, listener, mad);
	if (!w) {
		close(s);
		return NULL;
	}
	set_deadline(w, URO_CM_RESPONSE_MS);
	return w;
}

static void on_listener(struct watch *lw)
{
	struct watch *w = accept_one(lw, 0, lw->id, NOT_MAD); /* for its REQ */
	int one = 1;

	if (w)
		setsockopt(w->sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* A deadline passed: what the watch waited for did not come. */
static void on_timeout(struct watch *w)
{
	struct uro_cm_id *id = w->id;
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = w};

	w->deadline_ms = 0;
	if (w->mad == MAD_LISTENER) { /* paused with the fd table full */
		epoll_ctl(epfd, EPOLL_CTL_MOD, w->sock, &ev);
	} else if (!id) { /* an accepted connection that sent no request, or no MAD */
		close(w->sock);
		drop(w);
	} else if (id->state == CM_LISTEN) {
		epoll_ctl(epfd, EPOLL_CTL_MOD, w->sock, &ev);
	} else if (id->mad && uro_cm_mad_resend(id)) {
		set_deadline(w, URO_CM_RESPONSE_MS); /* a MAD is lost as a packet is */
	} else if (id->state == CM_CONNECTED && id->mad) {
		to_disconnected(id, w); /* our DREQ went unanswered (cm.c: timewait) */
	} else if (id->state == CM_CONNECTING) {
		failed(id, w, RDMA_CM_EVENT_UNREACHABLE, ETIMEDOUT);
	} else if (id->state == CM_ACCEPTING) {
		failed(id, w, RDMA_CM_EVENT_CONNECT_ERROR, ETIMEDOUT);
	}
}

/* Handles the deadlines that passed; returns the wait until the next one
 * (-1: none). */
static int expire(void)
{
	uint64_t now = now_ms(), next = UINT64_MAX;
	struct watch *w = live;

	while (w) {
		struct watch *after = w->next_live; /* w may be dropped */

		if (w->deadline_ms && w->deadline_ms <= now)
			on_timeout(w);
		else if (w->deadline_ms && w->deadline_ms < next)
			next = w->deadline_ms;
		w = after;
	}
	return next == UINT64_MAX ? -1 : (int)(next - now);
}

/* Connections that each bring one MAD: taken in a bounded batch, each
 * read when its MAD is there, or closed after a response timeout. */
static void on_mad_listener(struct watch *lw)
{
	for (int i = 0; i < 64; i++)
		if (!accept_one(lw, SOCK_NONBLOCK, lw->listener, MAD_ONE))
			return;
}

static void on_readable(struct watch *w)
{
	int r;

	if (w->mad == MAD_LISTENER) {
		on_mad_listener(w);
		return;
	}
	if (w->mad == MAD_ONE) {
		uro_cm_mad_readable(w->sock, w->listener);
		close(w->sock);
		drop(w);
		return;
	}
	if (w->id && w->id->state == CM_LISTEN) {
		on_listener(w);
		return;
	}
	r = uro_cm_recv(w->sock, &w->msg, &w->have);
	if (r < 0)
		on_hangup(w);
	else if (r > 0 && w->listener)
		on_request(w, &w->msg);
	else if (r > 0)
		on_message(w, &w->msg);
}

/* A deadline moved: the wait is recomputed after this batch. */
static void take_wake(void)
{
	uint64_t count;
	ssize_t r = read(wake_fd, &count, sizeof(count));

	(void)r;
}

static void *loop(void *arg)
{
	struct epoll_event evs[16];

	int wait_ms = -1;

	(void)arg;
	for (;;) {
		int n = epoll_wait(epfd, evs, 16, wait_ms);

		for (int i = 0; i < n; i++) {
			struct watch *w = evs[i].data.ptr;
			pthread_mutex_lock(&cm_lock);
			if (!w)
				take_wake();
			else if (!w->dead) /* else its id was destroyed after epoll returned */
				on_readable(w);
			pthread_mutex_unlock(&cm_lock);
		}
		pthread_mutex_lock(&cm_lock);
		wait_ms = expire();
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
	if (epfd >= 0) {
		close(epfd); /* the parent's; its registrations stay the parent's */
		close(wake_fd);
	}
	/* The parent's dead watches are this process's copies and nobody
	 * else's to free; its live ones stay with the ids that name them. */
	bury();
	live = NULL;
	thread_pid = getpid();
	epfd = epoll_create1(EPOLL_CLOEXEC);
	wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (epfd >= 0 && wake_fd >= 0) {
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};

		epoll_ctl(epfd, EPOLL_CTL_ADD, wake_fd, &ev);
	}
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (epfd >= 0)
		uro_thread_start(&t, &a, loop, NULL);
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
	w = epfd < 0 ? NULL : watch_new(id->sock, id, NULL, NOT_MAD);
	if (!w)
		return -1;
	id->watch = w;
	return 0;
}

/* Called with the CM lock held: the id's socket is no longer read. */
void uro_cm_unwatch(struct uro_cm_id *id)
{
	if (id->watch)
		drop(id->watch);
}

/* Called with the CM lock held. */
void uro_cm_expect_answer(struct uro_cm_id *id)
{
	if (id->watch)
		set_deadline(id->watch, URO_CM_RESPONSE_MS);
}

/* Called with the CM lock held. */
void *uro_cm_watch_fd(int fd, struct uro_cm_id *listener)
{
	start();
	return epfd < 0 ? NULL : watch_new(fd, NULL, listener, MAD_LISTENER);
}

/* Called with the CM lock held: the fd is closed too. */
void uro_cm_unwatch_fd(void *handle)
{
	struct watch *w = handle, *o = live;

	drop(w);
	close(w->sock);
	while (o) { /* its MADs still to read name its listener */
		struct watch *after = o->next_live;

		if (o->mad == MAD_ONE && o->listener == w->listener) {
			close(o->sock);
			drop(o);
		}
		o = after;
	}
}

/* Called with the CM lock held. */
void uro_cm_deliver(struct uro_cm_id *id, const struct uro_cm_msg *m)
{
	if (id->watch)
		on_message(id->watch, m);
}
