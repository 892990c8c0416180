#include "shareable.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

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

static int names(int fd, const struct uro_mapping *m)
{
	struct stat st;

	return !fstat(fd, &st) && st.st_dev == makedev(m->major, m->minor) &&
	       (uint64_t)st.st_ino == m->ino;
}

/* A descriptor of this process's on the mapping's object: its path opened
 * again, or, for a memfd or a file since removed, a descriptor the program
 * still holds on it (dup'ed: the program may close its own). -1 when the
 * object can be reached neither way. */
static int object_fd(const struct uro_mapping *m)
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

/* t's descriptor on m's object, one more region on it; or a new one. */
static int share_fd_get(struct uro_share_fds *t, const struct uro_mapping *m)
{
	uint64_t dev = makedev(m->major, m->minor);
	struct uro_share_fd *e;
	int fd;

	for (unsigned i = 0; i < t->n; i++)
		if (t->e[i].dev == dev && t->e[i].ino == m->ino) {
			t->e[i].refs++;
			return t->e[i].fd;
		}
	e = realloc(t->e, (t->n + 1) * sizeof(*e));
	if (!e)
		return -1;
	t->e = e;
	fd = object_fd(m);
	if (fd < 0)
		return -1;
	t->e[t->n++] = (struct uro_share_fd){.dev = dev, .ino = m->ino, .fd = fd, .refs = 1};
	return fd;
}

void uro_share_fd_put(struct uro_share_fds *t, int fd)
{
	for (unsigned i = 0; fd >= 0 && i < t->n; i++) {
		if (t->e[i].fd != fd || --t->e[i].refs)
			continue;
		close(fd);
		t->e[i] = t->e[--t->n];
		return;
	}
}

void uro_share_fds_close(struct uro_share_fds *t)
{
	for (unsigned i = 0; i < t->n; i++)
		close(t->e[i].fd);
	free(t->e);
	t->e = NULL;
	t->n = 0;
}

int uro_shareable_find(struct uro_share_fds *t, const struct uro_mapping *m, const void *addr,
		       size_t len, struct uro_seg_share *s, int *fd)
{
	uintptr_t a = (uintptr_t)addr;
	struct stat st;

	memset(s, 0, sizeof(*s));
	*fd = -1;
	if (!uro_direct_enabled() || !len || !m->start || a < m->start || a + len > m->end ||
	    !m->shared || !m->readable || !m->writable)
		return -1;
	s->offset = m->offset + (a - m->start);
	s->dev = makedev(m->major, m->minor);
	s->ino = m->ino;
	/* System V memory is named by its shmid, which the kernel gives its
	 * file as inode number (ipc/shm.c), and shows as /SYSV<key>. */
	if (!strncmp(m->path, "/SYSV", 5)) {
		s->kind = URO_SHARE_SYSV;
		s->id = (int32_t)m->ino;
		return m->ino <= INT32_MAX ? 0 : (s->kind = URO_SHARE_NONE, -1);
	}
	*fd = share_fd_get(t, m);
	if (*fd < 0 || fstat(*fd, &st) || (uint64_t)st.st_size < s->offset + len) {
		uro_share_fd_put(t, *fd);
		*fd = -1;
		return -1;
	}
	s->kind = URO_SHARE_FD;
	s->id = *fd;
	return 0;
}
