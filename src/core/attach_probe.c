#include "attach_probe.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attach_path.h"
#include "process_policy.h"

/* Read by the probes' children at the address fork gave both. */
static volatile char probe_byte = 0x5a;

int uro_attach_read(pid_t pid)
{
	char c = 0;
	struct iovec l = {.iov_base = &c, .iov_len = 1};
	struct iovec r = {.iov_base = (void *)&probe_byte, .iov_len = 1};
	ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);

	if (n < 0)
		return errno;
	return n == 1 && c == probe_byte ? 0 : EFAULT;
}

int uro_userns_differs(pid_t pid)
{
	char path[64], self[64], other[64];
	ssize_t a, b;

	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	a = readlink("/proc/self/ns/user", self, sizeof(self) - 1);
	b = readlink(path, other, sizeof(other) - 1);
	/* The kernel hides another namespace's link from us: that says it. */
	if (a < 0 || b < 0)
		return b < 0 && (errno == EACCES || errno == EPERM);
	self[a] = other[b] = '\0';
	return strcmp(self, other) != 0;
}

void uro_attach_facts(int err, pid_t target, struct uro_attach_facts *f)
{
	char path[64];
	struct stat st;

	memset(f, 0, sizeof(*f));
	f->err = err;
	f->self_err = uro_attach_read(getpid());
	f->yama = uro_yama_scope();
	f->seccomp = uro_seccomp_mode(NULL);
	snprintf(path, sizeof(path), "/proc/%d", (int)target);
	f->other_user = !stat(path, &st) && st.st_uid != getuid();
	f->other_userns = uro_userns_differs(target);
}

/* The target waits for the parent to let it go; the prober reads it and
 * reports. The facts are gathered while the target still lives. */
int uro_attach_probe(struct uro_attach_facts *f)
{
	int hold[2], res[2], err = ECHILD;
	pid_t target, prober = -1;

	if (pipe2(hold, O_CLOEXEC))
		return errno;
	if (pipe2(res, O_CLOEXEC)) {
		close(hold[0]);
		close(hold[1]);
		return errno;
	}
	target = fork();
	if (target == 0) {
		char c;

		/* Not the result pipe: a prober that dies without writing must
		 * leave its reader an end of file, not a target holding it. */
		close(res[0]);
		close(res[1]);
		close(hold[1]);
		/* As a uroce program grants it at its first open. */
		uro_attach_grant();
		_exit(read(hold[0], &c, 1) < 0);
	}
	if (target > 0)
		prober = fork();
	if (prober == 0) {
		int e = uro_attach_read(target);

		_exit(write(res[1], &e, sizeof(e)) != sizeof(e));
	}
	close(res[1]);
	if (prober > 0 && read(res[0], &err, sizeof(err)) != sizeof(err))
		err = ECHILD;
	if (target > 0)
		uro_attach_facts(err, target, f);
	else
		uro_attach_facts(errno, getpid(), f);
	close(hold[1]);
	close(hold[0]);
	close(res[0]);
	if (prober > 0)
		waitpid(prober, NULL, 0);
	if (target > 0)
		waitpid(target, NULL, 0);
	return f->err;
}

static enum uro_attach_cause yama(const struct uro_attach_facts *f, struct uro_diagnosis *d)
{
	if (f->yama == 1)
		uro_diagnose(d,
			     "leave UROCE_PTRACER unset, or as root: sysctl "
			     "kernel.yama.ptrace_scope=0",
			     "Yama's ptrace_scope is 1: a process may attach only to its own "
			     "descendants and to those that allow it, which UROCE_PTRACER=0 "
			     "keeps uroce's programs from doing");
	else if (f->yama == 2)
		uro_diagnose(d,
			     "as root: sysctl kernel.yama.ptrace_scope=0, or run the programs "
			     "with CAP_SYS_PTRACE (as root)",
			     "Yama's ptrace_scope is 2: only a process with CAP_SYS_PTRACE may "
			     "attach to another");
	else
		uro_diagnose(d,
			     "ptrace_scope 3 cannot be lowered until reboot: set "
			     "kernel.yama.ptrace_scope=0 in /etc/sysctl.d and reboot",
			     "Yama's ptrace_scope is %d: no process may attach to another",
			     f->yama);
	return URO_ATTACH_YAMA;
}

static enum uro_attach_cause refused(const struct uro_attach_facts *f, struct uro_diagnosis *d)
{
	if (f->self_err && f->seccomp == 2) {
		uro_diagnose(d,
			     "in a container: --cap-add SYS_PTRACE (Docker's default profile then "
			     "allows it) or a seccomp profile that allows process_vm_readv and "
			     "process_vm_writev",
			     "a seccomp filter refuses process_vm_readv/writev, even towards "
			     "this process itself: a container's profile");
		return URO_ATTACH_SECCOMP;
	}
	if (f->self_err) {
		uro_diagnose(d, "allow ptrace read access in the profile confining this program",
			     "refused even towards this process itself, with no seccomp filter: "
			     "a security module (AppArmor, SELinux) forbids it");
		return URO_ATTACH_LSM;
	}
	if (f->other_user) {
		uro_diagnose(d, "run both programs as the same user",
			     "the other process belongs to another user (or is not dumpable)");
		return URO_ATTACH_OTHER_USER;
	}
	if (f->other_userns) {
		uro_diagnose(d, "start both programs with uroce run, or both with UROCE_VIEW=0",
			     "the other process is in a user namespace this one is not in (a "
			     "program in uroce run's device view cannot reach one started "
			     "outside it)");
		return URO_ATTACH_USERNS;
	}
	if (f->yama >= 1)
		return yama(f, d);
	uro_diagnose(d, "look for a security module's denial in the kernel log (dmesg)",
		     "refused (%s) with no Yama, no seccomp filter and the same user: the "
		     "other process is not dumpable, or a security module refuses it",
		     strerror(f->err));
	return URO_ATTACH_UNKNOWN;
}

enum uro_attach_cause uro_attach_diagnose(const struct uro_attach_facts *f, struct uro_diagnosis *d)
{
	switch (f->err) {
	case 0:
		uro_diagnose(d, NULL, "works between two sibling processes");
		return URO_ATTACH_OK;
	case ESRCH:
		uro_diagnose(d, NULL, "the other process has exited");
		return URO_ATTACH_GONE;
	case ENOSYS:
		if (f->seccomp == 2) {
			uro_diagnose(d,
				     "in a container: a seccomp profile that allows "
				     "process_vm_readv and process_vm_writev",
				     "a seccomp filter answers ENOSYS for process_vm_readv/writev");
			return URO_ATTACH_SECCOMP;
		}
		uro_diagnose(d, "a kernel built with CONFIG_CROSS_MEMORY_ATTACH",
			     "this kernel was built without CONFIG_CROSS_MEMORY_ATTACH (ENOSYS)");
		return URO_ATTACH_NO_SYSCALL;
	case EPERM:
	case EACCES:
		return refused(f, d);
	default:
		uro_diagnose(d, NULL, "refused: %s", strerror(f->err));
		return URO_ATTACH_UNKNOWN;
	}
}
