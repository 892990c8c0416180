/* Whether an address is this network namespace's own: a peer there is on
 * this host (shared memory, the CM over TCP), any other is reached on the
 * wire (docs/architecture.md, "Which path"). */
#ifndef URO_OWN_ADDRESS_H
#define URO_OWN_ADDRESS_H

#include <infiniband/verbs.h>

/* 1 when the GID's address (IPv4-mapped or IPv6) is one of this network
 * namespace's; 1 also when that cannot be found out. */
int uro_gid_is_own(const union ibv_gid *gid);

#endif
