/* The CQ ring's producers and consumer racing (cq_ring.h). */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

#include "../check.h"
#include "cq_ring.h"

#define RING	4096
#define SECONDS 3

struct race {
	struct uro_seg_cq cq;
	struct uro_cqe ring[RING];
	uint64_t until_ns;
	unsigned produced;
	int producers_done;
};

struct producer {
	struct race *r;
	unsigned produced, full;
};

/* Each producer fills at most half the ring, then leaves the CPU until the
 * consumer has made room: the ring is never full. */
static void *produce(void *arg)
{
	struct producer *p = arg;
	struct uro_cqe e = {.wr_id = 1};

	while (uro_now_ns() < p->r->until_ns) {
		for (int i = 0; i < 64; i++) {
			uint32_t pos;

			while (uro_cq_pending(&p->r->cq) >= RING / 2)
				sched_yield();
			if (uro_cq_reserve(&p->r->cq, &pos)) {
				p->full++;
				continue;
			}
			uro_cq_publish(p->r->ring, RING, pos, &e);
			p->produced++;
		}
	}
	return NULL;
}

static void *consume(void *arg)
{
	struct race *r = arg;

	for (;;) {
		if (uro_cq_peek(&r->cq, r->ring))
			uro_cq_consume(&r->cq);
		else if (__atomic_load_n(&r->producers_done, __ATOMIC_ACQUIRE))
			return NULL;
		else
			sched_yield();
	}
}

/* The interrupted producer's pause: long enough for the other producer
 * and the consumer to move the ring on. */
static void pause_here(int sig)
{
	struct timespec pause = {.tv_nsec = 100 * 1000};

	(void)sig;
	nanosleep(&pause, NULL);
}

/* The first producer is interrupted every 200 us of CPU time, wherever it
 * is (the other threads block the signal). */
static void *produce_interrupted(void *arg)
{
	struct itimerval every = {{0, 200}, {0, 200}};
	sigset_t prof;

	sigemptyset(&prof);
	sigaddset(&prof, SIGPROF);
	pthread_sigmask(SIG_UNBLOCK, &prof, NULL);
	signal(SIGPROF, pause_here);
	setitimer(ITIMER_PROF, &every, NULL);
	produce(arg);
	setitimer(ITIMER_PROF, &(struct itimerval){0}, NULL);
	return NULL;
}

/* A producer reads the tail, then the head. If between the two other
 * producers publish and the consumer takes their entries, the head it
 * reads is past the tail it holds: a stale tail, not a full ring, and the
 * entry must not be dropped as an overrun (the lost completion hung
 * ibv_srq_pingpong under load). */
static void stale_tail_is_not_full(void)
{
	struct race *r = calloc(1, sizeof(*r));
	struct producer p[2] = {{.r = r}, {.r = r}};
	pthread_t pt[2], c;
	sigset_t prof;

	r->cq.size = RING;
	r->until_ns = uro_now_ns() + SECONDS * 1000000000ull;
	sigemptyset(&prof);
	sigaddset(&prof, SIGPROF);
	pthread_sigmask(SIG_BLOCK, &prof, NULL);
	pthread_create(&c, NULL, consume, r);
	pthread_create(&pt[0], NULL, produce_interrupted, &p[0]);
	pthread_create(&pt[1], NULL, produce, &p[1]);
	for (int i = 0; i < 2; i++)
		pthread_join(pt[i], NULL);
	__atomic_store_n(&r->producers_done, 1, __ATOMIC_RELEASE);
	pthread_join(c, NULL);
	printf("%u entries produced, %u refused as full\n", p[0].produced + p[1].produced,
	       p[0].full + p[1].full);
	CHECK_EQ(p[0].full + p[1].full, 0);
	CHECK_EQ(r->cq.head, p[0].produced + p[1].produced);
	free(r);
}

int main(void)
{
	RUN(stale_tail_is_not_full(), 60);
	return check_report();
}
