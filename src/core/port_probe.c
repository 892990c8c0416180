#include "port_probe.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stdio.h>

int uro_port_bind_shared(int fd, const struct sockaddr *a, socklen_t len)
{
	int one = 1;

	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
		return -1;
	return bind(fd, a, len);
}

/* /proc/net/udp prints an address as the 32-bit words of its network
 * order bytes, each as a number of this machine's order. */
static void hex_address(const char *hex, int family, char *out, size_t len, unsigned port)
{
	uint8_t raw[16];
	char text[INET6_ADDRSTRLEN] = "?";
	size_t words = family == AF_INET ? 1 : 4;

	for (size_t i = 0; i < words; i++) {
		char w[9];
		uint32_t v;

		memcpy(w, hex + 8 * i, 8);
		w[8] = '\0';
		v = (uint32_t)strtoul(w, NULL, 16);
		memcpy(raw + 4 * i, &v, 4);
	}
	inet_ntop(family, raw, text, sizeof(text));
	snprintf(out, len, family == AF_INET ? "%s:%u" : "[%s]:%u", text, port);
}

static int read_table(const char *file, int family, uint16_t port, struct uro_port_holder *h, int n,
		      int max)
{
	FILE *f = fopen(file, "re");
	char line[512], hex[40];
	unsigned lport, uid;
	unsigned long inode;

	if (!f)
		return n;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, " %*s %39[0-9A-Fa-f]:%x %*s %*s %*s %*s %*s %u %*s %lu", hex,
			   &lport, &uid, &inode) != 4 ||
		    lport != port)
			continue;
		if (n < max) {
			memset(&h[n], 0, sizeof(h[n]));
			h[n].uid = (uid_t)uid;
			h[n].inode = inode;
			hex_address(hex, family, h[n].addr, sizeof(h[n].addr), lport);
		}
		n++;
	}
	fclose(f);
	return n;
}

static void read_comm(pid_t pid, char *comm, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	f = fopen(path, "re");
	if (!f || !fgets(comm, (int)len, f))
		snprintf(comm, len, "?");
	comm[strcspn(comm, "\n")] = '\0';
	if (f)
		fclose(f);
}

/* Looks at one process's descriptors: the holders' sockets it has, and
 * whether it is a uroce process (it holds a segment). Another user's
 * descriptors are hidden from us, unless we are root. */
static void scan_process(pid_t pid, struct uro_port_holder *h, int n)
{
	char path[64], link[64];
	int found[URO_PORT_HOLDERS_MAX] = {0}, any = 0, uroce = 0;
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return;
	while ((e = readdir(d))) {
		ssize_t len = readlinkat(dirfd(d), e->d_name, link, sizeof(link) - 1);
		unsigned long ino;

		if (len <= 0)
			continue;
		link[len] = '\0';
		uroce |= !strncmp(link, "/memfd:uroce-seg-", 17);
		if (sscanf(link, "socket:[%lu]", &ino) != 1)
			continue;
		for (int i = 0; i < n; i++)
			if (h[i].inode && h[i].inode == ino && !h[i].pid)
				any = found[i] = 1;
	}
	closedir(d);
	for (int i = 0; any && i < n; i++) {
		if (!found[i])
			continue;
		h[i].pid = pid;
		h[i].uroce = uroce;
		read_comm(pid, h[i].comm, sizeof(h[i].comm));
	}
}

int uro_port_holders(uint16_t port, pid_t skip, struct uro_port_holder *h, int max)
{
	int n, k = 0;
	/* Another user cannot tell a Soft-RoCE link's socket from a hidden
	 * root process's (Linux 6.1's rxe holds port 4791 in the first
	 * network namespace, seen in the kernel peer's guest). */
	int rxe_loaded = access("/sys/module/rdma_rxe", F_OK) == 0;
	struct dirent *e;
	DIR *d;

	/* scan_process marks what it finds in an array of this size. */
	max = max < URO_PORT_HOLDERS_MAX ? max : URO_PORT_HOLDERS_MAX;
	n = read_table("/proc/net/udp", AF_INET, port, h, 0, max);
	n = read_table("/proc/net/udp6", AF_INET6, port, h, n, max);
	n = n < max ? n : max;
	d = opendir("/proc");
	while (d && (e = readdir(d))) {
		pid_t pid = (pid_t)atoi(e->d_name);

		if (pid > 0)
			scan_process(pid, h, n);
	}
	if (d)
		closedir(d);
	/* The skipped process's own sockets are nobody else's. */
	for (int i = 0; i < n; i++) {
		/* Root sees every process's descriptors: a socket none has is
		 * the kernel's. */
		h[i].kernel = !h[i].pid && (!h[i].inode || geteuid() == 0);
		h[i].rxe_loaded = rxe_loaded;
		if (!skip || h[i].pid != skip)
			h[k++] = h[i];
	}
	return k;
}

/* "pid 812 (python3, uid 0) on 0.0.0.0:4791", or who it must be. */
static void describe(const struct uro_port_holder *h, char *out, size_t len)
{
	if (h->pid)
		snprintf(out, len, "pid %d (%s%s, uid %u) on %s", (int)h->pid, h->comm,
			 h->uroce ? ", uroce" : "", (unsigned)h->uid, h->addr);
	else if (h->kernel)
		snprintf(out, len, "the kernel (a Soft-RoCE rxe link or a RoCE NIC) on %s",
			 h->addr);
	else if (h->rxe_loaded && h->uid == 0)
		snprintf(out, len,
			 "the kernel's Soft-RoCE (rdma_rxe is loaded) or a process of uid 0 that "
			 "/proc does not show to this user, on %s",
			 h->addr);
	else
		snprintf(out, len,
			 "a process of uid %u that /proc does not show to this user, on %s",
			 (unsigned)h->uid, h->addr);
}

/* The holders that are not uroce processes, described one after another. */
static int others(const struct uro_port_holder *h, int n, char *out, size_t len)
{
	size_t used = 0;
	int count = 0;

	out[0] = '\0';
	for (int i = 0; i < n && used < len; i++) {
		char one[192];

		if (h[i].uroce)
			continue;
		describe(&h[i], one, sizeof(one));
		used += (size_t)snprintf(out + used, len - used, "%s%s", count ? "; " : "", one);
		count++;
	}
	return count;
}

enum uro_port_state uro_port_diagnose(uint16_t port, int err, const struct uro_port_holder *h,
				      int n, struct uro_diagnosis *d)
{
	char who[320];
	int foreign = others(h, n, who, sizeof(who));

	if (err == EADDRINUSE) {
		uro_diagnose(d,
			     "stop that program, or have it bind with SO_REUSEADDR as uroce "
			     "does",
			     "UDP port %u is held without SO_REUSEADDR by %s", (unsigned)port,
			     foreign ? who : "a program /proc does not show");
		return URO_PORT_REFUSED;
	}
	if (err == EADDRNOTAVAIL) {
		uro_diagnose(d, "give the link's netdev an address (uroce link show)",
			     "the link's address is not this host's");
		return URO_PORT_REFUSED;
	}
	if (err) {
		uro_diagnose(d, NULL, "binding UDP port %u: %s", (unsigned)port, strerror(err));
		return URO_PORT_REFUSED;
	}
	if (foreign) {
		uro_diagnose(d, "stop that program while uroce uses the wire",
			     "bindable, but also held by %s: the kernel gives each datagram to "
			     "the newest socket, which may be that program's",
			     who);
		return URO_PORT_CONTESTED;
	}
	if (n) {
		uro_diagnose(d, NULL, "shared with %d uroce process%s, as designed", n,
			     n > 1 ? "es" : "");
		return URO_PORT_SHARED;
	}
	uro_diagnose(d, NULL, "free");
	return URO_PORT_FREE;
}

enum uro_port_state uro_port_explain(uint16_t port, int err, struct uro_diagnosis *d)
{
	struct uro_port_holder h[URO_PORT_HOLDERS_MAX];
	int n = uro_port_holders(port, getpid(), h, URO_PORT_HOLDERS_MAX);

	return uro_port_diagnose(port, err, h, n, d);
}
