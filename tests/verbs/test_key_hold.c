/* No byte moves through a key after the call that revokes it returns
 * (ibv_dereg_mr(3)): a long WRITE or READ in flight when its region is
 * deregistered stops there, and the initiator's work request completes with
 * a remote access error (IBTA 9.7.5.2.4) unless it was done before. The
 * owner waits for copies in flight, but never for a holder that died
 * mid-copy. Two contexts stand for two processes; the initiator runs in a
 * thread, and forked children play holders caught mid-copy. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "../check.h"
#include "key_hold.h"
#include "pair.h"
#include "peer.h"
#include "peer_segment.h"

#define BIG (128u << 20) /* a transfer of many chunks */

static struct side S, R; /* initiator, target */
static const struct ibv_qp_cap CAP = {
    .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1};

struct transfer {
	enum ibv_wr_opcode opcode;
	void *local;
	struct ibv_mr *lmr;
	uint64_t remote;
	uint32_t rkey;
	int status;
};

static void *initiate(void *arg)
{
	struct transfer *t = arg;
	struct ibv_sge sge = {.addr = (uintptr_t)t->local, .length = BIG, .lkey = t->lmr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = 1,
				 .opcode = t->opcode,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;

	wr.wr.rdma.remote_addr = t->remote;
	wr.wr.rdma.rkey = t->rkey;
	t->status = -1;
	if (!ibv_post_send(S.qp, &wr, &bad) && poll_one(S.cq, &wc) == 1)
		t->status = (int)wc.status;
	return NULL;
}

static void *big_buffer(int fill)
{
	void *p = mmap(NULL, BIG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	memset(p, fill, BIG);
	return p;
}

/* Waits (bounded) until the byte at p is what a transfer brings. */
static void await_byte(const volatile uint8_t *p, uint8_t want)
{
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	do
		clock_gettime(CLOCK_MONOTONIC, &now);
	while (*p != want && now.tv_sec - start.tv_sec < 5);
}

static int reconnect(void)
{
	return qp_connect(S.qp, R.qp->qp_num, 7, 1) || qp_connect(R.qp, S.qp->qp_num, 7, 1);
}

/* How many of the BIG bytes at p are v. */
static size_t count_of(const uint8_t *p, uint8_t v)
{
	size_t n = 0;

	for (size_t i = 0; i < BIG; i++)
		n += p[i] == v;
	return n;
}

/* A transfer's end: its buffers go, and the QPs its error may have moved
 * to ERR are connected again. */
static void transfer_done(struct transfer *t, void *src, void *dst)
{
	ibv_dereg_mr(t->lmr);
	munmap(src, BIG);
	munmap(dst, BIG);
	CHECK_EQ(reconnect(), 0);
}

/* The target deregisters as soon as the WRITE's first bytes land, then
 * clears its buffer: nothing arrives in it after that. */
static void test_write_stops_at_dereg(void)
{
	uint8_t *src = big_buffer(0xab), *dst = big_buffer(0);
	struct transfer t = {.opcode = IBV_WR_RDMA_WRITE, .local = src, .remote = (uintptr_t)dst};
	struct ibv_mr *dmr;
	pthread_t th;

	CHECK(src && dst);
	if (!src || !dst)
		return;
	t.lmr = ibv_reg_mr(S.pd, src, BIG, IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(R.pd, dst, BIG, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	t.rkey = dmr->rkey;
	CHECK_EQ(pthread_create(&th, NULL, initiate, &t), 0);
	await_byte(dst, 0xab);
	CHECK_EQ(ibv_dereg_mr(dmr), 0);
	memset(dst, 0, BIG);
	pthread_join(th, NULL);
	CHECK_EQ(count_of(dst, 0), BIG); /* nothing landed after the dereg */
	/* Cut short, or (on a slow machine) done before the dereg. */
	CHECK(t.status == IBV_WC_REM_ACCESS_ERR || t.status == IBV_WC_SUCCESS);
	transfer_done(&t, src, dst);
}

/* The target deregisters as soon as the READ's first bytes come back,
 * then overwrites its buffer: the reader never sees the new bytes. */
static void test_read_stops_at_dereg(void)
{
	uint8_t *dst = big_buffer(0), *src = big_buffer('A');
	struct transfer t = {.opcode = IBV_WR_RDMA_READ, .local = dst, .remote = (uintptr_t)src};
	struct ibv_mr *smr;
	pthread_t th;

	CHECK(src && dst);
	if (!src || !dst)
		return;
	t.lmr = ibv_reg_mr(S.pd, dst, BIG, IBV_ACCESS_LOCAL_WRITE);
	smr = ibv_reg_mr(R.pd, src, BIG, IBV_ACCESS_REMOTE_READ);
	t.rkey = smr->rkey;
	CHECK_EQ(pthread_create(&th, NULL, initiate, &t), 0);
	await_byte(dst, 'A');
	CHECK_EQ(ibv_dereg_mr(smr), 0);
	memset(src, 'B', BIG);
	pthread_join(th, NULL);
	CHECK_EQ(count_of(dst, 'B'), 0);
	CHECK(t.status == IBV_WC_REM_ACCESS_ERR || t.status == IBV_WC_SUCCESS);
	transfer_done(&t, src, dst);
}

/* The receiver deregisters the region its posted receive points into as
 * soon as a long SEND's first bytes land: nothing lands after that, and the
 * receive completes in error (or, on a slow machine, whole before). */
static void test_send_stops_at_dereg(void)
{
	uint8_t *src = big_buffer(0xab), *dst = big_buffer(0);
	struct transfer t = {.opcode = IBV_WR_SEND, .local = src};
	struct ibv_sge rsge = {.addr = (uintptr_t)dst, .length = BIG};
	struct ibv_recv_wr rwr = {.wr_id = 5, .sg_list = &rsge, .num_sge = 1}, *rbad;
	struct ibv_mr *dmr;
	struct ibv_wc wc;
	pthread_t th;

	CHECK(src && dst);
	if (!src || !dst)
		return;
	t.lmr = ibv_reg_mr(S.pd, src, BIG, IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(R.pd, dst, BIG, IBV_ACCESS_LOCAL_WRITE);
	rsge.lkey = dmr->lkey;
	CHECK_EQ(ibv_post_recv(R.qp, &rwr, &rbad), 0);
	CHECK_EQ(pthread_create(&th, NULL, initiate, &t), 0);
	await_byte(dst, 0xab);
	CHECK_EQ(ibv_dereg_mr(dmr), 0);
	memset(dst, 0, BIG);
	pthread_join(th, NULL);
	CHECK_EQ(count_of(dst, 0), BIG); /* nothing landed after the dereg */
	CHECK_EQ(poll_one(R.cq, &wc), 1);
	CHECK(wc.status == IBV_WC_LOC_QP_OP_ERR || wc.status == IBV_WC_SUCCESS);
	CHECK(t.status == IBV_WC_REM_OP_ERR || t.status == IBV_WC_SUCCESS);
	transfer_done(&t, src, dst);
}

/* A child takes a hold on a key as an initiator starting a copy does, in
 * the entry's lanes, and then sleeps for hold_ms, or dies there (hold_ms
 * 0) and is left unreaped. */
static pid_t holder(uint32_t key, int hold_ms)
{
	void *map = map_segment(R.qp);
	int ready[2];
	pid_t pid;
	char c;

	if (!map || pipe(ready))
		return -1;
	pid = fork();
	if (pid == 0) {
		struct uro_seg_mr *e = key_entry(map, key);

		__atomic_store_n(&e->lanes[0], (uint64_t)getpid() << 32 | 1, __ATOMIC_SEQ_CST);
		if (write(ready[1], "h", 1) != 1)
			_exit(1);
		if (hold_ms) {
			usleep((useconds_t)hold_ms * 1000);
			__atomic_store_n(&e->lanes[0], 0, __ATOMIC_SEQ_CST);
		}
		_exit(0);
	}
	close(ready[1]);
	if (read(ready[0], &c, 1) != 1)
		pid = -1;
	close(ready[0]);
	munmap(map, uro_seg_size());
	return pid;
}

static long elapsed_ms(const struct timespec *start)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - start->tv_sec) * 1000 + (now.tv_nsec - start->tv_nsec) / 1000000;
}

/* Dereg waits for a live holder to let go, and not for a dead one, reaped
 * or not (a zombie's lane is never released). */
static void test_holders_live_and_dead(void)
{
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct ibv_mr *live = ibv_reg_mr(R.pd, R.buf, 4096, access);
	struct ibv_mr *dead = ibv_reg_mr(R.pd, R.buf, 4096, access);
	/* The dead one first: the live one's hold is timed from its start. */
	pid_t dp = dead ? holder(dead->rkey, 0) : -1, lp = live ? holder(live->rkey, 600) : -1;
	struct timespec start;

	CHECK(lp > 0 && dp > 0);
	if (lp <= 0 || dp <= 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &start);
	CHECK_EQ(ibv_dereg_mr(live), 0);
	CHECK(elapsed_ms(&start) >= 300);
	clock_gettime(CLOCK_MONOTONIC, &start);
	CHECK_EQ(ibv_dereg_mr(dead), 0); /* dp is a zombie now */
	CHECK(elapsed_ms(&start) < 1000);
	waitpid(lp, NULL, 0);
	waitpid(dp, NULL, 0);
}

/* A window bound to a region: ibv_dealloc_mw(3) waits for a copy through
 * it, as ibv_dereg_mr does for a region's own key. */
static void test_window_dealloc_waits(void)
{
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;
	struct ibv_mr *mr = ibv_reg_mr(R.pd, R.buf, 4096, access);
	struct ibv_mw *mw = ibv_alloc_mw(R.pd, IBV_MW_TYPE_1);
	struct ibv_mw_bind b = {.send_flags = IBV_SEND_SIGNALED,
				.bind_info = {.mr = mr,
					      .addr = (uintptr_t)R.buf,
					      .length = 4096,
					      .mw_access_flags = IBV_ACCESS_REMOTE_WRITE}};
	struct timespec start;
	struct ibv_wc wc;
	pid_t pid;

	CHECK(mr && mw);
	if (!mr || !mw)
		return;
	CHECK_EQ(ibv_bind_mw(R.qp, mw, &b), 0);
	CHECK_EQ(poll_one(R.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	pid = holder(mw->rkey, 600);
	CHECK(pid > 0);
	clock_gettime(CLOCK_MONOTONIC, &start);
	CHECK_EQ(ibv_dealloc_mw(mw), 0);
	CHECK(elapsed_ms(&start) >= 300);
	CHECK_EQ(ibv_dereg_mr(mr), 0); /* no window holds it any more */
	waitpid(pid, NULL, 0);
}

/* An initiator holding a stale key (its hold comes before the lookup that
 * refuses it) counts in the lanes of an entry that is free; the owner
 * reuses the entry for a window meanwhile. The count stays until that
 * initiator lets go, and letting go never takes from a count that is not
 * its own: an owner may have reset the lane (it judges a process whose
 * main thread exited gone) and another process taken it, whose copy its
 * next quiesce must still wait for. */
static void test_stale_hold_across_reuse(void)
{
	struct ibv_mr *mr = ibv_reg_mr(R.pd, R.buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	uint32_t stale = mr ? mr->rkey : 0, self = (uint32_t)getpid();
	uint64_t other = (uint64_t)getppid() << 32 | 1;
	void *map = map_segment(R.qp);
	struct uro_peer peer = {0};
	struct uro_holds h;
	struct ibv_mw *mw;

	CHECK(mr && map);
	if (!mr || !map)
		return;
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	peer.mr = key_entry(map, 1 << 8);
	uro_holds_init(&h, 1);
	CHECK_EQ(uro_hold(&peer, stale, &h), 0);
	CHECK_EQ(h.n, 1);
	mw = ibv_alloc_mw(R.pd, IBV_MW_TYPE_1); /* the entry freed last */
	CHECK(mw && mw->rkey >> 8 == stale >> 8);
	CHECK_EQ(__atomic_load_n(h.lane[0], __ATOMIC_SEQ_CST), (uint64_t)self << 32 | 1);
	__atomic_store_n(h.lane[0], other, __ATOMIC_SEQ_CST);
	uro_release(&h);
	CHECK_EQ(__atomic_load_n(h.lane[0], __ATOMIC_SEQ_CST), other);
	__atomic_store_n(h.lane[0], 0, __ATOMIC_SEQ_CST); /* the other lets go */
	if (mw)
		CHECK_EQ(ibv_dealloc_mw(mw), 0);
	munmap(map, uro_seg_size());
}

int main(void)
{
	if (side_open(&S, IBV_QPT_RC, 16, CAP) || side_open(&R, IBV_QPT_RC, 16, CAP)) {
		fprintf(stderr, "cannot open two contexts on uroce0\n");
		return 1;
	}
	CHECK_EQ(reconnect(), 0);
	RUN(test_write_stops_at_dereg(), 60);
	RUN(test_read_stops_at_dereg(), 60);
	RUN(test_send_stops_at_dereg(), 60);
	RUN(test_holders_live_and_dead(), 30);
	RUN(test_window_dealloc_waits(), 30);
	RUN(test_stale_hold_across_reuse(), 30);
	side_close(&S);
	side_close(&R);
	return check_report();
}
