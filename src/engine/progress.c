/* The context's progress thread, as the engine knows it: started the first
 * time a request has to wait (or a QP goes on the wire), kicked when a new
 * wait begins, stopped and joined when the context closes. What it does
 * while it runs is the verbs layer's (src/verbs/progress_thread.c), which
 * drives both transports: the engine only starts it and wakes it, through
 * the two functions that layer hands it, and so calls neither transport. */
#include <string.h>
#include <unistd.h>

#include "library_thread.h"
#include "log.h"
#include "objects.h"

void uro_progress_init(struct uro_context *ctx, void *(*body)(void *),
		       void (*wake)(struct uro_context *))
{
	struct uro_progress_thread *t = &ctx->progress;
	pthread_condattr_t a;

	t->body = body;
	t->wake = wake;
	pthread_mutex_init(&t->lock, NULL);
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&t->cond, &a);
	pthread_condattr_destroy(&a);
}

void uro_progress_kick(struct uro_context *ctx)
{
	struct uro_progress_thread *t = &ctx->progress;
	int err;

	pthread_mutex_lock(&t->lock);
	if (t->running) {
		t->kicked = 1;
		pthread_cond_signal(&t->cond);
		t->wake(ctx);
	} else if (ctx->owner_pid == getpid() && !t->failed) {
		err = uro_thread_start(&t->thread, NULL, t->body, ctx);
		t->running = err == 0;
		t->failed = err != 0;
		if (err)
			uro_warn("no progress thread (%s): waiting requests are retried only "
				 "while the program polls its CQs",
				 strerror(err));
	}
	pthread_mutex_unlock(&t->lock);
}

void uro_progress_stop(struct uro_context *ctx)
{
	struct uro_progress_thread *t = &ctx->progress;

	/* A forked child has no thread, and its copies of the lock and the
	 * condition may show the parent's waiter: they are left alone. */
	if (ctx->owner_pid != getpid())
		return;
	pthread_mutex_lock(&t->lock);
	t->stop = 1;
	pthread_cond_signal(&t->cond);
	t->wake(ctx);
	pthread_mutex_unlock(&t->lock);
	if (t->running)
		pthread_join(t->thread, NULL);
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
}
