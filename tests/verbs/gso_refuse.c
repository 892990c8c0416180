/* A kernel that refuses UDP GSO, preloaded into a test program: sendmmsg
 * fails a message that carries a UDP_SEGMENT cmsg with EIO, as Linux does
 * for a route whose device has no checksum offload (udp_send_skb), after
 * sending the messages before it, as sendmmsg(2) does. The kernel this
 * suite runs on segments even then, so the fallback (wire_burst.c) is
 * tested this way. */
#include <dlfcn.h>
#include <errno.h>
#include <netinet/udp.h>
#include <sys/socket.h>

static int segmented(struct msghdr *h)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c))
		if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_SEGMENT)
			return 1;
	return 0;
}

int sendmmsg(int fd, struct mmsghdr *m, unsigned int n, int flags)
{
	static int (*real)(int, struct mmsghdr *, unsigned int, int);
	unsigned int plain = 0;

	if (!real)
		real =
		    (int (*)(int, struct mmsghdr *, unsigned int, int))dlsym(RTLD_NEXT, "sendmmsg");
	while (plain < n && !segmented(&m[plain].msg_hdr))
		plain++;
	if (n && !plain) {
		errno = EIO;
		return -1;
	}
	return real(fd, m, plain, flags);
}
