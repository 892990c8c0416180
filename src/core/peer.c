#include "peer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cq_ring.h"
#include "direct_map.h"
#include "registry.h"

/* The tables sit where every segment has them; a header's own offsets,
 * written by whoever could write the segment, are never followed. */
static void set_tables(struct uro_peer *p)
{
	struct uro_seg_header layout;

	uro_seg_table_offsets(&layout);
	p->hdr = (struct uro_seg_header *)p->base;
	p->qp = (struct uro_seg_qp *)(p->base + layout.qp_off);
	p->cq = (struct uro_seg_cq *)(p->base + layout.cq_off);
	p->srq = (struct uro_seg_srq *)(p->base + layout.srq_off);
	p->mr = (struct uro_seg_mr *)(p->base + layout.mr_off);
	p->share = (struct uro_seg_share *)(p->base + layout.share_off);
	p->mcast = (struct uro_seg_mcast *)(p->base + layout.mcast_off);
	p->atomics = (struct uro_seg_atomics *)(p->base + layout.atomic_off);
	p->arena_off = layout.arena_off;
}

void uro_peer_self(struct uro_peer *p, struct uro_segment *own, unsigned slot)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->fds_lock, NULL);
	p->slot = slot;
	p->pid = getpid();
	p->self = 1;
	p->pidfd = -1;
	p->base = own->base;
	p->size = own->size;
	set_tables(p);
}

static int header_ok(const struct uro_seg_header *h, unsigned slot, pid_t pid)
{
	return h->magic == URO_SEG_MAGIC && h->version == URO_SEG_VERSION && h->slot == slot &&
	       h->pid == pid && h->size == uro_seg_size();
}

/* The registry's record says where a slot's segment is, but anyone can
 * write the registry: what is believed is what the kernel says. The
 * process must be this user's (the owner of /proc/<pid>), and the fd a
 * uroce segment's memfd of this user, of a segment's size. */
static int open_segment(const struct uro_slot_record *rec, int *fd_out)
{
	char path[64], link[64];
	struct stat st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d", rec->pid);
	if (rec->pid <= 0 || stat(path, &st))
		return -ESRCH;
	if (st.st_uid != getuid())
		return -EACCES;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", rec->pid, rec->seg_fd);
	n = readlink(path, link, sizeof(link) - 1);
	/* Our user's process, and still refused: the kernel's ptrace check
	 * across user namespaces (capabilities(7)), which holds for
	 * cross-memory attach too. */
	if (n < 0 && (errno == EACCES || errno == EPERM))
		return -EPERM;
	if (n < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	link[n] = 0;
	if (strncmp(link, "/memfd:uroce-seg-", 17))
		return -ESRCH;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != getuid() ||
	    (uint64_t)st.st_size != uro_seg_size()) {
		close(fd);
		return -ESRCH;
	}
	*fd_out = fd;
	return 0;
}

/* Pipes opened for a previous owner of the slot are pointed at /dev/null,
 * not closed: a thread may be writing to one, and a closed number could be
 * reused by anything this process opens next. The numbers are reused for
 * the new owner's pipes. */
static void retire_pipes(struct uro_peer *p)
{
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

	for (int i = 0; i < p->nfds; i++) {
		if (null >= 0)
			(void)dup3(null, p->fds[i].local, O_CLOEXEC);
		__atomic_store_n(&p->fds[i].remote, -1, __ATOMIC_RELEASE);
	}
	if (null >= 0)
		close(null);
}

/* Whether rec, slot's live record in this user's registry, is one the
 * data path may follow: cross-memory attach serves only this network
 * namespace, whose addresses the shared-memory path stands for (a process
 * elsewhere is reached over the wire). A reader may look at any. */
static int reachable(const char *dir, unsigned slot, struct uro_slot_record *rec, int prot)
{
	return uro_registry_lookup(dir, slot, rec) == 1 && rec->magic == URO_REGISTRY_MAGIC &&
	       (!(prot & PROT_WRITE) || rec->netns == uro_registry_netns());
}

static void close_pidfd(int fd)
{
	if (fd >= 0)
		close(fd);
}

/* Whether the process behind pidfd has exited; a kernel without pidfds
 * (before 5.3) leaves only the failed copies to tell. */
static int exited(int pidfd)
{
	struct pollfd pfd = {.fd = pidfd, .events = POLLIN};

	return pidfd >= 0 && poll(&pfd, 1, 0) == 1;
}

/* A replaced owner's pidfd keeps its number, as its pipes do: another
 * thread may be polling it. */
static void set_pidfd(struct uro_peer *p, int pidfd)
{
	if (pidfd >= 0 && p->pidfd >= 0) {
		(void)dup3(pidfd, p->pidfd, O_CLOEXEC);
		close(pidfd);
	} else if (pidfd >= 0) {
		p->pidfd = pidfd;
	}
	__atomic_store_n(&p->alive_until_ns, uro_coarse_ns() + URO_PEER_ALIVE_NS, __ATOMIC_RELAXED);
}

int uro_peer_alive(struct uro_peer *p)
{
	uint64_t now;

	if (p->self)
		return 1;
	now = uro_coarse_ns();
	if (now < __atomic_load_n(&p->alive_until_ns, __ATOMIC_RELAXED))
		return 1;
	if (exited(p->pidfd)) {
		__atomic_store_n(&p->dead, 1, __ATOMIC_RELEASE);
		return 0;
	}
	__atomic_store_n(&p->alive_until_ns, now + URO_PEER_ALIVE_NS, __ATOMIC_RELAXED);
	uro_direct_sweep(p);
	return 1;
}

static int attach(struct uro_peer *p, const char *registry_dir, unsigned slot, int prot)
{
	struct uro_slot_record rec;
	size_t size = uro_seg_size();
	int fixed = p->base != NULL && !p->self;
	void *base;
	int fd = -1, pidfd, err;

	if (!fixed) {
		memset(p, 0, sizeof(*p));
		pthread_mutex_init(&p->fds_lock, NULL);
		p->pidfd = -1;
	}
	p->slot = slot;
	if (!reachable(registry_dir, slot, &rec, prot))
		return -ESRCH;
	/* Opened before the segment: if the process is still running once
	 * its segment is mapped, the pidfd names the segment's owner and not
	 * a later holder of its pid. */
	pidfd = (int)syscall(SYS_pidfd_open, rec.pid, 0);
	err = open_segment(&rec, &fd);
	if (err) {
		close_pidfd(pidfd);
		return err;
	}
	/* Over the old mapping when there is one: a thread still acting on
	 * the previous owner then reads the new tables (every index in them
	 * is checked at use), never an unmapped page. */
	base =
	    mmap(fixed ? p->base : NULL, size, prot, MAP_SHARED | (fixed ? MAP_FIXED : 0), fd, 0);
	close(fd);
	if (base == MAP_FAILED)
		return -errno;
	if (!header_ok(base, slot, rec.pid) || exited(pidfd)) {
		if (!fixed)
			munmap(base, size);
		close_pidfd(pidfd);
		return -ESRCH;
	}
	if (fixed)
		retire_pipes(p);
	set_pidfd(p, pidfd);
	__atomic_store_n(&p->pid, rec.pid, __ATOMIC_RELEASE);
	p->base = base;
	p->size = size;
	set_tables(p);
	__atomic_store_n(&p->dead, 0, __ATOMIC_RELEASE);
	return 0;
}

int uro_peer_attach(struct uro_peer *p, const char *registry_dir, unsigned slot)
{
	return attach(p, registry_dir, slot, PROT_READ | PROT_WRITE);
}

int uro_peer_observe(struct uro_peer *p, const char *registry_dir, unsigned slot)
{
	return attach(p, registry_dir, slot, PROT_READ);
}

void uro_peer_detach(struct uro_peer *p)
{
	uro_direct_drop(p);
	for (int i = 0; i < p->nfds; i++)
		if (!p->self)
			close(p->fds[i].local);
	if (p->base && !p->self)
		munmap(p->base, p->size);
	close_pidfd(p->pidfd);
	memset(p, 0, sizeof(*p));
	p->pidfd = -1;
}

uint64_t uro_fd_ino(int fd)
{
	struct stat st;

	return fd >= 0 && fstat(fd, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

int uro_peer_open_fd(const struct uro_peer *p, int remote_fd, int flags, uint64_t dev, uint64_t ino)
{
	char path[64];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", p->pid, remote_fd);
	fd = open(path, flags | O_CLOEXEC);
	if (fd >= 0 &&
	    (fstat(fd, &st) || (uint64_t)st.st_ino != ino || (dev && (uint64_t)st.st_dev != dev))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* The number is looked up with the pipe's inode: a channel destroyed and
 * made again can get the same number in its owner, and a write to the
 * first pipe's copy would wake nobody (rstream -T b slept for ever on
 * its second connection). */
int uro_peer_pipe(struct uro_peer *p, int remote_fd, uint64_t ino)
{
	int n, fd, i;

	if (p->self)
		return remote_fd;
	n = __atomic_load_n(&p->nfds, __ATOMIC_ACQUIRE);
	for (i = 0; i < n; i++)
		if (__atomic_load_n(&p->fds[i].remote, __ATOMIC_ACQUIRE) == remote_fd &&
		    __atomic_load_n(&p->fds[i].ino, __ATOMIC_ACQUIRE) == ino)
			return p->fds[i].local;
	fd = uro_peer_open_fd(p, remote_fd, O_WRONLY | O_NONBLOCK, 0, ino);
	if (fd < 0)
		return -1;
	pthread_mutex_lock(&p->fds_lock);
	/* The entry for this number, else a retired one, else a new one. */
	for (i = 0; i < p->nfds && p->fds[i].remote != remote_fd; i++)
		;
	if (i == p->nfds)
		for (i = 0; i < p->nfds && p->fds[i].remote != -1; i++)
			;
	if (i < p->nfds && p->fds[i].remote == remote_fd && p->fds[i].ino == ino) {
		close(fd); /* another thread was first */
		fd = p->fds[i].local;
	} else if (i < p->nfds) { /* a retired entry, or the number's old pipe */
		__atomic_store_n(&p->fds[i].remote, -1, __ATOMIC_RELEASE);
		(void)dup3(fd, p->fds[i].local, O_CLOEXEC);
		close(fd);
		fd = p->fds[i].local;
		__atomic_store_n(&p->fds[i].ino, ino, __ATOMIC_RELEASE);
		__atomic_store_n(&p->fds[i].remote, remote_fd, __ATOMIC_RELEASE);
	} else if (i < URO_PEER_FDS) {
		p->fds[i].local = fd;
		p->fds[i].ino = ino;
		p->fds[i].remote = remote_fd;
		__atomic_store_n(&p->nfds, i + 1, __ATOMIC_RELEASE);
	} else {
		close(fd);
		fd = -1;
	}
	pthread_mutex_unlock(&p->fds_lock);
	return fd;
}
