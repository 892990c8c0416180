/* rpoll and rselect (rsocket(3)): rsockets and plain fds in one wait. An
 * rsocket is ready by its own state (data queued, credits and a free
 * slot, a request to accept, a connect done); asleep, the wait is on the
 * fds that wake it: its CM channel, which names it, and its completion
 * channel, the CQ armed first. */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cm.h"
#include "rsocket.h"

static short rs_events(struct rsock *rs)
{
	if (rs->dg)
		return rs_dgram_events(rs);
	switch (rs->state) {
	case RS_LISTENING:
		rs_listen_advance(rs);
		return rs->npending ? POLLIN : 0;
	case RS_RESOLVING_ADDR:
	case RS_RESOLVING_ROUTE:
	case RS_CONNECTING:
		rs_connect_advance(rs);
		if (rs->state == RS_CONNECTED)
			return rs_events(rs);
		return rs->state == RS_FAILED ? POLLOUT | POLLERR : 0;
	case RS_CONNECTED:
		rs_progress(rs);
		return (short)((rs_readable(rs) ? POLLIN : 0) | (rs_writable(rs) ? POLLOUT : 0) |
			       (rs->disconnected ? POLLHUP : 0));
	case RS_FAILED:
		return POLLOUT | POLLERR;
	default:
		return POLLOUT | POLLHUP; /* as an unconnected TCP socket */
	}
}

/* Who is ready now: each entry's revents, and how many are. */
static int check(struct pollfd *fds, nfds_t nfds)
{
	int ready = 0;

	for (nfds_t i = 0; i < nfds; i++) {
		struct rsock *rs = fds[i].fd >= 0 ? rs_get(fds[i].fd) : NULL;

		fds[i].revents = 0;
		if (!rs) {
			if (fds[i].fd >= 0 && poll(&fds[i], 1, 0) < 0)
				return -1;
		} else {
			fds[i].revents = rs_events(rs) & (fds[i].events | POLLERR | POLLHUP);
			rs_put(rs);
		}
		ready += fds[i].revents != 0;
	}
	return ready;
}

static int ms_left(const struct timespec *end, int timeout)
{
	struct timespec now;
	long ns;

	if (timeout < 0)
		return -1;
	/* Rounded up, as poll(2) rounds its timeout: rounded down, rpoll for
	 * 1 ms returned at once, and udpong resent each echo in a tight loop. */
	clock_gettime(CLOCK_MONOTONIC, &now);
	ns = (end->tv_sec - now.tv_sec) * 1000000000L + (end->tv_nsec - now.tv_nsec);
	return ns > 0 ? (int)((ns + 999999) / 1000000) : 0;
}

/* The fds that wake each entry; 1 when an rsocket had news on arming. */
static int sleep_set(struct pollfd *fds, nfds_t nfds, struct pollfd *set, nfds_t *n)
{
	int news = 0;

	*n = 0;
	for (nfds_t i = 0; i < nfds; i++) {
		struct rsock *rs = fds[i].fd >= 0 ? rs_get(fds[i].fd) : NULL;

		if (!rs) {
			set[(*n)++] = fds[i];
			continue;
		}
		news |= rs->dg ? rs_dgram_arm(rs) : rs_arm(rs);
		set[(*n)++] = (struct pollfd){.fd = rs->fd, .events = POLLIN};
		if (rs->cc)
			set[(*n)++] = (struct pollfd){.fd = rs->cc->fd, .events = POLLIN};
		rs_put(rs);
	}
	return news;
}

static void drain(struct pollfd *fds, nfds_t nfds)
{
	for (nfds_t i = 0; i < nfds; i++) {
		struct rsock *rs = fds[i].fd >= 0 ? rs_get(fds[i].fd) : NULL;

		if (rs) {
			rs_drain_events(rs);
			rs_put(rs);
		}
	}
}

URO_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	struct pollfd *set = malloc(sizeof(*set) * (2 * nfds + 1));
	struct timespec end;
	int ready;

	if (!set)
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += timeout / 1000;
	end.tv_nsec += (long)(timeout % 1000) * 1000000;
	if (end.tv_nsec >= 1000000000) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000;
	}
	for (;;) {
		nfds_t n;
		int left;

		ready = check(fds, nfds);
		left = ms_left(&end, timeout);
		if (ready || left == 0)
			break;
		if (sleep_set(fds, nfds, set, &n))
			continue;
		if (poll(set, n, left) < 0) {
			ready = -1;
			break;
		}
		drain(fds, nfds);
	}
	free(set);
	return ready;
}

URO_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
		       struct timeval *timeout)
{
	struct pollfd *fds = calloc((size_t)(nfds > 0 ? nfds : 1), sizeof(*fds));
	nfds_t n = 0;
	int ready, ms = timeout ? (int)(timeout->tv_sec * 1000 + timeout->tv_usec / 1000) : -1;

	if (!fds)
		return -1;
	for (int fd = 0; fd < nfds; fd++) {
		short ev = (short)((readfds && FD_ISSET(fd, readfds) ? POLLIN : 0) |
				   (writefds && FD_ISSET(fd, writefds) ? POLLOUT : 0) |
				   (exceptfds && FD_ISSET(fd, exceptfds) ? POLLPRI : 0));

		if (ev)
			fds[n++] = (struct pollfd){.fd = fd, .events = ev};
	}
	ready = rpoll(fds, n, ms);
	if (ready >= 0) {
		ready = 0;
		if (readfds)
			FD_ZERO(readfds);
		if (writefds)
			FD_ZERO(writefds);
		if (exceptfds)
			FD_ZERO(exceptfds);
		for (nfds_t i = 0; i < n; i++) {
			short r = fds[i].revents;

			if (readfds && (r & (POLLIN | POLLHUP | POLLERR)) &&
			    (fds[i].events & POLLIN))
				FD_SET(fds[i].fd, readfds), ready++;
			if (writefds && (r & (POLLOUT | POLLERR)) && (fds[i].events & POLLOUT))
				FD_SET(fds[i].fd, writefds), ready++;
			if (exceptfds && (r & POLLPRI))
				FD_SET(fds[i].fd, exceptfds), ready++;
		}
	}
	free(fds);
	return ready;
}
