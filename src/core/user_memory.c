#include "user_memory.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

/* Steps of the probe: the smallest page there is, so that no page of a
 * buffer is skipped whatever the mapping's page size. */
#define PROBE_STEP 4096u

/* Where a fault inside a guarded access jumps to, for this thread; NULL
 * outside one. Initial-exec so that the signal handler's read of it never
 * has glibc allocate this thread's TLS block inside the handler. */
static __thread sigjmp_buf *volatile guard __attribute__((tls_model("initial-exec")));

/* The program's (or a sanitizer's) handlers from before uroce's, which
 * every fault outside a guarded access goes to. */
static struct sigaction previous[2]; /* SIGSEGV, SIGBUS */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int installed; /* once done: no call to pthread_once per access */

static void pass_on(int sig, siginfo_t *si, void *uc)
{
	const struct sigaction *prev = &previous[sig == SIGBUS];

	if (prev->sa_flags & SA_SIGINFO) {
		prev->sa_sigaction(sig, si, uc);
		return;
	}
	if (prev->sa_handler == SIG_DFL || prev->sa_handler == SIG_IGN) {
		/* Returning runs the faulting instruction again, which now meets
		 * the default action: the program ends as it would have. */
		sigaction(sig, prev, NULL);
		return;
	}
	prev->sa_handler(sig);
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	sigjmp_buf *g = guard;

	/* Only a fault the kernel raised (si_code > 0) ends an access: a
	 * SIGSEGV sent with kill() is the program's business. */
	if (g && si->si_code > 0) {
		guard = NULL;
		siglongjmp(*g, 1);
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
	__atomic_store_n(&installed, 1, __ATOMIC_RELEASE);
}

/* The compiler must neither move the guarded access out from between the
 * guard's setting and clearing nor keep its operands in registers across
 * a jump back. */
#define BARRIER() __asm__ volatile("" ::: "memory")

/* Runs access(arg) with a fault in it turned into EFAULT. The jump lands
 * in this frame, alive while access runs. */
static int guarded(void (*access)(const void *), const void *arg)
{
	sigjmp_buf env;

	if (!__atomic_load_n(&installed, __ATOMIC_ACQUIRE))
		pthread_once(&once, install);
	if (sigsetjmp(env, 0))
		return EFAULT;
	guard = &env;
	BARRIER();
	access(arg);
	BARRIER();
	guard = NULL;
	return 0;
}

struct copy {
	void *dst;
	const void *src;
	size_t len;
};

static void copy(const void *arg)
{
	const struct copy *c = arg;

	memcpy(c->dst, c->src, c->len);
}

int uro_user_copy(void *dst, const void *src, size_t len)
{
	struct copy c = {dst, src, len};

	return guarded(copy, &c);
}

static void touch(uintptr_t p, int write)
{
	if (write)
		__atomic_fetch_or((volatile uint8_t *)p, 0, __ATOMIC_RELAXED);
	else
		(void)*(volatile const uint8_t *)p;
}

struct probe {
	const struct iovec *iov;
	int n;
	int write;
};

/* The first byte of each buffer, then one in every later page it
 * reaches. */
static void probe(const void *arg)
{
	const struct probe *pr = arg;

	for (int i = 0; i < pr->n; i++) {
		uintptr_t p = (uintptr_t)pr->iov[i].iov_base;
		uintptr_t page = p & ~(uintptr_t)(PROBE_STEP - 1);
		size_t len = pr->iov[i].iov_len;
		size_t pages = len ? (p - page + len - 1) / PROBE_STEP + 1 : 0;

		for (size_t k = 0; k < pages; k++)
			touch(k ? page + k * PROBE_STEP : p, pr->write);
	}
}

int uro_user_probe(const struct iovec *iov, int n, int write)
{
	struct probe pr = {iov, n, write};

	return guarded(probe, &pr);
}
