/* The RoCEv2 transport (docs/design.md, Inter-host: RoCEv2 on the wire):
 * what a QP whose peer is on another host keeps, and what the verbs layer
 * calls. Requests go out as RoCEv2 packets in UDP datagrams to port 4791;
 * the process's progress thread, and the program's own polls, take what
 * comes back. */
#ifndef URO_WIRE_H
#define URO_WIRE_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>

#include "objects.h"
#include "send_wr.h"
#include "ud_receive.h"
#include "opcode.h"
#include "packet.h"
#include "relay.h"
#include "cq_ring.h"
#include "faults.h"
#include "icrc.h"
#include "key_hold.h"
#include "pcap_trace.h"
#include "recv_queue.h"
#include "segment_ops.h"

/* Datagrams taken with one recvmmsg. */
#define URO_WIRE_BATCH 16
/* QPs a batch can owe an ACK at once; one more is acknowledged at once. */
#define URO_WIRE_ACKS 64
/* Room for the IP (4 or 6) and UDP headers, written in front of each
 * packet only to compute its ICRC (they end where the BTH starts): the
 * kernel writes the real ones. */
#define URO_WIRE_HEAD URO_ROCE_IP_UDP_MAX
#define URO_WIRE_BUF  (URO_WIRE_HEAD + URO_ROCE_BTH_LEN + 64 + 4096 + URO_ROCE_ICRC_LEN)
/* A receive buffer: a datagram the kernel's GRO coalesced from several
 * packets holds up to 64 KiB of UDP payload (udp(7), UDP_GRO). */
#define URO_WIRE_RX_BUF (URO_WIRE_HEAD + 65536)
/* A WRITE's payloads placed with one process_vm_writev (rc_responder.c). */
#define URO_WIRE_RUN 32
/* A message's packets built, copied and sent together: one sendmmsg, and
 * one process_vm_readv for each 33 (uro_wire_gather), for up to this many,
 * where a system call costs about a microsecond (docs/architecture.md,
 * "Speed"). 64 fills a GSO message at path MTU 1024 (wire_gso.h); 16 gave
 * ib_write_bw 1.57 GB/s against 1.81 between namespaces at MTU 1500. */
#define URO_WIRE_BURST	 64
#define URO_PSN_MASK	 0xffffffu
#define URO_DEFAULT_PKEY 0xffff
/* How often a busy poll fires the timers. */
#define URO_WIRE_TICK_NS (100 * 1000ull)
/* The progress thread wakes on packets, and takes them unless the program
 * is polling its CQ at that moment (or left a poll or a post less than
 * URO_WIRE_POLLING_NS ago): a program spinning on memory for a WRITE to
 * land is served within a wake-up. One found polling takes its packets
 * itself: the thread then watches only its kick and looks again after
 * URO_WIRE_LOOK_NS, twice as late each time it finds the program still
 * polling, up to URO_WIRE_POLLER_NS, and twice as soon each time it finds
 * it away (docs/architecture.md, Who plays the NIC). A program that has
 * not polled for URO_WIRE_POLLER_NS is not waited for. */
#define URO_WIRE_POLLER_NS  (1000 * 1000ull)
#define URO_WIRE_LOOK_NS    (10 * 1000ull)
#define URO_WIRE_POLLING_NS (2 * 1000ull)
/* How long a poll that completed a QP's last request waits for the peer's
 * answer, on a QP whose peer answers: one whose request followed within
 * URO_WIRE_ANSWER_NS of such a completion URO_WIRE_ANSWERED times in a
 * row (answer_wait.c). Both are several of this VM's wake-ups. */
#define URO_WIRE_AWAIT_NS  (50 * 1000ull)
#define URO_WIRE_ANSWER_NS (200 * 1000ull)
#define URO_WIRE_ANSWERED  8
/* How long the progress thread, woken by packets, looks for more before it
 * sleeps again (progress_thread.c): a sender's next GSO datagram of 64 KiB
 * follows within about 35 us at 2 GB/s, and waking a sleeping receiver
 * cost the sender's core 11 % of its time between the namespaces
 * (docs/architecture.md, Who plays the NIC). */
#define URO_WIRE_SPIN_NS (50 * 1000ull)

struct uro_wire_faults;

/* Sending sockets: the UDP source ports a QP's packets may come from. */
#define URO_WIRE_TX_PORTS 16

/* The IP families RoCEv2 runs over (IBTA A17.4): an IPv4-mapped GID's,
 * and any other GID's. */
enum uro_wire_family { URO_WIRE_IPV4, URO_WIRE_IPV6, URO_WIRE_FAMILIES };

/* An endpoint's sockets of one family, opened when a QP or an address
 * handle first needs them. A link's packets of a family leave from, and
 * arrive at, its first address of that family (its first GID of it). */
struct uro_wire_socks {
	int fd; /* UDP, that address, port 4791, SO_REUSEADDR; -1 until opened */
	int tx_fd[URO_WIRE_TX_PORTS];	     /* UDP, the same address, ports the kernel chose */
	uint16_t tx_port[URO_WIRE_TX_PORTS]; /* theirs, network order */
	union ibv_gid addr;		     /* that address as its GID */
};

/* Where a QP's or a datagram's packets go: port 4791 of the destination
 * GID's address, as the headers under the ICRC name it and as sendto
 * takes it (an IPv6 link-local one scoped to the link's netdev). */
struct uro_wire_dest {
	union ibv_gid gid;
	union {
		struct sockaddr sa;
		struct sockaddr_in in;
		struct sockaddr_in6 in6;
	} sa;
	socklen_t len;
	uint8_t family; /* enum uro_wire_family */
};

/* A peer's flow (its address and UDP source port) that reaches this
 * process through a socket of its own (wire_flow.c). */
#define URO_WIRE_FLOWS 64
/* Multicast groups a process's endpoint has joined on the wire at once
 * (wire_mcast.c). */
#define URO_WIRE_GROUPS 16

/* The tags of the endpoint's receive set (rx_efd): the families' sockets
 * (enum uro_wire_family), the relay, the address announcements, each
 * flow's socket and each group's. */
enum {
	RX_RELAY = URO_WIRE_FAMILIES,
	RX_ADDRESSES,
	RX_FLOW0,
	RX_GROUP0 = RX_FLOW0 + URO_WIRE_FLOWS,
	RX_MEMBERS = RX_GROUP0 + URO_WIRE_GROUPS
};

/* A multicast group joined: its GID and the socket bound to it (-1: a
 * free entry). */
struct uro_wire_group {
	union ibv_gid gid;
	int fd;
};
struct uro_wire_flow {
	int fd;
	uint16_t sport; /* network order */
	union ibv_gid peer;
};

/* One per context with a QP on the wire. */
struct uro_wire_endpoint {
	struct uro_wire_socks fam[URO_WIRE_FAMILIES];
	/* Established flows' own sockets (fd -1: refused), under rx_lock. */
	struct uro_wire_flow flows[URO_WIRE_FLOWS];
	unsigned nflows;
	struct uro_wire_group groups[URO_WIRE_GROUPS]; /* under open_lock */
	unsigned ifindex;			       /* the link's netdev */
	pthread_mutex_t open_lock;		       /* opens a family's sockets */
	struct uro_wire_relay relay; /* packets for and from the host's other processes */
	int kick_fd;		     /* eventfd: wakes the progress thread */
	/* epoll over the families' open sockets and the relay: what has
	 * packets, in one call however many are open. */
	int rx_efd;
	/* The families whose socket the kernel refused for an address not
	 * yet usable, and the address announcements that open them then
	 * (address_watch.h; -1 while none waits). Under open_lock. */
	uint8_t awaited[URO_WIRE_FAMILIES];
	int addr_fd;
	int refused[URO_WIRE_FAMILIES]; /* the errno last said of a family's bind, or 0 */
	pthread_mutex_t rx_lock;	/* one receiver at a time: the responders' state */
	uint8_t (*rx)[URO_WIRE_RX_BUF]; /* URO_WIRE_BATCH of them */
	uint8_t (
	    *burst)[URO_WIRE_BUF]; /* the responders' packets (URO_WIRE_BURST), under rx_lock */
	struct uro_qp *runs[URO_WIRE_BATCH]; /* QPs whose WRITE runs wait, under rx_lock */
	unsigned nruns;
	struct uro_qp *acks[URO_WIRE_ACKS]; /* QPs with an ACK due, under rx_lock */
	unsigned nacks;
	/* The QP whose answer this receive waits for, URO_WIRE_AWAIT_NS from
	 * its drained_ns (answer_wait.c); under rx_lock, and NULL when it is
	 * released. */
	struct uro_qp *await_qp;
	int held;		 /* a QP holds small WQEs back (uro_wire_push_held) */
	uint32_t qp_limit;	 /* above every QP table index on the wire: the timers' scan */
	uint64_t last_active_ns; /* the program's last poll, or post on the wire */
	int in_poll;		 /* the program is in ibv_poll_cq now */
	int sleeps_on_events;	 /* the program has blocked in ibv_get_cq_event */
	uint64_t look_ns;	 /* the progress thread's, while the program polls */
	uint64_t last_tick_ns;	 /* the last pass over the timers */
	struct uro_wire_faults *faults; /* UROCE_FAULTS, or NULL */
	struct uro_pcap *pcap;		/* UROCE_PCAP, or NULL */
	struct uro_seg_counters *n;	/* in the segment: `uroce stat` reads them */
	struct uro_icrc_id_cache ids;	/* received packets' IPv4 IDs, under rx_lock */
	int gso_off; /* the kernel refused UDP GSO here: one datagram a packet (wire_burst.c) */
	uint32_t gsi_psn; /* QP 1's next PSN, for the answers gsi.c sends itself */
};

/* A send WQE on the wire: transmitted, then kept until acknowledged. */
struct uro_wire_wqe {
	struct uro_pending p; /* the request, its SGEs, its inline data */
	uint32_t psn;	      /* its first PSN */
	uint32_t npsn;	      /* PSNs it takes: its packets, or a READ's responses */
	uint32_t got;	      /* READ responses placed, in order */
	uint32_t tx;	      /* its packets sent so far (this round) */
	uint32_t byte_len;
	uint8_t kind; /* enum uro_op_kind */
	uint8_t done;
	uint8_t sent;
	uint8_t status; /* a local error found at transmit */
};

/* The responder's side of a connected QP (IBTA 9.7.5). */
/* A WRITE's payloads that arrived in one receive batch, placed together
 * with one process_vm_writev before anything is acknowledged
 * (rc_responder.c). */
struct uro_wire_run {
	unsigned n;
	uint32_t psn;	       /* the last packet's */
	uint8_t *dst;	       /* where the first lands */
	struct uro_peer *peer; /* in whose memory */
	uint64_t len;
	struct uro_holds h; /* the key, held until placed */
	struct iovec src[URO_WIRE_RUN];
};

/* Where a request's receive side is: the process whose memory and
 * tables it reaches, its SRQ (1-based, 0 none), the PD its keys and
 * receive buffers are checked against, and the CQ its receives complete
 * on. A QP's own, or an XRC target's SRQ's, which may be another
 * process's of this host (rc_responder.c, receive_side). */
struct uro_wire_side {
	struct uro_peer *peer;
	uint32_t srq, pd, cq;
};

struct uro_wire_rq {
	uint32_t epsn; /* the expected PSN */
	uint32_t msn;  /* messages completed, mod 2^24 */
	int nak_sent;  /* a NAK stands for epsn: later packets wait for the retry */
	/* The message being received: a SEND's receive and where it is, or a
	 * WRITE's key and address. */
	int in_send, in_write, has_recv;
	struct uro_wire_side side;	/* the packet being executed's */
	struct uro_wire_side recv_side; /* the kept receive's: where it lands */
	uint32_t xrc_srqn;		/* the SRQ an XRC target's message is for */
	struct uro_recv recv;
	/* The completion of the receive the message being executed took:
	 * delivered once its PSN is accepted (complete_recv). */
	struct uro_cqe done;
	int has_done, done_se;
	uint64_t off;
	uint32_t rkey;
	uint64_t va;
	uint64_t left;
	/* Atomics answered, by PSN: a duplicate is answered again from here,
	 * never executed twice (IBTA 9.7.5.3.3). */
	struct {
		uint32_t psn;
		uint32_t valid;
		uint64_t value;
	} replay[URO_MAX_RD_ATOMIC + 1];
	unsigned replay_next;
	struct uro_wire_run run;
	/* An ACK a packet of the batch asked for, sent when the batch ends
	 * (uro_wire_batch_end), or before any other answer of this QP's. */
	int ack_due;
	uint32_t ack_psn;
};

struct uro_qp_wire {
	struct uro_wire_dest peer; /* the destination GID's address, port 4791 */
	uint32_t mtu;		   /* bytes of the path MTU */
	/* requester */
	struct uro_wire_wqe *ring;
	uint32_t cap;
	uint32_t head, next, tail; /* [head,next) sent, [next,tail) not yet */
	int partial;		   /* the last sent waits for the window to send the rest */
	int held;		   /* small WQEs posted wait for those in flight: rc_requester.c */
	uint32_t psn;		   /* the next new PSN */
	uint32_t acked;		   /* the last PSN acknowledged */
	uint64_t deadline;	   /* the ACK timer of the oldest unacknowledged; 0 off */
	int rnr_wait;		   /* the deadline is an RNR NAK's timer */
	unsigned retry_left, rnr_left;
	unsigned rd_out;   /* READ and atomic requests sent, not answered */
	uint32_t read_gap; /* 1 + the READ response PSN last asked again at once */
	uint32_t nak_psn;  /* 1 + the PSN of the sequence NAK gone back for, until progress */
	/* When the send queue last emptied on a completion, 0 once a request
	 * of the peer's came; how many requests in a row came within
	 * URO_WIRE_ANSWER_NS of it (answer_wait.c). Under rx_lock. */
	uint64_t drained_ns;
	unsigned answers;
	uint8_t (
	    *burst)[URO_WIRE_BUF]; /* the requester's packets (URO_WIRE_BURST), under sq_lock */
	/* responder */
	struct uro_wire_rq rq;
};

/* Which path a destination of ctx's link takes: 1 the wire, 0 shared
 * memory. A GID of this network namespace stays local unless this process
 * takes the wire to all (uro_wire_forced); an IB link's stay local. */
int uro_wire_gid_is_remote(const struct uro_context *ctx, const union ibv_gid *gid);
/* Whether this process was told to take the wire path to every peer
 * (UROCE_TRANSPORT=roce, UROCE_FAULTS, UROCE_PCAP). */
int uro_wire_told(void);
/* Whether this process's QPs take the wire path to every peer: told to,
 * or cross-memory attach cannot serve it (attach_path.h). */
int uro_wire_forced(void);
/* Whether QP qpn, connected to (gid, dest_qpn), takes the wire path: a
 * remote GID, this process's or the destination process's forcing, or a
 * destination process that cross-memory attach cannot join to this one
 * both ways (another user's, another user namespace's). */
int uro_wire_connects(struct uro_context *ctx, const union ibv_gid *gid, uint32_t dest_qpn,
		      uint32_t qpn);
/* Whether a UD QP of ctx must listen on the wire too. */
int uro_wire_ud_listens(struct uro_context *ctx);

/* The context's endpoint, opened on first use, with the sockets of gid's
 * family open (gid NULL: of every family the link has an address of, at
 * least one); NULL and errno. */
struct uro_wire_endpoint *uro_wire_open(struct uro_context *ctx, const union ibv_gid *gid);
/* Fills *d for port 4791 of gid's address. */
void uro_wire_dest(const struct uro_wire_endpoint *w, const union ibv_gid *gid,
		   struct uro_wire_dest *d);
void uro_wire_close(struct uro_context *ctx);
/* Wakes the progress thread out of its ppoll. */
void uro_wire_kick(struct uro_context *ctx);
/* Sends the packet whose transport part (BTH onwards, tlen bytes) starts
 * at buf + URO_WIRE_HEAD, adding its ICRC. 0 or an errno. */
int uro_wire_send(struct uro_wire_endpoint *w, const struct uro_wire_dest *to, uint8_t *buf,
		  size_t tlen);
/* Sends n packets as uro_wire_send does, each tlen[i] bytes of transport
 * part at buf[i] + URO_WIRE_HEAD, with one system call when it can. */
void uro_wire_send_burst(struct uro_wire_endpoint *w, const struct uro_wire_dest *to,
			 uint8_t (*buf)[URO_WIRE_BUF], const size_t *tlen, unsigned n);
/* Writes the IP and UDP headers in front of the packet whose transport
 * part (tlen bytes) starts at buf + URO_WIRE_HEAD, and its ICRC behind,
 * computed with IPv4 identification ip_id (0 but for a GSO segment). */
void uro_wire_finish(const struct uro_wire_endpoint *w, const struct uro_wire_dest *to,
		     uint8_t *buf, size_t tlen, uint16_t ip_id);
/* wire_burst.c: sends the burst from socket fd in as few datagrams as UDP
 * GSO allows, finishing each packet. */
void uro_wire_send_gso(struct uro_wire_endpoint *w, int fd, const struct uro_wire_dest *to,
		       uint8_t (*buf)[URO_WIRE_BUF], const size_t *tlen, unsigned n);
/* Bytes an RC requester of this endpoint keeps unacknowledged: what the
 * peer's receive buffer holds of what it sends (socket_buffer.h), more
 * when its bursts leave as GSO messages. */
uint32_t uro_wire_window_bytes(const struct uro_wire_endpoint *w);
/* Copies the bytes of the list src in from's memory (this process's,
 * or an XRC SRQ's process's; ns entries, at most URO_MAX_SGE; under the
 * hold h, or NULL) into a burst's n payloads dst,
 * in order, with as few system calls as uro_remote_copy's lists allow:
 * 0, or -1 when src was not there. */
int uro_wire_gather(struct uro_peer *from, const struct iovec *dst, unsigned n,
		    const struct iovec *src, int ns, const struct uro_holds *h);
/* The same packet written to the trace (w->pcap) only, as if sent. */
void uro_wire_trace_sent(struct uro_wire_endpoint *w, const struct uro_wire_dest *to, uint8_t *buf,
			 size_t tlen);
/* Puts a finished packet (transport bytes and ICRC) on the socket. */
int uro_wire_transmit(struct uro_wire_endpoint *w, const struct uro_wire_dest *to,
		      const uint8_t *data, size_t len);

/* gsi.c: a packet to QP 1, its addresses those of the packet (src the
 * peer's, sport its UDP source port). */
void uro_wire_gsi_take(struct uro_wire_endpoint *w, const struct uro_roce_packet *p,
		       const union ibv_gid *src, const union ibv_gid *dst, uint16_t sport);

/* fault_inject.c: UROCE_FAULTS on this endpoint's packets (faults.h). */
/* 0 with *out set, or NULL for a spec scoped to another device than dev;
 * EINVAL for a bad spec (said in the log), ENOMEM. */
int uro_wire_faults_open(const char *spec, const char *dev, struct uro_wire_faults **out);
void uro_wire_faults_free(struct uro_wire_faults *f);
void uro_wire_faults_send(struct uro_wire_endpoint *w, const struct uro_wire_dest *to,
			  uint8_t *data, size_t len);
/* Sends the held packets now due; ns to the next one, 0 for none. */
uint64_t uro_wire_faults_flush(struct uro_wire_endpoint *w);
/* Whether this SEND is answered RNR although a receive is posted. */
int uro_wire_faults_rnr(struct uro_wire_endpoint *w);

/* Receives and answers what arrived, and fires due timers; returns the
 * nanoseconds to the next timer, 0 for none. */
uint64_t uro_wire_progress(struct uro_context *ctx, int wait_for_lock);

/* Whether the program polled within URO_WIRE_POLLER_NS; *left is how long
 * the progress thread may sleep before it looks again. */
int uro_wire_polled_lately(struct uro_wire_endpoint *w, uint64_t *left);
/* The progress thread, woken by packets, leaves them to a program that
 * is polling now; while it yields, it looks whether the program still
 * is (and then yields longer). */
int uro_wire_polling_now(struct uro_wire_endpoint *w);
int uro_wire_still_polling(struct uro_wire_endpoint *w);
/* The program enters (in = 1) or leaves a poll of a CQ. */
void uro_wire_in_poll(struct uro_context *ctx, int in);
/* The program posts: to the progress thread it is as busy as when it
 * polls, and is left its packets. */
void uro_wire_busy(struct uro_context *ctx);
/* The program is about to block (ibv_get_cq_event): the thread takes
 * over, and the program's polls no longer wait for answers
 * (answer_wait.c). */
void uro_wire_idle(struct uro_context *ctx);

/* A connected QP goes on the wire (modify to RTR): 0 or an errno. */
int uro_wire_qp_attach(struct uro_context *ctx, struct uro_qp *qp);
void uro_wire_qp_free(struct uro_qp *qp);
/* RTS: the requester starts at sq_psn. RESET: all is dropped. */
void uro_wire_qp_rts(struct uro_qp *qp);
void uro_wire_qp_reset(struct uro_qp *qp);

/* rc_requester.c */
int uro_wire_post_send(struct uro_context *ctx, struct uro_qp *qp, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad);
/* Timers and flushes of one QP; returns ns to its next timer or 0. */
uint64_t uro_wire_qp_tick(struct uro_context *ctx, struct uro_qp *qp);
/* Sends what the window allows. Caller holds sq_lock. */
void uro_wire_push(struct uro_context *ctx, struct uro_qp *qp);
/* Sends what QPs held back for the program's next call (rc_requester.c):
 * under rx_lock, which keeps the QPs from going. */
void uro_wire_push_held(struct uro_context *ctx);
/* Sends what qp held back: what was posted before a transition leaves
 * before it, as a NIC had taken it. */
void uro_wire_send_held(struct uro_context *ctx, struct uro_qp *qp);
/* Retransmits from the oldest WQE not done (go-back-N, IBTA 9.7.6.1.3). */
void uro_wire_go_back(struct uro_context *ctx, struct uro_qp *qp);
/* Completes, in order, the WQEs at the head that are done. */
void uro_wire_retire(struct uro_context *ctx, struct uro_qp *qp);
/* An RNR NAK with the responder's timer field: wait, or give up. */
void uro_wire_rnr(struct uro_context *ctx, struct uro_qp *qp, uint8_t timer);
/* Ends the QP's send queue: the head with status, the rest flushed. */
void uro_wire_fail(struct uro_context *ctx, struct uro_qp *qp, enum ibv_wc_status status);

/* answer_wait.c: a poll that completed a QP's last request waits for the
 * peer's answer. The completer says the queue emptied, the responder that
 * a request came, and the poll receives while the wait lasts (a wait
 * that runs out is ended here). Under rx_lock. */
void uro_wire_drained(struct uro_context *ctx, struct uro_qp *qp);
void uro_wire_request_came(struct uro_context *ctx, struct uro_qp *qp);
int uro_wire_awaits_answer(struct uro_wire_endpoint *w);

/* rc_completer.c: ACK, NAK, READ responses, atomic ACKs. */
void uro_wire_complete(struct uro_context *ctx, struct uro_qp *qp,
		       const struct uro_roce_packet *pkt);
/* rc_responder.c: requests to a connected QP. */
/* Places the WRITE runs the batch just received left waiting: before the
 * receive buffers are reused. */
void uro_wire_place_runs(struct uro_context *ctx);
/* The end of a received batch: its WRITE runs placed, then one ACK per QP
 * for all the batch's packets that asked for one. */
void uro_wire_batch_end(struct uro_context *ctx);
void uro_wire_respond(struct uro_context *ctx, struct uro_qp *qp,
		      const struct uro_roce_packet *pkt);
/* ud.c */
/* A datagram that went over shared memory, written to this process's
 * trace as the packet the wire would have carried. */
void uro_wire_ud_trace(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
		       const struct ibv_ah_attr *ah, const struct iovec *liov, int nl,
		       uint64_t len);
int uro_wire_ud_send(struct uro_context *ctx, struct uro_qp *qp, const struct ibv_send_wr *wr,
		     const struct ibv_ah_attr *ah, const struct iovec *liov, int nl, uint64_t len);
/* src and dst are the packet's IP addresses as GIDs. */
/* wire_mcast.c: multicast groups on the link's netdev. Whether the link
 * carries multicast to other hosts (not on lo); join and leave a group (0
 * or an errno); a datagram that came to a group; the endpoint's groups. */
int uro_wire_mcast_carried(const struct uro_context *ctx);
int uro_wire_mcast_join(struct uro_context *ctx, const union ibv_gid *mgid);
void uro_wire_mcast_leave(struct uro_context *ctx, const union ibv_gid *mgid);
void uro_wire_mcast_receive(struct uro_context *ctx, const struct uro_roce_packet *p,
			    const union ibv_gid *src, const union ibv_gid *dst);
int uro_wire_group_fd(struct uro_wire_endpoint *w, unsigned i);
void uro_wire_groups_close(struct uro_wire_endpoint *w);
void uro_wire_ud_receive(struct uro_context *ctx, struct uro_qp *qp,
			 const struct uro_roce_packet *pkt, const union ibv_gid *src,
			 const union ibv_gid *dst);

static inline struct uro_wire_wqe *uro_wire_at(struct uro_qp_wire *wq, uint32_t i)
{
	return &wq->ring[i % wq->cap];
}

/* READs and atomics are answered with data, not only acknowledged. */
static inline int uro_wire_reads_back(uint8_t kind)
{
	return kind == URO_OP_READ || kind == URO_OP_ATOMIC;
}

/* Reliable: RC, or either half of XRC, which is reliable as RC is
 * (IBTA Annex A14). */
static inline int uro_wire_is_rc(const struct uro_qp *qp)
{
	enum ibv_qp_type t = qp->qpx.qp_base.qp_type;

	return t == IBV_QPT_RC || t == IBV_QPT_XRC_SEND || t == IBV_QPT_XRC_RECV;
}

/* The transport a connected QP's opcodes belong to (bits 7-5 of each). */
static inline enum uro_wire_qp uro_wire_transport(const struct uro_qp *qp)
{
	enum ibv_qp_type t = qp->qpx.qp_base.qp_type;

	return t == IBV_QPT_RC ? WIRE_RC : t == IBV_QPT_UC ? WIRE_UC : WIRE_XRC;
}

/* The place of packet i of an n-packet message (IBTA 9.8.3). */
static inline uint8_t uro_wire_place(uint32_t i, uint32_t n)
{
	if (n == 1)
		return WIRE_ONLY;
	return i == 0 ? WIRE_FIRST : i == n - 1 ? WIRE_LAST : WIRE_MIDDLE;
}

/* A packet with opcode code, to dest_qp at psn, every other field zero. */
void uro_wire_header(struct uro_roce_packet *pkt, int code, uint32_t dest_qp, uint32_t psn);
/* Where uro_roce_build left pkt's payload in a buffer of URO_WIRE_BUF. */
static inline uint8_t *uro_wire_payload(uint8_t *buf, const struct uro_roce_packet *pkt)
{
	return buf + URO_WIRE_HEAD + URO_ROCE_BTH_LEN + uro_wire_hdrs_len(pkt->op->hdrs);
}

/* PSN arithmetic mod 2^24 (IBTA 9.7.1): a - b as a signed distance. */
static inline int32_t uro_psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

#endif
