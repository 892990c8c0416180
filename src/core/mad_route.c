/* Which CM agent of the host takes a MAD that came to QP 1 (mad_route.h). */
#include <stdio.h>
#include <string.h>

#include "big_endian.h"
#include "mad_route.h"
#include "registry.h"

/* Where a request's rdma_cm header lies (Annex A11; Linux cma.c's struct
 * cma_hdr), and in it the address the request is for. */
#define REQ_CMA_HDR	 164
#define SIDR_REQ_CMA_HDR 40
#define CMA_DST_ADDR	 20
#define SERVICE_ID	 32
#define COMM_ID_LOCAL	 24
#define COMM_ID_REMOTE	 28

socklen_t uro_mad_agent_name(const char *dir, unsigned agent, struct sockaddr_un *a)
{
	char what[32];

	snprintf(what, sizeof(what), "cm-%u", agent);
	return uro_registry_name(dir, what, a);
}

socklen_t uro_mad_service_name(const char *dir, uint64_t sid, const uint8_t *gid,
			       struct sockaddr_un *a)
{
	char what[64];
	int n = snprintf(what, sizeof(what), "cm-sid-%016llx-", (unsigned long long)sid);

	for (int i = 0; i < 16; i++)
		n += snprintf(what + n, sizeof(what) - (size_t)n, "%02x", gid[i]);
	return uro_registry_name(dir, what, a);
}

int uro_mad_is_cm(const uint8_t *mad)
{
	return mad[0] == 1 && mad[1] == 0x07 && mad[2] == 2 && mad[3] == 0x03;
}

/* The address a request's cma_hdr names, as a GID: IPv4 sits in its last
 * four bytes behind twelve zeros there, and is ::ffff:a.b.c.d as a GID. */
static int request_gid(const uint8_t *hdr, uint8_t gid[16])
{
	const uint8_t *addr = hdr + CMA_DST_ADDR;

	if (hdr[0] != 0)
		return -1; /* not rdma_cm's IP addressing: no listener of ours */
	if ((hdr[1] >> 4) == 6) {
		memcpy(gid, addr, 16);
		return 0;
	}
	if ((hdr[1] >> 4) != 4)
		return -1;
	memset(gid, 0, 10);
	gid[10] = gid[11] = 0xff;
	memcpy(gid + 12, addr + 12, 4);
	return 0;
}

/* The wildcard address of gid's family as a GID, which a listener on any
 * address of that family names its service with: ::ffff:0.0.0.0 for
 * IPv4, :: for IPv6. */
static void wildcard_of(const uint8_t gid[16], uint8_t any[16])
{
	static const uint8_t v4_mapped[12] = {[10] = 0xff, [11] = 0xff};

	memset(any, 0, 16);
	if (!memcmp(gid, v4_mapped, sizeof(v4_mapped)))
		memcpy(any, v4_mapped, sizeof(v4_mapped));
}

unsigned uro_mad_route(const char *dir, const uint8_t *mad, struct sockaddr_un a[2],
		       socklen_t len[2])
{
	unsigned attr = uro_mad_attr(mad);
	uint8_t gid[16], any[16];
	uint32_t id;

	if (!uro_mad_is_cm(mad))
		return 0;
	if (attr == CM_ATTR_REQ || attr == CM_ATTR_SIDR_REQ) {
		uint64_t sid = uro_get64(mad + SERVICE_ID);

		if (request_gid(mad + (attr == CM_ATTR_REQ ? REQ_CMA_HDR : SIDR_REQ_CMA_HDR), gid))
			return 0;
		wildcard_of(gid, any);
		len[0] = uro_mad_service_name(dir, sid, gid, &a[0]);
		len[1] = uro_mad_service_name(dir, sid, any, &a[1]);
		return len[0] && len[1] ? 2 : 0;
	}
	if (attr == CM_ATTR_SIDR_REP)
		id = uro_get32(mad + COMM_ID_LOCAL); /* the Request ID: ours */
	else if (attr >= CM_ATTR_MRA && attr <= CM_ATTR_DREP)
		id = uro_get32(mad + COMM_ID_REMOTE);
	else
		return 0;
	if (!uro_cm_agent_of(id))
		return 0;
	len[0] = uro_mad_agent_name(dir, uro_cm_agent_of(id), &a[0]);
	return len[0] ? 1 : 0;
}

static void answer_head(const uint8_t *mad, uint8_t *out, unsigned attr)
{
	memset(out, 0, URO_MAD_LEN);
	memcpy(out, mad, 16); /* the class, the method, the transaction ID */
	out[4] = out[5] = out[6] = out[7] = 0;
	out[16] = (uint8_t)(attr >> 8);
	out[17] = (uint8_t)attr;
}

int uro_mad_unheard(const uint8_t *mad, uint8_t out[URO_MAD_LEN])
{
	switch (uro_mad_is_cm(mad) ? uro_mad_attr(mad) : 0) {
	case CM_ATTR_REQ: /* Message REJected 0, local ID 0 (cm.c: cm_issue_rej) */
		answer_head(mad, out, CM_ATTR_REJ);
		memcpy(out + COMM_ID_REMOTE, mad + COMM_ID_LOCAL, 4);
		out[35] = 8;
		return 1;
	case CM_ATTR_SIDR_REQ: /* status 1: service ID not supported */
		answer_head(mad, out, CM_ATTR_SIDR_REP);
		memcpy(out + COMM_ID_LOCAL, mad + COMM_ID_LOCAL, 4);
		out[28] = 1;
		memcpy(out + 36, mad + SERVICE_ID, 8);
		return 1;
	case CM_ATTR_DREQ: /* the comm IDs swapped */
		answer_head(mad, out, CM_ATTR_DREP);
		memcpy(out + COMM_ID_LOCAL, mad + COMM_ID_REMOTE, 4);
		memcpy(out + COMM_ID_REMOTE, mad + COMM_ID_LOCAL, 4);
		return 1;
	default:
		return 0;
	}
}
