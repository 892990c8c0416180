/* Where uroce run's device view lives: a mount namespace private to the
 * program. /dev/infiniband and /sys/class/infiniband{,_verbs} do not exist
 * on a host without RDMA, and a new entry cannot be made in /dev or
 * /sys/class without changing the host for everyone; so the directory that
 * lacks them is covered, in the namespace only, by a tmpfs that holds bind
 * mounts of everything the directory held (submounts included: /dev/shm
 * stays the host's, so segments and the registry are shared with programs
 * outside) and the new entries beside them. Nothing else changes: the
 * program's uid, gid, pid and network namespace stay its own. As root
 * (CI, containers) the mount namespace is all there is, and cross-memory
 * attach to and from programs outside works as before; an unprivileged
 * user's needs a user namespace, with the limit user_namespace.c tells. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sysfs_view.h"
#include "user_namespace.h"

struct cover {
	const char *dir;
	int covered; /* our tmpfs is mounted on dir */
};

/* The tmpfs mounts made so far, so that a half-made view can be undone:
 * detaching one takes the bind mounts inside it along. */
struct mounts {
	char point[4][64]; /* at most /dev (or /dev/infiniband) and three in /sys/class */
	int n;
};

static int mount_tmpfs(struct mounts *m, const char *point, mode_t mode)
{
	char opts[32];
	size_t len = strlen(point);

	/* A point that would not fit could not be undone: refuse it before
	 * mounting rather than detach a truncated path later. */
	if (m->n == 4 || len >= sizeof(m->point[0]))
		return -1;
	snprintf(opts, sizeof(opts), "mode=%o", (unsigned)mode & 07777);
	if (mount("uroce", point, "tmpfs", MS_NOSUID, opts))
		return -1;
	memcpy(m->point[m->n++], point, len + 1);
	return 0;
}

static void undo(struct mounts *m)
{
	while (m->n > 0)
		umount2(m->point[--m->n], MNT_DETACH);
}

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -1;
}

/* A mount namespace, in the user's shared user namespace where we are not
 * privileged; mounts made in it never propagate back to the host. */
static int enter_namespaces(char *err, size_t len)
{
	if (unshare(CLONE_NEWNS)) {
		if (errno != EPERM)
			return fail(err, len, "unshare(CLONE_NEWNS): %s", strerror(errno));
		if (uro_userns_join(err, len))
			return -1;
		if (unshare(CLONE_NEWNS))
			return fail(err, len, "unshare(CLONE_NEWNS) in a user namespace: %s",
				    strerror(errno));
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL))
		return fail(err, len, "cannot make / a slave mount: %s", strerror(errno));
	return 0;
}

/* Recreates one entry of the covered directory (reached through old_fd) in
 * the tmpfs on top: a link as a link, anything else as a bind mount. */
static int carry_entry(int old_fd, const char *dir, const char *name)
{
	char src[PATH_MAX], dst[PATH_MAX], target[PATH_MAX];
	struct stat st;
	ssize_t n;
	int fd;

	if (fstatat(old_fd, name, &st, AT_SYMLINK_NOFOLLOW))
		return -1;
	snprintf(dst, sizeof(dst), "%s/%s", dir, name);
	if (S_ISLNK(st.st_mode)) {
		n = readlinkat(old_fd, name, target, sizeof(target) - 1);
		if (n < 0)
			return -1;
		target[n] = '\0';
		return symlink(target, dst);
	}
	if (S_ISDIR(st.st_mode)) {
		if (mkdir(dst, st.st_mode & 07777))
			return -1;
	} else {
		fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			return -1;
		close(fd);
	}
	/* The path through /proc/self/fd reaches the covered directory. */
	snprintf(src, sizeof(src), "/proc/self/fd/%d/%s", old_fd, name);
	return mount(src, dst, NULL, MS_BIND | MS_REC, NULL);
}

static int carry_all(int old_fd, const char *dir, char *err, size_t len)
{
	int list_fd = dup(old_fd);
	DIR *d = list_fd < 0 ? NULL : fdopendir(list_fd);
	struct dirent *e;
	int rc = 0;

	if (!d)
		return fail(err, len, "cannot list %s: %s", dir, strerror(errno));
	while (!rc && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			if (carry_entry(old_fd, dir, e->d_name))
				rc = fail(err, len, "cannot carry %s/%s into the view: %s", dir,
					  e->d_name, strerror(errno));
	closedir(d);
	return rc;
}

/* A tmpfs on c->dir holding what c->dir held. */
static int cover_dir(struct mounts *m, struct cover *c, char *err, size_t len)
{
	struct stat st;
	int old_fd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc;

	if (old_fd < 0 || fstat(old_fd, &st)) {
		rc = fail(err, len, "cannot open %s: %s", c->dir, strerror(errno));
		goto out;
	}
	if (mount_tmpfs(m, c->dir, st.st_mode)) {
		rc = fail(err, len, "cannot mount a tmpfs on %s: %s", c->dir, strerror(errno));
		goto out;
	}
	c->covered = 1;
	rc = carry_all(old_fd, c->dir, err, len);
out:
	if (old_fd >= 0)
		close(old_fd);
	return rc;
}

/* An empty directory parent/name of our own: a tmpfs over the one that
 * exists (a host with RDMA hardware, or an outer view: under uroce run the
 * devices are uroce's alone), else a new one in the covered parent. */
static int own_dir(struct mounts *m, struct cover *parent, const char *name, char *err, size_t len)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", parent->dir, name);
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		if (mount_tmpfs(m, path, 0755))
			return fail(err, len, "cannot mount a tmpfs on %s: %s", path,
				    strerror(errno));
		return 0;
	}
	if (!parent->covered && cover_dir(m, parent, err, len))
		return -1;
	if (mkdir(path, 0755))
		return fail(err, len, "cannot make %s: %s", path, strerror(errno));
	return 0;
}

/* The uverbs character devices UCX stats and checks for read and write
 * access, and rdma_cm: /dev/null stands for each, since uroce's libraries
 * never open them and a program that writes to one loses nothing. */
static int make_nodes(const struct uro_config *cfg, char *err, size_t len)
{
	char path[64];

	for (int i = 0; i <= cfg->n; i++) {
		int fd;

		if (i < cfg->n)
			snprintf(path, sizeof(path), "/dev/infiniband/uverbs%d", i);
		else
			snprintf(path, sizeof(path), "/dev/infiniband/rdma_cm");
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			return fail(err, len, "cannot make %s: %s", path, strerror(errno));
		close(fd);
		if (mount("/dev/null", path, NULL, MS_BIND, NULL))
			return fail(err, len, "cannot bind /dev/null on %s: %s", path,
				    strerror(errno));
	}
	return 0;
}

static int build(struct mounts *m, const struct uro_config *cfg, char *err, size_t len)
{
	struct cover dev = {.dir = "/dev"};
	struct cover class = {.dir = "/sys/class"};
	int class_fd, rc;

	if (own_dir(m, &dev, "infiniband", err, len) || make_nodes(cfg, err, len))
		return -1;
	if (own_dir(m, &class, "infiniband", err, len) ||
	    own_dir(m, &class, "infiniband_verbs", err, len))
		return -1;
	class_fd = open(class.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (class_fd < 0)
		return fail(err, len, "cannot open %s: %s", class.dir, strerror(errno));
	rc = uro_sysfs_view_write(class_fd, cfg);
	close(class_fd);
	return rc ? fail(err, len, "cannot write the sysfs view: %s", strerror(errno)) : 0;
}

int uro_view_enter(const struct uro_config *cfg, char *err, size_t errlen)
{
	struct mounts m = {.n = 0};

	if (enter_namespaces(err, errlen))
		return -1;
	if (build(&m, cfg, err, errlen)) {
		undo(&m);
		return -1;
	}
	return 0;
}
