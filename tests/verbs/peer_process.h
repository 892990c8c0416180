/* The second process of a test of two processes on one host, and the
 * pipes the two talk over. It is forked before either opens a device: a
 * child forked beside a context's threads may inherit a lock one of them
 * held (the sanitizer's allocator's, once in 4 runs). */
#ifndef URO_TEST_PEER_PROCESS_H
#define URO_TEST_PEER_PROCESS_H

#include <sys/wait.h>
#include <unistd.h>

#include "pair.h"

struct peer_process {
	pid_t pid;
	int from, to; /* what the child writes, and what it reads */
};

/* Forks child(up, down), whose result is its exit status: it writes to up
 * and reads from down. 0, or -1. */
static inline int peer_fork(struct peer_process *p, int (*child)(int up, int down))
{
	int up[2], down[2];

	*p = (struct peer_process){.pid = -1, .from = -1, .to = -1};
	if (pipe(up) || pipe(down))
		return -1;
	p->pid = fork();
	if (p->pid == 0)
		_exit(child(up[1], down[0]));
	close(up[1]); /* a child that fails is then an end of file, not a hang */
	close(down[0]);
	p->from = up[0];
	p->to = down[1];
	return p->pid > 0 ? 0 : -1;
}

/* The child's half of connecting: it says its QPN, then connects qp to the
 * parent's, after the parent connected. 0, or -1. */
static inline int peer_child_connect(struct ibv_qp *qp, int up, int down)
{
	uint32_t qpn;

	return write(up, &qp->qp_num, 4) != 4 || read(down, &qpn, 4) != 4 ||
		       qp_connect(qp, qpn, 7, 1)
		   ? -1
		   : 0;
}

/* The parent's half: connects qp to the child's QP, says its own, and
 * waits for the child's one byte that says it is ready. 0, or -1 once the
 * child, failed, is reaped. */
static inline int peer_connect(struct peer_process *p, struct ibv_qp *qp)
{
	uint32_t qpn;
	char ready;
	int status;

	if (read(p->from, &qpn, 4) == 4 && !qp_connect(qp, qpn, 7, 1) &&
	    write(p->to, &qp->qp_num, 4) == 4 && read(p->from, &ready, 1) == 1)
		return 0;
	waitpid(p->pid, &status, 0);
	printf("the other process failed before it was ready: status %d\n", status);
	return -1;
}

/* The parent tells the child to go on (a byte on its pipe). */
static inline int peer_go(struct peer_process *p)
{
	return write(p->to, "g", 1) == 1 ? 0 : -1;
}

/* The child waits for that. */
static inline int peer_child_wait(int down)
{
	char go;

	return read(down, &go, 1) == 1 ? 0 : -1;
}

/* The child's figure, once the parent says go: -1 if none comes. */
static inline long long peer_ask(struct peer_process *p)
{
	long long v = -1;

	if (peer_go(p) || read(p->from, &v, sizeof(v)) != (ssize_t)sizeof(v))
		return -1;
	return v;
}

/* Lets the child end: whether it exited with 0. */
static inline int peer_end(struct peer_process *p)
{
	int status;

	peer_go(p);
	return waitpid(p->pid, &status, 0) == p->pid && WIFEXITED(status) &&
	       WEXITSTATUS(status) == 0;
}

#endif
