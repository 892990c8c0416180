#include "port_leave.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Connected, a UDP socket matches only datagrams from the address and port
 * it is connected to (net/ipv4/udp.c compute_score: a socket whose
 * inet_daddr or inet_dport differs from the datagram's source scores -1;
 * net/ipv6/udp.c likewise), so the lookup passes on to the next socket of
 * the port. RoCEv2 packets leave from the QPs' own source ports (rxe picks
 * its port by QPN too), never from port 4791, so nothing matches self.
 * connect(2) on UDP leaves the receive queue alone. */
int uro_port_stop_receiving(int fd, const struct sockaddr *self, socklen_t len)
{
	return connect(fd, self, len);
}

/* The kernel looks a datagram's socket up and queues it there within one
 * RCU read-side section (ip_local_deliver_finish in net/ipv4/ip_input.c
 * holds rcu_read_lock around the protocol's handler: a UDP socket found by
 * the lookup is safe to use only inside it), so a delivery that picked the
 * socket before the connect may still be queueing once connect(2) has
 * returned; emptied then, the socket lost that datagram at close(2).
 * MEMBARRIER_CMD_GLOBAL is synchronize_rcu() (kernel/sched/membarrier.c):
 * when it returns, every such section has ended. It costs a grace period,
 * 8 to 28 ms on this project's machine, once per endpoint closed. Refused
 * (nohz_full CPUs, a seccomp filter), a millisecond covers a delivery that
 * no preemption stretched. */
int uro_port_await_deliveries(void)
{
	const struct timespec ms = {.tv_nsec = 1000 * 1000};
	int err;

	if (!syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0))
		return 0;
	err = errno;
	nanosleep(&ms, NULL);
	errno = err;
	return -1;
}
