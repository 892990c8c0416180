/* Who holds a UDP port on this host, as /proc shows it, and what that
 * means for a process that wants it too. The wire path receives on port
 * 4791 with SO_REUSEADDR: another uroce process there is expected (the
 * relay passes packets on), a program bound without SO_REUSEADDR keeps
 * uroce out, and one bound with it takes some of uroce's packets. */
#ifndef URO_PORT_PROBE_H
#define URO_PORT_PROBE_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "diagnosis.h"

#define URO_PORT_HOLDERS_MAX 16

struct uro_port_holder {
	pid_t pid; /* 0: /proc shows no process with the socket */
	uid_t uid; /* the socket's owner, as /proc/net/udp says */
	unsigned long inode;
	int kernel;	/* no process has it: the kernel's (rxe, a RoCE driver) */
	int rxe_loaded; /* the kernel's Soft-RoCE module is loaded: a root socket
			 * nobody is seen to hold may be its */
	int uroce;	/* the process holds a uroce segment */
	char comm[16];
	char addr[64]; /* ADDRESS:PORT */
};

enum uro_port_state {
	URO_PORT_FREE,	    /* nobody else */
	URO_PORT_SHARED,    /* only uroce processes, as designed */
	URO_PORT_CONTESTED, /* bindable, but another program listens there too */
	URO_PORT_REFUSED,   /* the bind failed */
};

/* Binds fd as the wire path binds its receiving socket: shared
 * (SO_REUSEADDR) with the host's other uroce processes, which the kernel
 * allows across users. 0, or -1 and errno. */
int uro_port_bind_shared(int fd, const struct sockaddr *a, socklen_t len);

/* The sockets bound to port, of either family, but not skip's: how many
 * were found (at most max are filled in). */
int uro_port_holders(uint16_t port, pid_t skip, struct uro_port_holder *h, int max);

/* What a bind to port that returned err (0: it worked) means, given who
 * else holds it. */
enum uro_port_state uro_port_diagnose(uint16_t port, int err, const struct uro_port_holder *h,
				      int n, struct uro_diagnosis *d);

/* Both, for this process. */
enum uro_port_state uro_port_explain(uint16_t port, int err, struct uro_diagnosis *d);

#endif
