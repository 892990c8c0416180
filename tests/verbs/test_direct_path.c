/* The direct path (src/core/direct_map.c): a region registered in
 * shareable memory (a memfd, a file in /dev/shm, a System V segment) is
 * mapped by a peer process of the same user, which then moves WRITE, READ
 * and SEND bytes with memcpy and executes atomics with CPU atomics on the
 * mapping. Two contexts of one process never take that path (one address
 * space), so every case runs real processes: this program only
 * orchestrates, and never opens a device; each role is a child of its own
 * that opens one after the fork, and all talk over pipes through it.
 *
 * Where the kernel has seccomp filters, every direct initiator runs under
 * one that makes process_vm_readv/writev fail with EPERM once it has
 * connected: a request that left the direct path for cross-memory attach
 * then ends in IBV_WC_RETRY_EXC_ERR (a refused attach is a peer that never
 * answers, remote_copy.c), so every case below also fails if its bytes
 * stopped going the direct way.
 *
 * What each case checks, and the mechanism it would catch broken:
 * 1. bytes_move_directly: WRITE, READ and a SEND into a receive buffer reach
 *    a memfd, a System V segment and a /dev/shm file under the filter
 *    (shareable.c finds the object, direct_map.c maps it, remote_copy.c
 *    copies through it); a WRITE to private memory fails under it (private
 *    memory stays on cross-memory attach), and so does the memfd WRITE of
 *    an initiator started with UROCE_DIRECT=0 (the filter bites, and the
 *    switch turns the path off).
 * 2. dereg_during_copy: ibv_dereg_mr of a 256 MiB memfd region while a
 *    direct WRITE or READ of all of it runs; nothing moves after it returns
 *    (the key hold and the check between chunks cover the mapped copy).
 * 3. key_revoked_and_moved: an old rkey fails after dereg and a new
 *    registration of the same memory; ibv_rereg_mr moving the region to
 *    another offset of the memfd, then to another memfd, keeps the key and
 *    a WRITE lands in the new memory, never the old (the peer's cached
 *    mapping is dropped when the publication's serial changes).
 * 4. fork_keeps_mappings: an initiator that forked after a direct WRITE, and
 *    a target that forked after registering, still move bytes to the right
 *    memory (a mapping, and the owner's published descriptor, survive a
 *    child's exit and a child's copy of them).
 * 5. killed_mid_copy: an initiator SIGKILLed while its hold on the key is
 *    taken (seen in the key's lanes while it is stopped) does not make the
 *    target's ibv_dereg_mr wait for ever (a dead holder is not waited for).
 * 6. two_adders(direct, stopped): an initiator adding 1 to a counter in a
 *    loop is stopped inside one of its FETCH_AND_ADDs (its hold on the key
 *    seen in the key's lanes), and another's N adds to the same counter
 *    all complete meanwhile (direct atomics take nothing another process
 *    waits for: with a lock shared between initiators, the other one
 *    hangs); the counter ends at the sum of both, each old value seen once.
 * 7. two_adders(UROCE_DIRECT=0, none stopped): the same beside an
 *    initiator on UROCE_DIRECT=0, whose atomics the target's thread
 *    executes, the direct one's run inside the other's: CPU atomics on two
 *    mappings of one page stay exact (an atomic on a copy of the page
 *    loses adds on every run; one that is not a single atomic instruction
 *    only when two collide, which a run may not see).
 * 8. atomics_without_target: with the target process stopped, direct
 *    FETCH_AND_ADD, CMP_AND_SWP and ATOMIC_WRITE complete with the right
 *    results; a direct FETCH_AND_ADD into a read-only result buffer is
 *    LOC_PROT_ERR and leaves the target's counter as it was (the buffer
 *    is probed before the atomic runs, in its guarded access); a
 *    FETCH_AND_ADD on UROCE_DIRECT=0 does not complete (direct atomics
 *    are the initiator's own, not handed to the target's atomic server).
 *    One on
 *    UROCE_DIRECT=0 with an ACK timeout of minutes, posted while the target
 *    is stopped, completes once it runs again (an answer that comes late
 *    is looked for before the ACK timeout: it used to wait that out).
 *
 * 9. descriptors_per_object: 256 regions registered on one memfd and on
 *    one /dev/shm file cost the process one descriptor each object, given
 *    back with the last region (shareable.c's table; one a region would
 *    spend a program's descriptors on uroce's, 256 here).
 * 10. refused_once: a System V region its peer may not map (the segment's
 *    owner made another user) takes every WRITE by cross-memory attach,
 *    and the peer tries to map it once, not once a request (direct_map.c
 *    keeps the refusal: UROCE_LOG=debug says "cannot map" once).
 *
 * A kernel without memfd_create skips everything, one without seccomp
 * filters case 1 (the other cases then run without the filter), one
 * without System V IPC or a writable /dev/shm those parts of case 1: each
 * says so, and the program then exits 77 (a skip) unless a check failed.
 * Children report their failed CHECKs by their exit status: the count at
 * the end is the orchestrator's. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../check.h"
#include "pair.h"
#include "peer_segment.h"

#define KIB   1024u
#define SMALL (64 * KIB)   /* a region of the small cases */
#define PART  (8 * KIB)	   /* one transfer of case 1: more than rides in a completion */
#define UPPER (32 * KIB)   /* where a small region's pattern for READs starts */
#define BIG   (256u << 20) /* 64 copy chunks (URO_COPY_CHUNK) */
#define ADDS  20000	   /* atomics per initiator in cases 6 and 7 */
/* Bounds: a child that outlives CHILD_SECONDS ends itself (check.h's
 * handler names the case); a message not there within MSG_MS is a failure,
 * never a hang. Generous: valgrind runs this too. */
#define CHILD_SECONDS 150
#define MSG_MS	      60000
#define WC_SECONDS    100

#define ALL_ACCESS                                                                                 \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

static const struct ibv_qp_cap CAP = {
    .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1};

/* What this kernel has, probed by the orchestrator before the cases. */
static int filter_ok, sysv_ok, shmfile_ok, skipped;

static void skip(const char *what)
{
	printf("SKIP: %s\n", what);
	skipped++;
}

/* ---- Messages: one fixed-size record each, relayed by the orchestrator. */

enum tag {
	M_QPN = 'q',
	M_READY = 'y',
	M_REGION = 'r',
	M_ARMED = 'a', /* an initiator's filter is in place */
	M_GO = 'g',
	M_STARTED = 's', /* a long transfer is under way */
	M_DEREGED = 'x', /* the target's ibv_dereg_mr returned */
	M_ERRED = 'e',	 /* an expected error moved the QPs to ERR */
	M_FORKED = 'f',
	M_LANDING = 'l',
	M_ASK = 'k',
	M_ANSWER = 'n',
	M_EARLY = 'u', /* an adder is early in its run */
	M_DONE = 'd',
};

struct msg {
	uint32_t tag, rkey;
	uint64_t addr, len, value;
};

/* One process's two pipe ends towards another. */
struct link {
	int rd, wr;
};

static int put(const struct link *l, struct msg m)
{
	return write(l->wr, &m, sizeof(m)) == (ssize_t)sizeof(m) ? 0 : -1;
}

static int say(const struct link *l, enum tag tag, uint64_t value)
{
	return put(l, (struct msg){.tag = tag, .value = value});
}

/* The next message, within MSG_MS: 0, or -1 (late, cut short, closed). */
static int get(const struct link *l, struct msg *m)
{
	size_t got = 0;

	while (got < sizeof(*m)) {
		struct pollfd p = {.fd = l->rd, .events = POLLIN};
		int r = poll(&p, 1, MSG_MS);
		ssize_t n;

		if (r < 0 && errno == EINTR) /* a stop and a continue */
			continue;
		if (r <= 0)
			return -1;
		n = read(l->rd, (char *)m + got, sizeof(*m) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

/* The next message, which must be tag's. */
static int expect(const struct link *l, enum tag tag, struct msg *m)
{
	struct msg own;

	if (!m)
		m = &own;
	if (get(l, m))
		return -1;
	if (m->tag == tag)
		return 0;
	fprintf(stderr, "pid %d: message '%c' where '%c' was expected\n", (int)getpid(),
		(char)m->tag, (char)tag);
	return -1;
}

/* ---- Processes: the orchestrator's children, each running one role. */

struct proc {
	const char *name;
	pid_t pid;
	struct link l; /* the orchestrator's ends */
	int status, reaped;
};

typedef int (*role)(const struct link *l, const void *arg);

/* The orchestrator's ends of its children's pipes: a child closes its
 * siblings', so that a child gone is an end of file to the orchestrator. */
#define MAX_ENDS 16
static int ends[MAX_ENDS];

static void keep_end(int fd)
{
	for (int i = 0; i < MAX_ENDS; i++)
		if (!ends[i]) {
			ends[i] = fd;
			return;
		}
}

static void drop_end(int fd)
{
	for (int i = 0; i < MAX_ENDS; i++)
		if (ends[i] == fd)
			ends[i] = 0;
	close(fd);
}

/* Runs fn(arg) in a child bounded by CHILD_SECONDS, whose exit status is
 * its result, or 1 when one of its CHECKs failed. */
static int spawn(struct proc *p, const char *name, role fn, const void *arg)
{
	int up[2], down[2];

	*p = (struct proc){.name = name, .pid = -1};
	if (pipe(up))
		return -1;
	if (pipe(down)) {
		close(up[0]);
		close(up[1]);
		return -1;
	}
	fflush(stdout);
	p->pid = fork();
	if (p->pid == 0) {
		struct link l = {.rd = down[0], .wr = up[1]};
		int failed = check_failed, r;

		for (int i = 0; i < MAX_ENDS; i++)
			if (ends[i])
				close(ends[i]);
		close(up[0]);
		close(down[1]);
		alarm(CHILD_SECONDS);
		r = fn(&l, arg);
		fflush(stdout);
		_exit(r ? r : check_failed > failed);
	}
	close(up[1]);
	close(down[0]);
	p->l = (struct link){.rd = up[0], .wr = down[1]};
	keep_end(up[0]);
	keep_end(down[1]);
	return p->pid > 0 ? 0 : -1;
}

/* The child's exit status (128 + signal when killed), once it has ended. */
static int reap(struct proc *p)
{
	if (p->pid <= 0)
		return -1;
	if (!p->reaped) {
		drop_end(p->l.rd);
		drop_end(p->l.wr);
		while (waitpid(p->pid, &p->status, 0) < 0 && errno == EINTR)
			;
		p->reaped = 1;
	}
	if (WIFSIGNALED(p->status))
		return 128 + WTERMSIG(p->status);
	if (WEXITSTATUS(p->status))
		printf("%s: exit status %d\n", p->name, WEXITSTATUS(p->status));
	return WEXITSTATUS(p->status);
}

/* After a failed exchange: the children end now, not at their alarm. */
static void abandon(struct proc *p)
{
	if (p->pid > 0 && !p->reaped) {
		kill(p->pid, SIGCONT);
		kill(p->pid, SIGKILL);
	}
}

/* The end of a case: ok, or else every child ends now; each one then
 * reaped with a clean exit (the list ends with NULL). */
static void finish(int ok, struct proc *p, ...)
{
	va_list ap;

	CHECK(ok);
	va_start(ap, p);
	for (struct proc *q = p; q; q = va_arg(ap, struct proc *)) {
		if (!ok)
			abandon(q);
		CHECK_EQ(reap(q), 0);
	}
	va_end(ap);
}

/* One message from one child to another; -1 when it did not come. */
static int pass(struct proc *from, struct proc *to)
{
	struct msg m;

	if (get(&from->l, &m)) {
		fprintf(stderr, "no message from %s\n", from->name);
		return -1;
	}
	return put(&to->l, m);
}

static int pass_n(struct proc *from, struct proc *to, int n)
{
	for (int i = 0; i < n; i++)
		if (pass(from, to))
			return -1;
	return 0;
}

/* The exchange link_connect makes on both sides: QPNs, then readiness. */
static int join(struct proc *t, struct proc *i)
{
	return pass(t, i) || pass(i, t) || pass(t, i) || pass(i, t) ? -1 : 0;
}

/* Stops a child, and waits until it is stopped: 0, or -1 if it ended. */
static int stop(struct proc *p)
{
	int st;

	if (kill(p->pid, SIGSTOP))
		return -1;
	while (waitpid(p->pid, &st, WUNTRACED) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFSTOPPED(st))
		return 0;
	p->status = st;
	p->reaped = 1;
	return -1;
}

/* ---- What the roles share. */

/* Each side, after the fork: says its QP's number, connects to the
 * other's, and waits until the other has connected too. */
static int link_connect(const struct link *l, struct ibv_qp *qp)
{
	struct msg m;

	if (say(l, M_QPN, qp->qp_num) || expect(l, M_QPN, &m) ||
	    qp_connect(qp, (uint32_t)m.value, 7, 1) || say(l, M_READY, 0))
		return -1;
	return expect(l, M_READY, NULL);
}

/* A second QP on a side's PD and CQ, for a second initiator. */
static struct ibv_qp *extra_qp(struct side *s)
{
	struct ibv_qp_init_attr init = {
	    .send_cq = s->cq, .recv_cq = s->cq, .cap = CAP, .qp_type = IBV_QPT_RC};

	return ibv_create_qp(s->pd, &init);
}

#if defined(__x86_64__)
#define THIS_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define THIS_ARCH AUDIT_ARCH_AARCH64
#endif

/* Makes process_vm_readv and process_vm_writev fail with EPERM in every
 * thread of this process, whichever of the library's makes a copy, as
 * tests/integration/seccomp_refuse.c does for a whole program: 0, or the
 * errno of the refusal. */
static int refuse_attach(void)
{
#ifdef THIS_ARCH
	struct sock_filter insn[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, THIS_ARCH, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 2, 0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_writev, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	};
	struct sock_fprog prog = {.len = sizeof(insn) / sizeof(insn[0]), .filter = insn};
	long r;

	/* Unprivileged users may install a filter once they give up setuid. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return errno;
	r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog);
	return r == 0 ? 0 : r > 0 ? EBUSY : errno;
#else
	return ENOSYS;
#endif
}

/* A direct initiator's filter, where the kernel has one. */
static int arm(void)
{
	return filter_ok ? refuse_attach() : 0;
}

/* Waits until the completion of one request arrives: 1, or 0 after
 * WC_SECONDS. */
static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n > 0;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec > WC_SECONDS)
			return 0;
	}
}

struct req {
	enum ibv_wr_opcode opcode;
	void *local;
	uint32_t len, lkey;
	uint64_t remote;
	uint32_t rkey;
	uint64_t operand, compare; /* atomics: add or swap, and compare */
};

/* One signaled request, and its completion's status; -1 when none came. */
static int run_req(struct ibv_qp *qp, struct ibv_cq *cq, const struct req *r)
{
	struct ibv_sge sge = {.addr = (uintptr_t)r->local, .length = r->len, .lkey = r->lkey};
	struct ibv_send_wr wr = {.wr_id = 1,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = r->opcode,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;

	if (r->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD || r->opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = r->remote;
		wr.wr.atomic.rkey = r->rkey;
		wr.wr.atomic.compare_add =
		    r->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? r->compare : r->operand;
		wr.wr.atomic.swap = r->operand;
	} else {
		wr.wr.rdma.remote_addr = r->remote;
		wr.wr.rdma.rkey = r->rkey;
	}
	if (ibv_post_send(qp, &wr, &bad) || !wait_wc(cq, &wc))
		return -1;
	return (int)wc.status;
}

/* A transfer between s's own buffer at off and the region at roff. */
static int rdma(struct side *s, enum ibv_wr_opcode opcode, uint32_t off, uint32_t len,
		const struct msg *region, uint64_t roff)
{
	struct req r = {.opcode = opcode,
			.local = s->buf + off,
			.len = len,
			.lkey = s->mr->lkey,
			.remote = region->addr + roff,
			.rkey = region->rkey};

	return run_req(s->qp, s->cq, &r);
}

/* An atomic on the region's 8 bytes at roff; the old value in *old. */
static int atomic(struct side *s, enum ibv_wr_opcode opcode, const struct msg *region,
		  uint64_t roff, uint64_t operand, uint64_t compare, uint64_t *old)
{
	struct req r = {.opcode = opcode,
			.local = s->buf,
			.len = 8,
			.lkey = s->mr->lkey,
			.remote = region->addr + roff,
			.rkey = region->rkey,
			.operand = operand,
			.compare = compare};
	int st;

	memcpy(s->buf, &operand, 8); /* ATOMIC_WRITE's value */
	st = run_req(s->qp, s->cq, &r);
	memcpy(old, s->buf, 8);
	return st;
}

static uint8_t pattern_byte(unsigned seed, size_t i)
{
	return (uint8_t)(seed * 37 + i * 7 + (i >> 9));
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pattern_byte(seed, i);
}

static int matches(const uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pattern_byte(seed, i))
			return 0;
	return 1;
}

static int all_are(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

/* Waits (bounded) until the byte at p is what a transfer brings, or until
 * *over says the transfer has ended without it. It gives way while it
 * waits: the copier may be this process's other thread, which valgrind
 * runs only when this one lets it. */
static int await_byte(const volatile uint8_t *p, uint8_t want, const int *over)
{
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		sched_yield();
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while (*p != want && !(over && __atomic_load_n(over, __ATOMIC_ACQUIRE)) &&
		 now.tv_sec - start.tv_sec < 60);
	return *p == want ? 0 : -1;
}

/* ---- Regions of the target. */

enum kind { MEMFD, PRIVATE, SYSV, SHMFILE, KINDS };

struct region {
	uint8_t *buf;
	size_t len;
	struct ibv_mr *mr;
	int fd;
};

static int memfd_map(struct region *g, size_t len)
{
	*g = (struct region){.len = len};
	g->fd = (int)syscall(SYS_memfd_create, "uroce-direct-test", 0);
	if (g->fd < 0 || ftruncate(g->fd, (off_t)len))
		return -1;
	/* The descriptor stays open: a memfd is published through one the
	 * program holds (shareable.c). */
	g->buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, g->fd, 0);
	return g->buf == MAP_FAILED ? -1 : 0;
}

static int private_map(struct region *g, size_t len)
{
	*g = (struct region){.len = len, .fd = -1};
	g->buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return g->buf == MAP_FAILED ? -1 : 0;
}

/* As perftest --use_hugepages does it, without SHM_HUGETLB: the segment
 * is removed at once and lives while attached. */
static int sysv_map(struct region *g, size_t len)
{
	int id = shmget(IPC_PRIVATE, len, IPC_CREAT | 0600);

	*g = (struct region){.len = len, .fd = -1};
	if (id < 0)
		return -1;
	g->buf = shmat(id, NULL, 0);
	shmctl(id, IPC_RMID, NULL);
	return g->buf == (void *)-1 ? -1 : 0;
}

/* A file in /dev/shm, closed before registering: the library opens it
 * again by its path, and the name goes after registering. */
static int shmfile_map(struct region *g, size_t len, const char *path)
{
	int fd;

	*g = (struct region){.len = len, .fd = -1};
	unlink(path); /* left by an earlier process of this pid killed here */
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	g->buf = ftruncate(fd, (off_t)len)
		     ? MAP_FAILED
		     : mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return g->buf == MAP_FAILED ? -1 : 0;
}

static void shmfile_path(char *path, size_t n)
{
	snprintf(path, n, "/dev/shm/uroce-direct-test-%d", (int)getpid());
}

static int region_reg(struct region *g, struct ibv_pd *pd)
{
	g->mr = ibv_reg_mr(pd, g->buf, g->len, ALL_ACCESS);
	return g->mr ? 0 : -1;
}

static int say_region(const struct link *l, const struct region *g)
{
	return put(l, (struct msg){.tag = M_REGION,
				   .addr = g->mr ? (uintptr_t)g->mr->addr : 0,
				   .rkey = g->mr ? g->mr->rkey : 0,
				   .len = g->mr ? g->mr->length : 0});
}

static void region_free(struct region *g, enum kind kind)
{
	if (!g->buf)
		return;
	if (g->mr)
		ibv_dereg_mr(g->mr);
	if (kind == SYSV)
		shmdt(g->buf);
	else if (g->buf != MAP_FAILED)
		munmap(g->buf, g->len);
	if (g->fd >= 0)
		close(g->fd);
}

/* ==== 1. The direct path is what moves the bytes. */

/* Whether an initiator takes the direct path (or runs on UROCE_DIRECT=0). */
struct path {
	int direct;
};

static int reach_make(struct region *g, struct side *t)
{
	char path[64];
	int err = 0;

	shmfile_path(path, sizeof(path));
	memset(g, 0, KINDS * sizeof(*g));
	err |= memfd_map(&g[MEMFD], SMALL) || private_map(&g[PRIVATE], SMALL);
	g[SYSV].fd = g[SHMFILE].fd = -1;
	if (sysv_ok)
		err |= sysv_map(&g[SYSV], SMALL);
	if (shmfile_ok)
		err |= shmfile_map(&g[SHMFILE], SMALL, path);
	for (int k = 0; k < KINDS && !err; k++) {
		if (!g[k].buf)
			continue;
		memset(g[k].buf, 0, SMALL);
		fill(g[k].buf + UPPER, SMALL - UPPER, (unsigned)k);
		err |= region_reg(&g[k], t->pd);
	}
	if (shmfile_ok)
		unlink(path);
	return err ? -1 : 0;
}

/* The receive the initiator's SEND lands in, in the memfd region. */
static int post_recv_in(struct ibv_qp *qp, const struct region *g, uint64_t off, uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)g->buf + off, .length = len, .lkey = g->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = 9, .sg_list = &sge, .num_sge = 1}, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

/* What the direct initiator's transfers left in each region. */
static void reach_check_direct(struct side *t, struct region *g)
{
	struct ibv_wc wc;

	for (int k = 0; k < KINDS; k++) {
		if (!g[k].buf || k == PRIVATE)
			continue;
		CHECK(matches(g[k].buf, PART, 100u + (unsigned)k));
		CHECK(matches(g[k].buf + UPPER, SMALL - UPPER, (unsigned)k)); /* READ only */
	}
	CHECK(all_are(g[PRIVATE].buf, UPPER, 0)); /* its WRITE was refused */
	CHECK_EQ(wait_wc(t->cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, PART);
	CHECK(matches(g[MEMFD].buf + 2 * PART, PART, 200));
}

static int target_reach(const struct link *l, const void *arg)
{
	static struct side t;
	struct region g[KINDS];
	struct ibv_qp *second;

	(void)arg;
	/* The receive once the QP can take it, before the regions are told. */
	if (side_open(&t, IBV_QPT_RC, 16, CAP) || reach_make(g, &t) || link_connect(l, t.qp) ||
	    post_recv_in(t.qp, &g[MEMFD], 2 * PART, PART))
		return 2;
	for (int k = 0; k < KINDS; k++)
		if (say_region(l, &g[k]))
			return 3;
	if (expect(l, M_DONE, NULL))
		return 4;
	reach_check_direct(&t, g);
	/* The initiator on UROCE_DIRECT=0, on a QP of its own. */
	second = extra_qp(&t);
	if (!second || link_connect(l, second))
		return 5;
	for (int k = 0; k < KINDS; k++)
		if (say_region(l, &g[k]))
			return 6;
	if (expect(l, M_DONE, NULL))
		return 7;
	CHECK(all_are(g[MEMFD].buf + PART, PART, 0));
	ibv_destroy_qp(second);
	for (int k = 0; k < KINDS; k++)
		region_free(&g[k], (enum kind)k);
	side_close(&t);
	return 0;
}

/* WRITE a pattern at the region's start, READ its upper half back. */
static void write_and_read(struct side *s, const struct msg *region, unsigned k)
{
	fill(s->buf, PART, 100 + k);
	CHECK_EQ(rdma(s, IBV_WR_RDMA_WRITE, 0, PART, region, 0), IBV_WC_SUCCESS);
	memset(s->buf + PART, 0, SMALL - UPPER);
	CHECK_EQ(rdma(s, IBV_WR_RDMA_READ, PART, SMALL - UPPER, region, UPPER), IBV_WC_SUCCESS);
	CHECK(matches(s->buf + PART, SMALL - UPPER, k));
}

static void reach_direct(struct side *s, const struct msg *r)
{
	struct req send = {
	    .opcode = IBV_WR_SEND, .local = s->buf + 2 * PART, .len = PART, .lkey = s->mr->lkey};

	for (int k = 0; k < KINDS; k++)
		if (r[k].len && k != PRIVATE)
			write_and_read(s, &r[k], (unsigned)k);
	fill(s->buf + 2 * PART, PART, 200);
	CHECK_EQ(run_req(s->qp, s->cq, &send), IBV_WC_SUCCESS);
	/* Last: the refusal leaves the QP in ERR. */
	CHECK_EQ(rdma(s, IBV_WR_RDMA_WRITE, 0, PART, &r[PRIVATE], 0), IBV_WC_RETRY_EXC_ERR);
}

static int initiator_reach(const struct link *l, const void *arg)
{
	const struct path *a = arg;
	static struct side s;
	struct msg r[KINDS];

	if (!a->direct)
		setenv("UROCE_DIRECT", "0", 1);
	/* A refused attach is retried until retry_cnt runs out: 17 ms a try. */
	setenv("PAIR_TIMEOUT", "12", 1);
	if (side_open(&s, IBV_QPT_RC, 16, CAP) || link_connect(l, s.qp))
		return 2;
	for (int k = 0; k < KINDS; k++)
		if (expect(l, M_REGION, &r[k]))
			return 3;
	/* After connecting: refused before, the device would have put the QP
	 * on the wire (attach_path.c). */
	CHECK_EQ(refuse_attach(), 0);
	if (a->direct) {
		reach_direct(&s, r);
	} else {
		fill(s.buf, PART, 100);
		CHECK_EQ(rdma(&s, IBV_WR_RDMA_WRITE, 0, PART, &r[MEMFD], PART),
			 IBV_WC_RETRY_EXC_ERR);
	}
	if (say(l, M_DONE, 0))
		return 4;
	side_close(&s);
	return 0;
}

static void test_bytes_move_directly(void)
{
	static const struct path direct = {.direct = 1}, off = {.direct = 0};
	struct proc t = {.pid = -1}, i = {.pid = -1}, i0 = {.pid = -1};
	int ok;

	if (!filter_ok) {
		skip("bytes_move_directly: no seccomp filter in this kernel");
		return;
	}
	ok = !spawn(&t, "target", target_reach, NULL) &&
	     !spawn(&i, "direct initiator", initiator_reach, &direct) && !join(&t, &i) &&
	     !pass_n(&t, &i, KINDS) && !pass(&i, &t);
	CHECK(ok);
	if (!ok)
		abandon(&t);
	CHECK_EQ(reap(&i), 0);
	if (!ok) {
		reap(&t);
		return;
	}
	ok = !spawn(&i0, "initiator on UROCE_DIRECT=0", initiator_reach, &off) && !join(&t, &i0) &&
	     !pass_n(&t, &i0, KINDS) && !pass(&i0, &t);
	CHECK(ok);
	if (!ok)
		abandon(&t);
	CHECK_EQ(reap(&i0), 0);
	CHECK_EQ(reap(&t), 0);
}

/* ==== 2. Deregistration during a direct WRITE and READ. */

struct transfer {
	struct side *s;
	struct req r;
	int status, over;
};

static void *transfer_run(void *arg)
{
	struct transfer *t = arg;

	t->status = run_req(t->s->qp, t->s->cq, &t->r);
	__atomic_store_n(&t->over, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* A big private buffer, registered, filled with v. */
static uint8_t *big_local(struct side *s, uint8_t v, struct ibv_mr **mr)
{
	uint8_t *p = mmap(NULL, BIG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	memset(p, v, BIG);
	*mr = ibv_reg_mr(s->pd, p, BIG, IBV_ACCESS_LOCAL_WRITE);
	return *mr ? p : NULL;
}

/* How far in order a transfer got: the length of the prefix of v. */
static size_t prefix_of(const uint8_t *p, uint8_t v)
{
	size_t n = 0;

	while (n < BIG && p[n] == v)
		n++;
	return n;
}

static int target_dereg(const struct link *l, const void *arg)
{
	const enum ibv_wr_opcode *op = arg;
	int write = *op == IBV_WR_RDMA_WRITE;
	static struct side t;
	struct region g;
	struct msg done;

	if (side_open(&t, IBV_QPT_RC, 16, CAP) || memfd_map(&g, BIG))
		return 2;
	memset(g.buf, write ? 0 : 'A', BIG);
	if (region_reg(&g, t.pd) || link_connect(l, t.qp) || say_region(l, &g) ||
	    expect(l, M_STARTED, NULL))
		return 3;
	/* A WRITE's first bytes are seen here; a READ's by the reader. */
	if (write)
		CHECK_EQ(await_byte(g.buf, 0xab, NULL), 0);
	CHECK_EQ(ibv_dereg_mr(g.mr), 0);
	g.mr = NULL;
	if (write)
		printf("WRITE: %zu of %u bytes landed when ibv_dereg_mr returned\n",
		       prefix_of(g.buf, 0xab), BIG);
	/* After the return nothing may land: a mark a late byte would break
	 * (a WRITE), or a new pattern a late READ would take. */
	memset(g.buf, write ? 0 : 'B', BIG);
	if (say(l, M_DEREGED, 0) || expect(l, M_DONE, &done))
		return 4;
	if (write)
		CHECK(memchr(g.buf, 0xab, BIG) == NULL);
	CHECK(done.value == IBV_WC_SUCCESS || done.value == IBV_WC_REM_ACCESS_ERR);
	region_free(&g, MEMFD);
	side_close(&t);
	return 0;
}

static int initiator_dereg(const struct link *l, const void *arg)
{
	const enum ibv_wr_opcode *op = arg;
	int write = *op == IBV_WR_RDMA_WRITE;
	static struct side s;
	struct transfer x = {.s = &s};
	struct ibv_mr *mr = NULL;
	struct msg region;
	uint8_t *buf;
	pthread_t th;

	if (side_open(&s, IBV_QPT_RC, 16, CAP))
		return 2;
	buf = big_local(&s, write ? 0xab : 0, &mr);
	if (!buf || link_connect(l, s.qp) || expect(l, M_REGION, &region))
		return 3;
	CHECK_EQ(arm(), 0);
	x.r = (struct req){.opcode = *op,
			   .local = buf,
			   .len = BIG,
			   .lkey = mr->lkey,
			   .remote = region.addr,
			   .rkey = region.rkey};
	if (pthread_create(&th, NULL, transfer_run, &x))
		return 4;
	if (!write)
		CHECK_EQ(await_byte(buf, 'A', &x.over), 0);
	if (say(l, M_STARTED, 0) || expect(l, M_DEREGED, NULL))
		return 5;
	pthread_join(th, NULL);
	if (!write) {
		printf("READ: %zu of %u bytes read, status %d\n", prefix_of(buf, 'A'), BIG,
		       x.status);
		CHECK(memchr(buf, 'B', BIG) == NULL);
	} else {
		printf("WRITE: status %d\n", x.status);
	}
	CHECK(x.status == IBV_WC_SUCCESS || x.status == IBV_WC_REM_ACCESS_ERR);
	if (say(l, M_DONE, (uint64_t)x.status))
		return 6;
	ibv_dereg_mr(mr);
	munmap(buf, BIG);
	side_close(&s);
	return 0;
}

static void test_dereg_during_copy(enum ibv_wr_opcode op)
{
	struct proc t = {.pid = -1}, i = {.pid = -1};
	int ok;

	ok = !spawn(&t, "target", target_dereg, &op) &&
	     !spawn(&i, "initiator", initiator_dereg, &op) && !join(&t, &i) && !pass(&t, &i) &&
	     !pass(&i, &t) && !pass(&t, &i) && !pass(&i, &t);
	finish(ok, &t, &i, NULL);
}

/* ==== 3. A key revoked, re-registered, and moved by ibv_rereg_mr. */

#define KEYED (4 * KIB)

static int rereg_to(struct ibv_mr *mr, void *addr)
{
	return ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, addr, KEYED, ALL_ACCESS);
}

static int say_mr(const struct link *l, struct ibv_mr *mr)
{
	return put(l, (struct msg){.tag = M_REGION,
				   .addr = (uintptr_t)mr->addr,
				   .rkey = mr->rkey,
				   .len = mr->length});
}

static int target_rekey(const struct link *l, const void *arg)
{
	static struct side t;
	struct region a, b;
	struct ibv_mr *mr;
	uint32_t old;

	(void)arg;
	if (side_open(&t, IBV_QPT_RC, 16, CAP) || memfd_map(&a, SMALL) || memfd_map(&b, SMALL))
		return 2;
	mr = ibv_reg_mr(t.pd, a.buf, KEYED, ALL_ACCESS);
	if (!mr || link_connect(l, t.qp) || say_mr(l, mr) || expect(l, M_DONE, NULL))
		return 3;
	CHECK(all_are(a.buf, KEYED, 'a'));
	old = mr->rkey;
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	mr = ibv_reg_mr(t.pd, a.buf, KEYED, ALL_ACCESS);
	if (!mr || say_mr(l, mr) || expect(l, M_ERRED, NULL))
		return 4;
	CHECK(mr->rkey != old);
	CHECK(all_are(a.buf, KEYED, 'a')); /* the old key's WRITE landed nowhere */
	if (link_connect(l, t.qp) || expect(l, M_DONE, NULL))
		return 5;
	CHECK(all_are(a.buf, KEYED, 'c'));
	/* Another offset of the same memfd, then another memfd. */
	CHECK_EQ(rereg_to(mr, a.buf + UPPER), 0);
	if (say_mr(l, mr) || expect(l, M_DONE, NULL))
		return 6;
	CHECK(all_are(a.buf + UPPER, KEYED, 'd'));
	CHECK(all_are(a.buf, KEYED, 'c'));
	CHECK_EQ(rereg_to(mr, b.buf), 0);
	if (say_mr(l, mr) || expect(l, M_DONE, NULL))
		return 7;
	CHECK(all_are(b.buf, KEYED, 'e'));
	CHECK(all_are(a.buf + UPPER, KEYED, 'd'));
	CHECK(all_are(a.buf, KEYED, 'c'));
	ibv_dereg_mr(mr);
	region_free(&a, MEMFD);
	region_free(&b, MEMFD);
	side_close(&t);
	return 0;
}

static int write_byte(struct side *s, const struct msg *region, uint8_t v)
{
	memset(s->buf, v, KEYED);
	return rdma(s, IBV_WR_RDMA_WRITE, 0, KEYED, region, 0);
}

static int initiator_rekey(const struct link *l, const void *arg)
{
	static struct side s;
	struct msg first, second, moved;

	(void)arg;
	if (side_open(&s, IBV_QPT_RC, 16, CAP) || link_connect(l, s.qp) ||
	    expect(l, M_REGION, &first))
		return 2;
	CHECK_EQ(arm(), 0);
	CHECK_EQ(write_byte(&s, &first, 'a'), IBV_WC_SUCCESS); /* the mapping is cached */
	if (say(l, M_DONE, 0) || expect(l, M_REGION, &second))
		return 3;
	CHECK_EQ(write_byte(&s, &first, 'b'), IBV_WC_REM_ACCESS_ERR);
	if (say(l, M_ERRED, 0) || link_connect(l, s.qp))
		return 4;
	CHECK_EQ(write_byte(&s, &second, 'c'), IBV_WC_SUCCESS);
	if (say(l, M_DONE, 0) || expect(l, M_REGION, &moved))
		return 5;
	CHECK_EQ(moved.rkey, second.rkey); /* ibv_rereg_mr kept the key */
	CHECK_EQ(write_byte(&s, &moved, 'd'), IBV_WC_SUCCESS);
	if (say(l, M_DONE, 0) || expect(l, M_REGION, &moved))
		return 6;
	CHECK_EQ(moved.rkey, second.rkey);
	CHECK_EQ(write_byte(&s, &moved, 'e'), IBV_WC_SUCCESS);
	if (say(l, M_DONE, 0))
		return 7;
	side_close(&s);
	return 0;
}

static void test_key_revoked_and_moved(void)
{
	struct proc t = {.pid = -1}, i = {.pid = -1};
	int ok;

	/* region, done, region, erred, reconnect, done, region, done, region,
	 * done */
	ok = !spawn(&t, "target", target_rekey, NULL) &&
	     !spawn(&i, "initiator", initiator_rekey, NULL) && !join(&t, &i) && !pass(&t, &i) &&
	     !pass(&i, &t) && !pass(&t, &i) && !pass(&i, &t) && !join(&t, &i) && !pass(&i, &t) &&
	     !pass(&t, &i) && !pass(&i, &t) && !pass(&t, &i) && !pass(&i, &t);
	finish(ok, &t, &i, NULL);
}

/* ==== 4. Forks of processes with direct-path mappings. */

#define FORK_PART (4 * KIB)

/* A child that never touches verbs (a forked child does not use its
 * parent's objects, ibv_fork_init(3)): it ends at once, or (hold, a pipe)
 * when the parent closes the pipe. Its pid, or -1. */
static pid_t fork_idle(const int *hold)
{
	pid_t pid = fork();
	char c;

	if (pid == 0) {
		alarm(30);
		if (hold) {
			close(hold[1]);
			(void)!read(hold[0], &c, 1);
		}
		_exit(0);
	}
	return pid;
}

static int reaped_clean(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return 0;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int target_fork(const struct link *l, const void *arg)
{
	static struct side t;
	struct region g;
	int hold[2];
	pid_t child;

	(void)arg;
	if (side_open(&t, IBV_QPT_RC, 16, CAP) || memfd_map(&g, SMALL))
		return 2;
	fill(g.buf + UPPER, SMALL - UPPER, 4);
	if (region_reg(&g, t.pd) || link_connect(l, t.qp) || say_region(l, &g) ||
	    expect(l, M_DONE, NULL))
		return 3;
	CHECK(all_are(g.buf, FORK_PART, 'f'));
	CHECK(all_are(g.buf + FORK_PART, FORK_PART, 'g'));
	CHECK(all_are(g.buf + 2 * FORK_PART, FORK_PART, 'h'));
	if (pipe(hold))
		return 4;
	child = fork_idle(hold);
	CHECK(child > 0);
	close(hold[0]);
	if (say(l, M_FORKED, 0) || expect(l, M_DONE, NULL))
		return 5;
	CHECK(all_are(g.buf + 3 * FORK_PART, FORK_PART, 'i')); /* in this process's memory */
	close(hold[1]);
	CHECK(child > 0 && reaped_clean(child));
	region_free(&g, MEMFD);
	side_close(&t);
	return 0;
}

/* A WRITE of v at the region's part, and a READ of its upper half. */
static void write_part(struct side *s, const struct msg *region, int part, uint8_t v)
{
	memset(s->buf, v, FORK_PART);
	CHECK_EQ(rdma(s, IBV_WR_RDMA_WRITE, 0, FORK_PART, region, (uint64_t)part * FORK_PART),
		 IBV_WC_SUCCESS);
	memset(s->buf + FORK_PART, 0, SMALL - UPPER);
	CHECK_EQ(rdma(s, IBV_WR_RDMA_READ, FORK_PART, SMALL - UPPER, region, UPPER),
		 IBV_WC_SUCCESS);
	CHECK(matches(s->buf + FORK_PART, SMALL - UPPER, 4));
}

static int initiator_fork(const struct link *l, const void *arg)
{
	static struct side s;
	struct msg region;
	int hold[2];
	pid_t child;

	(void)arg;
	if (side_open(&s, IBV_QPT_RC, 16, CAP) || link_connect(l, s.qp) ||
	    expect(l, M_REGION, &region))
		return 2;
	CHECK_EQ(arm(), 0);
	write_part(&s, &region, 0, 'f');
	child = fork_idle(NULL); /* gone at once */
	CHECK(child > 0 && reaped_clean(child));
	write_part(&s, &region, 1, 'g');
	if (pipe(hold))
		return 3;
	child = fork_idle(hold); /* there while the parent copies */
	close(hold[0]);
	write_part(&s, &region, 2, 'h');
	close(hold[1]);
	CHECK(child > 0 && reaped_clean(child));
	if (say(l, M_DONE, 0) || expect(l, M_FORKED, NULL))
		return 4;
	write_part(&s, &region, 3, 'i');
	if (say(l, M_DONE, 0))
		return 5;
	side_close(&s);
	return 0;
}

static void test_fork_keeps_mappings(void)
{
	struct proc t = {.pid = -1}, i = {.pid = -1};
	int ok;

	ok = !spawn(&t, "target", target_fork, NULL) &&
	     !spawn(&i, "initiator", initiator_fork, NULL) && !join(&t, &i) && !pass(&t, &i) &&
	     !pass(&i, &t) && !pass(&t, &i) && !pass(&i, &t);
	finish(ok, &t, &i, NULL);
}

/* ==== 5. A peer killed mid-copy. */

/* Whether pid holds the key now: one of the entry's lanes is its. */
static int held_by(void *seg, uint32_t key, uint32_t pid)
{
	const struct uro_seg_mr *e = key_entry(seg, key);

	for (int i = 0; i < URO_KEY_LANES; i++) {
		uint64_t v = __atomic_load_n(&e->lanes[i], __ATOMIC_ACQUIRE);

		if ((uint32_t)(v >> 32) == pid && (uint32_t)v)
			return 1;
	}
	return 0;
}

/* The target answers whether a pid holds key, until it is told why the
 * asking ended (until); 0, or -1. */
static int answer_asks(const struct link *l, void *seg, uint32_t key, enum tag until, struct msg *m)
{
	while (!get(l, m) && m->tag == M_ASK)
		if (say(l, M_ANSWER, (uint64_t)held_by(seg, key, (uint32_t)m->value)))
			return -1;
	return m->tag == until ? 0 : -1;
}

static int target_killed_peer(const struct link *l, const void *arg)
{
	static struct side t;
	struct region g;
	struct msg m;
	void *seg;

	(void)arg;
	if (side_open(&t, IBV_QPT_RC, 16, CAP) || memfd_map(&g, BIG) || region_reg(&g, t.pd))
		return 2;
	seg = map_segment(t.qp);
	if (!seg || link_connect(l, t.qp) || say_region(l, &g))
		return 3;
	CHECK_EQ(await_byte(g.buf, 0xab, NULL), 0);
	if (say(l, M_LANDING, 0))
		return 4;
	/* Asked while the initiator is stopped, until its hold is seen. */
	if (answer_asks(l, seg, g.mr->rkey, M_GO, &m))
		return 5;
	/* Bounded by this child's alarm: a wait for ever is a failure. */
	CHECK_EQ(ibv_dereg_mr(g.mr), 0);
	g.mr = NULL;
	if (say(l, M_DONE, 0))
		return 7;
	munmap(seg, uro_seg_size());
	region_free(&g, MEMFD);
	side_close(&t);
	return 0;
}

/* WRITEs all of the region again and again, until it is killed. */
static int initiator_killed(const struct link *l, const void *arg)
{
	static struct side s;
	struct ibv_mr *mr = NULL;
	struct msg region;
	uint8_t *buf;

	(void)arg;
	if (side_open(&s, IBV_QPT_RC, 16, CAP))
		return 2;
	buf = big_local(&s, 0xab, &mr);
	if (!buf || link_connect(l, s.qp) || expect(l, M_REGION, &region))
		return 3;
	CHECK_EQ(arm(), 0);
	for (;;) {
		struct req r = {.opcode = IBV_WR_RDMA_WRITE,
				.local = buf,
				.len = BIG,
				.lkey = mr->lkey,
				.remote = region.addr,
				.rkey = region.rkey};

		if (run_req(s.qp, s.cq, &r) != IBV_WC_SUCCESS)
			return 4;
	}
}

/* Stops the initiator until it is caught holding the target's key,
 * which it does for most of a long copy and for part of each atomic: 0,
 * and it is left stopped; -1 when it never was in CATCH_TRIES. */
#define CATCH_TRIES 20000 /* about 1 in 10 catches; under valgrind 1 in 1000 */

static int catch_holding(struct proc *t, struct proc *i)
{
	struct msg m;

	for (int tries = 1; tries <= CATCH_TRIES; tries++) {
		if (stop(i) || say(&t->l, M_ASK, (uint64_t)i->pid) || expect(&t->l, M_ANSWER, &m))
			return -1;
		if (m.value) {
			printf("%s caught holding the key at try %d\n", i->name, tries);
			return 0;
		}
		kill(i->pid, SIGCONT);
		usleep(200);
	}
	return -1;
}

static void test_killed_mid_copy(void)
{
	struct proc t = {.pid = -1}, i = {.pid = -1};
	int ok;

	ok = !spawn(&t, "target", target_killed_peer, NULL) &&
	     !spawn(&i, "initiator", initiator_killed, NULL) && !join(&t, &i) && !pass(&t, &i) &&
	     !expect(&t.l, M_LANDING, NULL);
	CHECK(ok);
	if (ok) {
		CHECK_EQ(catch_holding(&t, &i), 0);
		/* Killed with its hold taken, and left unreaped (a zombie)
		 * while the target deregisters. */
		abandon(&i);
		CHECK(!say(&t.l, M_GO, 0) && !expect(&t.l, M_DONE, NULL));
	} else {
		abandon(&i);
		abandon(&t);
	}
	CHECK_EQ(reap(&t), 0);
	CHECK_EQ(reap(&i), 128 + SIGKILL);
}

/* ==== 6 and 7. Atomics of two initiators on one counter. */

/* Adds an open-ended adder may make at most: it runs until the other's
 * run is over, and a stopped one until it is caught inside an atomic (a
 * few tries, each letting it run for a fraction of a millisecond). */
#define RUN_CAP (4u << 20)

/* Shared by the orchestrator and the adders, mapped before the forks. */
struct board {
	int halt;		       /* the open-ended adder stops */
	uint64_t olds[RUN_CAP + ADDS]; /* the old values, A's then B's */
};

/* give_way: the adder yields the core after each add. Two cores, three
 * busy threads with the target's atomic server: without it the served
 * adder (UROCE_DIRECT=0) waits out an ACK timeout whenever the server is
 * not scheduled within a millisecond, and makes no progress while the
 * direct one runs; with it, the two runs interleave add by add. Not for
 * a stopped adder, which must be caught inside an atomic: a yield is a
 * system call, and a stop lands at its return, never inside one. */
struct adder {
	int direct, open_ended; /* open-ended: until halt, at most RUN_CAP */
	int give_way;
	struct board *board;
	uint64_t *olds;
};

static int target_counter(const struct link *l, const void *arg)
{
	static struct side t;
	struct ibv_qp *second;
	struct region g;
	struct msg done;
	void *seg;

	(void)arg;
	if (side_open(&t, IBV_QPT_RC, 16, CAP) || memfd_map(&g, SMALL) || region_reg(&g, t.pd))
		return 2;
	second = extra_qp(&t);
	seg = map_segment(t.qp);
	if (!second || !seg || link_connect(l, t.qp) || link_connect(l, second) ||
	    say_region(l, &g) || say_region(l, &g) ||
	    answer_asks(l, seg, g.mr->rkey, M_DONE, &done))
		return 3;
	/* Every add completed counted once: what both initiators made. */
	CHECK_EQ(*(volatile uint64_t *)g.buf, done.value);
	munmap(seg, uro_seg_size());
	ibv_destroy_qp(second);
	region_free(&g, MEMFD);
	side_close(&t);
	return 0;
}

/* FETCH_AND_ADD 1, each completed before the next: ADDS of them, or
 * open-ended until halted, saying early in the run that it runs. Says at
 * its end how many it made. */
static int initiator_adder(const struct link *l, const void *arg)
{
	const struct adder *a = arg;
	uint32_t cap = a->open_ended ? RUN_CAP : ADDS, n;
	static struct side s;
	struct msg region;

	if (!a->direct)
		setenv("UROCE_DIRECT", "0", 1);
	if (side_open(&s, IBV_QPT_RC, 16, CAP) || link_connect(l, s.qp) ||
	    expect(l, M_REGION, &region))
		return 2;
	if (a->direct)
		CHECK_EQ(arm(), 0);
	if (say(l, M_ARMED, 0) || expect(l, M_GO, NULL))
		return 3;
	for (n = 0; n < cap; n++) {
		int st;

		if (a->open_ended && __atomic_load_n(&a->board->halt, __ATOMIC_ACQUIRE))
			break;
		st = atomic(&s, IBV_WR_ATOMIC_FETCH_AND_ADD, &region, 0, 1, 0, &a->olds[n]);
		if (st != IBV_WC_SUCCESS) {
			CHECK_EQ(st, IBV_WC_SUCCESS);
			return 4;
		}
		if (a->open_ended && n == 1000 && say(l, M_EARLY, 0))
			return 5;
		if (a->give_way)
			sched_yield();
	}
	if (say(l, M_DONE, n))
		return 6;
	side_close(&s);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* How often the two adders' old values alternate: each adder's rise in
 * order, so this counts the turns between them, a measure of how much
 * their runs overlapped (said, never judged: it is the scheduler's). */
static uint64_t turns(const uint64_t *a, uint64_t na, const uint64_t *b, uint64_t nb)
{
	uint64_t i = 0, j = 0, n = 0;
	int last = -1;

	while (i < na || j < nb) {
		int from_a = j == nb || (i < na && a[i] < b[j]);

		n += last >= 0 && from_a != last;
		last = from_a;
		if (from_a)
			i++;
		else
			j++;
	}
	return n;
}

/* Every add saw its own old value: A's na and B's nb together are
 * 0 .. na+nb-1. */
static int each_seen_once(struct board *b, uint64_t na, uint64_t nb, uint64_t b_at)
{
	printf("the two adders' old values alternate %" PRIu64 " times\n",
	       turns(b->olds, na, b->olds + b_at, nb));
	memmove(b->olds + na, b->olds + b_at, nb * sizeof(uint64_t));
	qsort(b->olds, na + nb, sizeof(uint64_t), cmp_u64);
	for (uint64_t n = 0; n < na + nb; n++)
		if (b->olds[n] != n)
			return 0;
	return 1;
}

/* Both initiators connected and armed, with the counter's region. */
static int adders_ready(struct proc *t, struct proc *a, struct proc *b)
{
	return join(t, a) || join(t, b) || pass(t, a) || pass(t, b) ||
		       expect(&a->l, M_ARMED, NULL) || expect(&b->l, M_ARMED, NULL)
		   ? -1
		   : 0;
}

/* a runs first, and goes on until b's run is over, so that b's run lies
 * within a's; with stop_a, a is stopped inside one of its atomics (holding
 * the key, as the target sees in the key's lanes) before b starts, and
 * b's adds all complete before a goes on. How many each made, in na and
 * nb. */
static int run_within(struct proc *t, struct proc *a, struct proc *b, int stop_a,
		      struct board *board, uint64_t *na, uint64_t *nb)
{
	struct msg m;

	if (say(&a->l, M_GO, 0) || expect(&a->l, M_EARLY, NULL) || (stop_a && catch_holding(t, a)))
		return -1;
	if (say(&b->l, M_GO, 0) || expect(&b->l, M_DONE, &m))
		return -1;
	*nb = m.value;
	__atomic_store_n(&board->halt, 1, __ATOMIC_RELEASE);
	if (stop_a)
		kill(a->pid, SIGCONT);
	if (expect(&a->l, M_DONE, &m))
		return -1;
	*na = m.value;
	return 0;
}

static void test_two_adders(int a_direct, int stop_a)
{
	struct board *board =
	    mmap(NULL, sizeof(*board), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct adder aa = {.direct = a_direct, .open_ended = 1, .give_way = !stop_a},
		     bb = {.direct = 1, .give_way = !stop_a};
	struct proc t = {.pid = -1}, a = {.pid = -1}, b = {.pid = -1};
	uint64_t na = 0, nb = 0;
	int ok;

	if (board == MAP_FAILED) {
		CHECK(0);
		return;
	}
	aa.board = bb.board = board;
	aa.olds = board->olds;
	bb.olds = board->olds + RUN_CAP;
	ok = !spawn(&t, "target", target_counter, NULL) &&
	     !spawn(&a, a_direct ? "adder A" : "adder A on UROCE_DIRECT=0", initiator_adder, &aa) &&
	     !spawn(&b, "adder B", initiator_adder, &bb) && !adders_ready(&t, &a, &b) &&
	     !run_within(&t, &a, &b, stop_a, board, &na, &nb) && !say(&t.l, M_DONE, na + nb);
	finish(ok, &t, &a, &b, NULL);
	CHECK_EQ(nb, ADDS);
	CHECK(na > 1000);
	if (ok)
		CHECK(each_seen_once(board, na, nb, RUN_CAP));
	munmap(board, sizeof(*board));
}

/* ==== 8. Direct atomics need no thread of the target. */

enum { W_ADD = 0, W_SWAP = 8, W_STORE = 16, W_SERVED = 24, W_LATE = 32 };

static int target_stopped(const struct link *l, const void *arg)
{
	static struct side t;
	struct ibv_qp *second, *third;
	struct region g;
	uint64_t *w;

	(void)arg;
	if (side_open(&t, IBV_QPT_RC, 16, CAP) || memfd_map(&g, SMALL) || region_reg(&g, t.pd))
		return 2;
	w = (uint64_t *)g.buf;
	w[W_ADD / 8] = 5;
	w[W_SWAP / 8] = 7;
	second = extra_qp(&t);
	third = extra_qp(&t);
	if (!second || !third || link_connect(l, t.qp) || link_connect(l, second) ||
	    link_connect(l, third) || say_region(l, &g) || say_region(l, &g) || say_region(l, &g) ||
	    expect(l, M_DONE, NULL))
		return 3;
	CHECK_EQ(w[W_ADD / 8], 8);
	CHECK_EQ(w[W_SWAP / 8], 9);
	CHECK(w[W_STORE / 8] == 0x1122334455667788ull);
	CHECK_EQ(w[W_LATE / 8], 1);
	ibv_destroy_qp(third);
	ibv_destroy_qp(second);
	region_free(&g, MEMFD);
	side_close(&t);
	return 0;
}

static void direct_atomics(struct side *s, const struct msg *r)
{
	uint64_t old = 0;

	for (uint64_t n = 0; n < 3; n++) {
		CHECK_EQ(atomic(s, IBV_WR_ATOMIC_FETCH_AND_ADD, r, W_ADD, 1, 0, &old),
			 IBV_WC_SUCCESS);
		CHECK_EQ(old, 5 + n);
	}
	CHECK_EQ(atomic(s, IBV_WR_ATOMIC_CMP_AND_SWP, r, W_SWAP, 9, 7, &old), IBV_WC_SUCCESS);
	CHECK_EQ(old, 7);
	CHECK_EQ(atomic(s, IBV_WR_ATOMIC_CMP_AND_SWP, r, W_SWAP, 11, 7, &old), IBV_WC_SUCCESS);
	CHECK_EQ(old, 9); /* compared unequal: not swapped */
	CHECK_EQ(atomic(s, IBV_WR_ATOMIC_WRITE, r, W_STORE, 0x1122334455667788ull, 0, &old),
		 IBV_WC_SUCCESS);
}

/* A FETCH_AND_ADD whose result buffer the program made read-only after
 * registering it: the requester's LOC_PROT_ERR, and the target's counter
 * untouched (target_stopped checks it). Last: the error moves the QP to
 * ERR. */
static void atomic_into_read_only(struct side *s, const struct msg *r)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr =
	    p != MAP_FAILED ? ibv_reg_mr(s->pd, p, page, IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct req q = {.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
			.local = p,
			.len = 8,
			.remote = r->addr + W_ADD,
			.rkey = r->rkey,
			.operand = 1};

	CHECK(mr != NULL);
	if (!mr)
		return;
	q.lkey = mr->lkey;
	CHECK_EQ(mprotect(p, page, PROT_READ), 0);
	CHECK_EQ(run_req(s->qp, s->cq, &q), IBV_WC_LOC_PROT_ERR);
	ibv_dereg_mr(mr);
	munmap(p, page);
}

static int initiator_atomics(const struct link *l, const void *arg)
{
	const struct path *a = arg;
	static struct side s;
	struct msg region;
	uint64_t old;

	if (!a->direct)
		setenv("UROCE_DIRECT", "0", 1);
	setenv("PAIR_TIMEOUT", "12", 1); /* the unanswered one gives up sooner */
	if (side_open(&s, IBV_QPT_RC, 16, CAP) || link_connect(l, s.qp) ||
	    expect(l, M_REGION, &region))
		return 2;
	if (a->direct)
		CHECK_EQ(arm(), 0);
	if (say(l, M_ARMED, 0) || expect(l, M_GO, NULL))
		return 3;
	if (a->direct) {
		direct_atomics(&s, &region);
		atomic_into_read_only(&s, &region);
	} else
		CHECK_EQ(atomic(&s, IBV_WR_ATOMIC_FETCH_AND_ADD, &region, W_SERVED, 1, 0, &old),
			 IBV_WC_RETRY_EXC_ERR);
	if (say(l, M_DONE, 0))
		return 4;
	side_close(&s);
	return 0;
}

/* A served atomic posted while the target is stopped, with an ACK timeout
 * (4.096 us << 26: about 275 s) longer than wait_wc's bound: it completes
 * only if its answer is looked for before the timeout runs out. */
static int initiator_late(const struct link *l, const void *arg)
{
	static struct side s;
	struct ibv_sge sge;
	struct ibv_send_wr wr = {.wr_id = 1,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct msg region;
	struct ibv_wc wc;
	uint64_t old;

	(void)arg;
	setenv("UROCE_DIRECT", "0", 1);
	setenv("PAIR_TIMEOUT", "26", 1);
	if (side_open(&s, IBV_QPT_RC, 16, CAP) || link_connect(l, s.qp) ||
	    expect(l, M_REGION, &region) || say(l, M_ARMED, 0) || expect(l, M_GO, NULL))
		return 2;
	sge = (struct ibv_sge){.addr = (uintptr_t)s.buf, .length = 8, .lkey = s.mr->lkey};
	wr.wr.atomic.remote_addr = region.addr + W_LATE;
	wr.wr.atomic.rkey = region.rkey;
	wr.wr.atomic.compare_add = 1;
	/* ibv_post_send waits a while for the answer; then it is left to
	 * the timers, and the target is let run. */
	CHECK_EQ(ibv_post_send(s.qp, &wr, &bad), 0);
	if (say(l, M_STARTED, 0))
		return 3;
	CHECK(wait_wc(s.cq, &wc) && wc.status == IBV_WC_SUCCESS);
	memcpy(&old, s.buf, 8);
	CHECK_EQ(old, 0);
	if (say(l, M_DONE, 0))
		return 4;
	side_close(&s);
	return 0;
}

static void test_atomics_without_target(void)
{
	static const struct path direct = {.direct = 1}, off = {.direct = 0};
	struct proc t = {.pid = -1}, a = {.pid = -1}, b = {.pid = -1}, c = {.pid = -1};
	int ok, stopped;

	ok = !spawn(&t, "target", target_stopped, NULL) &&
	     !spawn(&a, "direct initiator", initiator_atomics, &direct) &&
	     !spawn(&b, "initiator on UROCE_DIRECT=0", initiator_atomics, &off) &&
	     !spawn(&c, "late answer's initiator", initiator_late, NULL) && !join(&t, &a) &&
	     !join(&t, &b) && !join(&t, &c) && !pass(&t, &a) && !pass(&t, &b) && !pass(&t, &c) &&
	     !expect(&a.l, M_ARMED, NULL) && !expect(&b.l, M_ARMED, NULL) &&
	     !expect(&c.l, M_ARMED, NULL);
	stopped = ok && !stop(&t);
	ok = stopped && !say(&a.l, M_GO, 0) && !expect(&a.l, M_DONE, NULL) && !say(&b.l, M_GO, 0) &&
	     !expect(&b.l, M_DONE, NULL) && !say(&c.l, M_GO, 0) && !expect(&c.l, M_STARTED, NULL);
	if (stopped)
		kill(t.pid, SIGCONT);
	ok = ok && !expect(&c.l, M_DONE, NULL) && !say(&t.l, M_DONE, 0);
	finish(ok, &t, &a, &b, &c, NULL);
}

/* ==== 9. One descriptor an object, however many regions lie in it. */

#define REGIONS 256

/* Registers REGIONS pages of g one by one: the descriptors that costs. */
static void regions_on(struct ibv_pd *pd, struct region *g, const char *what)
{
	static struct ibv_mr *mr[REGIONS];
	int before = open_fds(), held;

	for (int i = 0; i < REGIONS; i++)
		mr[i] = ibv_reg_mr(pd, g->buf + (size_t)i * 4 * KIB, 4 * KIB, ALL_ACCESS);
	held = open_fds() - before;
	for (int i = 0; i < REGIONS; i++)
		CHECK(mr[i] && !ibv_dereg_mr(mr[i]));
	if (held > 1)
		printf("%s: %d regions hold %d descriptors\n", what, REGIONS, held);
	CHECK(held <= 1);
	CHECK_EQ(open_fds(), before);
}

static int descriptors_role(const struct link *l, const void *arg)
{
	struct ibv_context *ctx = open_dev("uroce0");
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct region g;
	char path[64];

	(void)l;
	(void)arg;
	CHECK(pd != NULL);
	if (!pd)
		return 1;
	CHECK(!memfd_map(&g, REGIONS * 4 * KIB));
	regions_on(pd, &g, "a memfd");
	region_free(&g, MEMFD);
	if (shmfile_ok) {
		shmfile_path(path, sizeof(path));
		CHECK(!shmfile_map(&g, REGIONS * 4 * KIB, path));
		regions_on(pd, &g, "a /dev/shm file");
		region_free(&g, SHMFILE);
		unlink(path);
	}
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}

static void test_descriptors_per_object(void)
{
	struct proc p = {.pid = -1};

	CHECK(!spawn(&p, "registrar", descriptors_role, NULL));
	CHECK_EQ(reap(&p), 0);
}

/* ==== 10. A region the peer may not map is tried once. */

#define REFUSED_WRITES 20

/* A System V segment, registered, then given to another user: published
 * as shareable, but no longer its peer's to map (map_sysv). */
static int target_refused(const struct link *l, const void *arg)
{
	static struct side t;
	struct shmid_ds ds;
	struct ibv_mr *mr;
	uint8_t *buf;
	int id;

	(void)arg;
	id = shmget(IPC_PRIVATE, SMALL, IPC_CREAT | 0600);
	buf = id < 0 ? (void *)-1 : shmat(id, NULL, 0);
	if (buf == (void *)-1 || side_open(&t, IBV_QPT_RC, 16, CAP))
		return 2;
	memset(buf, 0, SMALL);
	mr = ibv_reg_mr(t.pd, buf, SMALL, ALL_ACCESS);
	if (!mr || shmctl(id, IPC_STAT, &ds))
		return 3;
	ds.shm_perm.uid = geteuid() + 1; /* its creator may (shmctl(2), IPC_SET) */
	if (shmctl(id, IPC_SET, &ds))
		return 4;
	if (link_connect(l, t.qp) || say_mr(l, mr) || expect(l, M_DONE, NULL))
		return 5;
	CHECK(all_are(buf, KEYED, REFUSED_WRITES - 1));
	ibv_dereg_mr(mr);
	shmctl(id, IPC_RMID, NULL);
	shmdt(buf);
	side_close(&t);
	return 0;
}

/* How many lines of the file at fd say "cannot map". */
static int refusals_in(int fd)
{
	FILE *f = fdopen(fd, "r");
	char line[512];
	int n = 0;

	if (!f)
		return -1;
	rewind(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "direct path: cannot map") != NULL;
	fclose(f);
	return n;
}

static int initiator_refused(const struct link *l, const void *arg)
{
	static struct side s;
	char path[] = "/tmp/uroce-direct-refused-XXXXXX";
	int log = mkstemp(path), err = dup(2), landed = 0;
	struct msg region;

	(void)arg;
	/* The library's debug lines, into a file of their own. */
	if (log < 0 || err < 0 || dup2(log, 2) < 0)
		return 2;
	unlink(path);
	setenv("UROCE_LOG", "debug", 1);
	if (side_open(&s, IBV_QPT_RC, 16, CAP) || link_connect(l, s.qp) ||
	    expect(l, M_REGION, &region))
		return 3;
	for (int k = 0; k < REFUSED_WRITES; k++)
		landed += write_byte(&s, &region, (uint8_t)k) == IBV_WC_SUCCESS;
	dup2(err, 2);
	CHECK_EQ(landed, REFUSED_WRITES);
	CHECK_EQ(refusals_in(log), 1);
	if (say(l, M_DONE, 0))
		return 4;
	side_close(&s);
	return 0;
}

static void test_refused_once(void)
{
	struct proc t = {.pid = -1}, i = {.pid = -1};
	int ok;

	if (!sysv_ok) {
		skip("refused_once: no System V IPC in this kernel");
		return;
	}
	/* region, done */
	ok = !spawn(&t, "target", target_refused, NULL) &&
	     !spawn(&i, "initiator", initiator_refused, NULL) && !join(&t, &i) && !pass(&t, &i) &&
	     !pass(&i, &t);
	finish(ok, &t, &i, NULL);
}

/* ==== What the kernel offers. */

/* A child installs the filter and tries an attach to itself: 0 when it is
 * refused, 77 when the kernel has no seccomp filters, 1 when the filter
 * does not bite. */
static int probe_filter(void)
{
	pid_t pid;
	int st;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		char from = 1, to = 0;
		struct iovec l = {.iov_base = &to, .iov_len = 1},
			     r = {.iov_base = &from, .iov_len = 1};
		int err;

		alarm(10);
		err = refuse_attach();
		if (err)
			_exit(err == EINVAL || err == ENOSYS ? 77 : 1);
		_exit(process_vm_readv(getpid(), &l, 1, &r, 1, 0) < 0 && errno == EPERM ? 0 : 1);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return 1;
	return WEXITSTATUS(st);
}

static int sysv_available(void)
{
	int id = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);

	if (id < 0)
		return errno == ENOSYS ? 0 : -1;
	shmctl(id, IPC_RMID, NULL);
	return 1;
}

static int probe(void)
{
	int memfd = (int)syscall(SYS_memfd_create, "uroce-direct-probe", 0);
	int f;

	if (memfd < 0) {
		printf("SKIP: no memfd_create in this kernel\n");
		return 77;
	}
	close(memfd);
	f = probe_filter();
	filter_ok = f == 0;
	if (f == 77)
		skip("seccomp filters (the proof that bytes go the direct way)");
	CHECK(f == 0 || f == 77);
	f = sysv_available();
	sysv_ok = f == 1;
	if (!f)
		skip("bytes_move_directly to System V memory: no System V IPC in this kernel");
	CHECK(f >= 0);
	shmfile_ok = access("/dev/shm", W_OK) == 0;
	if (!shmfile_ok)
		skip("bytes_move_directly to a /dev/shm file: no writable /dev/shm");
	return 0;
}

int main(void)
{
	int r;

	/* Between processes on shared memory: the path this tests. */
	unsetenv("UROCE_TRANSPORT");
	unsetenv("UROCE_DIRECT");
	signal(SIGPIPE, SIG_IGN);
	if (probe())
		return 77;
	RUN(test_bytes_move_directly(), 120);
	RUN(test_dereg_during_copy(IBV_WR_RDMA_WRITE), 200);
	RUN(test_dereg_during_copy(IBV_WR_RDMA_READ), 200);
	RUN(test_key_revoked_and_moved(), 120);
	RUN(test_fork_keeps_mappings(), 120);
	RUN(test_killed_mid_copy(), 200);
	RUN(test_two_adders(1, 1), 200); /* 6: one stopped mid-run */
	RUN(test_two_adders(0, 0), 200); /* 7: one on UROCE_DIRECT=0 */
	RUN(test_atomics_without_target(), 120);
	RUN(test_descriptors_per_object(), 120);
	RUN(test_refused_once(), 120);
	r = check_report();
	return r ? r : skipped ? 77 : 0;
}
