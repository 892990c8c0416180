/* Whether this process's peers on the host reach it, and it them, by
 * cross-memory attach, or whether the two must meet on the RoCEv2 wire
 * over the host's own addresses instead (docs/architecture.md, "Which
 * path"). Decided once per process, at its first ibv_open_device: the
 * grant Yama lets a process give, then a probe across a fork that no
 * ancestry can help. */
#ifndef URO_ATTACH_PATH_H
#define URO_ATTACH_PATH_H

#include "diagnosis.h"

/* Lets any process of this user that passes the kernel's other ptrace
 * checks attach to this one, as under Yama's ptrace_scope 0
 * (prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY)), unless UROCE_PTRACER=0.
 * 0, or the errno: EINVAL where the kernel has no Yama. */
int uro_attach_grant(void);

/* After the grant: a child of this process reads this process's memory
 * (a child is not its parent's ancestor, so under Yama's scope 1 only the
 * grant lets it in; a seccomp filter is inherited), and this process
 * reads the child's. 0, or the errno of the first refusal. */
int uro_attach_self_probe(void);

/* The grant and the probe, once per process (a forked child's own): 0 when this process's peers
 * on the host can be reached by cross-memory attach, else the errno. */
int uro_attach_refused(void);

/* uro_attach_refused with why, in `uroce doctor`'s words: d->why says
 * what refuses, d->remedy what would lift it. */
int uro_attach_refused_why(struct uro_diagnosis *d);

#endif
