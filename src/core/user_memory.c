#include "user_memory.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

/* A NIC's reads and writes of the program's memory are the device's, not
 * the program's, and a tool that checks the program's accesses never sees
 * them. uroce's guarded accesses stand for them: under valgrind they are
 * not the program's errors either (a fault among them is the unmapped
 * buffer the completion reports, which valgrind would report first).
 * Made only under valgrind, as found once: outside it, each request is
 * a dozen instructions that do nothing, 22 of a guarded access's 51
 * (callgrind). */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
static int under_valgrind;
#define FIND_VALGRIND() (under_valgrind = RUNNING_ON_VALGRIND != 0)
#define DEVICE_ACCESS_BEGIN()                                                                      \
	do {                                                                                       \
		if (under_valgrind)                                                                \
			VALGRIND_DISABLE_ERROR_REPORTING;                                          \
	} while (0)
#define DEVICE_ACCESS_END()                                                                        \
	do {                                                                                       \
		if (under_valgrind)                                                                \
			VALGRIND_ENABLE_ERROR_REPORTING;                                           \
	} while (0)
#endif
#endif
#ifndef DEVICE_ACCESS_BEGIN
#define FIND_VALGRIND()	      ((void)0)
#define DEVICE_ACCESS_BEGIN() ((void)0)
#define DEVICE_ACCESS_END()   ((void)0)
#endif

/* Steps of the probe: the smallest page there is, so that no page of a
 * buffer is skipped whatever the mapping's page size. */
#define PROBE_STEP 4096u

/* A guarded access: where a fault in it jumps to, and the memory it
 * touches. A fault elsewhere (in a signal handler of the program's that
 * interrupted the access, say) is not the access's. The jump buffer is
 * guarded()'s own, not a member: each access's initializer would zero
 * its 200 bytes (a rep stos, a tenth of a direct atomic's time). */
struct guard {
	sigjmp_buf *env;
	const struct iovec *iov; /* the program's buffers */
	int n;
	struct iovec other;		/* and one more, the copy's other side */
	int write;			/* a probe's: for writing */
	struct uro_user_atomic *atomic; /* an atomic's operands and result */
};

/* This thread's access under way, or NULL. Initial-exec so that the
 * signal handler's read of it never has glibc allocate this thread's TLS
 * block inside the handler. */
static __thread struct guard *volatile guard __attribute__((tls_model("initial-exec")));

/* The program's (or a sanitizer's) handlers from before uroce's, which
 * every fault outside a guarded access goes to. */
static struct sigaction previous[2]; /* SIGSEGV, SIGBUS */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int installed; /* once done: no call to pthread_once per access */

static void pass_on(int sig, siginfo_t *si, void *uc)
{
	const struct sigaction *prev = &previous[sig == SIGBUS];

	if (prev->sa_handler == SIG_IGN && si->si_code <= 0)
		return; /* a sent signal the program ignores */
	if (prev->sa_handler == SIG_DFL || prev->sa_handler == SIG_IGN) {
		/* A fault runs its instruction again on return and meets the
		 * default action; a sent signal is sent again to meet it. Either
		 * way the program ends as it would have without uroce. */
		sigaction(sig, prev, NULL);
		if (si->si_code <= 0)
			raise(sig);
		return;
	}
	if (prev->sa_flags & SA_SIGINFO)
		prev->sa_sigaction(sig, si, uc);
	else
		prev->sa_handler(sig);
}

static int within(const struct iovec *v, uintptr_t a)
{
	return a - (uintptr_t)v->iov_base < v->iov_len;
}

static int touches(const struct guard *g, const siginfo_t *si)
{
	uintptr_t a = (uintptr_t)si->si_addr;

	/* An address that is not canonical faults without one (SI_KERNEL). */
	if (si->si_code == SI_KERNEL || within(&g->other, a))
		return 1;
	for (int i = 0; i < g->n; i++)
		if (within(&g->iov[i], a))
			return 1;
	return 0;
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	struct guard *g = guard;

	/* Only a fault the kernel raised (si_code > 0) on the access's own
	 * memory ends it: a SIGSEGV sent with kill() is the program's
	 * business. */
	if (g && si->si_code > 0 && touches(g, si)) {
		guard = NULL;
		siglongjmp(*g->env, 1);
	}
	pass_on(sig, si, uc);
}

static void install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_fault;
	/* SA_NODEFER: jumping out of the handler then leaves the signal
	 * unblocked, so sigsetjmp need not save the mask (a system call per
	 * access). SA_ONSTACK: a program's stack overflow still reaches its
	 * own handler on its alternate stack. */
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &previous[0]);
	sigaction(SIGBUS, &sa, &previous[1]);
	FIND_VALGRIND();
	__atomic_store_n(&installed, 1, __ATOMIC_RELEASE);
}

/* The compiler must neither move the guarded access out from between the
 * guard's setting and clearing nor keep its operands in registers across
 * a jump back. */
#define BARRIER() __asm__ volatile("" ::: "memory")

/* Runs access(g) with a fault on g's memory turned into EFAULT. The jump
 * lands in this frame, alive while access runs. */
static int guarded(void (*access)(const struct guard *), struct guard *g)
{
	sigjmp_buf env;

	if (!__atomic_load_n(&installed, __ATOMIC_ACQUIRE))
		pthread_once(&once, install);
	g->env = &env;
	if (sigsetjmp(env, 0)) {
		DEVICE_ACCESS_END();
		return EFAULT;
	}
	DEVICE_ACCESS_BEGIN();
	guard = g;
	BARRIER();
	access(g);
	BARRIER();
	guard = NULL;
	DEVICE_ACCESS_END();
	return 0;
}

/* Gathers g's buffers into g->other. */
static void gather(const struct guard *g)
{
	uint8_t *to = g->other.iov_base;

	/* An empty buffer may name no memory at all (an SGE of length 0 at
	 * address 0): nothing is read from it. */
	for (int i = 0; i < g->n; i++) {
		if (!g->iov[i].iov_len)
			continue;
		memcpy(to, g->iov[i].iov_base, g->iov[i].iov_len);
		to += g->iov[i].iov_len;
	}
}

int uro_user_copy(void *dst, const void *src, size_t len)
{
	struct iovec from = {(void *)(uintptr_t)src, len};
	struct guard g = {.iov = &from, .n = 1, .other = {dst, len}};

	return guarded(gather, &g);
}

int uro_user_gather(void *dst, const struct iovec *iov, int n)
{
	struct guard g = {.iov = iov, .n = n, .other = {dst, 0}};

	for (int i = 0; i < n; i++)
		g.other.iov_len += iov[i].iov_len;
	return guarded(gather, &g);
}

/* Scatters g->other over g's buffers. */
static void scatter(const struct guard *g)
{
	const uint8_t *from = g->other.iov_base;

	for (int i = 0; i < g->n; i++) {
		if (!g->iov[i].iov_len)
			continue;
		memcpy(g->iov[i].iov_base, from, g->iov[i].iov_len);
		from += g->iov[i].iov_len;
	}
}

int uro_user_scatter(const struct iovec *iov, int n, const void *src)
{
	struct guard g = {.iov = iov, .n = n, .other = {(void *)(uintptr_t)src, 0}};

	for (int i = 0; i < n; i++)
		g.other.iov_len += iov[i].iov_len;
	return guarded(scatter, &g);
}

static void touch(uintptr_t p, int write)
{
	if (write)
		__atomic_fetch_or((volatile uint8_t *)p, 0, __ATOMIC_RELAXED);
	else
		(void)*(volatile const uint8_t *)p;
}

/* The first byte of each buffer, then one in every later page it
 * reaches. */
static void probe(const struct guard *g)
{
	for (int i = 0; i < g->n; i++) {
		uintptr_t p = (uintptr_t)g->iov[i].iov_base;
		uintptr_t page = p & ~(uintptr_t)(PROBE_STEP - 1);
		size_t len = g->iov[i].iov_len;
		size_t pages = len ? (p - page + len - 1) / PROBE_STEP + 1 : 0;

		for (size_t k = 0; k < pages; k++)
			touch(k ? page + k * PROBE_STEP : p, g->write);
	}
}

int uro_user_probe(const struct iovec *iov, int n, int write)
{
	struct guard g = {.iov = iov, .n = n, .write = write};

	return guarded(probe, &g);
}

/* One CPU instruction on the 8 bytes (a locked add, a compare-exchange, an
 * aligned store), so that it is atomic with respect to every other atomic
 * on them, from any thread of the process. */
static void atomic_access(const struct guard *g)
{
	struct uro_user_atomic *a = g->atomic;
	uint64_t *p = g->other.iov_base;

	if (a->result) {
		volatile uint8_t *first = a->result, *last = first + 7;

		a->result_fault = 1;
		BARRIER();
		*first = *first;
		*last = *last;
		BARRIER();
		a->result_fault = 0;
	}
	switch (a->kind) {
	case URO_ATOMIC_FETCH_ADD:
		a->old = __atomic_fetch_add(p, a->operand, __ATOMIC_SEQ_CST);
		break;
	case URO_ATOMIC_CMP_SWAP:
		a->old = a->compare;
		__atomic_compare_exchange_n(p, &a->old, a->operand, 0, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
		break;
	default:
		a->old = __atomic_exchange_n(p, a->operand, __ATOMIC_SEQ_CST);
		break;
	}
	if (a->result) {
		a->result_fault = 1;
		BARRIER();
		memcpy(a->result, &a->old, sizeof(a->old));
		BARRIER();
		a->result_fault = 0;
	}
}

int uro_user_atomic(void *addr, struct uro_user_atomic *a)
{
	struct iovec result = {a->result, a->result ? 8 : 0};
	struct guard g = {.iov = &result, .n = 1, .other = {addr, 8}, .atomic = a};

	a->result_fault = 0;
	if ((uintptr_t)addr & 7)
		return EFAULT;
	return guarded(atomic_access, &g);
}
