/* QP 1, the host's General Services Interface on a RoCEv2 link (IBTA
 * 13.4; docs/architecture.md, "Connection management on the wire"). It
 * is no process's QP: whichever process's endpoint receives a MAD checks
 * it as a NIC's QP 1 would (a UD SEND Only with the GSI's Q_Key, P_Key
 * and a whole MAD: Linux rxe_recv.c's and mad.c's checks) and passes it to
 * the CM agent it is for (mad_route.h), without waiting: an agent whose
 * backlog is full loses it, as a busy QP 1 would, and its peer resends. A
 * request nobody takes is answered here as the kernel's CM answers it. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mad_codec.h"
#include "wire.h"

static int is_mad(const struct uro_wire_endpoint *w, const struct uro_roce_packet *p)
{
	struct uro_cm_mad m;

	if (p->op->op != WIRE_SEND || !(p->op->qp & WIRE_UD) || (p->op->hdrs & HDR_IMMDT)) {
		w->n->no_qp++;
		return 0;
	}
	if (p->deth.qkey != URO_GSI_QKEY) {
		w->n->qkey_violations++;
		return 0;
	}
	if ((p->pkey & 0x7fff) != (URO_DEFAULT_PKEY & 0x7fff)) {
		w->n->bad_pkey++;
		return 0;
	}
	if (p->payload_len != URO_MAD_LEN || !uro_mad_is_cm(p->payload)) {
		w->n->no_qp++; /* no agent of the host takes this class */
		return 0;
	}
	/* The CM would drop a message no CM could have sent (Linux's cm.c
	 * drops and counts them too): dropped here, never answered, never
	 * passed to an agent. */
	if (uro_cm_mad_parse(p->payload, &m)) {
		w->n->bad_mads++;
		return 0;
	}
	return 1;
}

/* An answer of QP 1's own, to QP 1 of the address the MAD came from
 * (cm.c's cm_issue_rej and cm_issue_drep answer there too). */
static void answer(struct uro_wire_endpoint *w, const union ibv_gid *to_gid, const uint8_t *mad)
{
	uint8_t buf[URO_WIRE_BUF];
	struct uro_roce_packet pkt;
	struct uro_wire_dest to;
	size_t tlen;

	uro_wire_header(&pkt, uro_wire_code(WIRE_SEND, WIRE_UD, WIRE_ONLY, 0), URO_GSI_QPN,
			w->gsi_psn++);
	pkt.deth.qkey = URO_GSI_QKEY;
	pkt.deth.src_qp = URO_GSI_QPN;
	pkt.payload = mad;
	pkt.payload_len = URO_MAD_LEN;
	tlen = uro_roce_build(&pkt, buf + URO_WIRE_HEAD);
	uro_wire_dest(w, to_gid, &to);
	uro_wire_send(w, &to, buf, tlen);
}

/* One MAD on a connection of its own to the agent's listening socket:
 * its backlog, not a unix datagram queue of 10 (net.unix.max_dgram_qlen),
 * bounds what a burst of requests may queue for it. 0, or -1 and errno
 * (ECONNREFUSED, ENOENT: nobody holds the name; EAGAIN: its backlog is
 * full). */
static int pass_to(const struct sockaddr_un *a, socklen_t len, const struct uro_mad_envelope *e)
{
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int rc = -1;

	if (fd < 0)
		return -1;
	if (!connect(fd, (const struct sockaddr *)a, len) &&
	    send(fd, e, sizeof(*e), MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(*e))
		rc = 0;
	if (rc) {
		int err = errno;

		close(fd);
		errno = err;
		return -1;
	}
	close(fd);
	return 0;
}

void uro_wire_gsi_take(struct uro_wire_endpoint *w, const struct uro_roce_packet *p,
		       const union ibv_gid *src, const union ibv_gid *dst, uint16_t sport)
{
	struct uro_mad_envelope e = {.sport = sport};
	struct sockaddr_un a[2];
	socklen_t len[2];
	unsigned n;
	uint8_t out[URO_MAD_LEN];

	if (!is_mad(w, p))
		return;
	memcpy(e.src, src->raw, 16);
	memcpy(e.dst, dst->raw, 16);
	memcpy(e.mad, p->payload, URO_MAD_LEN);
	n = uro_mad_route(NULL, e.mad, a, len);
	for (unsigned i = 0; i < n; i++) {
		if (!pass_to(&a[i], len[i], &e)) {
			w->n->forwarded++;
			return;
		}
		if (errno != ECONNREFUSED && errno != ENOENT) { /* there, and busy */
			w->n->no_qp++;
			return;
		}
	}
	w->n->no_qp++; /* nobody of this host holds the name */
	if (uro_mad_unheard(e.mad, out))
		answer(w, src, out);
}
