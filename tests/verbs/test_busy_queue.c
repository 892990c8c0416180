/* Neither the progress thread nor the program's thread spins on a lock
 * the other holds. Both share a core when the program is pinned, so a
 * spin there lasts until the scheduler preempts the spinner: the holder
 * cannot run to let go. The library's spinlocks are interposed here (its
 * calls go through the PLT, and the executable's definitions come first;
 * 0 is unlocked here, whatever glibc's own spinlocks use): while `hold`
 * names a thread, that thread keeps each lock it takes for HOLD_US, and a
 * spin by either on a held lock is counted. A SEND waits behind RNR NAKs
 * (no receive posted) so that the progress thread retries it every 10 us,
 * taking the send queue; the program posts more SENDs, taking it too. */
#include <errno.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../check.h"
#include "pair.h"

#define HOLD_US 20000

enum holder { NOBODY, PROGRAM, OTHER };

static struct side A, B;
static const struct ibv_qp_cap CAP = {
    .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1};
static enum holder hold;
static int spun[3]; /* spins on a held lock by PROGRAM, by OTHER */

static enum holder who(void)
{
	return syscall(SYS_gettid) == getpid() ? PROGRAM : OTHER;
}

/* A thread that took a lock while `hold` names it keeps it a while. */
static void maybe_hold(void)
{
	if (__atomic_load_n(&hold, __ATOMIC_ACQUIRE) == who())
		usleep(HOLD_US);
}

int pthread_spin_init(pthread_spinlock_t *lock, int shared)
{
	(void)shared;
	__atomic_store_n(lock, 0, __ATOMIC_RELEASE);
	return 0;
}

int pthread_spin_lock(pthread_spinlock_t *lock)
{
	if (__atomic_load_n(lock, __ATOMIC_ACQUIRE))
		__atomic_add_fetch(&spun[who()], 1, __ATOMIC_RELAXED);
	while (__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(lock, __ATOMIC_RELAXED))
			;
	maybe_hold();
	return 0;
}

int pthread_spin_trylock(pthread_spinlock_t *lock)
{
	if (__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE))
		return EBUSY;
	maybe_hold();
	return 0;
}

int pthread_spin_unlock(pthread_spinlock_t *lock)
{
	__atomic_store_n(lock, 0, __ATOMIC_RELEASE);
	return 0;
}

static int post_send(uint64_t wr_id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)A.buf, .length = 8, .lkey = A.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = wr_id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	return ibv_post_send(A.qp, &wr, &bad);
}

static void test_neither_spins(void)
{
	struct ibv_wc wc;

	/* The first waits behind RNR NAKs and starts the progress thread. */
	CHECK_EQ(post_send(1), 0);
	usleep(1000);
	/* The program holds the send queue through some of the thread's
	 * retries... */
	__atomic_store_n(&hold, PROGRAM, __ATOMIC_RELEASE);
	CHECK_EQ(post_send(2), 0);
	/* ... and the thread, retrying, holds it while the program posts. */
	__atomic_store_n(&hold, OTHER, __ATOMIC_RELEASE);
	usleep(2000);
	CHECK_EQ(post_send(3), 0);
	__atomic_store_n(&hold, NOBODY, __ATOMIC_RELEASE);
	CHECK_EQ(spun[OTHER], 0);
	CHECK_EQ(spun[PROGRAM], 0);
	/* All three are delivered, in order, once receives are there. */
	for (uint64_t id = 1; id <= 3; id++)
		CHECK_EQ(post_recv_buf(&B, 10 + id, B.buf + 64 * id, 64), 0);
	for (uint64_t id = 1; id <= 3; id++) {
		CHECK_EQ(poll_one(A.cq, &wc), 1);
		CHECK_EQ(wc.wr_id, id);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(poll_one(B.cq, &wc), 1);
		CHECK_EQ(wc.wr_id, 10 + id);
	}
}

int main(void)
{
	if (side_open(&A, IBV_QPT_RC, 16, CAP) || side_open(&B, IBV_QPT_RC, 16, CAP)) {
		fprintf(stderr, "cannot open two contexts on uroce0\n");
		return 1;
	}
	/* RNR retries for ever, 0.01 ms apart (IBTA 9.7.5.2.8, table 45). */
	CHECK_EQ(qp_connect(A.qp, B.qp->qp_num, 7, 1), 0);
	CHECK_EQ(qp_connect(B.qp, A.qp->qp_num, 7, 1), 0);
	RUN(test_neither_spins(), 10);
	side_close(&A);
	side_close(&B);
	return check_report();
}
