/* rsockets (rsocket(7)): a byte stream over an RC QP that the CM connects,
 * and datagrams over UD, with the socket calls' names prefixed by r. The
 * descriptor a program holds is the fd of the rsocket's own CM event
 * channel (a datagram rsocket's: its UDP socket): a real fd, so that it
 * never collides with the program's others, and one rpoll can sleep on.
 *
 * A stream speaks rdma-core's protocol (rsocket_wire.h): each end grants
 * the other halves of a receive ring, and the sender writes the stream
 * into them with RDMA WRITEs with immediate data. */
#ifndef URO_RSOCKET_H
#define URO_RSOCKET_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <infiniband/ib.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <stdint.h>
#include <sys/socket.h>

#include "rsocket_wire.h"

#define RS_QP_MIN     16 /* send and receive queue sizes: rdma-core's bounds */
#define RS_QP_MAX     0xfffe
#define RS_QP_DEF     384
#define RS_BUF_DEF    (128u << 10) /* each way, unless SO_SNDBUF/SO_RCVBUF say */
#define RS_BUF_MIN    (4u << 10)
#define RS_BUF_MAX    (64u << 20)
#define RS_INLINE_DEF 64

/* A region of ours the peer may write (riomap): its entry in the peer's
 * table. */
struct rs_local_map {
	struct rs_local_map *next;
	uint32_t index;
	uint64_t offset;
	struct ibv_mr *mr;
};

/* An iomap entry on its way to the peer's table. */
struct rs_map_msg {
	struct rs_map_msg *next;
	uint32_t index;
	struct rs_iomap_entry e; /* in the peer's order */
};

/* A connected stream (rsocket_stream.c). Sequence numbers are 16 bits, as
 * on the wire. */
struct rs_stream {
	uint32_t sq_size, rq_size, inline_size;

	/* Sending: a ring the bytes are copied into, send WRs, the peer's
	 * grants and its credits. */
	uint32_t sbuf_size, sbuf_head, sbuf_avail, sqe_avail;
	uint32_t ctrl_sent, ctrl_done; /* control messages posted, completed */
	uint16_t sseq_no, sseq_comp;   /* data messages sent; the peer's limit */
	struct rs_sge grant[RS_SGL_ENTRIES];
	unsigned grant_cur;	  /* the grant being written into */
	unsigned grant_next;	  /* the entry the peer's next grant fills */
	struct rs_sge peer_sgl;	  /* the peer's grant table: length in entries */
	struct rs_sge peer_iomap; /* the peer's iomap table: length in entries */
	unsigned peer_sge;	  /* the entry our next grant fills */
	int swap;		  /* the peer's byte order is not ours */

	/* Receiving: the ring, the messages in it, and what we granted. */
	struct ibv_mr *tmr;
	uint8_t *table;		      /* our grant table, then our iomap table */
	unsigned niomap;	      /* our iomap table's entries */
	struct rs_iomap_entry *iomap; /* the peer's maps, as its entries said */
	uint32_t rbuf_size, rx_off;   /* the ring; where its first unread byte is */
	uint32_t rbuf_avail;	      /* bytes read and not granted again */
	uint32_t rbuf_free;	      /* where the next grant starts */
	uint16_t rseq_no, rseq_comp;  /* messages read; when to give credits */
	uint32_t *rmsg;		      /* queued data messages' lengths, a ring */
	uint32_t rmsg_cap, rmsg_head, rmsg_tail, rx_part;
	uint64_t queued; /* bytes written into the ring, not read */

	struct rs_local_map *maps;
	struct rs_map_msg *unsent;
};

struct rs_pending {
	struct rdma_cm_id *id;
	struct rs_conn_data peer;
};

enum rs_state {
	RS_NEW,
	RS_LISTENING,
	RS_RESOLVING_ADDR,
	RS_RESOLVING_ROUTE,
	RS_CONNECTING,
	RS_CONNECTED,
	RS_FAILED, /* a connect that did not: SO_ERROR says why */
};

struct rs_dgram;

struct rsock {
	int fd;		     /* the descriptor: ch's fd; a datagram rsocket's UDP socket */
	struct rs_dgram *dg; /* a datagram rsocket's (rsocket_dgram.c), else NULL */
	pthread_mutex_t lock;
	enum rs_state state;
	int err; /* SO_ERROR, taken when read */
	int nonblock;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;

	/* A listener's connection requests not yet accepted. */
	struct rs_pending *pending;
	unsigned npending, backlog;

	/* Options, as set (rsetsockopt); some only read back. */
	int sndbuf, rcvbuf, nodelay, keepalive, keepidle, reuseaddr, inline_size, iomapsize;
	int sqsize, rqsize;

	/* The connection. */
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_pd *pd;
	struct ibv_mr *smr, *rmr;
	uint8_t *sbuf, *rbuf;

	struct rs_stream st;
	int peer_fin;	  /* the peer sends no more: end of stream once read */
	int peer_closed;  /* nor receives (its RS_CTRL_DISCONNECT) */
	int fin_sent;	  /* rshutdown(SHUT_WR) */
	int disconnected; /* the CM or the QP says the connection is gone */
};

/* The rsocket of a descriptor, locked; NULL with errno EBADF. */
struct rsock *rs_get(int fd);
void rs_put(struct rsock *rs);

/* rsocket_stream.c */
int rs_create_resources(struct rsock *rs);
void rs_set_peer(struct rsock *rs, const struct rs_conn_data *peer);
void rs_destroy_resources(struct rsock *rs);
void rs_conn_data_of(const struct rsock *rs, struct rs_conn_data *c);
size_t rs_conn_offset(struct rdma_cm_id *id);
int rs_conn_data_valid(const void *pdata, uint8_t len, size_t offset, struct rs_conn_data *c);
void rs_progress(struct rsock *rs);
int rs_wait(struct rsock *rs, int timeout_ms);
int rs_arm(struct rsock *rs);
void rs_drain_events(struct rsock *rs);
int rs_send_ctrl(struct rsock *rs, enum rs_ctrl code);
int rs_drain_sends(struct rsock *rs, int timeout_ms);
ssize_t rs_send(struct rsock *rs, const void *buf, size_t len, int flags);
ssize_t rs_recv(struct rsock *rs, void *buf, size_t len, int flags);
int rs_queue_map(struct rsock *rs, uint32_t index, uint64_t offset, uint64_t addr, uint32_t key,
		 uint32_t len);
int rs_flush_maps(struct rsock *rs, int flags);
ssize_t rs_write_direct(struct rsock *rs, const void *buf, size_t len, uint64_t offset, int flags);
int rs_readable(const struct rsock *rs);
int rs_writable(const struct rsock *rs);
uint32_t rs_buf_size(int set);

/* rsocket_dgram.c */
int rs_dgram_new(struct rsock *rs, int domain);
void rs_dgram_drain(struct rsock *rs);
void rs_dgram_free(struct rsock *rs);
int rs_dgram_bind(struct rsock *rs, const struct sockaddr *addr, socklen_t len);
int rs_dgram_connect(struct rsock *rs, const struct sockaddr *addr, socklen_t len);
int rs_dgram_names(struct rsock *rs, struct sockaddr *addr, socklen_t *len, int peer);
ssize_t rs_dgram_sendto(struct rsock *rs, const void *buf, size_t len, int flags,
			const struct sockaddr *to);
ssize_t rs_dgram_recvfrom(struct rsock *rs, void *buf, size_t len, int flags, struct sockaddr *from,
			  socklen_t *fromlen);
short rs_dgram_events(struct rsock *rs);
int rs_dgram_arm(struct rsock *rs);

/* rsocket.c: the descriptor's rsocket, if it is one (unlocked). */
struct rsock *rs_find(int fd);
void rs_table_lock(void);
void rs_table_unlock(void);
void rs_connect_advance(struct rsock *rs);
void rs_listen_advance(struct rsock *rs);

#endif
