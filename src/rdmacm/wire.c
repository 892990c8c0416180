/* CM messages over TCP: one fixed-size record each (design.md 7). */
#include <string.h>
#include <sys/socket.h>

#include "cm.h"

#define CM_MAGIC 0x55434d31u /* "UCM1" */

static int io_all(int sock, void *buf, size_t len, int out)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = out ? send(sock, (char *)buf + done, len - done, MSG_NOSIGNAL)
				: recv(sock, (char *)buf + done, len - done, 0);

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
	m.magic = CM_MAGIC;
	m.type = (uint8_t)type;
	m.status = status;
	if (peer)
		m.peer = *peer;
	m.pdata_len = pdata_len;
	if (pdata_len)
		memcpy(m.pdata, pdata, pdata_len);
	return io_all(sock, &m, sizeof(m), 1);
}

/* 0, or -1 when the connection closed or sent something malformed: a
 * message from the network is checked, never trusted. */
int uro_cm_recv(int sock, struct uro_cm_msg *m)
{
	if (io_all(sock, m, sizeof(*m), 0))
		return -1;
	if (m->magic != CM_MAGIC || m->type < MSG_REQ || m->type > MSG_SIDR_REP ||
	    m->pdata_len > URO_PDATA_MAX)
		return -1;
	return 0;
}
