/* The IB CM's messages as both of its users see them: the CM (librdmacm,
 * src/rdmacm) that speaks them, and QP 1 on the wire (gsi.c), which drops
 * what no CM could have sent before it reaches one (mad_codec.h). */
#ifndef URO_CM_MESSAGE_H
#define URO_CM_MESSAGE_H

#include <infiniband/verbs.h>
#include <stdint.h>

/* Private data limits (rdma_connect(3), rdma_accept(3), rdma_reject(3)):
 * what the IB CM messages carry after rdma_cm's own header. */
enum {
	URO_PDATA_REQ = 56,
	URO_PDATA_REP = 196,
	URO_PDATA_REJ = 148,
	URO_PDATA_SIDR_REQ = 180,
	URO_PDATA_SIDR_REP = 136,
	URO_PDATA_MAX = 196, /* the largest of the above */
};

enum uro_cm_msg_type {
	MSG_REQ = 1,
	MSG_REP,
	MSG_RTU,
	MSG_REJ,
	MSG_DREQ,
	MSG_DREP,
	MSG_SIDR_REQ,
	MSG_SIDR_REP,
	MSG_MRA, /* the passive CM has the REQ; its program is deciding */
};

/* What the peer told us in its REQ or REP. */
struct uro_cm_peer {
	uint32_t qpn;
	uint32_t psn;
	uint32_t qkey;
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t rnr_retry;
	uint8_t retry_count;
	uint8_t srq;
	uint8_t mtu; /* the path MTU a REQ offers (enum ibv_mtu), 0: the port's */
	union ibv_gid gid;
	uint16_t lid;
};

#endif
