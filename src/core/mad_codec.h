/* The IB CM's messages as MADs on QP 1 (IBTA Vol. 1 12.6; rdma_cm's IP
 * addressing, Annex A11): a message as the CM uses it, and its 256 bytes.
 * Fields are written with shifts on big-endian bytes, never C bitfields. */
#ifndef URO_MAD_CODEC_H
#define URO_MAD_CODEC_H

#include <infiniband/verbs.h>
#include <stdint.h>

#include <rdma/rdma_cma.h>

#include "cm_message.h"
#include "mad_route.h"

/* rdma_cm's IP header in a REQ's and a SIDR_REQ's private data (A11). */
struct uro_cma_hdr {
	uint8_t ip_version; /* 4 or 6 */
	uint16_t port;	    /* the active side's rdma_cm port, host order */
	union ibv_gid src, dst;
};

struct uro_cm_mad {
	enum uro_cm_msg_type type;
	uint64_t tid;
	uint32_t local_id, remote_id; /* the sender's communication ID, the receiver's */
	uint64_t sid;		      /* REQ, SIDR_REQ, SIDR_REP: the service ID */
	uint64_t guid;		      /* REQ, REP: the sender's CA GUID */
	struct uro_cm_peer peer;      /* QPN, PSN, Q_Key, depths, retry counts, SRQ */
	uint8_t transport;	      /* REQ: 0 RC, 1 UC (IBTA table 99) */
	uint8_t mtu;		      /* REQ: enum ibv_mtu */
	uint8_t ack_timeout; /* REQ: the primary path's local ACK timeout; REP: target ACK delay */
	union ibv_gid lgid, rgid; /* REQ: the primary path's local and remote GIDs */
	uint16_t status;	  /* REJ: the reason; SIDR_REP: the status */
	uint8_t msg;		  /* REJ, MRA: which message (0 REQ, 1 REP, 2 other) */
	uint8_t service_timeout;  /* MRA */
	uint32_t remote_qpn;	  /* DREQ: the receiver's QPN */
	struct uro_cma_hdr cma;	  /* REQ, SIDR_REQ */
	uint8_t pdata_len;	  /* what the program sees of the private data */
	uint8_t pdata[URO_PDATA_MAX];
};

/* Service IDs of rdma_cm's IP port spaces: (port space << 16) + port
 * (cma.c's rdma_get_service_id; Annex A11.1). */
static inline uint64_t uro_cm_service_id(enum rdma_port_space ps, uint16_t port)
{
	return ((uint64_t)ps << 16) + port;
}

void uro_cm_mad_build(const struct uro_cm_mad *m, uint8_t mad[URO_MAD_LEN]);
/* 0 with *m filled, or -1 for a MAD that is not a CM message a CM could
 * have sent: dropped (and counted by the caller). */
int uro_cm_mad_parse(const uint8_t mad[URO_MAD_LEN], struct uro_cm_mad *m);

#endif
