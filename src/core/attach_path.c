#include "attach_path.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attach_probe.h"
#include "self_pid.h"

int uro_attach_grant(void)
{
	const char *opt = getenv("UROCE_PTRACER");

	if (opt && !strcmp(opt, "0"))
		return EPERM;
	/* Yama (Documentation/admin-guide/LSM/Yama.rst): at ptrace_scope 1 a
	 * process may attach only to its descendants, unless the target
	 * declared a ptracer; PR_SET_PTRACER_ANY declares every process that
	 * passes the other checks (same user, dumpable, or CAP_SYS_PTRACE).
	 * process_vm_readv/writev check PTRACE_MODE_ATTACH_REALCREDS
	 * (mm/process_vm_access.c), which Yama's hook judges. Scopes 2 and 3
	 * ignore the declaration. Without Yama the call fails with EINVAL
	 * (PR_SET_PTRACER(2const)) and nothing needed granting. */
	return prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) ? errno : 0;
}

/* The child: reads its parent, reports, and waits to be read in turn
 * until the parent ends it. Only system calls: it is a copy of a
 * possibly multithreaded process made without fork(3). */
static __attribute__((noreturn)) void child(pid_t parent, int res, int hold)
{
	int e = uro_attach_read(parent);
	char c;

	if (write(res, &e, sizeof(e)) != sizeof(e))
		_exit(1);
	_exit(read(hold, &c, 1) < 0);
}

int uro_attach_self_probe(void)
{
	int res[2], hold[2], err = ECHILD;
	pid_t parent = getpid(), pid;

	if (pipe2(res, O_CLOEXEC))
		return errno;
	if (pipe2(hold, O_CLOEXEC)) {
		err = errno;
		close(res[0]);
		close(res[1]);
		return err;
	}
	/* A raw clone with no exit signal, not fork(3): the program's atfork
	 * handlers do not run, its SIGCHLD handler hears nothing and its
	 * waitpid(-1) does not reap the child, which only __WCLONE waits for
	 * (clone(2)). No CLONE_VM: a process sharing the memory would pass
	 * the kernel's check without being judged (mm_access). */
	pid = (pid_t)syscall(SYS_clone, 0UL, NULL, NULL, NULL, NULL);
	if (pid == 0) {
		close(res[0]);
		close(hold[1]);
		child(parent, res[1], hold[0]);
	}
	if (pid < 0)
		err = errno;
	close(res[1]);
	close(hold[0]);
	if (pid > 0 && read(res[0], &err, sizeof(err)) != sizeof(err))
		err = ECHILD;
	/* The other way too: a filter may refuse only some targets. */
	if (pid > 0 && !err)
		err = uro_attach_read(pid);
	/* Ended by SIGKILL from here, which nothing in the child can act on:
	 * its own exit, under valgrind, first runs memcheck's leak check over
	 * the whole copied address space (2-3 s here, which every
	 * ibv_open_device waited for; valgrind_rsocket's forked servers then
	 * answered their first datagram too late for its sender). */
	if (pid > 0)
		kill(pid, SIGKILL);
	close(hold[1]);
	close(res[0]);
	if (pid > 0)
		while (waitpid(pid, NULL, __WCLONE) < 0 && errno == EINTR)
			;
	return err;
}

/* Decided for one process: a forked child inherits a seccomp filter but
 * not Yama's grant (an exception names the task that made it), so a child
 * that opens a device decides again. */
static pthread_mutex_t deciding = PTHREAD_MUTEX_INITIALIZER;
static uint32_t decided_for; /* the pid the answer is for, 0 before */
static int refused_err;

int uro_attach_refused(void)
{
	uint32_t self = uro_self_pid();

	if (__atomic_load_n(&decided_for, __ATOMIC_ACQUIRE) == self)
		return refused_err;
	pthread_mutex_lock(&deciding);
	if (decided_for != self) {
		uro_attach_grant();
		refused_err = uro_attach_self_probe();
		__atomic_store_n(&decided_for, self, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&deciding);
	return refused_err;
}

int uro_attach_refused_why(struct uro_diagnosis *d)
{
	struct uro_attach_facts f;
	int err = uro_attach_refused();

	/* The probe's partner is this process's own child: the facts that
	 * tell a refusal apart are this process's (filter, Yama, itself). */
	uro_attach_facts(err, getpid(), &f);
	uro_attach_diagnose(&f, d);
	return err;
}
