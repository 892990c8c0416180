/* A poll that completes a QP's last request waits for the peer's answer.
 *
 * In a ping-pong (ib_write_lat, ib_send_lat, ibv_rc_pingpong) the peer's
 * ACK comes first, as a NIC sends it: on receipt, before its program can
 * answer (IBTA 9.7.5.1). The poll that takes the ACK completes the
 * request, and the program goes back to its loop; ib_write_lat's then
 * spins on memory for the peer's WRITE. Here nobody else is there to
 * place it while the program spins: the progress thread shares the
 * program's core when the program is pinned (perftest pins it), and a
 * thread woken onto a core where another spins waits for its time slice.
 * That cost ib_write_lat between two namespaces 46 us a half round trip,
 * against about 10 with the wait.
 *
 * So a poll whose receive emptied a QP's send queue keeps receiving until
 * a request of the peer's comes on that QP, for URO_WIRE_AWAIT_NS at
 * most, once the peer has answered URO_WIRE_ANSWERED times in a row
 * within URO_WIRE_ANSWER_NS of such a completion; a wait that runs out
 * starts the count again, so one-way traffic never waits. The completion
 * is in the CQ before the answer's: the order a NIC shows, which
 * perftest's latency tests with -e count on (after the event that follows
 * a signalled SEND they poll the send CQ once).
 *
 * Not in a program that sleeps on a completion channel: its thread
 * receives for it, and its polls come after a wake-up. Not in the progress
 * thread's passes either: it waits for packets in ppoll. */
#include "wire.h"

void uro_wire_drained(struct uro_context *ctx, struct uro_qp *qp)
{
	struct uro_wire_endpoint *w = ctx->wire;
	struct uro_qp_wire *wq = qp->wire;

	wq->drained_ns = uro_now_ns();
	if (wq->answers < URO_WIRE_ANSWERED ||
	    __atomic_load_n(&w->sleeps_on_events, __ATOMIC_RELAXED))
		return;
	w->await_qp = qp;
}

void uro_wire_request_came(struct uro_context *ctx, struct uro_qp *qp)
{
	struct uro_qp_wire *wq = qp->wire;

	if (wq->drained_ns) {
		int soon = uro_now_ns() - wq->drained_ns < URO_WIRE_ANSWER_NS;

		wq->answers = soon ? wq->answers + (wq->answers < URO_WIRE_ANSWERED) : 0;
		wq->drained_ns = 0;
	}
	if (ctx->wire->await_qp == qp)
		ctx->wire->await_qp = NULL;
}

int uro_wire_awaits_answer(struct uro_wire_endpoint *w)
{
	if (!w->await_qp)
		return 0;
	if (uro_now_ns() < w->await_qp->wire->drained_ns + URO_WIRE_AWAIT_NS)
		return 1;
	w->await_qp->wire->answers = 0;
	w->await_qp = NULL;
	return 0;
}
