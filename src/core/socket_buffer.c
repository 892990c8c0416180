#include "socket_buffer.h"

#include <sys/socket.h>

#include "process_policy.h"

void uro_sockbuf_limits(struct uro_sockbuf_limits *l)
{
	l->rmem_max = uro_proc_number("/proc/sys/net/core/rmem_max");
	l->wmem_max = uro_proc_number("/proc/sys/net/core/wmem_max");
}

int uro_sockbuf_grow_rcv(int fd, int want)
{
	socklen_t len = sizeof(int);
	int got;

	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &want, sizeof(want)))
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &want, sizeof(want));
	return getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &got, &len) ? -1 : got;
}

int uro_sockbuf_enough(int got)
{
	return got >= URO_WIRE_RCVBUF_NEED;
}
