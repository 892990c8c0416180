/* The progress thread never spins on a send queue the program's thread
 * holds. Both share a core when the program is pinned, so a spin there
 * lasts until the scheduler preempts the spinner: the holder cannot run to
 * let go. The library's spinlocks are interposed here (its calls go
 * through the PLT, and the executable's definitions come first; 0 is
 * unlocked here, whatever glibc's own spinlocks use): the
 * program's thread holds whatever it takes for HOLD_US while `holding` is
 * set, and a lock another thread waits for while it is held is counted.
 * A SEND waits behind RNR NAKs (no receive posted) so that the progress
 * thread retries it every 10 us; the program posts a second SEND, holding
 * the send queue through at least one of those retries. */
#include <errno.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../check.h"
#include "pair.h"

#define HOLD_US 20000

static struct side A, B;
static const struct ibv_qp_cap CAP = {
    .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1};
static int holding;
static int waited_on_held;

static int program_thread(void)
{
	return syscall(SYS_gettid) == getpid();
}

int pthread_spin_init(pthread_spinlock_t *lock, int shared)
{
	(void)shared;
	__atomic_store_n(lock, 0, __ATOMIC_RELEASE);
	return 0;
}

int pthread_spin_lock(pthread_spinlock_t *lock)
{
	if (!program_thread() && __atomic_load_n(lock, __ATOMIC_ACQUIRE))
		__atomic_add_fetch(&waited_on_held, 1, __ATOMIC_RELAXED);
	while (__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(lock, __ATOMIC_RELAXED))
			;
	if (program_thread() && __atomic_load_n(&holding, __ATOMIC_ACQUIRE))
		usleep(HOLD_US);
	return 0;
}

int pthread_spin_trylock(pthread_spinlock_t *lock)
{
	return __atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE) ? EBUSY : 0;
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

static void test_retry_passes_held_queue(void)
{
	struct ibv_wc wc;

	/* The first waits behind RNR NAKs and starts the progress thread. */
	CHECK_EQ(post_send(1), 0);
	usleep(1000);
	__atomic_store_n(&holding, 1, __ATOMIC_RELEASE);
	CHECK_EQ(post_send(2), 0);
	__atomic_store_n(&holding, 0, __ATOMIC_RELEASE);
	CHECK_EQ(waited_on_held, 0);
	/* Both are delivered, in order, once receives are there. */
	CHECK_EQ(post_recv_buf(&B, 11, B.buf, 64), 0);
	CHECK_EQ(post_recv_buf(&B, 12, B.buf + 64, 64), 0);
	for (uint64_t id = 1; id <= 2; id++) {
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
	RUN(test_retry_passes_held_queue(), 10);
	side_close(&A);
	side_close(&B);
	return check_report();
}
