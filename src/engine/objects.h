/* The engine's objects, which the verbs layer hands to programs and both
 * transports work on: each embeds the ABI struct a program sees, first,
 * and adds the state uroce keeps for it. The published half of that state
 * lives in the context's segment (src/core/segment_layout.h). */
#ifndef URO_OBJECTS_H
#define URO_OBJECTS_H

#include <infiniband/verbs.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <sys/single_threaded.h>
#include <sys/uio.h>

#include "atomic_table.h"
#include "config.h"
#include "cqe.h"
#include "device_model.h"
#include "peer.h"
#include "recv_queue.h"
#include "registry.h"
#include "segment.h"
#include "shareable.h"

#define uro_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* rdma-core keeps its provider bookkeeping right after struct ibv_device,
 * and hardware "dv" helpers (mlx5dv_is_supported, ...) read it; it must be
 * zero so that no uroce device looks like theirs. */
#define URO_DEVICE_ALLOC 2048

struct uro_device {
	struct ibv_device ibdev;
	uint8_t provider_area[256];
	struct uro_link link;
	uint64_t link_id; /* which configuration's link it is (uro_link_id) */
	int index;
	struct uro_device *next;
};
_Static_assert(sizeof(struct uro_device) <= URO_DEVICE_ALLOC, "device fits its allocation");

struct uro_wire_endpoint; /* src/transport/roce/wire.h */
struct uro_qp_wire;

struct uro_context;

/* The progress thread (progress.c; its body: src/verbs/progress_thread.c). */
struct uro_progress_thread {
	pthread_mutex_t lock; /* held by the thread while it retries */
	pthread_cond_t cond;  /* CLOCK_MONOTONIC: woken by a new wait */
	pthread_t thread;
	int running, stop, kicked, failed;
	int yielding;		  /* to a program found polling its CQ (progress_thread.c) */
	void *(*body)(void *ctx); /* what the thread runs */
	void (*wake)(struct uro_context *ctx); /* wakes it where the condition does not */
};

/* The thread that executes the atomics aimed at this process's memory
 * (atomic_server.c). */
struct uro_atomic_server {
	pthread_mutex_t lock; /* starting it */
	pthread_t thread;
	int running, stop, failed;
};

struct uro_context {
	struct verbs_context vctx; /* ends with the struct ibv_context */
	/* The context whose state this one works on: itself, or for a context
	 * imported with ibv_import_device(3), the one it was imported from. */
	struct uro_context *shared;
	unsigned refs;		       /* itself and its imports (context.c) */
	struct uro_context *next_open; /* this process's contexts, for import */
	struct uro_pd *pd_list;	       /* live PDs, for ibv_import_pd(3) */
	struct uro_xrcd *xrcd_list;    /* open XRC domains (xrcd.c) */
	struct uro_device *dev;
	pid_t owner_pid; /* the process that opened it (a forked child's copy is not its) */
	struct uro_device_model model;
	struct uro_slot slot;
	struct uro_segment seg;
	int async_wfd;	/* the event pipe's write end, for this and peer processes */
	int async_rfd;	/* its read end; context.async_fd is an epoll set of it and netlink_fd */
	int netlink_fd; /* hears the link's netdev (port_watch.c); -1 if none */
	int port_up, port_gone; /* as the last port event said (port_watch.c) */
	uint32_t next_handle;	/* PD/AH handles and object serials, never reused in a context */
	uint32_t pds, ahs;	/* held against max_pd and max_ah */
	struct uro_share_fds share_fds;	       /* what its regions lie in (shareable.h) */
	struct uro_peer self;		       /* this context's own segment, seen as a peer */
	struct uro_peer *peers[URO_MAX_SLOTS]; /* attached on first use */
	pthread_mutex_t peers_lock;	       /* attaching, refreshing */
	struct uro_qp *qps[URO_MAX_QP];	       /* by QPN index: send-queue retiring */
	unsigned pending_qps;		       /* QPs with WQEs waiting for RNR */
	struct uro_progress_thread progress;
	struct uro_atomic_server atomics;
	struct uro_wire_endpoint *wire; /* RoCEv2: opened by the first QP on the wire */
	/* Where a UD datagram goes, chosen per address handle by the layer
	 * that knows both transports (src/verbs/ud_route.c): the
	 * shared-memory requester, which runs a UD QP's requests, sends
	 * each through it. A struct ibv_wc status. */
	int (*ud_send)(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
		       const struct iovec *liov, int nl, uint64_t len);
	/* 1 + the last empty GID index the program read: an example given
	 * "-g N" of an empty slot then builds an address without a GRH, and
	 * the hint that refuses it names N. 0: none read. */
	int empty_gid_read;
};

struct uro_pd {
	struct ibv_pd ibpd;
	unsigned users; /* MRs, QPs, SRQs, AHs on it: dealloc is EBUSY */
	/* Itself, or for a PD imported with ibv_import_pd(3) the PD it names:
	 * objects created on an import count on (and keep) the original, and
	 * unimporting frees only the import. */
	struct uro_pd *origin;
	struct uro_pd *next;
};

/* An XRC domain (ibv_open_xrcd(3)). Opening the same file again, in this
 * process or another, gives a handle on the same domain: the same id,
 * which the segment's XRC SRQs and targets carry, so that a request's SRQ
 * is checked against its target's domain (IBTA A14.4). */
struct uro_xrcd {
	struct ibv_xrcd ibx;
	struct uro_xrcd_id id;
	unsigned users; /* XRC SRQs and targets on this handle: close is EBUSY */
	struct uro_xrcd *next;
};

struct uro_mr {
	struct ibv_mr ibmr;
	uint32_t index;
	struct uro_seg_mr *pub;
	struct uro_seg_share *share; /* beside pub: where peers may map it */
	int share_fd;		     /* the object share names, held open, or -1 */
	struct uro_pd *pd;	     /* counted on: an imported PD's original */
	int imported;		     /* ibv_import_mr(3): another context's region */
};

struct uro_channel {
	struct ibv_comp_channel ch; /* ch.fd is the read end */
	int wfd;
	unsigned users; /* CQs using it */
};

struct uro_cq {
	struct ibv_cq_ex cqx; /* starts with the fields of struct ibv_cq */
	uint32_t index;
	struct uro_seg_cq *pub;
	struct uro_cqe *ring;
	unsigned users;	      /* QPs and SRQs... QPs using it: destroy is EBUSY */
	uint32_t comp_events; /* delivered on the channel, for ack accounting */
	uint32_t async_events;
	struct uro_cqe *cur;	      /* the entry an extended-CQ poll is on */
	pthread_spinlock_t poll_lock; /* the ring has one consumer at a time */
	int single_threaded;	      /* IBV_CREATE_CQ_ATTR_SINGLE_THREADED */
	int poll_locked;	      /* held from start_poll to end_poll */
	/* The head position found reserved and unpublished, and since when:
	 * a producer that never publishes it is skipped past (cq.c). */
	uint32_t stall_pos, stall_polls;
	uint64_t stall_since_ns;
};

struct uro_srq {
	struct ibv_srq ibsrq;
	uint32_t index;
	struct uro_seg_srq *pub;
	struct uro_pd *pd;
	struct uro_cq *cq;     /* an XRC SRQ's */
	struct uro_xrcd *xrcd; /* an XRC SRQ's */
	unsigned users;
	uint32_t events;
	pthread_spinlock_t rq_lock; /* see uro_mt_lock */
};

struct uro_qp {
	struct ibv_qp_ex qpx; /* starts with struct ibv_qp */
	int extended;	      /* created with send_ops_flags: ibv_qp_to_qp_ex works */
	uint32_t index;
	struct uro_seg_qp *pub;
	struct ibv_qp_attr attr;
	struct ibv_qp_cap cap;
	int sq_sig_all;
	struct uro_pd *pd;		  /* NULL for an XRC target */
	struct uro_cq *send_cq, *recv_cq; /* NULL where the QP has no such queue (XRC) */
	struct uro_srq *srq;
	struct uro_xrcd *xrcd; /* an XRC target's domain */
	uint32_t events;
	uint32_t sq_posted;	    /* send WQEs accepted */
	uint32_t sq_retired;	    /* ...and known complete: the queue's free space */
	pthread_spinlock_t sq_lock; /* see uro_mt_lock */
	pthread_spinlock_t rq_lock;
	struct uro_pending *pending; /* WQEs waiting behind an RNR NAK (requester.c) */
	uint32_t pending_head, pending_n;
	uint64_t rnr_deadline_ns; /* when the head of pending is tried again */
	unsigned rnr_left;	  /* RNR retries left for the head */
	unsigned retry_left;	  /* transport retries left for the head */
	int head_waits;		  /* why the head waits: a RESULT_ (requester.h), 0 none */
	/* The head's atomic, posted to its target's table and not yet
	 * answered (requester.c): a retry waits for it again rather than
	 * post it twice (IBTA 9.7.5.1.1). NULL peer: none. */
	struct uro_peer *atomic_peer;
	struct uro_atomic_ticket atomic_ticket;
	uint64_t ack_deadline_ns;  /* when the head's unanswered atomic spends a retry */
	struct uro_qp_wire *wire;  /* its peer is reached over RoCEv2; NULL: shared memory */
	struct uro_pending *batch; /* the ibv_wr_* batch being built (qp_ex.c) */
	uint32_t batch_n;
	int batch_err;
};

/* A memory window (mw.c). */
struct uro_mw {
	struct ibv_mw ibmw;
	uint32_t index;
	struct uro_pd *pd; /* counted on: an imported PD's original */
};

static inline struct uro_mw *to_umw(struct ibv_mw *mw)
{
	return uro_container_of(mw, struct uro_mw, ibmw);
}

/* A send WQE kept for a retry: the request with its SGEs and inline data
 * copied, since the caller may reuse them once ibv_post_send returns. */
struct uro_pending {
	struct ibv_send_wr wr;
	struct ibv_sge sge[URO_MAX_SGE];
	uint8_t data[URO_MAX_INLINE];
	uint32_t seq;
};

struct uro_ah {
	struct ibv_ah ibah;
	struct ibv_ah_attr attr;
	struct uro_pd *pd;
	int wire; /* its GID is another host's, or this process takes the wire */
	int own;  /* its GID is an IPv4 address of this host's */
};

static inline struct uro_context *to_uctx(struct ibv_context *c)
{
	return uro_container_of(c, struct uro_context, vctx.context)->shared;
}
static inline struct uro_xrcd *to_uxrcd(struct ibv_xrcd *x)
{
	return uro_container_of(x, struct uro_xrcd, ibx);
}
static inline struct uro_pd *to_upd(struct ibv_pd *p)
{
	return uro_container_of(p, struct uro_pd, ibpd)->origin;
}
static inline struct uro_cq *to_ucq(struct ibv_cq *c)
{
	return uro_container_of((struct ibv_cq_ex *)c, struct uro_cq, cqx);
}
static inline struct ibv_cq *uro_cq_base(struct uro_cq *cq)
{
	return ibv_cq_ex_to_cq(&cq->cqx);
}
static inline struct uro_qp *to_uqp(struct ibv_qp *q)
{
	return uro_container_of(q, struct uro_qp, qpx.qp_base);
}
static inline struct uro_srq *to_usrq(struct ibv_srq *s)
{
	return uro_container_of(s, struct uro_srq, ibsrq);
}
static inline struct uro_ah *to_uah(struct ibv_ah *ah)
{
	return uro_container_of(ah, struct uro_ah, ibah);
}
static inline struct uro_channel *to_uchannel(struct ibv_comp_channel *c)
{
	return uro_container_of(c, struct uro_channel, ch);
}

/* Peers (peers.c). */
/* The peer a QPN names, attached on first use; NULL when its process is
 * gone. *err is set to a positive errno on failure. */
struct uro_peer *uro_peer_of(struct uro_context *ctx, uint32_t qpn, int *err);
/* The peer owning qpn's slot, looked up again in the registry: the cached
 * one may be a previous owner's (the slot was reused). */
struct uro_peer *uro_peer_refresh(struct uro_context *ctx, uint32_t qpn, int *err);

/* The progress thread (progress.c), with its body and the way to wake it
 * where the condition does not (asleep on the wire's sockets). */
void uro_progress_init(struct uro_context *ctx, void *(*body)(void *),
		       void (*wake)(struct uro_context *));
/* A request now waits: the progress thread starts, or recomputes its wait.
 * Called with no QP lock held. */
void uro_progress_kick(struct uro_context *ctx);
void uro_progress_stop(struct uro_context *ctx);

/* Takes a lock shared with the progress thread. A thread that finds it
 * held gives its core away rather than spin: the holder may be the other
 * thread, preempted on this very core by the spinner (a program pinned to
 * one core), and a spin there lasted until the scheduler's next tick
 * (ib_send_lat on the wire: 2 ms at the 99.9th percentile). */
static inline void uro_spin_lock(pthread_spinlock_t *lock)
{
	while (pthread_spin_trylock(lock))
		sched_yield();
}

/* Posting and polling (ibv_post_send(3), ibv_post_recv(3), ibv_poll_cq(3))
 * are thread-safe, as on rdma-core; a process that has never started a
 * thread takes no lock. Returns whether it locked, for uro_mt_unlock. */
static inline int uro_mt_lock(pthread_spinlock_t *lock)
{
	if (__libc_single_threaded)
		return 0;
	uro_spin_lock(lock);
	return 1;
}

static inline void uro_mt_unlock(pthread_spinlock_t *lock, int locked)
{
	if (locked)
		pthread_spin_unlock(lock);
}

#endif
