/* The per-process shared-memory segment (docs/design.md, A process is a
 * function of the device): what a remote initiator reads to act on this
 * process's objects. Only the owner writes the tables; peers map the
 * segment and read them. Everything here is fixed-size and
 * position-independent (offsets, never pointers). */
#ifndef URO_SEGMENT_LAYOUT_H
#define URO_SEGMENT_LAYOUT_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "drop_reason.h"
#include "limits.h"

#define URO_SEG_MAGIC	0x5552534547303031ull /* "URSEG001" */
#define URO_SEG_VERSION 17
#define URO_ARENA_SIZE	(1ull << 30) /* sparse: pages cost only when touched */

/* What the owner's port counts, read by `uroce stat` from another process
 * while the owner runs (port_counters.c names them). */
struct uro_seg_counters {
	/* Counted by the owner's threads. */
	uint64_t rdma_sends;			     /* SEND work requests posted */
	uint64_t retry_exceeded, rnr_retry_exceeded; /* completions with those errors */
	uint64_t rnr_naks_received;
	/* The RoCEv2 path (the owner's endpoint). */
	uint64_t sent, received, forwarded, send_err;
	uint64_t retransmits;  /* go-back-N restarts (IBTA 9.7.6.1.3) */
	uint64_t ack_timeouts; /* local ACK timeouts that ran out */
	uint64_t seq_naks_received, seq_naks_sent;
	uint64_t duplicates, out_of_sequence, no_qp;
	uint64_t dropped[ROCE_DROP_REASONS];
	/* UDP GSO and GRO (udp(7)): messages of several packets sent, the
	 * endpoint's refusals, datagrams of several packets received. */
	uint64_t gso_msgs, gso_refused, gro_msgs;
	/* What UROCE_FAULTS did to this process's packets. */
	uint64_t injected_loss, injected_dup, injected_reorder, injected_corrupt, injected_delay;
	uint64_t injected_rnr, injected_stall;
	/* Counted also by the processes that deliver to this one over shared
	 * memory, on a cache line the owner's counting leaves to them. */
	_Alignas(64) uint64_t rdma_recvs; /* SENDs received (receive completions) */
	uint64_t rnr_naks_sent;		  /* on shared memory, RNR waits its peers took */
	uint64_t bad_pkey;
	uint64_t qkey_violations;
	uint64_t rx_dropped;	 /* a datagram with no receive, a CQ busy */
	uint64_t bad_mads;	 /* CM MADs on QP 1 no CM could have sent (gsi.c) */
	uint64_t staged_dropped; /* staged payloads whose region went first */
};

/* One QP's, in its entry: `uroce stat qp`. Each writer counts on a cache
 * line of its own, so that counting moves no line between the owner's
 * core and a peer's. */
struct uro_seg_qp_counters {
	/* Counted by whoever delivers a receive, a peer on shared memory: on
	 * the line of xrcd, which peers read and the owner no longer writes. */
	uint64_t recv_cqes;
	uint8_t pad[40];
	/* Counted by the owner: the entry's last line, which peers never read. */
	uint64_t posted_sends, posted_recvs;
	uint64_t send_cqes, error_cqes;
	uint64_t retransmits; /* go-back-N restarts */
	uint64_t rnr_waits;   /* RNR NAKs it waited out or gave up on */
};

/* A receive queue, a QP's own or an SRQ's: the owner posts at tail, any
 * process that delivers a message takes at head (recv_queue.c). */
struct uro_seg_rq {
	uint64_t ring; /* arena offset */
	uint32_t size; /* entries; 0 for a QP on an SRQ */
	uint32_t stride;
	uint32_t max_sge;
	uint32_t head;
	uint32_t tail;
	uint32_t limit; /* SRQ limit (IBTA 10.2.9.3); 0 = not armed */
};

/* An XRC domain, as every process of the host names it (IBTA A14.2): the
 * inode of the file it was opened with, or for a private domain (no file)
 * its owner's slot and its number there. All 0: no domain. */
struct uro_xrcd_id {
	uint64_t ino;	/* the file's inode, or the private domain's number */
	uint32_t dev;	/* the file's device; 0 for a private domain */
	uint32_t owner; /* the private domain's registry slot; 0 for a file's */
};

static inline int uro_xrcd_id_same(const struct uro_xrcd_id *a, const struct uro_xrcd_id *b)
{
	return (a->ino || a->owner) && a->ino == b->ino && a->dev == b->dev && a->owner == b->owner;
}

struct uro_seg_qp {
	uint32_t in_use;
	uint32_t qpn;
	uint32_t state; /* enum ibv_qp_state; peers may move it to ERR */
	uint32_t type;	/* enum ibv_qp_type */
	uint32_t pd;	/* PD handle: remote checks compare these */
	uint32_t access;
	uint32_t qkey;
	uint32_t dest_qpn;
	/* As ibv_modify_qp set them; on the wire, the next PSN to send and
	 * the one expected, kept current for `uroce stat qp`. */
	uint32_t sq_psn;
	uint32_t rq_psn;
	uint32_t srq; /* SRQ index + 1; 0 = none */
	uint32_t send_cq;
	uint32_t recv_cq;
	uint16_t pkey_index;
	uint16_t dlid;
	uint8_t path_mtu;
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t min_rnr_timer;
	uint8_t max_rd_atomic;
	uint8_t max_dest_rd_atomic;
	uint8_t port;
	union ibv_gid dgid;
	uint64_t token;	 /* the owner's struct ibv_qp *, named in its events */
	uint32_t serial; /* this QP's, never reused in the segment (uro_event_record) */
	struct uro_seg_rq rq;
	struct uro_xrcd_id xrcd; /* an XRC target's domain; all 0 otherwise */
	struct uro_seg_qp_counters counters;
	uint8_t reserved[16]; /* and 4 bytes of padding after serial */
};

struct uro_seg_cq {
	uint32_t in_use;
	uint32_t size;		 /* ring entries */
	uint64_t ring;		 /* arena offset */
	uint32_t head;		 /* the owner's next entry to poll */
	uint32_t tail;		 /* producers reserve entries here (cq_ring.c) */
	uint32_t armed;		 /* 0, 1 = next completion, 2 = next solicited */
	int32_t channel_wfd;	 /* the owner's completion-channel pipe; -1 none */
	uint64_t token;		 /* what the channel carries: the owner's CQ */
	uint32_t ignore_overrun; /* IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN: no CQ_ERR */
	uint32_t serial;	 /* as the QP's */
	/* The pipe's inode: channel_wfd is a number, which the owner may
	 * give to a new channel's pipe once this one is destroyed. */
	uint64_t channel_ino;
	uint8_t reserved[8];
};

struct uro_seg_srq {
	uint32_t in_use;
	uint32_t pd;
	uint64_t token;
	uint32_t serial; /* as the QP's */
	uint32_t cq;	 /* an XRC SRQ's own CQ, where its receives complete */
	struct uro_seg_rq rq;
	struct uro_xrcd_id xrcd; /* an XRC SRQ's domain; all 0 for a basic SRQ */
	uint8_t reserved[56];
};

/* A key: a memory region, or a memory window (IBTA 10.6.7) that the owner
 * binds to part of a region. */
enum uro_key_kind { URO_KEY_MR, URO_KEY_MW1, URO_KEY_MW2 };

/* Processes that may copy through one key at the same time, each counted
 * in its own lane (key_hold.c). */
#define URO_KEY_LANES 7

struct uro_seg_mr {
	uint32_t in_use;
	uint32_t lkey;
	uint32_t rkey;
	uint32_t pd;
	uint32_t access;
	uint32_t generation; /* bumped on each reuse of the entry */
	uint64_t addr;	     /* where the bytes are in the owner's address space */
	uint64_t iova;	     /* the address remote peers name them by */
	uint64_t length;
	uint8_t kind;	/* enum uro_key_kind */
	uint8_t bound;	/* a window: bound to a region */
	uint8_t shared; /* a region: its share entry's kind is not NONE */
	uint8_t reserved0;
	uint32_t qpn;	  /* a type 2 window: the QP it is bound to */
	uint32_t parent;  /* a window: the region's entry */
	uint32_t windows; /* a region: windows bound to it */
	/* Copies in flight through the key: pid << 32 | count per lane; a
	 * lane whose count is 0 is free, whatever pid it still names. */
	uint64_t lanes[URO_KEY_LANES];
	uint64_t reserved1;
};

/* Where a region's memory can be mapped by a peer of the same user, beside
 * its key-table entry (the direct path, direct_map.h): the kind of object
 * that backs it, how the peer reaches that object, and where the region
 * starts in it. Written by the owner only while the entry is out of reach
 * (registration, re-registration), so an initiator holding the key reads
 * it as it reads the region's bounds. */
enum uro_share_kind {
	URO_SHARE_NONE, /* private memory: cross-memory attach only */
	URO_SHARE_FD,	/* a file or memfd: /proc/<owner>/fd/<id> */
	URO_SHARE_SYSV, /* a System V segment: shmat(id) */
};

struct uro_seg_share {
	uint32_t kind;	 /* enum uro_share_kind */
	int32_t id;	 /* the owner's fd number, or the shmid */
	uint32_t serial; /* bumped at each publication: a peer's mapping names one */
	uint32_t pad;
	uint64_t offset;   /* of the region's first byte in the object */
	uint64_t dev, ino; /* the object's, as fstat(2) gives them */
};

/* A UD QP attached to a multicast group (ibv_attach_mcast(3)): a sender
 * to the group delivers to every attached QP of every process on the host
 * whose device is its own (IBTA 10.5.2.1). */
struct uro_seg_mcast {
	uint32_t in_use;
	uint32_t qpn;
	union ibv_gid mgid;
	uint8_t reserved[8];
};

/* Atomics aimed at this process's memory, executed by the process itself
 * (atomic_table.c): an initiator claims a slot, writes its request there
 * and waits for the owner's thread to answer in it, so that no initiator
 * ever holds what another waits for. */
#define URO_ATOMIC_SLOTS 64

enum uro_atomic_state {
	URO_ATOMIC_FREE,
	URO_ATOMIC_CLAIMED,   /* an initiator is writing its request */
	URO_ATOMIC_POSTED,    /* ready for the owner */
	URO_ATOMIC_TAKEN,     /* the owner is executing it */
	URO_ATOMIC_DONE,      /* answered: status and old are valid */
	URO_ATOMIC_ABANDONED, /* taken, and its initiator has given up: the owner frees it */
};

/* A status of the owner's besides enum ibv_wc_status: it did not execute
 * the request (its key's lanes were full, its QP not ready), as a
 * responder that drops a packet. */
#define URO_ATOMIC_UNANSWERED 0xffffffffu

struct uro_seg_atomic {
	uint32_t state;	 /* enum uro_atomic_state; the futex the initiator sleeps on */
	int32_t owner;	 /* the initiator's pid, for reclaiming a dead one's slot */
	uint32_t ticket; /* bumped at each claim: names one use of the slot */
	uint32_t rkey, pd, qpn;
	uint32_t status;  /* answered: enum ibv_wc_status or URO_ATOMIC_UNANSWERED */
	uint16_t kind;	  /* enum uro_user_atomic_kind */
	uint16_t waiting; /* the initiator sleeps on state: wake it */
	uint64_t va, operand, compare;
	uint64_t old; /* answered: what the 8 bytes held */
};

struct uro_seg_atomics {
	/* The slots posted and not yet looked at, a bit each, which the
	 * owner's thread takes all at once. */
	uint64_t posted;
	/* Bumped by an initiator that finds the thread asleep: the futex it
	 * sleeps on (futex(2) words are 32 bits). */
	uint32_t doorbell;
	uint32_t asleep;
	uint32_t serving; /* the owner's thread runs: ATOMIC WRITE may use it */
	uint8_t pad[44];
	struct uro_seg_atomic slot[URO_ATOMIC_SLOTS];
};

struct uro_seg_header {
	uint64_t magic;
	uint32_t version;
	uint32_t slot;
	int32_t pid;
	uint32_t uid;
	uint64_t size;
	uint64_t qp_off, cq_off, srq_off, mr_off, mcast_off, atomic_off, arena_off;
	struct uro_seg_counters counters;
	int32_t async_wfd; /* the owner's async-event pipe */
	uint32_t closed;   /* set when the owner closes the context */
	/* The owner's connected QPs take the wire path even to this host's
	 * processes (UROCE_TRANSPORT=roce, UROCE_FAULTS, UROCE_PCAP): a peer
	 * connecting to one of them must take it too (wire_qp.c). */
	uint32_t wire_forced;
	uint32_t pad;
	uint64_t async_ino; /* async_wfd's pipe (see uro_seg_cq.channel_ino) */
	uint64_t share_off; /* the regions' struct uro_seg_share, by MR index */
	uint8_t reserved[32];
};

_Static_assert(sizeof(struct uro_seg_qp) == 256, "QP entry size");
_Static_assert(offsetof(struct uro_seg_qp, counters.recv_cqes) / 64 ==
		   offsetof(struct uro_seg_qp, xrcd) / 64,
	       "a peer's count on the line peers read, not the owner's");
_Static_assert(offsetof(struct uro_seg_qp, counters.posted_sends) % 64 == 0,
	       "the owner's counts on a line of their own");
_Static_assert(sizeof(struct uro_seg_cq) == 64, "CQ entry size");
_Static_assert(sizeof(struct uro_seg_srq) == 128, "SRQ entry size");
_Static_assert(sizeof(struct uro_seg_mr) == 128, "MR entry size");
_Static_assert(sizeof(struct uro_seg_share) == 40, "share entry size");
_Static_assert(sizeof(struct uro_seg_mcast) == 32, "multicast entry size");
_Static_assert(sizeof(struct uro_seg_atomic) == 64, "an atomic slot on a cache line of its own");
_Static_assert(offsetof(struct uro_seg_atomics, slot) == 64, "the doorbell on a line of its own");
_Static_assert(URO_ATOMIC_SLOTS <= 64, "one bit a slot in posted");

#endif
