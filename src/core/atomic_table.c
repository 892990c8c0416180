#include "atomic_table.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cq_ring.h"
#include "key_hold.h"
#include "segment_ops.h"
#include "self_pid.h"

/* An initiator spins this long for its answer before it sleeps: an owner's
 * thread that is awake answers in well under a microsecond, and a futex
 * wake-up costs tens of them. */
#define ANSWER_SPIN_NS 20000ull

/* futex(2) on a word of the shared segment: not FUTEX_PRIVATE_FLAG, the
 * waker is another process. */
static void futex_wait(uint32_t *word, uint32_t seen, uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
			      .tv_nsec = (long)(ns % 1000000000ull)};

	syscall(SYS_futex, word, FUTEX_WAIT, seen, &ts, NULL, 0);
}

static void futex_wake(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static uint32_t load(const uint32_t *w)
{
	return __atomic_load_n(w, __ATOMIC_ACQUIRE);
}

static int cas(uint32_t *w, uint32_t from, uint32_t to)
{
	return __atomic_compare_exchange_n(w, &from, to, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* ---- the initiator's side ---- */

/* A slot whose initiator is gone, taken back: it will never post, read
 * or free it. One posted and never rung for is dropped with it. */
static int reclaim(struct uro_seg_atomic *s)
{
	uint32_t st = load(&s->state);
	int32_t owner = __atomic_load_n(&s->owner, __ATOMIC_ACQUIRE);

	if (st != URO_ATOMIC_CLAIMED && st != URO_ATOMIC_POSTED && st != URO_ATOMIC_DONE)
		return 0;
	if (owner <= 0 || (uint32_t)owner == uro_self_pid() || !uro_holder_gone((uint32_t)owner))
		return 0;
	return cas(&s->state, st, URO_ATOMIC_FREE);
}

static int claim(struct uro_seg_atomics *a)
{
	for (int pass = 0; pass < 2; pass++)
		for (unsigned i = 0; i < URO_ATOMIC_SLOTS; i++) {
			struct uro_seg_atomic *s = &a->slot[i];

			if (load(&s->state) != URO_ATOMIC_FREE && !(pass && reclaim(s)))
				continue;
			if (cas(&s->state, URO_ATOMIC_FREE, URO_ATOMIC_CLAIMED))
				return (int)i;
		}
	return -1;
}

int uro_atomic_post(struct uro_peer *p, const struct uro_atomic_request *rq,
		    struct uro_atomic_ticket *t)
{
	struct uro_seg_atomics *a = p->atomics;
	int i = claim(a);
	struct uro_seg_atomic *s;

	if (i < 0)
		return -1;
	s = &a->slot[i];
	s->owner = (int32_t)uro_self_pid();
	s->ticket++;
	s->kind = (uint16_t)rq->kind;
	s->waiting = 0;
	s->rkey = rq->rkey;
	s->pd = rq->pd;
	s->qpn = rq->qpn;
	s->va = rq->va;
	s->operand = rq->operand;
	s->compare = rq->compare;
	t->slot = (uint32_t)i;
	t->ticket = s->ticket;
	t->target_pid = p->hdr->pid;
	__atomic_store_n(&s->state, URO_ATOMIC_POSTED, __ATOMIC_RELEASE);
	/* Posted, then rung, then is the owner asleep: the owner sets asleep,
	 * then looks at posted. With both orders total (seq_cst), one of the
	 * two sees the other. */
	__atomic_fetch_or(&a->posted, 1ull << i, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&a->asleep, __ATOMIC_SEQ_CST)) {
		__atomic_fetch_add(&a->doorbell, 1, __ATOMIC_SEQ_CST);
		futex_wake(&a->doorbell);
	}
	return 0;
}

/* The slot t names, if its owner is still the process t was posted to. */
static struct uro_seg_atomic *slot_of(struct uro_peer *p, const struct uro_atomic_ticket *t)
{
	if (t->slot >= URO_ATOMIC_SLOTS || p->hdr->pid != t->target_pid)
		return NULL;
	return &p->atomics->slot[t->slot];
}

static int answered(struct uro_seg_atomic *s, struct uro_atomic_answer *a)
{
	if (load(&s->state) != URO_ATOMIC_DONE)
		return 0;
	a->status = s->status;
	a->old = s->old;
	__atomic_store_n(&s->state, URO_ATOMIC_FREE, __ATOMIC_RELEASE);
	return 1;
}

int uro_atomic_wait(struct uro_peer *p, const struct uro_atomic_ticket *t, uint64_t wait_ns,
		    struct uro_atomic_answer *a)
{
	struct uro_seg_atomic *s = slot_of(p, t);
	uint64_t start = uro_now_ns(), now = start;

	if (!s)
		return -1;
	while (now - start < ANSWER_SPIN_NS && now - start < wait_ns) {
		for (int k = 0; k < 64; k++) {
			if (answered(s, a))
				return 1;
			cpu_relax();
		}
		now = uro_now_ns();
	}
	while (now - start < wait_ns) {
		uint32_t st;

		/* Waiting, then the state: the owner stores DONE, then looks at
		 * waiting (seq_cst both), so one of the two sees the other. */
		__atomic_store_n(&s->waiting, 1, __ATOMIC_SEQ_CST);
		st = __atomic_load_n(&s->state, __ATOMIC_SEQ_CST);
		if (st == URO_ATOMIC_DONE)
			break;
		futex_wait(&s->state, st, wait_ns - (now - start));
		now = uro_now_ns();
	}
	__atomic_store_n(&s->waiting, 0, __ATOMIC_RELAXED);
	return answered(s, a);
}

void uro_atomic_abandon(struct uro_peer *p, const struct uro_atomic_ticket *t)
{
	struct uro_seg_atomic *s = slot_of(p, t);
	struct uro_atomic_answer a;

	if (!s || s->ticket != t->ticket)
		return;
	/* Not taken: it will never run. Taken: the owner frees it when done.
	 * Done: its answer is dropped. */
	if (cas(&s->state, URO_ATOMIC_POSTED, URO_ATOMIC_FREE) ||
	    cas(&s->state, URO_ATOMIC_TAKEN, URO_ATOMIC_ABANDONED))
		return;
	answered(s, &a);
}

int uro_atomic_served(const struct uro_peer *p)
{
	return (int)load(&p->atomics->serving);
}

/* ---- the owner's side ---- */

static int qp_accepts(const struct uro_peer *self, uint32_t qpn)
{
	const struct uro_seg_qp *qp;
	uint32_t state;

	/* An XRC target QP may be another process's: its initiator checked it. */
	if (qpn >> URO_QPN_INDEX_BITS != self->slot)
		return 1;
	qp = &self->qp[qpn & (URO_MAX_QP - 1)];
	state = uro_qp_state(qp);
	return __atomic_load_n(&qp->in_use, __ATOMIC_ACQUIRE) && qp->qpn == qpn &&
	       (state == IBV_QPS_RTR || state == IBV_QPS_RTS || state == IBV_QPS_SQD);
}

/* The request of slot s, run under a hold on its key (key_hold.h): a
 * deregistration in this process waits for it, and the key, checked again
 * here, names the memory it named at the initiator's check or the request
 * fails as one with a revoked key. */
static void execute(struct uro_peer *self, struct uro_seg_atomic *s)
{
	struct uro_user_atomic op = {.kind = (enum uro_user_atomic_kind)s->kind,
				     .operand = s->operand,
				     .compare = s->compare};
	unsigned access =
	    op.kind == URO_ATOMIC_WRITE ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_ATOMIC;
	uint32_t rkey = s->rkey;
	struct uro_holds h;
	uint64_t addr;

	s->status = URO_ATOMIC_UNANSWERED;
	uro_holds_init(&h, 1);
	if (!qp_accepts(self, s->qpn) || uro_hold(self, rkey, &h))
		return;
	if (uro_rkey_check(self, s->pd, s->qpn, rkey, s->va, 8, access, &addr) ||
	    uro_user_atomic((void *)(uintptr_t)addr, &op))
		s->status = IBV_WC_REM_ACCESS_ERR;
	else {
		s->status = IBV_WC_SUCCESS;
		s->old = op.old;
	}
	uro_release(&h);
}

static void answer(struct uro_seg_atomic *s)
{
	if (!cas(&s->state, URO_ATOMIC_TAKEN, URO_ATOMIC_DONE)) {
		/* Its initiator gave up on it. */
		__atomic_store_n(&s->state, URO_ATOMIC_FREE, __ATOMIC_RELEASE);
		return;
	}
	if (__atomic_load_n(&s->waiting, __ATOMIC_SEQ_CST))
		futex_wake(&s->state);
}

unsigned uro_atomic_serve(struct uro_peer *self)
{
	struct uro_seg_atomics *a = self->atomics;
	uint64_t bits = __atomic_exchange_n(&a->posted, 0, __ATOMIC_ACQ_REL);
	unsigned n = 0;

	while (bits) {
		unsigned i = (unsigned)__builtin_ctzll(bits);
		struct uro_seg_atomic *s = &a->slot[i];

		bits &= bits - 1;
		if (!cas(&s->state, URO_ATOMIC_POSTED, URO_ATOMIC_TAKEN))
			continue; /* given up before it was taken */
		execute(self, s);
		/* SEQ_CST: the DONE store must precede the waiting load. */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		answer(s);
		n++;
	}
	return n;
}

int uro_atomic_pending(const struct uro_peer *self)
{
	return __atomic_load_n(&self->atomics->posted, __ATOMIC_ACQUIRE) != 0;
}

void uro_atomic_sleep(struct uro_peer *self, uint64_t timeout_ns)
{
	struct uro_seg_atomics *a = self->atomics;
	uint32_t seen = __atomic_load_n(&a->doorbell, __ATOMIC_SEQ_CST);

	__atomic_store_n(&a->asleep, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&a->posted, __ATOMIC_SEQ_CST))
		futex_wait(&a->doorbell, seen, timeout_ns);
	__atomic_store_n(&a->asleep, 0, __ATOMIC_SEQ_CST);
}

void uro_atomic_set_serving(struct uro_peer *self, int serving)
{
	__atomic_store_n(&self->atomics->serving, (uint32_t)serving, __ATOMIC_RELEASE);
}

void uro_atomic_ring(struct uro_peer *self)
{
	__atomic_fetch_add(&self->atomics->doorbell, 1, __ATOMIC_SEQ_CST);
	futex_wake(&self->atomics->doorbell);
}
