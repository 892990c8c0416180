/* The context's progress thread: it plays the NIC's retry timers while the
 * program sleeps or does other work (a server blocked in epoll on its
 * completion channel). A request waiting behind an RNR NAK or an ACK
 * timeout is retried when its timer is due, as a NIC does on its own
 * (IBTA 9.7.5.2.8, 9.7.6.1.3); the program's own ibv_poll_cq and
 * ibv_get_cq_event still retry too, paying no wake-up when they do.
 *
 * The thread starts the first time a request has to wait, so that a
 * program whose requests never do stays single-threaded (and its posting
 * takes no lock, objects.h uro_mt_lock). It sleeps on a condition until the
 * earliest timer, and is stopped and joined when the context closes.
 *
 * With a QP on the wire it starts at once and plays the responder too: it
 * sleeps in ppoll on the endpoint's sockets and its kick eventfd, so that
 * READ, WRITE and atomic targets are served and retransmit timers fire
 * while the program does something else (docs/design.md, Inter-host: RoCEv2
 * on the wire). */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "verbs_ops.h"
#include "wire.h"

static void deadline_in(struct timespec *ts, uint64_t ns)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ns += (uint64_t)ts->tv_nsec;
	ts->tv_sec += (time_t)(ns / 1000000000ull);
	ts->tv_nsec = (long)(ns % 1000000000ull);
}

/* Looks at fds without sleeping for up to URO_WIRE_SPIN_NS (less when
 * the timer is due sooner): a stream's next datagram usually comes within
 * that, and a thread found awake costs its sender no wake-up. Only while
 * the program is away: one that spins on memory for a WRITE may share the
 * thread's core, and a spinning thread is not woken by a packet but waits
 * out the program's time slice (docs/architecture.md, Who plays the NIC). */
static int look_awhile(struct pollfd *fds, nfds_t n, uint64_t *next)
{
	const struct timespec now = {0, 0};
	uint64_t spin = *next && *next < URO_WIRE_SPIN_NS ? *next : URO_WIRE_SPIN_NS;
	uint64_t start = uro_now_ns(), spun = 0;
	int woke;

	while (!(woke = ppoll(fds, n, &now, NULL)) && (spun = uro_now_ns() - start) < spin)
		;
	/* What is left of the timer's wait; 1 ns when it is due. */
	if (*next)
		*next = *next > spun ? *next - spun : 1;
	return woke;
}

/* Sleeps until a packet (n = 2) or only a kick (n = 1), or the timer:
 * t->lock is let go meanwhile. The endpoint's receive set holds every
 * socket it opened, the ones opened while the thread sleeps too. After a
 * wait that packets ended (streaming, only ever with n = 2), it looks
 * awhile before it sleeps, if the program polled not lately.
 * Whether packets woke it. */
static int wait_wire(struct uro_progress_thread *t, struct uro_wire_endpoint *w, uint64_t next,
		     nfds_t n, int streaming)
{
	struct pollfd fds[2] = {{.fd = w->kick_fd, .events = POLLIN},
				{.fd = w->rx_efd, .events = POLLIN}};
	uint64_t drain, left;
	struct timespec ts;
	int woke = 0;

	pthread_mutex_unlock(&t->lock);
	if (streaming && !uro_wire_polled_lately(w, &left))
		woke = look_awhile(fds, n, &next);
	ts.tv_sec = (time_t)(next / 1000000000ull);
	ts.tv_nsec = (long)(next % 1000000000ull);
	if (woke <= 0)
		woke = ppoll(fds, n, next ? &ts : NULL, NULL);
	if (woke > 0 && (fds[0].revents & POLLIN) && read(w->kick_fd, &drain, sizeof(drain)) < 0)
		drain = 0;
	pthread_mutex_lock(&t->lock);
	return woke > 0 && (fds[1].revents & POLLIN);
}

static void *run(void *arg)
{
	struct uro_context *ctx = arg;
	struct uro_progress_thread *t = &ctx->progress;
	int streaming = 0;

	/* Its looks at a polling program are tens of microseconds apart: the
	 * default 50 us timer slack would more than double them. */
	prctl(PR_SET_TIMERSLACK, 1000ul);
	pthread_mutex_lock(&t->lock);
	while (!t->stop) {
		struct uro_wire_endpoint *w = __atomic_load_n(&ctx->wire, __ATOMIC_ACQUIRE);
		struct timespec until;
		uint64_t next, left;

		/* Woken by packets while the program polls its CQ, the thread
		 * leaves them to it and watches only its kick for a while
		 * (wire.h, URO_WIRE_POLLING_NS): a busy poller takes its
		 * packets and fires its timers itself, and pays about one
		 * wake-up a millisecond. Found away, the program is served on
		 * the next packet. */
		if (w && !t->kicked && t->yielding && uro_wire_polled_lately(w, &left)) {
			wait_wire(t, w, left, 1, 0);
			if (t->stop || t->kicked || uro_wire_still_polling(w))
				continue;
		}
		t->yielding = 0;
		/* Under t->lock: ibv_destroy_qp waits for the pass to end. */
		next = uro_progress_pass(ctx);
		if (t->stop || t->kicked) {
			t->kicked = 0;
			continue;
		}
		if (w) {
			streaming = wait_wire(t, w, next, 2, streaming);
			t->yielding = streaming && uro_wire_polling_now(w);
			continue;
		}
		if (!next) {
			pthread_cond_wait(&t->cond, &t->lock);
			continue;
		}
		deadline_in(&until, next);
		pthread_cond_timedwait(&t->cond, &t->lock, &until);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

void uro_progress_thread_init(struct uro_context *ctx)
{
	uro_progress_init(ctx, run, uro_wire_kick);
}
