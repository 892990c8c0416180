/* What uroce reads of a Linux network interface to model a port on it. */
#ifndef URO_NETDEV_H
#define URO_NETDEV_H

#include <net/if.h>
#include <stdint.h>

#include "limits.h"

struct uro_netdev_addr {
	int family; /* AF_INET or AF_INET6 */
	uint8_t addr[16];
};

struct uro_netdev {
	char name[IFNAMSIZ];
	unsigned ifindex;
	unsigned mtu;
	uint8_t mac[6];
	int running; /* IFF_UP and IFF_RUNNING */
	int naddrs;
	struct uro_netdev_addr addrs[URO_GID_TBL_MAX];
};

/* -1 with errno ENODEV when there is no such interface. */
int uro_netdev_query(const char *name, struct uro_netdev *nd);
int uro_netdev_exists(const char *name);
/* Up and running now; 0 when there is no such interface. */
int uro_netdev_running(const char *name);
/* How often the kernel saw the interface's link go down since it was
 * made (IFLA_CARRIER_DOWN_COUNT, asked of the caller's network namespace
 * over netlink): 0, or -1 with errno. */
int uro_netdev_carrier_downs(const char *name, uint64_t *count);

#endif
