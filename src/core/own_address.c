/* Whether an address is this network namespace's own (own_address.h). */
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "device_model.h"
#include "own_address.h"

/* Whether addr is one of this namespace's own IPv4 addresses: the kernel
 * lets a socket bind only to those. */
static int is_own_ipv4(uint32_t addr)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), own;

	if (fd < 0)
		return 1;
	a.sin_addr.s_addr = addr;
	own = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 || errno != EADDRNOTAVAIL;
	close(fd);
	return own;
}

/* The same for IPv6, from the interfaces' addresses: a bind would need a
 * link-local address's interface. */
static int is_own_ipv6(const uint8_t addr[16])
{
	struct ifaddrs *list;
	int own = 0;

	if (getifaddrs(&list))
		return 1;
	for (struct ifaddrs *i = list; i && !own; i = i->ifa_next)
		own = i->ifa_addr && i->ifa_addr->sa_family == AF_INET6 &&
		      !memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, addr, 16);
	freeifaddrs(list);
	return own;
}

int uro_gid_is_own(const union ibv_gid *gid)
{
	uint32_t addr;

	if (!uro_gid_is_ipv4_mapped(gid))
		return is_own_ipv6(gid->raw);
	memcpy(&addr, gid->raw + 12, 4);
	return is_own_ipv4(addr);
}
