#include "own_userns.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "process_policy.h"

static int write_text(const char *file, const char *text)
{
	int fd = open(file, O_WRONLY | O_CLOEXEC);
	ssize_t n;
	int err;

	if (fd < 0)
		return -1;
	n = write(fd, text, strlen(text));
	err = errno;
	close(fd);
	errno = err;
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* user_namespaces(7): an unprivileged process may map its own ids, once
 * setgroups is denied. */
int uro_userns_unshare_own(uid_t uid, gid_t gid, const char **step)
{
	char map[64];

	*step = "unshare(CLONE_NEWUSER)";
	if (unshare(CLONE_NEWUSER))
		return -1;
	*step = "writing uid_map";
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	if (write_text("/proc/self/uid_map", map))
		return -1;
	*step = "writing setgroups";
	if (write_text("/proc/self/setgroups", "deny\n"))
		return -1;
	*step = "writing gid_map";
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	return write_text("/proc/self/gid_map", map);
}

/* The steps, numbered for the child's report. */
static const char *const steps[] = {"unshare(CLONE_NEWNS)",
				    "unshare(CLONE_NEWUSER)",
				    "writing uid_map",
				    "writing setgroups",
				    "writing gid_map",
				    "unshare(CLONE_NEWNS) in the user namespace",
				    "fork"};

static int step_index(const char *step)
{
	for (unsigned i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		if (!strcmp(steps[i], step))
			return (int)i;
	return 0;
}

struct report {
	int way, err, step;
};

static struct report try_view(void)
{
	struct report r = {URO_VIEW_DIRECT, 0, 0};
	const char *step;

	if (!unshare(CLONE_NEWNS))
		return r;
	if (errno != EPERM)
		return (struct report){URO_VIEW_NONE, errno, 0};
	if (uro_userns_unshare_own(getuid(), getgid(), &step))
		return (struct report){URO_VIEW_NONE, errno, step_index(step)};
	if (unshare(CLONE_NEWNS))
		return (struct report){URO_VIEW_NONE, errno, 5};
	return (struct report){URO_VIEW_USERNS, 0, 0};
}

void uro_userns_probe(struct uro_userns_facts *f)
{
	struct report r = {URO_VIEW_NONE, ECHILD, 6};
	int p[2];
	pid_t child;

	if (pipe2(p, O_CLOEXEC)) {
		uro_userns_facts(errno, steps[6], f);
		return;
	}
	child = fork();
	if (child == 0) {
		r = try_view();
		_exit(write(p[1], &r, sizeof(r)) != sizeof(r));
	}
	close(p[1]);
	if (child < 0 || read(p[0], &r, sizeof(r)) != sizeof(r))
		r = (struct report){URO_VIEW_NONE, child < 0 ? errno : ECHILD, 6};
	close(p[0]);
	if (child > 0)
		waitpid(child, NULL, 0);
	uro_userns_facts(r.err, steps[r.step], f);
	f->way = (enum uro_view_way)r.way;
}

void uro_userns_facts(int err, const char *step, struct uro_userns_facts *f)
{
	memset(f, 0, sizeof(*f));
	f->way = URO_VIEW_NONE;
	f->err = err;
	f->step = step;
	f->max_userns = uro_proc_number("/proc/sys/user/max_user_namespaces");
	f->unpriv_clone = uro_proc_number("/proc/sys/kernel/unprivileged_userns_clone");
	f->apparmor = uro_proc_number("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
	f->seccomp = uro_seccomp_mode(NULL);
}

void uro_userns_diagnose(const struct uro_userns_facts *f, struct uro_diagnosis *d)
{
	if (f->way == URO_VIEW_DIRECT) {
		uro_diagnose(d, NULL,
			     "a mount namespace of its own (CAP_SYS_ADMIN): no user "
			     "namespace needed");
	} else if (f->way == URO_VIEW_USERNS) {
		uro_diagnose(d, NULL,
			     "an unprivileged user namespace, and a mount namespace in it");
	} else if (f->max_userns == 0) {
		uro_diagnose(d, "as root: sysctl user.max_user_namespaces=15000",
			     "user.max_user_namespaces is 0: no user namespaces at all (%s: %s)",
			     f->step, strerror(f->err));
	} else if (f->unpriv_clone == 0) {
		uro_diagnose(d, "as root: sysctl kernel.unprivileged_userns_clone=1",
			     "kernel.unprivileged_userns_clone is 0: only root may make one (%s: "
			     "%s)",
			     f->step, strerror(f->err));
	} else if (f->apparmor == 1) {
		uro_diagnose(d,
			     "an AppArmor profile granting 'userns,' to uroce, or as root: sysctl "
			     "kernel.apparmor_restrict_unprivileged_userns=0",
			     "AppArmor restricts unprivileged user namespaces (%s: %s)", f->step,
			     strerror(f->err));
	} else if (f->err == ENOSPC) {
		uro_diagnose(d,
			     "end some of this user's namespaces, or raise "
			     "user.max_user_namespaces (root)",
			     "this user has as many user namespaces as user.max_user_namespaces "
			     "(%ld) allows",
			     f->max_userns);
	} else if (f->seccomp == 2 && f->err == EPERM) {
		uro_diagnose(d,
			     "in a container: a seccomp profile that allows unshare and clone "
			     "with CLONE_NEWUSER, or run as root",
			     "a seccomp filter refuses it (%s: %s): a container's profile", f->step,
			     strerror(f->err));
	} else {
		uro_diagnose(d, "run as root, or where unprivileged user namespaces are allowed",
			     "%s: %s (chrooted, or a security module refuses it)", f->step,
			     strerror(f->err));
	}
}
