/* rsockets (rsocket(7)): a byte stream over an RC QP that the CM connects,
 * with the socket calls' names prefixed by r. The descriptor a program
 * holds is the fd of the rsocket's own CM event channel: a real fd, so
 * that it never collides with the program's others, and one rpoll can
 * sleep on.
 *
 * The protocol is uroce's own (docs/rsockets.md): both ends must be
 * uroce. Each end posts receive slots of RS_SEG bytes; a SEND with
 * immediate data carries up to a slot of the stream, and the immediate
 * says what the message is and returns the sender's freed slots
 * (credits) to the peer, so that a sender never overruns the receiver's
 * posted receives. */
#ifndef URO_RSOCKET_H
#define URO_RSOCKET_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <infiniband/ib.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <stdint.h>
#include <sys/socket.h>

#define RS_SEG	      (32u << 10) /* bytes a message carries */
#define RS_SLOTS_MIN  4
#define RS_SLOTS_MAX  64
#define RS_SLOTS_DEF  8		  /* 256 KiB each way unless SO_SNDBUF/SO_RCVBUF say */
#define RS_CTRL	      8		  /* receives beyond the data credits, and control sends */
#define RS_CTRL_BYTES 64	  /* a control message's payload at most */
#define RS_MAGIC      0x55525331u /* "URS1" */

/* What a message is: the immediate's top byte (the rest: credits). */
enum rs_msg {
	RS_MSG_DATA = 1,   /* stream bytes */
	RS_MSG_CREDIT = 2, /* only credits */
	RS_MSG_FIN = 3,	   /* the sender will send no more (rshutdown SHUT_WR) */
	RS_MSG_IOMAP = 4,  /* a region riowrite may write (struct rs_iomap_msg) */
};

/* The private data of the CM's REQ and REP: what each end takes. */
struct rs_hello {
	uint32_t magic;
	uint32_t slots; /* receive slots for data: the peer's first credits */
	uint32_t seg;	/* bytes each takes */
};

struct rs_iomap_msg {
	uint64_t offset, addr, len;
	uint32_t rkey;
	uint32_t pad;
};

struct rs_iomap {
	struct rs_iomap *next;
	uint64_t offset, addr, len;
	uint32_t rkey;
	struct ibv_mr *mr; /* ours; NULL for the peer's */
};

struct rs_pending {
	struct rdma_cm_id *id;
	struct rs_hello hello;
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

	/* Options, as set (rsetsockopt); most only read back. */
	int sndbuf, rcvbuf, nodelay, keepalive, keepidle, reuseaddr, inline_size, iomapsize;

	/* The connection. */
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_pd *pd;
	struct ibv_mr *smr, *rmr;
	uint8_t *sbuf, *rbuf;
	uint32_t nsend, nrecv;	       /* data slots each way */
	uint32_t seg;		       /* bytes a data message carries: the peer's slot */
	uint32_t send_head, send_tail; /* data slots in flight, a ring */
	uint32_t ctrl_head, ctrl_tail; /* control sends in flight, a ring */
	uint32_t credits;	       /* data messages the peer can take now */
	uint32_t unreturned;	       /* our slots freed, not yet told */
	/* Data received, in order: slot numbers, their lengths, and how far
	 * the first has been read. */
	uint32_t *rx_slot, *rx_len;
	uint32_t rx_head, rx_tail, rx_off;
	int peer_fin;	  /* FIN came: end of stream once the queue is read */
	int fin_sent;	  /* rshutdown(SHUT_WR) */
	int disconnected; /* the CM or the QP says the connection is gone */
	struct rs_iomap *local_maps, *peer_maps;
};

/* The rsocket of a descriptor, locked; NULL with errno EBADF. */
struct rsock *rs_get(int fd);
void rs_put(struct rsock *rs);

/* rsocket_stream.c */
int rs_create_resources(struct rsock *rs);
void rs_set_peer(struct rsock *rs, const struct rs_hello *peer);
void rs_destroy_resources(struct rsock *rs);
void rs_hello_of(const struct rsock *rs, struct rs_hello *h);
int rs_hello_valid(const void *pdata, uint8_t len, struct rs_hello *h);
void rs_progress(struct rsock *rs);
int rs_wait(struct rsock *rs, int timeout_ms);
int rs_arm(struct rsock *rs);
void rs_drain_events(struct rsock *rs);
int rs_send_ctrl(struct rsock *rs, enum rs_msg type, const void *payload, uint32_t len);
int rs_drain_sends(struct rsock *rs, int timeout_ms);
ssize_t rs_send(struct rsock *rs, const void *buf, size_t len, int flags);
ssize_t rs_recv(struct rsock *rs, void *buf, size_t len, int flags);
ssize_t rs_write_remote(struct rsock *rs, const void *buf, size_t len, uint64_t addr, uint32_t rkey,
			int flags);
int rs_readable(const struct rsock *rs);
int rs_writable(const struct rsock *rs);

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
