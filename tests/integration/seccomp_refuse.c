/* seccomp_refuse [--attach] [--userns] CMD [ARGS...]: runs CMD under a
 * seccomp filter that refuses, with EPERM, what a container's profile
 * refuses: cross-memory attach (--attach) and making a user namespace
 * (--userns). The filter is inherited by everything CMD starts, so the
 * test sees what a program in such a container sees.
 *
 * clone3 passes its flags in memory a filter cannot read, so with
 * --userns it answers ENOSYS, and glibc falls back to clone, whose flags
 * it can. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define THIS_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define THIS_ARCH AUDIT_ARCH_AARCH64
#else
#error "seccomp_refuse knows x86_64 and aarch64"
#endif

#define MAX_INSNS 64

struct program {
	struct sock_filter insn[MAX_INSNS];
	unsigned short n;
};

static void emit(struct program *p, struct sock_filter f)
{
	/* A program cut short would jump past its end: never run one. */
	if (p->n == MAX_INSNS) {
		fputs("seccomp_refuse: filter longer than MAX_INSNS\n", stderr);
		exit(2);
	}
	p->insn[p->n++] = f;
}

static struct sock_filter load(unsigned offset)
{
	return (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offset);
}

static struct sock_filter ret(unsigned value)
{
	return (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, value);
}

/* nr fails with err whatever its arguments. */
static void refuse(struct program *p, long nr, int err)
{
	emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1));
	emit(p, ret(SECCOMP_RET_ERRNO | (unsigned)err));
}

/* nr fails with EPERM when its first argument has flag; the syscall
 * number is gone from the accumulator after, so both ways return. */
static void refuse_flag(struct program *p, long nr, unsigned flag)
{
	emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 4));
	emit(p, load(offsetof(struct seccomp_data, args[0])));
	emit(p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, flag, 0, 1));
	emit(p, ret(SECCOMP_RET_ERRNO | EPERM));
	emit(p, ret(SECCOMP_RET_ALLOW));
}

int main(int argc, char **argv)
{
	struct program p = {.n = 0};
	struct sock_fprog prog;
	int attach = 0, userns = 0, i = 1;

	for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
		if (!strcmp(argv[i], "--attach"))
			attach = 1;
		else if (!strcmp(argv[i], "--userns"))
			userns = 1;
		else
			break;
	}
	if (i >= argc || (!attach && !userns)) {
		fprintf(stderr, "usage: seccomp_refuse [--attach] [--userns] CMD [ARGS...]\n");
		return 2;
	}
	emit(&p, load(offsetof(struct seccomp_data, arch)));
	emit(&p, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, THIS_ARCH, 1, 0));
	emit(&p, ret(SECCOMP_RET_ALLOW));
	emit(&p, load(offsetof(struct seccomp_data, nr)));
	if (attach) {
		refuse(&p, SYS_process_vm_readv, EPERM);
		refuse(&p, SYS_process_vm_writev, EPERM);
	}
	if (userns) {
		refuse(&p, SYS_clone3, ENOSYS);
		refuse_flag(&p, SYS_unshare, CLONE_NEWUSER);
		refuse_flag(&p, SYS_clone, CLONE_NEWUSER);
	}
	emit(&p, ret(SECCOMP_RET_ALLOW));
	prog.len = p.n;
	prog.filter = p.insn;
	/* Unprivileged users may install a filter once they give up setuid. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) {
		perror("seccomp_refuse: installing the filter");
		return 1;
	}
	execvp(argv[i], argv + i);
	perror(argv[i]);
	return 127;
}
