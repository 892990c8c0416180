/* Cross-memory attach (process_vm_readv/writev) between two processes of
 * this user: whether the kernel allows it here, tried rather than
 * guessed, and why it refuses when it does. The shared-memory path depends
 * on it: when it is refused, every connection between two processes of
 * the host ends in "transport retry counter exceeded". */
#ifndef URO_ATTACH_PROBE_H
#define URO_ATTACH_PROBE_H

#include <sys/types.h>

#include "diagnosis.h"

/* What decides a refusal, gathered once so that diagnosing is a pure
 * function of it. */
struct uro_attach_facts {
	int err;	  /* what the attach returned: 0 or an errno */
	int self_err;	  /* the same call towards this process itself */
	int yama;	  /* ptrace_scope 0-3, -1: no Yama */
	int seccomp;	  /* 0 off, 1 strict, 2 filter, -1 unknown */
	int other_user;	  /* the target's /proc entry is not this user's */
	int other_userns; /* the target is in a user namespace this one is not */
};

enum uro_attach_cause {
	URO_ATTACH_OK,
	URO_ATTACH_GONE,
	URO_ATTACH_NO_SYSCALL,
	URO_ATTACH_SECCOMP,
	URO_ATTACH_LSM,
	URO_ATTACH_OTHER_USER,
	URO_ATTACH_USERNS,
	URO_ATTACH_YAMA,
	URO_ATTACH_UNKNOWN,
};

/* The facts about an attach to target that failed with err. */
void uro_attach_facts(int err, pid_t target, struct uro_attach_facts *f);

/* Tries it between two sibling children of this process, neither the
 * other's ancestor, as two programs a user starts are: 0 or the errno. */
int uro_attach_probe(struct uro_attach_facts *f);

/* Reads one byte of pid's, at an address of this library's that a fork
 * gives parent and child alike: 0, or the errno of the refusal. */
int uro_attach_read(pid_t pid);

/* Whether pid lives in a user namespace this process is not in: the kernel
 * lets an attach cross user namespaces only downwards (commoncap's ptrace
 * check), so the two cannot reach each other both ways. */
int uro_userns_differs(pid_t pid);

enum uro_attach_cause uro_attach_diagnose(const struct uro_attach_facts *f,
					  struct uro_diagnosis *d);

#endif
