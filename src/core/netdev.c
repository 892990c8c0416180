#include "netdev.h"

#include <errno.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

int uro_netdev_exists(const char *name)
{
	return if_nametoindex(name) != 0;
}

int uro_netdev_running(const char *name)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int running = 0;

	if (fd < 0)
		return 0;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0)
		running = (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
	close(fd);
	return running;
}

/* The IFLA_CARRIER_DOWN_COUNT of a RTM_NEWLINK answer of len bytes. */
static int carrier_downs_of(const struct nlmsghdr *h, size_t len, uint64_t *count)
{
	const struct ifinfomsg *ifi = NLMSG_DATA(h);
	const struct rtattr *a = IFLA_RTA(ifi);
	unsigned int left;

	if (!NLMSG_OK(h, len) || h->nlmsg_type != RTM_NEWLINK ||
	    h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifi))) {
		errno = h->nlmsg_type == NLMSG_ERROR ? ENODEV : EPROTO;
		return -1;
	}
	left = h->nlmsg_len - NLMSG_LENGTH(sizeof(*ifi));
	for (; RTA_OK(a, left); a = RTA_NEXT(a, left)) {
		uint32_t v;

		if (a->rta_type != IFLA_CARRIER_DOWN_COUNT || RTA_PAYLOAD(a) < sizeof(v))
			continue;
		memcpy(&v, RTA_DATA(a), sizeof(v));
		*count = v;
		return 0;
	}
	errno = ENOTSUP; /* a kernel before 4.16 */
	return -1;
}

int uro_netdev_carrier_downs(const char *name, uint64_t *count)
{
	struct {
		struct nlmsghdr h;
		struct ifinfomsg ifi;
	} req = {.h = {.nlmsg_len = sizeof(req),
		       .nlmsg_type = RTM_GETLINK,
		       .nlmsg_flags = NLM_F_REQUEST},
		 .ifi = {.ifi_family = AF_UNSPEC, .ifi_index = (int)if_nametoindex(name)}};
	char buf[16384] __attribute__((aligned(NLMSG_ALIGNTO)));
	int fd, rc = -1;
	ssize_t n;

	if (!req.ifi.ifi_index) {
		errno = ENODEV;
		return -1;
	}
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -1;
	if (send(fd, &req, sizeof(req), 0) == (ssize_t)sizeof(req) &&
	    (n = recv(fd, buf, sizeof(buf), 0)) > 0)
		rc = carrier_downs_of((const struct nlmsghdr *)buf, (size_t)n, count);
	close(fd);
	return rc;
}

static int query_ioctls(struct uro_netdev *nd)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int rc = -1;

	if (fd < 0)
		return -1;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", nd->name);
	if (ioctl(fd, SIOCGIFMTU, &ifr))
		goto out;
	nd->mtu = (unsigned)ifr.ifr_mtu;
	if (ioctl(fd, SIOCGIFFLAGS, &ifr))
		goto out;
	nd->running = (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) == 0)
		memcpy(nd->mac, ifr.ifr_hwaddr.sa_data, sizeof(nd->mac));
	rc = 0;
out:
	close(fd);
	return rc;
}

static void add_addr(struct uro_netdev *nd, const struct sockaddr *sa)
{
	struct uro_netdev_addr *a = &nd->addrs[nd->naddrs];

	if (nd->naddrs == URO_GID_TBL_MAX)
		return;
	a->family = sa->sa_family;
	if (sa->sa_family == AF_INET)
		memcpy(a->addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	else
		memcpy(a->addr, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	nd->naddrs++;
}

/* IPv4 addresses first, then IPv6: GID index 0 is then the IPv4 address a
 * user most often means (`ibv_rc_pingpong -g 0`). */
static int query_addrs(struct uro_netdev *nd)
{
	struct ifaddrs *list;
	static const int families[] = {AF_INET, AF_INET6};

	if (getifaddrs(&list))
		return -1;
	for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++)
		for (struct ifaddrs *i = list; i; i = i->ifa_next)
			if (i->ifa_addr && i->ifa_addr->sa_family == families[f] &&
			    !strcmp(i->ifa_name, nd->name))
				add_addr(nd, i->ifa_addr);
	freeifaddrs(list);
	return 0;
}

int uro_netdev_query(const char *name, struct uro_netdev *nd)
{
	memset(nd, 0, sizeof(*nd));
	if (strlen(name) >= sizeof(nd->name)) {
		errno = ENODEV;
		return -1;
	}
	strcpy(nd->name, name);
	nd->ifindex = if_nametoindex(name);
	if (!nd->ifindex) {
		errno = ENODEV;
		return -1;
	}
	if (query_ioctls(nd) || query_addrs(nd))
		return -1;
	return 0;
}
