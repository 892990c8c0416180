/* ACKs that wait for their QP's answer (rc_responder.c, ACKs after the
 * answer) and leave without the responder: the progress thread counts
 * them in its sleep, and the program's turning to other things, or its
 * exit, sends them. */
#include <pthread.h>
#include <stdint.h>

#include "wire.h"

/* An ACK a poll left waiting for its QP's answer (rc_responder.c) is sent
 * by the program's next poll or post, or else by the progress thread by
 * its time, when the thread next passes: a thread asleep for longer than
 * it leaves a poller alone (URO_WIRE_POLLER_NS) is woken to count it in.
 * One between passes (thread_looks_ns 0) sees it before it sleeps
 * (uro_wire_thread_sleeps). */
void uro_wire_thread_looks_soon(struct uro_context *ctx, struct uro_wire_endpoint *w)
{
	uint64_t looks = __atomic_load_n(&w->thread_looks_ns, __ATOMIC_SEQ_CST);

	if (looks && looks > uro_now_ns() + URO_WIRE_POLLER_NS)
		uro_wire_kick(ctx);
}

/* The progress thread is to sleep for next ns (0: until woken), after a
 * pass or, watching a polling program, without one: how long it may. An
 * ACK a poll left waiting while the thread passed is counted in here, as
 * the pass's own are. Watching, it needs not: the program sends its ACKs,
 * or the next look finds it away. */
uint64_t uro_wire_thread_sleeps(struct uro_wire_endpoint *w, uint64_t next, int after_pass)
{
	__atomic_store_n(&w->thread_looks_ns, next ? uro_now_ns() + next : UINT64_MAX,
			 __ATOMIC_SEQ_CST);
	if (after_pass && __atomic_load_n(&w->deferred_acks, __ATOMIC_SEQ_CST) &&
	    (!next || next > URO_WIRE_ACK_WAIT_NS))
		return URO_WIRE_ACK_WAIT_NS;
	return next;
}

/* The ACKs the QPs kept waiting for an answer (rc_responder.c) leave now,
 * as a NIC's would have: the program turns from its exchanges to other
 * things (it creates or changes a QP, or sleeps on a completion channel),
 * or exits without closing its context. At exit (wait 0) not if a
 * receiver holds them: a thread that called exit while receiving. */
void uro_wire_acks_now(struct uro_context *ctx, int wait)
{
	struct uro_wire_endpoint *w = __atomic_load_n(&ctx->wire, __ATOMIC_ACQUIRE);

	if (!w || !__atomic_load_n(&w->deferred_acks, __ATOMIC_SEQ_CST))
		return;
	if (wait)
		pthread_mutex_lock(&w->rx_lock);
	else if (pthread_mutex_trylock(&w->rx_lock))
		return;
	uro_wire_deferred_acks(ctx, UINT64_MAX);
	pthread_mutex_unlock(&w->rx_lock);
}
