/* The verbs layer's own functions: the ABI's entry points a context's
 * ops table and the exported verbs reach, and what the layer's files share
 * among themselves. The objects they work on are the engine's
 * (src/engine/objects.h). */
#ifndef URO_VERBS_OPS_H
#define URO_VERBS_OPS_H

#include "objects.h"
#include "shm.h"

/* Validation shared by QPs and AHs: 0 or EINVAL, with a diagnostic. */
int uro_ah_attr_check(struct uro_context *ctx, const struct ibv_ah_attr *ah);

/* Retries what waits behind RNR NAKs; returns the nanoseconds until the
 * next retry is due, or 0 when nothing waits. */
uint64_t uro_progress(struct uro_context *ctx);
/* The same, for the progress thread: it waits for the wire's receive lock
 * rather than leave the pass to a polling thread. */
uint64_t uro_progress_pass(struct uro_context *ctx);
/* Hands the engine's progress thread its body (progress_thread.c). */
void uro_progress_thread_init(struct uro_context *ctx);

/* Memory windows (mw.c). */
struct ibv_mw *uro_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int uro_dealloc_mw(struct ibv_mw *mw);
int uro_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *b);
uint32_t uro_make_key(uint32_t index, uint32_t generation);

/* Gives a QP the ibv_wr_* builder: 0, EOPNOTSUPP or ENOMEM. */
int uro_qp_ex_init(struct uro_qp *qp, uint64_t send_ops_flags);

/* XRC domains (xrcd.c). */
struct ibv_xrcd *uro_open_xrcd(struct ibv_context *c, struct ibv_xrcd_init_attr *attr);
int uro_close_xrcd(struct ibv_xrcd *xrcd);
int uro_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num);

/* Whether a QP of this context is attached to a multicast group
 * (multicast.c): ibv_destroy_qp(3) refuses it then, with EBUSY. */
int uro_qp_in_mcast_group(struct uro_context *ctx, uint32_t qpn);

/* UD: where one datagram goes, by its address handle (ud_route.c);
 * returns a struct ibv_wc status. */
int uro_ud_route(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
		 const struct iovec *liov, int nl, uint64_t len);

/* The ops every context carries (context.c). */
void uro_context_set_ops(struct uro_context *ctx);
/* The open context of this process whose command fd cmd_fd duplicates,
 * with one more reference; NULL and *err otherwise. */
struct uro_context *uro_context_get_by_fd(int cmd_fd, int *err);
void uro_context_put(struct uro_context *ctx);
void uro_contexts_lock(void);
void uro_contexts_unlock(void);
void uro_devices_lock(void);
void uro_devices_unlock(void);
int uro_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
/* Removes a QP's completions from a CQ (a QP moved to RESET). */
void uro_cq_discard_qp(struct uro_cq *cq, uint32_t qpn);
int uro_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int uro_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int uro_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int uro_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int uro_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
		  struct ibv_sge *sg_list, uint32_t num_sge);
int uro_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *attr, size_t len);
int uro_query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
			struct ibv_device_attr_ex *attr, size_t len);
struct ibv_cq_ex *uro_create_cq_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *attr);
struct ibv_qp *uro_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *attr);
struct ibv_srq *uro_create_srq_ex(struct ibv_context *c, struct ibv_srq_init_attr_ex *attr);

/* A destroy waits until every event it reported on the object was
 * acknowledged, so that no event names a freed object
 * (ibv_get_async_event(3), ibv_get_cq_event(3)). */
static inline void uro_wait_acked(pthread_mutex_t *m, pthread_cond_t *c, const uint32_t *acked,
				  const uint32_t *reported)
{
	pthread_mutex_lock(m);
	while (*acked != *reported)
		pthread_cond_wait(c, m);
	pthread_mutex_unlock(m);
}

/* Serialises a context's control path; the data path never takes it. */
static inline void uro_lock(struct uro_context *ctx)
{
	pthread_mutex_lock(&ctx->vctx.context.mutex);
}
static inline void uro_unlock(struct uro_context *ctx)
{
	pthread_mutex_unlock(&ctx->vctx.context.mutex);
}

/* port_watch.c */
int uro_port_watch_open(struct uro_context *ctx, int pipe_rfd);
void uro_port_watch_close(struct uro_context *ctx);
/* 1 and the event when the netdev changed the port's state; else 0. */
int uro_port_watch_event(struct uro_context *ctx, struct ibv_async_event *event);
/* Marks the port gone (its device deleted): 1 the first time, when
 * DEVICE_FATAL is to be reported, 0 after. */
int uro_port_gone(struct uro_context *ctx);

/* A QP's, CQ's or SRQ's serial, under the context lock. */
static inline uint32_t uro_next_serial(struct uro_context *ctx)
{
	return ++ctx->next_handle ? ctx->next_handle : ++ctx->next_handle;
}

/* A destroy's first step: events raised for the object from now on, or
 * raised and not yet read, are dropped (async_event.c), so only those
 * already reported remain to wait for. */
static inline void uro_forget_events(struct uro_context *ctx, uint32_t *serial)
{
	uro_lock(ctx);
	__atomic_store_n(serial, 0, __ATOMIC_RELEASE);
	uro_unlock(ctx);
}

/* Sets errno and returns NULL: the shape of every failing create verb. */
static inline void *uro_fail_null(int err)
{
	errno = err;
	return NULL;
}

#define URO_EXPORT __attribute__((visibility("default")))

/* A verb that also has an IBVERBS_1.0 compat version: bind the definition
 * to IBVERBS_1.1 as the default, as rdma-core does. */
#define URO_DEFAULT_VERSION(name) __asm__(".symver " #name ", " #name "@@IBVERBS_1.1, remove")

#endif
