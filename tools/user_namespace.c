/* The user namespace in which an unprivileged user's device views live.
 *
 * Without CAP_SYS_ADMIN a mount namespace can only be made inside a user
 * namespace of one's own, and the kernel lets a process read or write
 * another's memory across user namespaces only downwards: the target must
 * be in the caller's namespace or in one the caller's user owns from
 * outside (capabilities(7), the commoncap ptrace check behind
 * process_vm_writev). Two programs each in a namespace of its own could
 * never reach each other. So every `uroce run` of one user joins the same
 * user namespace, where the user is who it is (its own uid and gid mapped
 * to themselves), held by a small process named uroce-userns that leaves
 * once no member is left. A program outside it can still reach the
 * programs inside; a program inside cannot reach one started outside. */
#include "user_namespace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "own_userns.h"
#include "registry.h"

#define HOLDER_NAME	"uroce-userns"
#define HOLDER_CHECK_US 2000000 /* how often the holder looks for members */

static int read_text(const char *file, char *buf, size_t len)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

/* "uid uid 1" as /proc/PID/uid_map prints it, whatever the spacing. */
static int maps_self(pid_t pid, const char *which, unsigned id)
{
	char path[64], text[128];
	unsigned a, b, n;
	char extra;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, which);
	if (read_text(path, text, sizeof(text)))
		return 0;
	return sscanf(text, " %u %u %u %c", &a, &b, &n, &extra) == 3 && a == id && b == id &&
	       n == 1;
}

/* The recorded holder is believed only if the kernel says it is one: ours,
 * named so, in a namespace that maps exactly our ids. */
static int is_holder(pid_t pid)
{
	char path[64], comm[32];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (pid <= 0 || stat(path, &st) || st.st_uid != geteuid())
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	if (read_text(path, comm, sizeof(comm)) || strcmp(comm, HOLDER_NAME "\n"))
		return 0;
	return maps_self(pid, "uid_map", geteuid()) && maps_self(pid, "gid_map", getegid());
}

/* Members of our namespace other than us: the processes whose
 * /proc/PID/ns/user we may read (the kernel refuses those outside) and
 * which name our namespace. */
static int count_members(void)
{
	char self[64], link[64], path[288];
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;
	ssize_t len;

	len = readlink("/proc/self/ns/user", self, sizeof(self) - 1);
	if (!d || len < 0) {
		if (d)
			closedir(d);
		return 1; /* cannot tell: stay */
	}
	self[len] = '\0';
	while ((e = readdir(d))) {
		pid_t pid = (pid_t)atoi(e->d_name);

		if (pid <= 0 || pid == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%s/ns/user", e->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		if (len < 0)
			continue;
		link[len] = '\0';
		n += !strcmp(link, self);
	}
	closedir(d);
	return n;
}

/* The holder: in the namespace, detached from the caller's session and
 * files, it checks under the record's lock, so that no run joins while it
 * decides to go, and goes when it is alone. */
static void hold(const char *record, int ready_fd)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	int fd;

	prctl(PR_SET_NAME, HOLDER_NAME);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
	}
	/* Whatever it inherited, the record's locked description first, would
	 * stay open for as long as it lives. */
	if (ready_fd > 3)
		close_range(3, (unsigned)ready_fd - 1, 0);
	close_range((unsigned)ready_fd + 1, ~0u, 0);
	fd = open(record, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || write(ready_fd, "1", 1) != 1)
		_exit(1);
	close(ready_fd);
	if (chdir("/"))
		_exit(1);
	for (;;) {
		usleep(HOLDER_CHECK_US);
		if (flock(fd, LOCK_EX))
			continue;
		if (count_members() == 0) {
			if (ftruncate(fd, 0)) {
				/* the record names a dead pid: is_holder refuses it */
			}
			_exit(0);
		}
		flock(fd, LOCK_UN);
	}
}

/* Starts a holder (a grandchild, so that the program this process becomes
 * never sees it as a child) and returns its pid, or -1. */
static pid_t spawn_holder(const char *record)
{
	int p[2];
	pid_t child, holder = -1;
	uid_t uid = geteuid(); /* inside, unmapped, they read as the overflow ids */
	gid_t gid = getegid();
	int status;
	char ok = 0;

	if (pipe2(p, O_CLOEXEC))
		return -1;
	child = fork();
	if (child == 0) {
		pid_t g;

		const char *step;

		close(p[0]);
		if (setsid() < 0 || uro_userns_unshare_own(uid, gid, &step))
			_exit(1);
		g = fork();
		if (g < 0)
			_exit(1);
		if (g > 0)
			_exit(write(p[1], &g, sizeof(g)) == sizeof(g) ? 0 : 1);
		hold(record, p[1]);
	}
	close(p[1]);
	if (child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 0 && read(p[0], &holder, sizeof(holder)) == sizeof(holder) &&
	    read(p[0], &ok, 1) == 1 && ok == '1') {
		close(p[0]);
		return holder;
	}
	close(p[0]);
	if (holder > 0)
		kill(holder, SIGKILL);
	return -1;
}

/* The record: one file per user beside the registry, never another's. */
static int open_record(char *path, size_t len)
{
	struct stat st;
	int fd;

	snprintf(path, len, "%s/uroce-userns-%u", uro_registry_dir(NULL), (unsigned)geteuid());
	fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077)) {
		close(fd);
		errno = EPERM;
		return -1;
	}
	return fd;
}

static int join(pid_t holder)
{
	char path[64];
	int fd, rc;

	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)holder);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = setns(fd, CLONE_NEWUSER);
	close(fd);
	return rc;
}

/* Why the holder could not be started, asked again of a child that tries
 * the same steps, as `uroce doctor` asks it. */
static void no_userns(pid_t holder, char *err, size_t len)
{
	struct uro_userns_facts f;
	struct uro_diagnosis d;
	int saved = errno;

	if (holder > 0) {
		snprintf(err, len, "cannot record the user namespace's holder: %s",
			 strerror(saved));
		return;
	}
	uro_userns_probe(&f);
	if (f.way != URO_VIEW_NONE) {
		snprintf(err, len, "no unprivileged user namespaces here: %s", strerror(saved));
		return;
	}
	uro_userns_diagnose(&f, &d);
	snprintf(err, len, "no unprivileged user namespaces here: %s; %s", d.why, d.remedy);
}

int uro_userns_join(char *err, size_t len)
{
	char path[256], text[32] = "";
	pid_t holder;
	ssize_t n;
	int fd = open_record(path, sizeof(path));

	if (fd < 0) {
		snprintf(err, len, "%s/uroce-userns-%u is not a file of this user's: %s",
			 uro_registry_dir(NULL), (unsigned)geteuid(), strerror(errno));
		return -1;
	}
	flock(fd, LOCK_EX);
	n = pread(fd, text, sizeof(text) - 1, 0);
	holder = n > 0 ? (pid_t)atoi(text) : 0;
	if (!is_holder(holder)) {
		holder = spawn_holder(path);
		n = holder > 0 ? snprintf(text, sizeof(text), "%d\n", (int)holder) : 0;
		if (holder <= 0 || ftruncate(fd, 0) || pwrite(fd, text, (size_t)n, 0) != n) {
			no_userns(holder, err, len);
			close(fd);
			return -1;
		}
	}
	if (join(holder)) {
		snprintf(err, len, "cannot join user namespace of pid %d: %s", (int)holder,
			 strerror(errno));
		close(fd);
		return -1;
	}
	close(fd); /* the lock goes with it: we are a member now */
	return 0;
}
