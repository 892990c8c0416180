/* Addresses that become usable after a program started. Containers and CI
 * start programs the moment their network appears, when an IPv6 address is
 * still tentative (duplicate address detection, RFC 4862 5.4) and cannot be
 * bound: the endpoint then listens to the kernel's address announcements
 * (rtnetlink(7), RTM_NEWADDR) and opens the refused family again once the
 * kernel says an address is usable, instead of staying deaf on it. */
#ifndef URO_ADDRESS_WATCH_H
#define URO_ADDRESS_WATCH_H

/* A non-blocking rtnetlink socket that hears IPv4 and IPv6 address
 * changes, and first every address there is (so that one that became
 * usable just before is heard too), or -1 with errno. */
int uro_addr_watch_open(void);

/* Reads what fd has: 1 when an address of netdev ifindex (0: any) became
 * usable (added, and not tentative), else 0. */
int uro_addr_watch_usable(int fd, unsigned ifindex);

#endif
