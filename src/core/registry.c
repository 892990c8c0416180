#include "registry.h"

#include <errno.h>
#include <fcntl.h>
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

/* The registry is shared by every user, so anyone may have made what is
 * at its path: a link to a file of ours, a FIFO, a file of theirs. Links
 * are never followed, only a plain world-writable file with one name is
 * used, and only a file this call created is chmodded (umask must not
 * narrow it). */
static int open_registry(const char *dir, int flags)
{
	char path[4096];
	struct stat st;
	int fd = -1;

	snprintf(path, sizeof(path), "%s/uroce-registry", uro_registry_dir(dir));
	if (flags & O_CREAT) {
		fd = open(path, flags | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
		if (fd >= 0) {
			(void)fchmod(fd, 0666);
			return fd;
		}
		if (errno != EEXIST)
			return -1;
	}
	fd = open(path, (flags & ~O_CREAT) | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno != ELOOP)
		return -1;
	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
	    (st.st_mode & 07777) != 0666) {
		if (fd >= 0)
			close(fd);
		uro_warn("%s is not a registry uroce can trust (a link, not a plain file, or not "
			 "world-writable 0666); remove it, or set UROCE_RUNTIME_DIR",
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

int uro_registry_claim(const char *dir, struct uro_slot *s)
{
	int fd = open_registry(dir, O_RDWR | O_CREAT);

	if (fd < 0)
		return -1;
	for (unsigned slot = 1; slot < URO_MAX_SLOTS; slot++) {
		struct flock fl = record_lock(F_WRLCK, slot);

		if (fcntl(fd, F_OFD_SETLK, &fl) == 0) {
			s->fd = fd;
			s->slot = slot;
			return 0;
		}
		if (errno != EAGAIN && errno != EACCES)
			break;
	}
	close(fd);
	errno = errno == EAGAIN || errno == EACCES ? ENOSPC : errno;
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
	s->fd = -1;
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

/* The live owners of records naming device, read in runs of records with
 * no allocation, each checked against its lock on the same fd: a multicast
 * sender calls this per datagram. A record is a claim, not proof: the
 * caller attaches each owner, and attaching checks it is who the kernel
 * says (peer.c). */
unsigned uro_registry_owners_of(const char *dir, const char *device, struct uro_slot_owner *out,
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
			    strncmp(recs[i].device, device, sizeof(recs[i].device)) ||
			    fcntl(fd, F_OFD_GETLK, &fl) || fl.l_type == F_UNLCK)
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
