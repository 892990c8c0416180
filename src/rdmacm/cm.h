/* librdmacm's objects: connection identifiers, event channels, and the CM
 * protocol they speak over TCP (docs/design.md, Connection management). */
#ifndef URO_CM_H
#define URO_CM_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdint.h>

#include "cm_message.h"

#define URO_EXPORT __attribute__((visibility("default")))

/* The IB CM reject reasons rdma_cm reports as an event's status. */
enum {
	URO_REJ_INVALID_SERVICE_ID = 8,
	URO_REJ_CONSUMER_DEFINED = 28,
};

#define URO_UDP_QKEY 0x01234567 /* RDMA_UDP_QKEY: the Q_Key of RDMA_PS_UDP */

enum uro_cm_state {
	CM_IDLE,
	CM_ADDR_RESOLVED,
	CM_ROUTE_RESOLVED,
	CM_LISTEN,
	CM_CONNECTING, /* active side, REQ sent */
	CM_REQ_RCVD,   /* passive side, before accept */
	CM_ACCEPTING,  /* REP sent, waiting for RTU */
	CM_CONNECTED,
	CM_DISCONNECTED,
};

struct uro_cm_mad_conn;

struct uro_cm_channel;

struct uro_cm_id {
	struct rdma_cm_id id; /* what the program sees; first */
	enum uro_cm_state state;
	struct uro_cm_channel *chan;
	int sync; /* created without a channel: verbs wait for their event */
	int sock; /* the CM TCP connection, or the listening socket */
	uint32_t psn;
	struct uro_cm_peer peer;
	struct rdma_conn_param param; /* this side's, from connect or accept */
	int afonly;		      /* RDMA_OPTION_ID_AFONLY; -1: the system's default */
	int ack_timeout;	      /* RDMA_OPTION_ID_ACK_TIMEOUT; -1: the CM's default */
	uint32_t qpn;		      /* the connection's QP, 0 before it has one */
	struct uro_cm_id *listener;   /* for a request's id */
	struct ibv_sa_path_rec path;
	struct ibv_qp_init_attr *ep_attr; /* rdma_create_ep's, for get_request */
	int own_cqs;			  /* ... and the CQs and channels */
	unsigned pending_events;	  /* retrieved, not yet acknowledged */
	void *watch;			  /* the CM thread's entry for sock */
	struct uro_cm_mcast *mcasts;	  /* groups joined (multicast.c) */
	struct uro_cm_mad_conn *mad;	  /* its CM speaks MADs (cm_mad.h), or NULL */
	int svc_fd[2];			  /* a bound id's names for MAD requests */
	void *svc_watch[2];		  /* ... and the CM thread's entries once it listens */
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

static inline struct uro_cm_id *to_cm(struct rdma_cm_id *id)
{
	return (struct uro_cm_id *)id;
}

/* event_channel.c */
struct uro_cm_channel {
	struct rdma_event_channel ch; /* fd: an eventfd, set while events are queued */
	pthread_mutex_t lock;
	struct uro_cm_event *head, *tail;
	int refs;   /* the program's, and one per thread in rdma_get_cm_event */
	int closed; /* rdma_destroy_event_channel was called */
};

struct uro_cm_event {
	struct rdma_cm_event ev;
	struct uro_cm_event *next;
	uint8_t pdata[URO_PDATA_MAX];
};

void uro_cm_post(struct uro_cm_id *id, enum rdma_cm_event_type type, int status, const void *pdata,
		 uint8_t pdata_len, struct rdma_cm_id *listen_id);
struct uro_cm_event *uro_cm_event_new(struct uro_cm_id *id, enum rdma_cm_event_type type,
				      int status, const void *pdata, uint8_t pdata_len);
void uro_cm_queue(struct uro_cm_channel *c, struct uro_cm_event *e);
/* The id's events not yet retrieved are dropped (rdma_destroy_id(3)). */
void uro_cm_forget(struct uro_cm_id *id);
/* A synchronous id's verb waits for its next event: 0 if it is want.
 * The event stays on the id it names (id->event); *out gets it too. */
int uro_cm_wait(struct uro_cm_id *id, enum rdma_cm_event_type want);
int uro_cm_wait_for(struct uro_cm_id *id, enum rdma_cm_event_type want, struct rdma_cm_event **out);

/* cm_id.c */
struct uro_cm_id *uro_cm_id_new(struct rdma_event_channel *ch, void *context,
				enum rdma_port_space ps, enum ibv_qp_type qpt);
void uro_cm_id_free(struct uro_cm_id *id);

/* device.c: one verbs context per uroce device, shared by every id. */
struct ibv_context *uro_cm_device_for_addr(const struct sockaddr *addr);
/* 127/8 or ::1. */
int uro_cm_is_loopback(const struct sockaddr *sa);
/* The device a local address leads to: the one that carries it, else for
 * a loopback address the one the kernel's cma_bind_loopback picks. */
struct ibv_context *uro_cm_device_for_local(const struct sockaddr *addr);
struct ibv_pd *uro_cm_default_pd(struct ibv_context *ctx);
struct ibv_xrcd *uro_cm_default_xrcd(struct ibv_context *ctx);
/* The id's device, and its PD the device's default one, as librdmacm sets
 * them once an id has an address (rdma-core's CM tests read id->pd). */
void uro_cm_set_device(struct rdma_cm_id *id, struct ibv_context *verbs);
/* A RoCEv2 GID for an IP address (IBTA A17.2). */
void uro_cm_addr_gid(const struct sockaddr *sa, union ibv_gid *gid);

static inline __be16 uro_cm_port_of(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET6)
		return ((const struct sockaddr_in6 *)sa)->sin6_port;
	return ((const struct sockaddr_in *)sa)->sin_port;
}

/* address.c: binds the id's CM socket to addr (0, or -1 with errno). */
int uro_cm_bind_socket(struct uro_cm_id *cm, const struct sockaddr *addr);
/* The queue of a bound id's socket, before and after rdma_listen. */
#define URO_CM_BACKLOG 128
int uro_cm_fill_route(struct uro_cm_id *id);

/* multicast.c: an id leaves its groups when it is destroyed. */
void uro_cm_leave_all(struct uro_cm_id *id);

/* cm_qp.c */
/* Index of gid in the port's table of the id's device, or 0. */
int uro_cm_gid_index(struct ibv_context *verbs, const union ibv_gid *gid);
int uro_cm_qp_attr(struct uro_cm_id *id, struct ibv_qp_attr *a, int *mask);
int uro_cm_qp_to_rtr_rts(struct uro_cm_id *id);
int uro_cm_qp_to_error(struct uro_cm_id *id);
void uro_cm_qp_error_by_num(uint32_t qpn);

/* wire.c and cm_thread.c */
#define URO_CM_MAGIC 0x55434d31u /* "UCM1" */

/* How long a CM waits for its peer's CM to answer: rdma_cm's CM response
 * timeout (4.096 us x 2^20). TCP already retransmits, so no message is
 * sent twice; an unanswered REQ, REP or a silent accepted connection is
 * given up after one such wait. Once an MRA says the REQ is with the
 * peer's program, the wait is the service timeout an MRA grants. */
#define URO_CM_RESPONSE_MS 4295
#define URO_CM_SERVICE_MS  60000

struct uro_cm_msg {
	uint32_t magic;
	uint8_t type;
	uint8_t pdata_len;
	uint16_t status;
	struct uro_cm_peer peer;
	uint8_t pdata[URO_PDATA_MAX];
};

int uro_cm_send(int sock, enum uro_cm_msg_type type, const struct uro_cm_peer *peer,
		uint16_t status, const void *pdata, uint8_t pdata_len);
/* A message to the id's peer, on its TCP connection or as a MAD
 * (cm_mad.c; with the CM lock held): 0, or -1 when it could not go. */
int uro_cm_tell(struct uro_cm_id *id, enum uro_cm_msg_type type, const struct uro_cm_peer *peer,
		uint16_t status, const void *pdata, uint8_t pdata_len);
/* Reads what has arrived of the next message without blocking: 1 when
 * *m is whole (*have bytes of it are kept between calls), 0 when more is
 * to come, -1 when the connection closed or sent something malformed. */
int uro_cm_recv(int sock, struct uro_cm_msg *m, size_t *have);
/* 0 when a received message's fields are ones a CM could have sent. */
int uro_cm_msg_check(const struct uro_cm_msg *m);
/* The CM lock orders the CM thread and the verbs that change an id's
 * state or socket; watch/unwatch are called with it held. */
void uro_cm_lock(void);
void uro_cm_unlock(void);
void uro_cm_devices_lock(void);
void uro_cm_devices_unlock(void);
int uro_cm_watch(struct uro_cm_id *id); /* the CM thread reads id->sock */
void uro_cm_unwatch(struct uro_cm_id *id);
/* The id now waits for its peer's answer (REP after a REQ, RTU after a
 * REP): a deadline from its state, which the CM thread enforces. */
void uro_cm_expect_answer(struct uro_cm_id *id);

static inline socklen_t sa_len(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* rdma_cm's errno convention: -1 with errno set. */
static inline int uro_cm_err(int err)
{
	errno = err;
	return -1;
}

#endif
