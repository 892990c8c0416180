#include "shareable.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* One line of /proc/self/maps (proc(5)): "start-end perms offset dev inode
 * path". */
struct mapping {
	uintptr_t start, end;
	char perms[5];
	uint64_t offset, ino;
	unsigned major, minor;
	char path[4096];
};

int uro_direct_enabled(void)
{
	static int enabled = -1;
	int e = __atomic_load_n(&enabled, __ATOMIC_RELAXED);

	if (e < 0) {
		const char *v = getenv("UROCE_DIRECT");

		e = !(v && !strcmp(v, "0"));
		__atomic_store_n(&enabled, e, __ATOMIC_RELAXED);
	}
	return e;
}

/* The mapping that holds addr, or -1. */
static int mapping_of(uintptr_t addr, struct mapping *m)
{
	char line[4096 + 128];
	FILE *f = fopen("/proc/self/maps", "re");
	int found = -1;

	if (!f)
		return -1;
	while (found && fgets(line, sizeof(line), f)) {
		int at = 0;

		m->path[0] = 0;
		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s %" SCNx64 " %x:%x %" SCNu64 " %n",
			   &m->start, &m->end, m->perms, &m->offset, &m->major, &m->minor, &m->ino,
			   &at) < 7)
			continue;
		if (addr < m->start || addr >= m->end)
			continue;
		snprintf(m->path, sizeof(m->path), "%s", line + at);
		m->path[strcspn(m->path, "\n")] = 0;
		found = 0;
	}
	fclose(f);
	return found;
}

static int names(int fd, const struct mapping *m)
{
	struct stat st;

	return !fstat(fd, &st) && st.st_dev == makedev(m->major, m->minor) &&
	       (uint64_t)st.st_ino == m->ino;
}

/* A descriptor of this process's on the mapping's object: its path opened
 * again, or, for a memfd or a file since removed, a descriptor the program
 * still holds on it (dup'ed: the program may close its own). -1 when the
 * object can be reached neither way. */
static int object_fd(const struct mapping *m)
{
	const char *deleted = strstr(m->path, " (deleted)");
	struct dirent *d;
	DIR *dir;
	int fd = -1;

	if (m->path[0] == '/' && !deleted) {
		fd = open(m->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		if (fd >= 0 && names(fd, m))
			return fd;
		if (fd >= 0)
			close(fd);
	}
	dir = opendir("/proc/self/fd");
	if (!dir)
		return -1;
	fd = -1;
	while (fd < 0 && (d = readdir(dir))) {
		int n = atoi(d->d_name);
		int flags = fcntl(n, F_GETFL);

		if (d->d_name[0] == '.' || n == dirfd(dir) || flags < 0 ||
		    (flags & O_ACCMODE) != O_RDWR || !names(n, m))
			continue;
		fd = fcntl(n, F_DUPFD_CLOEXEC, 0);
	}
	closedir(dir);
	return fd;
}

int uro_shareable_find(const void *addr, size_t len, struct uro_seg_share *s, int *fd)
{
	uintptr_t a = (uintptr_t)addr;
	struct mapping m;
	struct stat st;

	memset(s, 0, sizeof(*s));
	*fd = -1;
	if (!uro_direct_enabled() || !len || mapping_of(a, &m) || a + len > m.end ||
	    m.perms[3] != 's' || m.perms[0] != 'r' || m.perms[1] != 'w')
		return -1;
	s->offset = m.offset + (a - m.start);
	s->dev = makedev(m.major, m.minor);
	s->ino = m.ino;
	/* System V memory is named by its shmid, which the kernel gives its
	 * file as inode number (ipc/shm.c), and shows as /SYSV<key>. */
	if (!strncmp(m.path, "/SYSV", 5)) {
		s->kind = URO_SHARE_SYSV;
		s->id = (int32_t)m.ino;
		return m.ino <= INT32_MAX ? 0 : (s->kind = URO_SHARE_NONE, -1);
	}
	*fd = object_fd(&m);
	if (*fd < 0 || fstat(*fd, &st) || (uint64_t)st.st_size < s->offset + len) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		return -1;
	}
	s->kind = URO_SHARE_FD;
	s->id = *fd;
	return 0;
}
