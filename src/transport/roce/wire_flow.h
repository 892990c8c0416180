/* Established flows' own sockets: see wire_flow.c. */
#ifndef URO_WIRE_FLOW_H
#define URO_WIRE_FLOW_H

#include <stdint.h>

#include "wire.h"

/* The flow from peer's UDP source port sport (network order), which
 * reached this process through the relay, gets a socket of its own in the
 * endpoint's receive set, reported as tag0 plus its index in w->flows;
 * nothing if it has one (or was refused one) already. Under rx_lock. */
void uro_wire_flow_open(struct uro_wire_endpoint *w, const union ibv_gid *peer, uint16_t sport,
			uint32_t tag0);

void uro_wire_flows_close(struct uro_wire_endpoint *w);

#endif
