/* Whether rdma_listen is ready for other hosts by the time its TCP port
 * listens. Tests (lib.sh's wait_listen) and people take a listening TCP
 * port as "the server is up"; a client that connects from another host
 * then sends a CM REQ on QP 1, which only the listener's service name
 * (mad_route.c) delivers. If the port listened first, such a REQ could be
 * rejected with reason 8 (invalid service ID) by a server that is about to
 * listen. This program binds ADDR:PORT, calls rdma_listen, and catches the
 * listen(2) calls of its TCP socket (rdma_bind_addr's and rdma_listen's):
 * at each the host's abstract unix sockets must already hold the
 * service's name. Exit 0 then, and when every ADDR listens, 1 if not.
 *
 *   listen_ready PORT ADDR... */
#include <dlfcn.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static char service[64];
static int tcp_listens, service_missing;

/* "cm-sid-<service ID>-" as mad_route.c names a listener's service: the
 * ID is rdma_cm's for the TCP port space (Annex A11: 0x0000000001060000
 * plus the port). */
static int service_bound(void)
{
	char line[512];
	int found = 0;
	FILE *f = fopen("/proc/net/unix", "r");

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, service) != NULL;
	fclose(f);
	return found;
}

/* Interposed on libc's: librdmacm's listen(2) calls come here first. */
int listen(int fd, int backlog)
{
	int (*real)(int, int) = (int (*)(int, int))dlsym(RTLD_NEXT, "listen");
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (!getsockname(fd, (struct sockaddr *)&ss, &len) &&
	    (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)) {
		tcp_listens++;
		service_missing += !service_bound();
	}
	return real(fd, backlog);
}

/* A listener on addr:port; an IPv6 one takes IPv6 only (AFONLY), so that
 * 0.0.0.0 and :: listen side by side as two such TCP sockets may. */
static struct rdma_cm_id *listener(struct rdma_event_channel *ch, const char *addr,
				   const char *port)
{
	struct rdma_cm_id *id = NULL;
	struct addrinfo *ai;
	int afonly = 1;

	if (getaddrinfo(addr, port, NULL, &ai))
		return NULL;
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    (ai->ai_family == AF_INET6 &&
	     rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &afonly, sizeof(afonly))) ||
	    rdma_bind_addr(id, ai->ai_addr) || rdma_listen(id, 0)) {
		fprintf(stderr, "listen_ready: rdma_cm on %s: %m\n", addr);
		if (id)
			rdma_destroy_id(id);
		id = NULL;
	}
	freeaddrinfo(ai);
	return id;
}

int main(int argc, char **argv)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id[4] = {0};
	int listening = 0;

	if (argc < 3 || argc > 2 + 4 || !ch) {
		fprintf(stderr, "usage: listen_ready PORT ADDR...\n");
		return 2;
	}
	snprintf(service, sizeof(service), "cm-sid-%016llx-",
		 0x0000000001060000ull + atoi(argv[1]));
	for (int i = 2; i < argc; i++)
		listening += (id[i - 2] = listener(ch, argv[i], argv[1])) != NULL;
	printf(
	    "%d of %d listening; TCP listens: %d, %d of them before the service name was bound\n",
	    listening, argc - 2, tcp_listens, service_missing);
	for (int i = 0; i < 4; i++)
		if (id[i])
			rdma_destroy_id(id[i]);
	rdma_destroy_event_channel(ch);
	return listening == argc - 2 && !service_missing ? 0 : 1;
}
