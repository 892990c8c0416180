/* What the kernel enforces on this process beyond its credentials: the
 * two policies that decide whether uroce's processes may reach each
 * other's memory and make namespaces. */
#ifndef URO_PROCESS_POLICY_H
#define URO_PROCESS_POLICY_H

/* Yama's kernel.yama.ptrace_scope, 0-3; -1 when the kernel has no Yama. */
int uro_yama_scope(void);

/* The Seccomp: field of /proc/self/status (0 off, 1 strict, 2 filter) and
 * how many filters are stacked; -1 when the kernel does not say. */
int uro_seccomp_mode(int *filters);

/* A decimal number from a /proc or /sys file; -1 when absent. */
long uro_proc_number(const char *path);

#endif
