/* Connections to other hosts: the IB CM's MADs on QP 1 (docs/design.md,
 * "rdma_cm speaks the IB CM to other hosts"; docs/architecture.md,
 * "Connection management on the wire"). Between processes of one host the
 * CM's messages stay on TCP (cm.h); an id whose peer is on another host
 * sends them as MADs, and its replies come back through the host's QP 1
 * to this process's agent (mad_agent.c). Called with the CM lock held. */
#ifndef URO_CM_MAD_H
#define URO_CM_MAD_H

#include "cm.h"
#include "mad_codec.h"

/* mad_agent.c */
/* The agent's socket (bound on first use), or -1. */
int uro_mad_agent_fd(void);
/* A new communication ID of this agent's. */
uint32_t uro_mad_comm_id(void);
/* A socket holding the name of requests for sid to gid (NULL: to any
 * address), or -1 and errno (EADDRINUSE: another listener has it). */
int uro_mad_service_fd(uint64_t sid, const union ibv_gid *gid);
/* The device's sender of MADs, which also keeps its endpoint listening. */
int uro_mad_port_open(struct ibv_context *ctx);
int uro_mad_send(struct ibv_context *ctx, const union ibv_gid *sgid, const union ibv_gid *dgid,
		 const uint8_t mad[URO_MAD_LEN]);

/* cm_mad.c */
/* 1 when the id's destination is not an address of this network
 * namespace: its CM speaks MADs. */
int uro_cm_peer_is_remote(const struct uro_cm_id *id);
/* rdma_connect over MADs: REQ or SIDR_REQ. 0 or an errno. */
int uro_cm_mad_connect(struct uro_cm_id *id, const struct uro_cm_peer *me, const void *pdata,
		       uint8_t pdata_len);
/* rdma_bind_addr: an id bound to an address of a link off lo (or to any
 * address) holds its service's names from then on, as its TCP socket
 * listens from then on (address.c): a request from another host that
 * comes before rdma_listen waits in the name's queue instead of meeting
 * "invalid service ID". 0 or an errno. */
int uro_cm_mad_bind(struct uro_cm_id *l);
/* rdma_listen: the CM thread takes the requests the names bring. 0 or an
 * errno. */
int uro_cm_mad_listen(struct uro_cm_id *l);
/* The names go (rdma_connect on a bound id, rdma_destroy_id); requests
 * still queued in them are dropped, and their senders' retries find the
 * host's "invalid service ID". */
void uro_cm_mad_unlisten(struct uro_cm_id *l);
/* The id is destroyed: a connection still up gets its DREQ. */
void uro_cm_mad_goodbye(struct uro_cm_id *id);
/* The id is gone: its MADs find nothing any more. */
void uro_cm_mad_forget(struct uro_cm_id *id);
/* The MAD a connection to the agent's name, or to a listener's, brought. */
void uro_cm_mad_readable(int fd, struct uro_cm_id *listener);
/* A deadline passed with the id's REQ, REP, DREQ or SIDR_REQ unanswered:
 * 1 when it was sent again, 0 when its retries are spent. */
int uro_cm_mad_resend(struct uro_cm_id *id);

/* cm_thread.c, for MADs */
/* Watches the listening socket fd (the agent's, or listener's names):
 * each MAD that comes goes to uro_cm_mad_readable. The handle to unwatch
 * it with. */
void *uro_cm_watch_fd(int fd, struct uro_cm_id *listener);
void uro_cm_unwatch_fd(void *handle);
/* A message for an id, as if its TCP connection had brought it. */
void uro_cm_deliver(struct uro_cm_id *id, const struct uro_cm_msg *m);
/* A request the listener takes: the new id, its CONNECT_REQUEST queued
 * (NULL: refused). src is ours, dst the peer's. */
struct uro_cm_id *uro_cm_take_request(struct uro_cm_id *l, const struct uro_cm_msg *m,
				      const struct sockaddr *src, const struct sockaddr *dst);

#endif
