/* Whether the program is polling its CQs: what the progress thread reads
 * before it takes packets the program would take itself
 * (src/verbs/progress_thread.c; docs/architecture.md, Who plays the NIC).
 * The program marks its polls and posts here; the thread asks. */
#include <pthread.h>

#include "wire.h"

void uro_wire_in_poll(struct uro_context *ctx, int in)
{
	struct uro_wire_endpoint *w = __atomic_load_n(&ctx->wire, __ATOMIC_ACQUIRE);

	if (w)
		__atomic_store_n(&w->in_poll, in, __ATOMIC_RELAXED);
}

void uro_wire_busy(struct uro_context *ctx)
{
	struct uro_wire_endpoint *w = __atomic_load_n(&ctx->wire, __ATOMIC_ACQUIRE);

	if (w)
		__atomic_store_n(&w->last_active_ns, uro_now_ns(), __ATOMIC_RELAXED);
}

void uro_wire_idle(struct uro_context *ctx)
{
	struct uro_wire_endpoint *w = __atomic_load_n(&ctx->wire, __ATOMIC_ACQUIRE);

	if (!w)
		return;
	__atomic_store_n(&w->last_active_ns, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&w->sleeps_on_events, 1, __ATOMIC_RELAXED);
	uro_wire_kick(ctx);
}

int uro_wire_polled_lately(struct uro_wire_endpoint *w, uint64_t *left)
{
	uint64_t now = uro_now_ns(), last = __atomic_load_n(&w->last_active_ns, __ATOMIC_RELAXED);

	if (now - last >= URO_WIRE_POLLER_NS)
		return 0;
	*left = URO_WIRE_POLLER_NS - (now - last);
	if (*left > w->look_ns)
		*left = w->look_ns;
	return 1;
}

/* Whether the program is polling right now: inside ibv_poll_cq (or
 * between ibv_start_poll and ibv_end_poll), or out of one, or a post, for
 * less than URO_WIRE_POLLING_NS, or receiving. The thread runs on the
 * program's core when the program is pinned: the program is then not
 * running at all, and how long ago it last polled says more about the
 * scheduler's wake-up than about the program. Where it stood does not. */
int uro_wire_polling_now(struct uro_wire_endpoint *w)
{
	uint64_t last = __atomic_load_n(&w->last_active_ns, __ATOMIC_RELAXED);

	if (__atomic_load_n(&w->in_poll, __ATOMIC_RELAXED) ||
	    uro_now_ns() - last < URO_WIRE_POLLING_NS || pthread_mutex_trylock(&w->rx_lock))
		return 1;
	pthread_mutex_unlock(&w->rx_lock);
	return 0;
}

/* A program busy on its CQ is left alone longer each time it is found
 * polling, so that it pays about one wake-up a millisecond; each time it
 * is found away the thread looks twice as soon, down to URO_WIRE_LOOK_NS
 * (a program that polls for its WRITE's completion and then spins on
 * memory for the peer's: ib_write_lat). */
int uro_wire_still_polling(struct uro_wire_endpoint *w)
{
	if (uro_wire_polling_now(w)) {
		w->look_ns =
		    w->look_ns * 2 < URO_WIRE_POLLER_NS ? w->look_ns * 2 : URO_WIRE_POLLER_NS;
		return 1;
	}
	w->look_ns = w->look_ns / 2 > URO_WIRE_LOOK_NS ? w->look_ns / 2 : URO_WIRE_LOOK_NS;
	return 0;
}
