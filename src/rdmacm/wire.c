/* CM messages over TCP: one fixed-size record each (docs/architecture.md,
 * Connection management). A message from the network is checked, never
 * trusted. */
#include <string.h>
#include <sys/socket.h>

#include "cm.h"

static int send_all(int sock, const void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = send(sock, (const char *)buf + done, len - done, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

int uro_cm_send(int sock, enum uro_cm_msg_type type, const struct uro_cm_peer *peer,
		uint16_t status, const void *pdata, uint8_t pdata_len)
{
	struct uro_cm_msg m;

	memset(&m, 0, sizeof(m));
	m.magic = URO_CM_MAGIC;
	m.type = (uint8_t)type;
	m.status = status;
	if (peer)
		m.peer = *peer;
	m.pdata_len = pdata_len;
	if (pdata_len)
		memcpy(m.pdata, pdata, pdata_len);
	return send_all(sock, &m, sizeof(m));
}

int uro_cm_recv(int sock, struct uro_cm_msg *m, size_t *have)
{
	ssize_t n = recv(sock, (char *)m + *have, sizeof(*m) - *have, MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	if (n <= 0)
		return -1;
	*have += (size_t)n;
	if (*have < sizeof(*m))
		return 0;
	*have = 0;
	return uro_cm_msg_check(m) ? -1 : 1;
}

/* The private data each message may carry (rdma_connect(3), rdma_accept(3),
 * rdma_reject(3)), by message type. */
static const uint8_t pdata_limit[] = {
    [MSG_REQ] = URO_PDATA_REQ,
    [MSG_REP] = URO_PDATA_REP,
    [MSG_RTU] = 0,
    [MSG_REJ] = URO_PDATA_REJ,
    [MSG_DREQ] = 0,
    [MSG_DREP] = 0,
    [MSG_SIDR_REQ] = URO_PDATA_SIDR_REQ,
    [MSG_SIDR_REP] = URO_PDATA_SIDR_REP,
    [MSG_MRA] = 0,
};

/* A QPN is 24 bits, and QP0 and QP1 are never a connection's (IBTA 9.2). */
static int qpn_ok(uint32_t qpn)
{
	return qpn > 1 && qpn <= 0xffffff;
}

int uro_cm_msg_check(const struct uro_cm_msg *m)
{
	if (m->magic != URO_CM_MAGIC || m->type < MSG_REQ || m->type > MSG_MRA ||
	    m->pdata_len > pdata_limit[m->type])
		return -1;
	/* Retry counts are 3-bit fields on the wire (IBTA 12.6.5). */
	if ((m->type == MSG_REQ || m->type == MSG_REP) &&
	    (!qpn_ok(m->peer.qpn) || m->peer.retry_count > 7 || m->peer.rnr_retry > 7))
		return -1;
	if (m->type == MSG_SIDR_REP && !m->status && !qpn_ok(m->peer.qpn))
		return -1;
	return 0;
}
