/* QP 1 on a RoCEv2 link: the Communication Manager's MADs (IBTA Vol. 1
 * ch. 12 and 13; docs/architecture.md, "Connection management on the
 * wire"). A host has one QP 1 per address and one UDP port 4791, shared
 * by all of its uroce processes; a process's CM is an agent that holds an
 * abstract unix name, and whichever process's endpoint receives a MAD
 * passes it to the agent it is for:
 * - a REQ or SIDR_REQ to the listener of its service ID and address
 *   (rdma_cm's cma_hdr), by the name the listener holds for them;
 * - every other CM message by the communication ID it names as ours,
 *   whose top 16 bits are the agent's number. */
#ifndef URO_MAD_ROUTE_H
#define URO_MAD_ROUTE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#define URO_GSI_QPN  1u
#define URO_GSI_QKEY 0x80010000u /* IB_QP1_QKEY (IBTA 13.4.6.1) */
#define URO_MAD_LEN  256
#define URO_MAD_HDR  24 /* the common MAD header; a CM message's body follows */

/* The CM's attributes (IBTA 12.6, table 100); LAP and APR are not used
 * on RoCE (the kernel drops both there). */
enum uro_cm_attr {
	CM_ATTR_REQ = 0x10,
	CM_ATTR_MRA = 0x11,
	CM_ATTR_REJ = 0x12,
	CM_ATTR_REP = 0x13,
	CM_ATTR_RTU = 0x14,
	CM_ATTR_DREQ = 0x15,
	CM_ATTR_DREP = 0x16,
	CM_ATTR_SIDR_REQ = 0x17,
	CM_ATTR_SIDR_REP = 0x18,
};

/* What an endpoint passes to an agent: the MAD and where it came from. */
struct uro_mad_envelope {
	uint8_t src[16], dst[16]; /* the packet's addresses, as GIDs */
	uint16_t sport;		  /* its UDP source port, network order */
	uint16_t reserved;
	uint8_t mad[URO_MAD_LEN];
};

/* The CM agent an id's communication ID belongs to. */
static inline unsigned uro_cm_agent_of(uint32_t comm_id)
{
	return comm_id >> 16;
}

/* The abstract name of agent number agent (1..65535). Its length, or 0. */
socklen_t uro_mad_agent_name(const char *dir, unsigned agent, struct sockaddr_un *a);
/* The abstract name a listener of service sid holds for requests to the
 * address gid (16 bytes); a listener on any address of a family names its
 * family's wildcard (::ffff:0.0.0.0, ::), as its TCP socket binds it, so
 * that 0.0.0.0 and :: with AFONLY listen side by side. */
socklen_t uro_mad_service_name(const char *dir, uint64_t sid, const uint8_t *gid,
			       struct sockaddr_un *a);
/* 1 when mad is a CM message of the class version the kernel speaks
 * (base version 1, class 0x07, version 2, method Send: IBTA 13.4.2;
 * mad.c's validate_mad and cm.c's agent in Linux). */
int uro_mad_is_cm(const uint8_t *mad);
/* The attribute of a CM MAD. */
static inline unsigned uro_mad_attr(const uint8_t *mad)
{
	return (unsigned)mad[16] << 8 | mad[17];
}
/* The agent names a MAD is for, most specific first: a request's
 * listener's on its address, then on any address of its family; another message's
 * agent. Returns how many it filled (0: none can take it). */
unsigned uro_mad_route(const char *dir, const uint8_t *mad, struct sockaddr_un a[2],
		       socklen_t len[2]);
/* The answer a CM gives a request that no listener takes (IBTA 12.6.7,
 * 12.11.2): a REJ with reason 8, invalid service ID, for a REQ, a SIDR_REP
 * with status 1 for a SIDR_REQ, and a DREP for a DREQ whose connection is
 * gone (as Linux's cm_issue_drep, so that the peer lets its end go).
 * Written to out; 0 when mad has no such answer. */
int uro_mad_unheard(const uint8_t *mad, uint8_t out[URO_MAD_LEN]);

#endif
