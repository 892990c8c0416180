#include "registry.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

_Static_assert(sizeof(struct uro_slot_record) == 128, "registry record is 128 bytes");

const char *uro_registry_dir(const char *dir)
{
	const char *env = getenv("UROCE_RUNTIME_DIR");

	if (dir)
		return dir;
	return env && *env ? env : "/dev/shm";
}

/* The file is this user's, in a directory every user may write (sticky
 * /dev/shm), so another user may have put something at its path first: a
 * link to a file of ours, a FIFO, a file of theirs. Links are never
 * followed, and only a plain file of ours with one name, open to nobody
 * else, is used. What another user planted there denies this user its
 * device, with this message, and is left as it was. */
static int open_registry(const char *dir, int flags)
{
	char path[4096];
	struct stat st;
	uid_t me = geteuid();
	int fd = -1;

	snprintf(path, sizeof(path), "%s/uroce-registry-%u", uro_registry_dir(dir), (unsigned)me);
	if (flags & O_CREAT) {
		fd = open(path, flags | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	fd = open(path, (flags & ~O_CREAT) | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno != ELOOP && errno != EACCES)
		return -1;
	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
	    st.st_uid != me || (st.st_mode & 0077)) {
		if (fd >= 0)
			close(fd);
		uro_warn("%s is not a registry uroce can trust (a link, not a plain file, not this "
			 "user's, or open to others); remove it, or set UROCE_RUNTIME_DIR",
			 path);
		errno = EPERM;
		return -1;
	}
	return fd;
}

static struct flock record_lock(short type, unsigned slot)
{
	struct flock fl = {
	    .l_type = type,
	    .l_whence = SEEK_SET,
	    .l_start = (off_t)slot * (off_t)sizeof(struct uro_slot_record),
	    .l_len = sizeof(struct uro_slot_record),
	};
	return fl;
}

/* Names are per registry directory, so that two registries (tests, or a
 * user's own UROCE_RUNTIME_DIR) number their slots apart, as they always
 * did. */
socklen_t uro_registry_name(const char *dir, const char *what, struct sockaddr_un *a)
{
	struct stat st;
	int n;

	if (stat(uro_registry_dir(dir), &st))
		return 0;
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "uroce-%llx:%llx-%s",
		     (unsigned long long)st.st_dev, (unsigned long long)st.st_ino, what);
	if (n < 0 || (size_t)n >= sizeof(a->sun_path) - 1)
		return 0;
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

socklen_t uro_registry_slot_name(const char *dir, unsigned slot, struct sockaddr_un *a)
{
	char what[32];

	snprintf(what, sizeof(what), "slot-%u", slot);
	return uro_registry_name(dir, what, a);
}

/* A socket bound to slot's name, or -1 (EADDRINUSE: somebody holds it).
 * SOCK_SEQPACKET, as the wire's relay listens on it (relay.h). */
static int bind_slot(const char *dir, unsigned slot)
{
	struct sockaddr_un a;
	socklen_t len = uro_registry_slot_name(dir, slot, &a);
	int fd;

	if (!len)
		return -1;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, len)) {
		int err = errno;

		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

int uro_registry_held(const char *dir, unsigned slot)
{
	int fd = bind_slot(dir, slot);

	if (fd >= 0)
		close(fd); /* it was free: let it go at once */
	return fd < 0 && errno == EADDRINUSE;
}

/* The slot must be free both in this user's file (a process of ours in
 * another network namespace may hold it) and among every user here. */
static int take(int fd, const char *dir, unsigned slot, struct uro_slot *s)
{
	struct flock fl = record_lock(F_WRLCK, slot);

	if (fcntl(fd, F_OFD_SETLK, &fl))
		return errno == EAGAIN || errno == EACCES ? 1 : -1;
	s->sock = bind_slot(dir, slot);
	if (s->sock >= 0) {
		s->fd = fd;
		s->slot = slot;
		return 0;
	}
	if (errno != EADDRINUSE)
		return -1;
	fl = record_lock(F_UNLCK, slot);
	(void)fcntl(fd, F_OFD_SETLK, &fl);
	return 1;
}

/* The first slots, tried in turn from after the last one this process
 * took (or from one its pid picks): a context opened after another closed
 * does not take its slot again at once, so its QPs do not take the closed
 * context's QP numbers, which a stale packet may still name
 * (index_pool.h). Only then the rest, lowest first: the registry file,
 * which a multicast sender reads whole, stays a few KiB long. */
#define URO_SLOT_TURN 64

static unsigned last_taken;

static unsigned nth_try(unsigned start, unsigned k)
{
	if (k < URO_SLOT_TURN - 1)
		return 1 + (start + k) % (URO_SLOT_TURN - 1);
	return k + 1;
}

int uro_registry_claim(const char *dir, struct uro_slot *s)
{
	int fd = open_registry(dir, O_RDWR | O_CREAT);
	unsigned start = __atomic_load_n(&last_taken, __ATOMIC_RELAXED);
	int rc = 1;

	if (fd < 0)
		return -1;
	if (!start)
		start = (unsigned)getpid();
	for (unsigned k = 0; k < URO_MAX_SLOTS - 1 && rc == 1; k++)
		rc = take(fd, dir, nth_try(start, k), s);
	if (rc == 0) {
		if (s->slot < URO_SLOT_TURN)
			__atomic_store_n(&last_taken, s->slot, __ATOMIC_RELAXED);
		return 0;
	}
	if (rc == 1) {
		uro_warn("no free uroce slot: all %u of this network namespace are held "
			 "(`uroce stat` lists this user's processes)",
			 URO_MAX_SLOTS - 1);
		errno = ENOSPC;
	}
	rc = errno;
	close(fd);
	errno = rc;
	return -1;
}

int uro_registry_publish(const struct uro_slot *s, const struct uro_slot_record *rec)
{
	off_t off = (off_t)s->slot * (off_t)sizeof(*rec);

	return pwrite(s->fd, rec, sizeof(*rec), off) == (ssize_t)sizeof(*rec) ? 0 : -1;
}

void uro_registry_release(struct uro_slot *s)
{
	struct uro_slot_record empty;

	if (s->fd < 0)
		return;
	memset(&empty, 0, sizeof(empty));
	(void)uro_registry_publish(s, &empty);
	close(s->fd); /* drops the lock */
	close(s->sock);
	s->fd = s->sock = -1;
}

int uro_registry_lookup(const char *dir, unsigned slot, struct uro_slot_record *rec)
{
	int fd = open_registry(dir, O_RDONLY);
	struct flock fl = record_lock(F_WRLCK, slot);
	int live;

	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	/* F_OFD_GETLK answers F_UNLCK when nobody holds the record. */
	if (slot == 0 || slot >= URO_MAX_SLOTS || fcntl(fd, F_OFD_GETLK, &fl)) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	live = fl.l_type != F_UNLCK;
	if (live && pread(fd, rec, sizeof(*rec), (off_t)slot * (off_t)sizeof(*rec)) !=
			(ssize_t)sizeof(*rec))
		memset(rec, 0, sizeof(*rec));
	close(fd);
	return live;
}

uint64_t uro_registry_netns(void)
{
	struct stat st;

	return stat("/proc/self/ns/net", &st) ? 0 : (uint64_t)st.st_ino;
}

/* The live owners of records naming the link, read in runs of records with
 * no allocation, each checked against its lock on the same fd: a multicast
 * sender calls this per datagram. A record is a claim, not proof: the
 * caller attaches each owner, and attaching checks it is who the kernel
 * says (peer.c). */
unsigned uro_registry_owners_of(const char *dir, uint64_t link_id, struct uro_slot_owner *out,
				unsigned max)
{
	struct uro_slot_record recs[64];
	int fd = open_registry(dir, O_RDONLY);
	unsigned n = 0;

	if (fd < 0)
		return 0;
	for (unsigned first = 0; first < URO_MAX_SLOTS && n < max; first += 64) {
		ssize_t got = pread(fd, recs, sizeof(recs), (off_t)first * (off_t)sizeof(recs[0]));

		if (got <= 0)
			break;
		for (unsigned i = 0; i < (size_t)got / sizeof(recs[0]) && n < max; i++) {
			struct flock fl = record_lock(F_WRLCK, first + i);

			if (first + i == 0 || recs[i].magic != URO_REGISTRY_MAGIC ||
			    recs[i].link_id != link_id || fcntl(fd, F_OFD_GETLK, &fl) ||
			    fl.l_type == F_UNLCK)
				continue;
			out[n].slot = first + i;
			out[n++].pid = recs[i].pid;
		}
		if ((size_t)got < sizeof(recs))
			break; /* the end of the file */
	}
	close(fd);
	return n;
}
