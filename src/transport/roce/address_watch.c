#include "address_watch.h"

#include <errno.h>
#include <linux/if_addr.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Asks for every address there is now: one that became usable between
 * the refused bind and this socket's first listening is in the answer,
 * which arrives as the announcements do (RTM_NEWADDR), not missed. */
static int ask_dump(int fd)
{
	struct {
		struct nlmsghdr h;
		struct ifaddrmsg ifa;
	} req = {.h = {.nlmsg_len = sizeof(req),
		       .nlmsg_type = RTM_GETADDR,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
		 .ifa = {.ifa_family = AF_UNSPEC}};

	return send(fd, &req, sizeof(req), 0) == (ssize_t)sizeof(req) ? 0 : -1;
}

int uro_addr_watch_open(void)
{
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK,
				 .nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR};
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);

	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || ask_dump(fd)) {
		int err = errno;

		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

/* The address's flags: IFA_FLAGS (32 bits) where the kernel sends it,
 * else the header's 8 (rtnetlink(7)). */
static uint32_t addr_flags(const struct nlmsghdr *h)
{
	const struct ifaddrmsg *ifa = NLMSG_DATA(h);
	int len = (int)IFA_PAYLOAD(h);

	for (const struct rtattr *a = IFA_RTA(ifa); RTA_OK(a, len); a = RTA_NEXT(a, len))
		if (a->rta_type == IFA_FLAGS && RTA_PAYLOAD(a) >= sizeof(uint32_t)) {
			uint32_t f;

			memcpy(&f, RTA_DATA(a), sizeof(f));
			return f;
		}
	return ifa->ifa_flags;
}

static int usable(const struct nlmsghdr *h, unsigned ifindex)
{
	const struct ifaddrmsg *ifa = NLMSG_DATA(h);

	if (h->nlmsg_type != RTM_NEWADDR || h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifa)))
		return 0;
	if (ifindex && ifa->ifa_index != ifindex)
		return 0;
	return !(addr_flags(h) & (IFA_F_TENTATIVE | IFA_F_DADFAILED));
}

int uro_addr_watch_usable(int fd, unsigned ifindex)
{
	/* Aligned for the headers read in place. */
	uint8_t buf[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
	int found = 0;
	ssize_t n;

	/* Drained whole, so that the socket is not reported again for what
	 * was read; an overrun (ENOBUFS) lost announcements, and says so by
	 * being one. */
	while ((n = recv(fd, buf, sizeof(buf), 0)) != 0) {
		if (n < 0) {
			if (errno == ENOBUFS) {
				found = 1;
				continue;
			}
			break;
		}
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (unsigned)n);
		     h = NLMSG_NEXT(h, n))
			found |= usable(h, ifindex);
	}
	return found;
}
