/* A burst: up to URO_WIRE_BURST packets of one message, their payloads
 * gathered together and sent together.
 *
 * They leave in as few datagrams as UDP GSO allows (udp(7),
 * UDP_SEGMENT, Linux 4.18): a run of packets of one length goes to the
 * kernel as one message, which the stack (or the NIC) cuts every `seg`
 * bytes into datagrams of their own; the last may be shorter. Each
 * segment is a whole RoCEv2 packet, BTH to ICRC, so the wire carries what
 * single sends would have put there, except the IPv4 identification: the
 * segmentation numbers a message's segments on from the message's own
 * (inet_gso_segment), which is 0 for a DF datagram of an unconnected
 * socket (ip_select_ident_segs), and the ICRC covers it (Annex A17.8).
 * Packet k of a message is therefore finished with identification k. A
 * packet of another length (a FIRST with its RETH, a LAST with immediate
 * data) starts a message of its own in the same sendmmsg. */
#include <errno.h>
#include <netinet/udp.h>
#include <string.h>
#include <sys/socket.h>

#include "log.h"
#include "remote_copy.h"
#include "socket_buffer.h"
#include "wire.h"
#include "wire_gso.h"

/* A message per packet: GSO refused. */
static unsigned singles(unsigned n, const size_t *len, struct uro_wire_msg *out)
{
	for (unsigned i = 0; i < n; i++)
		out[i] = (struct uro_wire_msg){.first = i, .n = 1, .seg = len[i]};
	return n;
}

/* Whether sendmsg's errno says the kernel will not segment here: EIO from
 * a route whose device has no checksum offload (udp_send_skb), EINVAL or
 * ENOPROTOOPT from a kernel that does not know UDP_SEGMENT, EMSGSIZE from
 * one that ignores the cmsg and sees one datagram too large for DF. */
static int refused(int err)
{
	return err == EIO || err == EINVAL || err == ENOPROTOOPT || err == EMSGSIZE;
}

/* The endpoint sends one datagram a packet from now on: said once. */
static void give_up(struct uro_wire_endpoint *w, int err)
{
	if (__atomic_exchange_n(&w->gso_off, 1, __ATOMIC_RELAXED))
		return;
	w->n->gso_refused++;
	uro_debug("RoCEv2 endpoint on ifindex %u: the kernel refused UDP GSO (%s): one datagram a "
		  "packet from now on",
		  w->ifindex, strerror(err));
}

union segment_cmsg {
	char buf[CMSG_SPACE(sizeof(uint16_t))];
	struct cmsghdr align;
};

/* Asks the kernel to cut h's payload every seg bytes (udp(7)). */
static void segment(struct msghdr *h, union segment_cmsg *c, size_t seg)
{
	struct cmsghdr *cm = &c->align;
	uint16_t size = (uint16_t)seg;

	memset(c, 0, sizeof(*c));
	h->msg_control = c->buf;
	h->msg_controllen = sizeof(c->buf);
	cm->cmsg_level = SOL_UDP;
	cm->cmsg_type = UDP_SEGMENT;
	cm->cmsg_len = CMSG_LEN(sizeof(size));
	memcpy(CMSG_DATA(cm), &size, sizeof(size));
}

void uro_wire_send_gso(struct uro_wire_endpoint *w, int fd, const struct uro_wire_dest *to,
		       uint8_t (*buf)[URO_WIRE_BUF], const size_t *tlen, unsigned n)
{
	size_t len[URO_WIRE_BURST];
	struct uro_wire_msg msg[URO_WIRE_BURST];
	struct mmsghdr m[URO_WIRE_BURST];
	struct iovec iov[URO_WIRE_BURST];
	union segment_cmsg ctl[URO_WIRE_BURST];
	unsigned nm, done = 0, gso = 0;

	for (unsigned i = 0; i < n; i++)
		len[i] = tlen[i] + URO_ROCE_ICRC_LEN;
	nm = __atomic_load_n(&w->gso_off, __ATOMIC_RELAXED) ? singles(n, len, msg)
							    : uro_wire_gso_messages(len, n, msg);
	memset(m, 0, sizeof(m[0]) * nm);
	for (unsigned j = 0; j < nm; j++) {
		for (unsigned k = 0; k < msg[j].n; k++) {
			unsigned i = msg[j].first + k;

			uro_wire_finish(w, to, buf[i], tlen[i], (uint16_t)k);
			iov[i].iov_base = buf[i] + URO_WIRE_HEAD;
			iov[i].iov_len = len[i];
		}
		m[j].msg_hdr.msg_name = (void *)&to->sa;
		m[j].msg_hdr.msg_namelen = to->len;
		m[j].msg_hdr.msg_iov = &iov[msg[j].first];
		m[j].msg_hdr.msg_iovlen = msg[j].n;
		if (msg[j].n > 1)
			segment(&m[j].msg_hdr, &ctl[j], msg[j].seg);
	}
	while (done < nm) {
		int sent = sendmmsg(fd, m + done, nm - done, 0);

		if (sent > 0) {
			done += (unsigned)sent;
			continue;
		}
		if (sent < 0 && msg[done].n > 1 && refused(errno)) {
			unsigned first = msg[done].first;

			give_up(w, errno);
			/* Finished again with identification 0: plain datagrams. */
			uro_wire_send_gso(w, fd, to, buf + first, tlen + first, n - first);
			n = first;
		}
		break; /* a full socket buffer: lost, as on a congested link */
	}
	for (unsigned j = 0; j < done; j++)
		gso += msg[j].n > 1;
	w->n->gso_msgs += gso;
	w->n->sent += n;
	/* What did not fit in the socket buffer is lost: the retry covers it. */
	w->n->send_err += done < nm && n > msg[done].first ? n - msg[done].first : 0;
}

/* uro_remote_copy takes lists of at most this many. */
#define GATHER_IOVS (URO_MAX_SGE + 1)

int uro_wire_gather(struct uro_peer *from, const struct iovec *dst, unsigned n,
		    const struct iovec *src, int ns, const struct uro_holds *h)
{
	uint64_t off = 0;

	for (unsigned i = 0; i < n; i += GATHER_IOVS) {
		unsigned k = n - i < GATHER_IOVS ? n - i : GATHER_IOVS;
		struct iovec part[URO_MAX_SGE + 1];
		uint64_t len = 0;
		int np;

		for (unsigned j = 0; j < k; j++)
			len += dst[i + j].iov_len;
		if (!len)
			continue;
		np = uro_iov_slice(src, ns, off, len, part);
		if (uro_remote_copy(from, 0, dst + i, (int)k, part, np, len, h))
			return -1;
		off += len;
	}
	return 0;
}

uint32_t uro_wire_window_bytes(const struct uro_wire_endpoint *w)
{
	/* Faults and traces send one datagram a packet. */
	if (w->faults || w->pcap || __atomic_load_n(&w->gso_off, __ATOMIC_RELAXED))
		return URO_WIRE_WINDOW_BYTES;
	return URO_WIRE_GSO_WINDOW_BYTES;
}
