#include "key_hold.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "segment_ops.h"
#include "self_pid.h"

/* Rounds of looking for a free lane before the request goes unanswered. */
#define HOLD_ROUNDS 64
/* How often a waiting owner looks whether a holder still lives. */
#define HOLDER_CHECK_NS (1000 * 1000)

static uint64_t lane_value(uint32_t pid, uint32_t count)
{
	return (uint64_t)pid << 32 | count;
}

static uint32_t lane_pid(uint64_t v)
{
	return (uint32_t)(v >> 32);
}

static uint32_t lane_count(uint64_t v)
{
	return (uint32_t)v;
}

/* A lane that is free (no count, whoever held it last) or already this
 * process's: one more hold in it. A lane keeps its last holder's pid when
 * its count drops to 0, so that letting go is one compare-and-swap on the
 * lane the hold recorded, with no search. */
static uint64_t *take_lane(struct uro_seg_mr *e, uint32_t pid)
{
	for (int round = 0; round < HOLD_ROUNDS; round++) {
		for (uint32_t i = 0; i < URO_KEY_LANES; i++) {
			uint64_t *lane = &e->lanes[(pid + i) % URO_KEY_LANES];
			uint64_t v = __atomic_load_n(lane, __ATOMIC_RELAXED);
			uint64_t next = lane_pid(v) == pid ? v + 1 : lane_value(pid, 1);

			if (lane_count(v) && lane_pid(v) != pid)
				continue;
			if (__atomic_compare_exchange_n(lane, &v, next, 0, __ATOMIC_SEQ_CST,
							__ATOMIC_RELAXED))
				return lane;
		}
		sched_yield();
	}
	return NULL;
}

/* A full barrier after a locked read-modify-write. On x86 the locked
 * instruction is one already (Intel SDM vol. 3A, 8.2.2: reads and writes
 * are not reordered with locked instructions), and an mfence after it
 * costs each request some 30 cycles more. */
static inline void fence_after_locked(void)
{
#if !defined(__x86_64__) && !defined(__i386__)
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

int uro_hold(const struct uro_peer *p, uint32_t key, struct uro_holds *h)
{
	uint32_t index = (key >> 8) - 1;
	struct uro_seg_mr *e = (key >> 8) ? uro_peer_mr(p, index) : NULL;
	uint64_t *lane;

	if (!e || h->n == URO_MAX_SGE)
		return 0;
	lane = take_lane(e, uro_self_pid());
	if (!lane)
		return -1;
	/* The owner's store that made the entry unreachable and its reading
	 * of the lanes are ordered the other way round: one of the two sees
	 * the other (the lookup that follows fails, or the owner waits). */
	fence_after_locked();
	h->lane[h->n] = lane;
	h->entry[h->n] = e;
	h->key[h->n] = key;
	h->n++;
	return 0;
}

int uro_hold_sges(const struct uro_peer *p, const struct ibv_sge *sge, uint32_t n,
		  struct uro_holds *h)
{
	for (uint32_t i = 0; i < n; i++)
		if (sge[i].length && uro_hold(p, sge[i].lkey, h))
			return -1;
	return 0;
}

int uro_holds_valid(const struct uro_peer *p, const struct uro_holds *h)
{
	for (int i = 0; i < h->n; i++)
		if (uro_mr_lookup(p, h->key[i], h->remote) != h->entry[i])
			return 0;
	return 1;
}

/* One hold fewer in the lane it was counted in, if the lane still counts
 * this process's holds: an owner that judged us gone (a process whose
 * main thread has exited reads as a zombie) may have reset it, and another
 * process taken it since. One compare-and-swap, as a decrement would be,
 * that never takes from another's count. */
static void drop_hold(uint64_t *lane, uint32_t pid)
{
	uint64_t v = __atomic_load_n(lane, __ATOMIC_RELAXED);

	while (lane_pid(v) == pid && lane_count(v))
		if (__atomic_compare_exchange_n(lane, &v, v - 1, 0, __ATOMIC_RELEASE,
						__ATOMIC_RELAXED))
			return;
}

void uro_release(struct uro_holds *h)
{
	uint32_t pid = uro_self_pid();

	for (int i = 0; i < h->n; i++)
		drop_hold(h->lane[i], pid);
	h->n = 0;
}

int uro_holder_gone(uint32_t pid)
{
	char path[64], buf[256], *state;
	FILE *f;

	if (kill((pid_t)pid, 0) && errno == ESRCH)
		return 1;
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return errno == ENOENT;
	state = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	return state && (state[2] == 'Z' || state[2] == 'X');
}

static void wait_lane(uint64_t *lane)
{
	const struct timespec nap = {.tv_nsec = 20 * 1000};
	uint64_t v, waited = HOLDER_CHECK_NS;

	while (lane_count(v = __atomic_load_n(lane, __ATOMIC_SEQ_CST))) {
		if (waited >= HOLDER_CHECK_NS) {
			waited = 0;
			if (lane_pid(v) != uro_self_pid() && uro_holder_gone(lane_pid(v))) {
				__atomic_compare_exchange_n(lane, &v, 0, 0, __ATOMIC_SEQ_CST,
							    __ATOMIC_RELAXED);
				continue;
			}
		}
		nanosleep(&nap, NULL);
		waited += (uint64_t)nap.tv_nsec;
	}
}

void uro_key_quiesce(struct uro_seg_mr *e)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	for (int i = 0; i < URO_KEY_LANES; i++)
		wait_lane(&e->lanes[i]);
}
