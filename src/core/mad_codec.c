/* The CM's messages in and out of their MADs (mad_codec.h). Offsets are from
 * the MAD's first byte, as IBTA Vol. 1 12.6's tables give them plus the
 * 24-byte MAD header. */
#include <string.h>

#include "big_endian.h"
#include "mad_codec.h"

#define CMA_HDR_LEN 36
/* The CM response timeout and the retries a REQ asks its peer for (IBTA
 * 12.6.5): rdma_cm's 20 (4.096 us x 2^20) and 15. */
#define RESPONSE_TIMEOUT 20
#define MAX_CM_RETRIES	 15
#define HOP_LIMIT	 64

/* Where each message keeps its private data, and how much of it the
 * program sees (rdma_cm(7) private data limits; A11: after rdma_cm's
 * header in a request). */
static const struct layout {
	enum uro_cm_msg_type type;
	uint16_t attr;
	uint8_t pdata; /* offset of the private data */
	uint8_t user;  /* bytes of it the program's */
	uint8_t cma;   /* rdma_cm's header comes first */
} layouts[] = {
    {.type = MSG_REQ, .attr = CM_ATTR_REQ, .pdata = 164, .user = URO_PDATA_REQ, .cma = 1},
    {.type = MSG_MRA, .attr = CM_ATTR_MRA, .pdata = 34},
    {.type = MSG_REJ, .attr = CM_ATTR_REJ, .pdata = 108, .user = URO_PDATA_REJ},
    {.type = MSG_REP, .attr = CM_ATTR_REP, .pdata = 60, .user = URO_PDATA_REP},
    {.type = MSG_RTU, .attr = CM_ATTR_RTU, .pdata = 32},
    {.type = MSG_DREQ, .attr = CM_ATTR_DREQ, .pdata = 36},
    {.type = MSG_DREP, .attr = CM_ATTR_DREP, .pdata = 32},
    {.type = MSG_SIDR_REQ,
     .attr = CM_ATTR_SIDR_REQ,
     .pdata = 40,
     .user = URO_PDATA_SIDR_REQ,
     .cma = 1},
    {.type = MSG_SIDR_REP, .attr = CM_ATTR_SIDR_REP, .pdata = 120, .user = URO_PDATA_SIDR_REP},
};

static const struct layout *layout_of_type(enum uro_cm_msg_type t)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].type == t)
			return &layouts[i];
	return NULL;
}

static const struct layout *layout_of_attr(unsigned attr)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].attr == attr)
			return &layouts[i];
	return NULL;
}

/* The primary path's flow label of a RoCEv2 REQ: cma.c's
 * rdma_calc_flow_label, from the rdma_cm ports. */
static uint32_t flow_label(const struct uro_cm_mad *m)
{
	return ((uint32_t)m->cma.port * 31 + (uint16_t)m->sid) & 0xfffff;
}

static void build_cma(const struct uro_cm_mad *m, uint8_t *p)
{
	p[0] = 0; /* rdma_cm's version 0 */
	p[1] = (uint8_t)(m->cma.ip_version << 4);
	uro_put16(p + 2, m->cma.port);
	if (m->cma.ip_version == 4) { /* twelve zeros, then the address */
		memcpy(p + 4 + 12, m->cma.src.raw + 12, 4);
		memcpy(p + 20 + 12, m->cma.dst.raw + 12, 4);
	} else {
		memcpy(p + 4, m->cma.src.raw, 16);
		memcpy(p + 20, m->cma.dst.raw, 16);
	}
}

static void build_req(const struct uro_cm_mad *m, uint8_t *d)
{
	const struct uro_cm_peer *p = &m->peer;

	uro_put32(d + 24, m->local_id);
	uro_put64(d + 32, m->sid);
	uro_put64(d + 40, m->guid);
	uro_put24(d + 56, p->qpn);
	d[59] = p->responder_resources;
	d[63] = p->initiator_depth;
	d[67] = (uint8_t)(RESPONSE_TIMEOUT << 3 | (m->transport & 3) << 1);
	uro_put24(d + 68, p->psn);
	d[71] = (uint8_t)(RESPONSE_TIMEOUT << 3 | (p->retry_count & 7));
	uro_put16(d + 72, 0xffff);
	d[74] = (uint8_t)(m->mtu << 4 | (p->rnr_retry & 7));
	d[75] = (uint8_t)(MAX_CM_RETRIES << 4 | (p->srq ? 1 << 3 : 0));
	uro_put16(d + 76, 0xffff); /* permissive LIDs: the path is routed */
	uro_put16(d + 78, 0xffff);
	memcpy(d + 80, m->lgid.raw, 16);
	memcpy(d + 96, m->rgid.raw, 16);
	uro_put32(d + 112, flow_label(m) << 12);
	d[117] = HOP_LIMIT;
	d[119] = (uint8_t)(m->ack_timeout << 3);
	build_cma(m, d + 164);
}

static void build_rep(const struct uro_cm_mad *m, uint8_t *d)
{
	const struct uro_cm_peer *p = &m->peer;

	uro_put32(d + 24, m->local_id);
	uro_put32(d + 28, m->remote_id);
	uro_put24(d + 36, p->qpn);
	uro_put24(d + 44, p->psn);
	d[48] = p->responder_resources;
	d[49] = p->initiator_depth;
	d[50] = (uint8_t)(m->ack_timeout << 3);
	d[51] = (uint8_t)((p->rnr_retry & 7) << 5 | (p->srq ? 1 << 4 : 0));
	uro_put64(d + 52, m->guid);
}

static void build_body(const struct uro_cm_mad *m, uint8_t *d)
{
	switch (m->type) {
	case MSG_REQ:
		build_req(m, d);
		break;
	case MSG_REP:
		build_rep(m, d);
		break;
	case MSG_SIDR_REQ:
		uro_put32(d + 24, m->local_id);
		uro_put16(d + 28, 0xffff);
		uro_put64(d + 32, m->sid);
		build_cma(m, d + 40);
		break;
	case MSG_SIDR_REP:
		uro_put32(d + 24, m->remote_id);
		d[28] = (uint8_t)m->status;
		uro_put24(d + 32, m->peer.qpn);
		uro_put64(d + 36, m->sid);
		uro_put32(d + 44, m->peer.qkey);
		break;
	default: /* MRA, REJ, RTU, DREQ, DREP: the two communication IDs first */
		uro_put32(d + 24, m->local_id);
		uro_put32(d + 28, m->remote_id);
		if (m->type == MSG_REJ) {
			d[32] = (uint8_t)(m->msg << 6);
			uro_put16(d + 34, m->status);
		} else if (m->type == MSG_MRA) {
			d[32] = (uint8_t)(m->msg << 6);
			d[33] = (uint8_t)(m->service_timeout << 3);
		} else if (m->type == MSG_DREQ) {
			uro_put24(d + 32, m->remote_qpn);
		}
		break;
	}
}

void uro_cm_mad_build(const struct uro_cm_mad *m, uint8_t mad[URO_MAD_LEN])
{
	const struct layout *l = layout_of_type(m->type);

	memset(mad, 0, URO_MAD_LEN);
	mad[0] = 1;    /* base version */
	mad[1] = 0x07; /* Communication Management */
	mad[2] = 2;    /* the class version Linux's CM agent takes */
	mad[3] = 0x03; /* Send */
	uro_put64(mad + 8, m->tid);
	uro_put16(mad + 16, l->attr);
	build_body(m, mad);
	memcpy(mad + l->pdata + (l->cma ? CMA_HDR_LEN : 0), m->pdata,
	       m->pdata_len < l->user ? m->pdata_len : l->user);
}

static int parse_cma(const uint8_t *p, struct uro_cma_hdr *h)
{
	int v = p[1] >> 4;

	if (p[0] != 0 || (v != 4 && v != 6))
		return -1; /* not rdma_cm's IP addressing (A11.2) */
	h->ip_version = (uint8_t)v;
	h->port = uro_get16(p + 2);
	memset(&h->src, 0, sizeof(h->src));
	memset(&h->dst, 0, sizeof(h->dst));
	if (v == 6) {
		memcpy(h->src.raw, p + 4, 16);
		memcpy(h->dst.raw, p + 20, 16);
		return 0;
	}
	h->src.raw[10] = h->src.raw[11] = h->dst.raw[10] = h->dst.raw[11] = 0xff;
	memcpy(h->src.raw + 12, p + 4 + 12, 4);
	memcpy(h->dst.raw + 12, p + 20 + 12, 4);
	return 0;
}

/* A data QP's number: never 0 or 1, which are the SMI's and the GSI's. */
static int data_qpn(uint32_t qpn)
{
	return qpn > 1;
}

static int parse_req(const uint8_t *d, struct uro_cm_mad *m)
{
	struct uro_cm_peer *p = &m->peer;

	m->local_id = uro_get32(d + 24);
	m->sid = uro_get64(d + 32);
	m->guid = uro_get64(d + 40);
	p->qpn = uro_get24(d + 56);
	p->responder_resources = d[59];
	p->initiator_depth = d[63];
	m->transport = (d[67] >> 1) & 3;
	p->psn = uro_get24(d + 68);
	p->retry_count = d[71] & 7;
	m->mtu = d[74] >> 4;
	p->rnr_retry = d[74] & 7;
	p->srq = (d[75] >> 3) & 1;
	memcpy(m->lgid.raw, d + 80, 16);
	memcpy(m->rgid.raw, d + 96, 16);
	m->ack_timeout = d[119] >> 3;
	p->gid = m->lgid;
	if (!m->local_id || !data_qpn(p->qpn) || m->transport > 1 || m->mtu < IBV_MTU_256 ||
	    m->mtu > IBV_MTU_4096)
		return -1;
	return parse_cma(d + 164, &m->cma);
}

static int parse_rep(const uint8_t *d, struct uro_cm_mad *m)
{
	struct uro_cm_peer *p = &m->peer;

	m->local_id = uro_get32(d + 24);
	m->remote_id = uro_get32(d + 28);
	p->qpn = uro_get24(d + 36);
	p->psn = uro_get24(d + 44);
	p->responder_resources = d[48];
	p->initiator_depth = d[49];
	m->ack_timeout = d[50] >> 3;
	p->rnr_retry = d[51] >> 5;
	p->srq = (d[51] >> 4) & 1;
	m->guid = uro_get64(d + 52);
	return m->local_id && m->remote_id && data_qpn(p->qpn) ? 0 : -1;
}

static int parse_body(const uint8_t *d, struct uro_cm_mad *m)
{
	switch (m->type) {
	case MSG_REQ:
		return parse_req(d, m);
	case MSG_REP:
		return parse_rep(d, m);
	case MSG_SIDR_REQ:
		m->local_id = uro_get32(d + 24);
		m->sid = uro_get64(d + 32);
		return m->local_id ? parse_cma(d + 40, &m->cma) : -1;
	case MSG_SIDR_REP:
		m->remote_id = uro_get32(d + 24);
		m->status = d[28];
		m->peer.qpn = uro_get24(d + 32);
		m->sid = uro_get64(d + 36);
		m->peer.qkey = uro_get32(d + 44);
		/* IBTA table 111: statuses 0 to 5; a QP only with success. */
		return m->status > 5 || (!m->status && !data_qpn(m->peer.qpn)) ? -1 : 0;
	default:
		m->local_id = uro_get32(d + 24);
		m->remote_id = uro_get32(d + 28);
		if (m->type == MSG_REJ) {
			m->msg = d[32] >> 6;
			m->status = uro_get16(d + 34);
			return m->remote_id && m->msg <= 2 ? 0 : -1;
		}
		if (m->type == MSG_MRA) {
			m->msg = d[32] >> 6;
			m->service_timeout = d[33] >> 3;
			return m->remote_id && m->msg <= 2 ? 0 : -1;
		}
		if (m->type == MSG_DREQ)
			m->remote_qpn = uro_get24(d + 32);
		return m->local_id && m->remote_id ? 0 : -1;
	}
}

int uro_cm_mad_parse(const uint8_t mad[URO_MAD_LEN], struct uro_cm_mad *m)
{
	const struct layout *l = uro_mad_is_cm(mad) ? layout_of_attr(uro_mad_attr(mad)) : NULL;

	memset(m, 0, sizeof(*m));
	if (!l)
		return -1; /* LAP, APR, ClassPortInfo: not used on RoCE */
	m->type = l->type;
	m->tid = uro_get64(mad + 8);
	if (parse_body(mad, m))
		return -1;
	m->pdata_len = l->user;
	memcpy(m->pdata, mad + l->pdata + (l->cma ? CMA_HDR_LEN : 0), l->user);
	return 0;
}
