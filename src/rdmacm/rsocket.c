/* The rsocket calls (rsocket(7)). Every Debian RDMA binary is linked
 * BIND_NOW, so they must exist; uroce does not implement rsockets yet, and
 * each fails with ENOSYS (README). */
#include <poll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "cm.h"

#define RSOCKET_ENOSYS(ret, name)                                                                  \
	URO_EXPORT ret name(void);                                                                 \
	URO_EXPORT ret name(void)                                                                  \
	{                                                                                          \
		errno = ENOSYS;                                                                    \
		return (ret)-1;                                                                    \
	}

RSOCKET_ENOSYS(int, rsocket)
RSOCKET_ENOSYS(int, rbind)
RSOCKET_ENOSYS(int, rlisten)
RSOCKET_ENOSYS(int, raccept)
RSOCKET_ENOSYS(int, rconnect)
RSOCKET_ENOSYS(int, rshutdown)
RSOCKET_ENOSYS(int, rclose)
RSOCKET_ENOSYS(ssize_t, rrecv)
RSOCKET_ENOSYS(ssize_t, rrecvfrom)
RSOCKET_ENOSYS(ssize_t, rrecvmsg)
RSOCKET_ENOSYS(ssize_t, rsend)
RSOCKET_ENOSYS(ssize_t, rsendto)
RSOCKET_ENOSYS(ssize_t, rsendmsg)
RSOCKET_ENOSYS(ssize_t, rread)
RSOCKET_ENOSYS(ssize_t, rreadv)
RSOCKET_ENOSYS(ssize_t, rwrite)
RSOCKET_ENOSYS(ssize_t, rwritev)
RSOCKET_ENOSYS(int, rpoll)
RSOCKET_ENOSYS(int, rselect)
RSOCKET_ENOSYS(int, rgetpeername)
RSOCKET_ENOSYS(int, rgetsockname)
RSOCKET_ENOSYS(int, rsetsockopt)
RSOCKET_ENOSYS(int, rgetsockopt)
RSOCKET_ENOSYS(int, rfcntl)
RSOCKET_ENOSYS(off_t, riomap)
RSOCKET_ENOSYS(int, riounmap)
RSOCKET_ENOSYS(size_t, riowrite)
