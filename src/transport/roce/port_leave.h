/* A receiving socket leaving UDP port 4791, which every uroce process of
 * the host binds (endpoint.c), without losing a datagram the kernel gave
 * it: first it stops being picked, then the deliveries that picked it
 * before are waited for, and only then is it emptied and closed. */
#ifndef URO_PORT_LEAVE_H
#define URO_PORT_LEAVE_H

#include <sys/socket.h>

/* Makes the socket fd, bound to the port, one the kernel no longer picks
 * for a datagram, keeping what waits in it: connected to self (its own
 * address and port, which sends nothing). 0, or -1 with errno. */
int uro_port_stop_receiving(int fd, const struct sockaddr *self, socklen_t len);

/* Returns once every delivery that picked a socket before it stopped
 * receiving has queued its datagram there: 0; -1 with errno when the
 * kernel refused the wait, which is then a millisecond's sleep. */
int uro_port_await_deliveries(void);

#endif
