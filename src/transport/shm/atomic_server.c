/* The context's atomic server: the thread that executes the atomics other
 * processes of the host aim at this process's memory (core/atomic_table.h
 * says why the target executes them, and not the initiator).
 *
 * It starts when the process first registers memory for remote atomics or
 * moves a QP that accepts them to RTR, so a program that takes no atomics
 * stays single-threaded (objects.h uro_mt_lock). After serving it keeps
 * looking for a while before it sleeps: the next atomic of a stream then
 * costs no wake-up. It sleeps on a futex in the segment, which an
 * initiator rings only when it sees the thread asleep. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "atomic_table.h"
#include "cq_ring.h"
#include "library_thread.h"
#include "log.h"
#include "objects.h"

/* How long the thread keeps looking after it served: an atomic stream's
 * next request comes within a microsecond or two, while a futex wake-up
 * costs tens of them. */
#define SERVE_SPIN_NS 50000ull
/* How long one sleep lasts when nobody rings. */
#define SLEEP_NS 100000000ull

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Spins up to SERVE_SPIN_NS past last for a new request: 1 when one came. */
static int look_a_while(struct uro_context *ctx, uint64_t last)
{
	while (uro_now_ns() - last < SERVE_SPIN_NS) {
		for (int k = 0; k < 64; k++) {
			if (uro_atomic_pending(&ctx->self) ||
			    __atomic_load_n(&ctx->atomics.stop, __ATOMIC_ACQUIRE))
				return 1;
			cpu_relax();
		}
	}
	return 0;
}

static void *serve(void *arg)
{
	struct uro_context *ctx = arg;
	uint64_t last = 0;

	while (!__atomic_load_n(&ctx->atomics.stop, __ATOMIC_ACQUIRE)) {
		if (uro_atomic_serve(&ctx->self)) {
			last = uro_now_ns();
			continue;
		}
		if (last && look_a_while(ctx, last))
			continue;
		last = 0;
		uro_atomic_sleep(&ctx->self, SLEEP_NS);
	}
	return NULL;
}

void uro_atomic_server_init(struct uro_context *ctx)
{
	pthread_mutex_init(&ctx->atomics.lock, NULL);
}

void uro_atomic_server_start(struct uro_context *ctx)
{
	struct uro_atomic_server *s = &ctx->atomics;
	int err;

	if (__atomic_load_n(&s->running, __ATOMIC_ACQUIRE) || ctx->owner_pid != getpid())
		return;
	pthread_mutex_lock(&s->lock);
	if (!s->running && !s->failed) {
		err = uro_thread_start(&s->thread, NULL, serve, ctx);
		__atomic_store_n(&s->running, err == 0, __ATOMIC_RELEASE);
		s->failed = err != 0;
		uro_atomic_set_serving(&ctx->self, err == 0);
		if (err)
			uro_warn("no atomic server thread (%s): atomics aimed at this process "
				 "from the host's other processes go unanswered",
				 strerror(err));
	}
	pthread_mutex_unlock(&s->lock);
}

void uro_atomic_server_stop(struct uro_context *ctx)
{
	struct uro_atomic_server *s = &ctx->atomics;

	/* A forked child has no thread: its copy of the flag is the parent's. */
	if (ctx->owner_pid != getpid())
		return;
	if (s->running) {
		uro_atomic_set_serving(&ctx->self, 0);
		__atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
		uro_atomic_ring(&ctx->self);
		pthread_join(s->thread, NULL);
		s->running = 0;
	}
	pthread_mutex_destroy(&s->lock);
}
