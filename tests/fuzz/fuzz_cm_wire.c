/* libFuzzer target for the CM wire parser (src/rdmacm/wire.c): the bytes a
 * peer sends on a CM connection, delivered in pieces of the sizes the input
 * chooses, as TCP may cut them. Whatever arrives, the parser never reads or
 * writes outside its buffer, and every message it accepts is one a CM could
 * have sent: a known type, private data within that type's limit, a QPN of
 * 24 bits for a REQ or REP. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cm.h"

static const uint8_t limits[] = {
    [MSG_REQ] = URO_PDATA_REQ,		 [MSG_REP] = URO_PDATA_REP,
    [MSG_REJ] = URO_PDATA_REJ,		 [MSG_SIDR_REQ] = URO_PDATA_SIDR_REQ,
    [MSG_SIDR_REP] = URO_PDATA_SIDR_REP, [MSG_MRA] = 0,
};

static void check_accepted(const struct uro_cm_msg *m)
{
	if (m->magic != URO_CM_MAGIC || m->type < MSG_REQ || m->type > MSG_MRA ||
	    m->pdata_len > limits[m->type])
		abort();
	if ((m->type == MSG_REQ || m->type == MSG_REP) &&
	    (m->peer.qpn < 2 || m->peer.qpn > 0xffffff))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct uro_cm_msg m;
	size_t have = 0, off = 0;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 0;
	/* The first byte of each piece says how long the piece is. */
	while (off < size) {
		size_t piece = (size_t)data[off++] * 4 + 1;
		int r;

		if (piece > size - off)
			piece = size - off;
		if (piece && write(sv[1], data + off, piece) != (ssize_t)piece)
			break;
		off += piece;
		while ((r = uro_cm_recv(sv[0], &m, &have)) > 0)
			check_accepted(&m);
		if (r < 0)
			break; /* the CM closes such a connection */
	}
	close(sv[0]);
	close(sv[1]);
	return 0;
}
