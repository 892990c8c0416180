/* Established flows come straight to their process. The kernel gives the
 * host's RoCEv2 packets to the newest socket of port 4791, and that
 * process passes the others' on through the relay (relay.c): every packet
 * for an older process cost a forward by the newest, and a stopped newest
 * process held them all. A connected QP's flow that reaches this process
 * through the relay therefore gets a socket connected to it
 * (uro_wire_flow_socket), which the kernel prefers to the port's
 * unconnected ones. At most URO_WIRE_FLOWS, kept while the endpoint lives:
 * a flow's later packets for another process of the host are passed on
 * from there, as from the shared socket. Every reader of the flows holds
 * rx_lock, as their opener does. */
#include "wire_flow.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "wire_socket.h"

static int known(const struct uro_wire_endpoint *w, const union ibv_gid *peer, uint16_t sport)
{
	for (unsigned i = 0; i < w->nflows; i++)
		if (w->flows[i].sport == sport && !memcmp(&w->flows[i].peer, peer, sizeof(*peer)))
			return 1;
	return 0;
}

void uro_wire_flow_open(struct uro_wire_endpoint *w, const union ibv_gid *peer, uint16_t sport,
			uint32_t tag0)
{
	enum uro_wire_family f = uro_wire_family_of(peer);
	unsigned n = w->nflows;
	int fd = __atomic_load_n(&w->fam[f].fd, __ATOMIC_ACQUIRE);

	if (n == URO_WIRE_FLOWS || fd < 0 || known(w, peer, sport))
		return;
	fd = uro_wire_flow_socket(f, &w->fam[f].addr, w->ifindex, peer, sport);
	if (fd >= 0 && uro_wire_watch(w->rx_efd, fd, tag0 + n)) {
		close(fd);
		fd = -1;
	}
	/* A refused one is remembered too, so as not to be tried again per
	 * packet: that flow keeps the relay. */
	if (fd < 0)
		uro_debug("no socket of its own for a RoCEv2 flow (%s): it comes through the relay",
			  strerror(errno));
	w->flows[n] = (struct uro_wire_flow){.fd = fd, .sport = sport, .peer = *peer};
	w->nflows = n + 1;
}

void uro_wire_flows_close(struct uro_wire_endpoint *w)
{
	for (unsigned i = 0; i < w->nflows; i++)
		if (w->flows[i].fd >= 0)
			close(w->flows[i].fd);
	w->nflows = 0;
}
