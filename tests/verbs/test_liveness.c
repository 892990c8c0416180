/* A dead, stopped or slow peer costs a bounded wait, never a wedge
 * (docs/design.md, A process is a function of the device). A CQ stays whole
 * while other processes complete into it: resized under traffic it loses
 * nothing, and a producer that reserved an entry and died before writing it
 * does not hide the completions after it. A process stopped in the middle
 * of its atomic fails no other process's atomic on the same target. A request
 * waiting for a retry is retried while its program sleeps, and successive
 * peers on one slot, or threads reaching a new one at once, are each
 * reached. Two contexts stand for two processes; the sender runs in a
 * thread of its own, and a forked child plays the stopped process. */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../check.h"
#include "pair.h"
#include "peer_segment.h"
#include "registry.h"

#define TOTAL 100000
#define DEPTH 1024

static struct side S, R; /* sender, receiver */
static const struct ibv_qp_cap CAP = {
    .max_send_wr = 16, .max_recv_wr = DEPTH, .max_send_sge = 1, .max_recv_sge = 1};

static int send_one(uint64_t id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)S.buf, .length = 64, .lkey = S.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;

	if (ibv_post_send(S.qp, &wr, &bad) || poll_one(S.cq, &wc) != 1)
		return -1;
	return wc.status == IBV_WC_SUCCESS ? 0 : -1;
}

static void *sender(void *arg)
{
	int *failed = arg;

	for (uint64_t i = 0; i < TOTAL && !*failed; i++)
		if (send_one(i))
			*failed = 1;
	return NULL;
}

static int repost(uint64_t id)
{
	return post_recv_buf(&R, id, R.buf + (id % DEPTH) * 64, 64);
}

static void test_resize_under_traffic(void)
{
	struct timespec start, now;
	int failed = 0, got = 0, bad = 0, resizes = 0;
	pthread_t t;

	for (int i = 0; i < DEPTH; i++)
		repost((uint64_t)i);
	CHECK_EQ(pthread_create(&t, NULL, sender, &failed), 0);
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (got < TOTAL) {
		struct ibv_wc wc[16];
		int n = ibv_poll_cq(R.cq, 16, wc);

		for (int i = 0; i < n; i++) {
			bad += wc[i].status != IBV_WC_SUCCESS;
			repost(wc[i].wr_id);
		}
		got += n;
		if (n && got / 500 > resizes) {
			resizes++;
			CHECK_EQ(ibv_resize_cq(R.cq, resizes % 2 ? 2 * DEPTH : 4 * DEPTH), 0);
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec > 60 || (failed && !n))
			break;
	}
	pthread_join(t, NULL);
	CHECK_EQ(failed, 0);
	CHECK_EQ(got, TOTAL);
	CHECK_EQ(bad, 0);
	CHECK(resizes >= 100);
}

static struct uro_seg_cq *shared_cq(void *map, struct ibv_cq *cq)
{
	struct uro_seg_header layout;

	uro_seg_table_offsets(&layout);
	return (struct uro_seg_cq *)((uint8_t *)map + layout.cq_off) + cq->handle;
}

static void test_producer_died_mid_entry(void)
{
	void *map = map_segment(R.qp);
	struct uro_seg_cq *cq = map ? shared_cq(map, R.cq) : NULL;
	struct ibv_wc wc;

	CHECK(cq != NULL);
	if (!cq)
		return;
	CHECK_EQ(ibv_poll_cq(R.cq, 1, &wc), 0);
	/* A producer reserves the next entry and is killed before writing it. */
	__atomic_fetch_add(&cq->tail, 1, __ATOMIC_ACQ_REL);
	CHECK_EQ(send_one(7), 0); /* a receive is posted from the test before */
	CHECK_EQ(poll_one(R.cq, &wc), 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	munmap(map, uro_seg_size());
}

/* What the parent and the stopped initiator share (an anonymous shared
 * mapping, made before the fork). */
struct atomic_race {
	int stop_inside; /* the child stops itself in its next cross-memory write */
	int finish;	 /* the child ends its loop */
	uint64_t done;	 /* its fetch-and-adds that completed successfully */
	uint64_t failed; /* and those that did not */
};

static struct atomic_race *race;
static int race_child;

/* Test hook: the child stops itself inside its own atomic, wherever the
 * library's atomic makes a cross-memory write. An initiator that executed
 * an atomic itself did so between a read and this write, holding the
 * target's atomic lock; one that hands its atomics to the target never
 * comes here, and is stopped from outside instead. Interposed on libc's:
 * the library calls it through its PLT. */
ssize_t process_vm_writev(pid_t pid, const struct iovec *local, unsigned long nl,
			  const struct iovec *remote, unsigned long nr, unsigned long flags)
{
	if (race_child && race && __atomic_exchange_n(&race->stop_inside, 0, __ATOMIC_SEQ_CST))
		raise(SIGSTOP);
	return syscall(SYS_process_vm_writev, pid, local, nl, remote, nr, flags);
}

static int fetch_add_on(struct ibv_qp *qp, struct ibv_cq *cq, uint8_t *buf, struct ibv_mr *mr)
{
	uint64_t *result = (uint64_t *)(buf + 1024);
	struct ibv_sge sge = {.addr = (uintptr_t)result, .length = 8, .lkey = mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;

	wr.wr.atomic.remote_addr = (uintptr_t)R.buf + 2048;
	wr.wr.atomic.rkey = R.mr->rkey;
	wr.wr.atomic.compare_add = 1;
	if (ibv_post_send(qp, &wr, &bad) || poll_one(cq, &wc) != 1)
		return -1;
	return (int)wc.status;
}

static int fetch_add(void)
{
	return fetch_add_on(S.qp, S.cq, S.buf, S.mr);
}

/* The stopped initiator: a process of its own, adding 1 to the receiver's
 * counter in a loop through a QP of its own, until told to finish. */
static void atomic_initiator(int to_parent, int from_parent)
{
	static struct side C;
	uint32_t peer_qpn;

	race_child = 1;
	if (side_open(&C, IBV_QPT_RC, 16, CAP) || write(to_parent, &C.qp->qp_num, 4) != 4 ||
	    read(from_parent, &peer_qpn, 4) != 4 || qp_connect(C.qp, peer_qpn, 7, 1) ||
	    write(to_parent, "c", 1) != 1)
		_exit(1);
	while (!__atomic_load_n(&race->finish, __ATOMIC_ACQUIRE)) {
		if (fetch_add_on(C.qp, C.cq, C.buf, C.mr) == IBV_WC_SUCCESS)
			__atomic_fetch_add(&race->done, 1, __ATOMIC_SEQ_CST);
		else
			__atomic_fetch_add(&race->failed, 1, __ATOMIC_SEQ_CST);
	}
	_exit(0);
}

/* Stops the child in the middle of its atomic: it stops itself in the
 * hook if its atomic passes there, or is stopped from outside, most
 * likely while it waits for an atomic it posted (its loop does little
 * else). Returns once the kernel reports it stopped. */
static void stop_mid_atomic(pid_t pid)
{
	uint64_t from = __atomic_load_n(&race->done, __ATOMIC_SEQ_CST);
	int st;

	for (int i = 0; i < 2000 && __atomic_load_n(&race->done, __ATOMIC_SEQ_CST) == from; i++)
		usleep(1000);
	__atomic_store_n(&race->stop_inside, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < 20; i++) {
		if (waitpid(pid, &st, WUNTRACED | WNOHANG) == pid && WIFSTOPPED(st))
			return;
		usleep(1000);
	}
	/* Not taken: the child is stopped here. Taken meanwhile: it stops. */
	if (__atomic_exchange_n(&race->stop_inside, 0, __ATOMIC_SEQ_CST))
		kill(pid, SIGSTOP);
	waitpid(pid, &st, WUNTRACED);
}

/* Whether the stopped child holds a slot of R's atomic table (seg, R's
 * segment mapped): a request of its posted, answered or not, that it has
 * not taken back. */
static int child_holds_slot(void *seg, pid_t pid)
{
	struct uro_seg_header layout;
	struct uro_seg_atomics *a;

	uro_seg_table_offsets(&layout);
	a = (struct uro_seg_atomics *)((uint8_t *)seg + layout.atomic_off);
	for (unsigned i = 0; i < URO_ATOMIC_SLOTS; i++)
		if (__atomic_load_n(&a->slot[i].state, __ATOMIC_ACQUIRE) != URO_ATOMIC_FREE &&
		    a->slot[i].owner == pid)
			return 1;
	return 0;
}

/* One initiator stopped in the middle of its atomic on a target never
 * fails another's atomic on that target, as on a NIC one process's stop
 * fails nobody else's operation: in 8 trials, each with the initiator
 * stopped while it holds a slot of the target's table, the other's
 * fetch-and-add succeeds 8 times. And nothing is lost or done twice: once
 * the stopped one has resumed and finished, the counter is the sum of
 * every add that completed. */
static void test_stopped_atomic_holder(void)
{
	struct ibv_qp_init_attr init = {
	    .send_cq = R.cq, .recv_cq = R.cq, .qp_type = IBV_QPT_RC, .cap = CAP};
	volatile uint64_t *counter = (uint64_t *)(R.buf + 2048);
	struct ibv_qp *rq = ibv_create_qp(R.pd, &init);
	void *seg = map_segment(R.qp);
	int up[2], down[2], ok = 0, held = 0, st;
	uint32_t child_qpn;
	uint64_t start;
	pid_t pid;
	char c;

	race = mmap(NULL, sizeof(*race), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(rq != NULL && race != MAP_FAILED && seg != NULL);
	if (!rq || race == MAP_FAILED || !seg || pipe(up) || pipe(down))
		return;
	CHECK_EQ(qp_connect(S.qp, R.qp->qp_num, 7, 1), 0);
	CHECK_EQ(qp_connect(R.qp, S.qp->qp_num, 7, 1), 0);
	start = *counter;
	pid = fork();
	if (pid == 0)
		atomic_initiator(up[1], down[0]);
	alarm(60); /* an unbounded wait fails the test instead of hanging it */
	CHECK(read(up[0], &child_qpn, 4) == 4 && qp_connect(rq, child_qpn, 7, 1) == 0 &&
	      write(down[1], &rq->qp_num, 4) == 4 && read(up[0], &c, 1) == 1);
	for (int trial = 0; trial < 8; trial++) {
		/* Stopped from outside, the child holds a slot only if the stop
		 * fell between its post and its taking the answer back: let it
		 * go on until one does (bounded), so that every trial tests a
		 * stopped holder, not the odds of stopping one. */
		for (int tries = 0; tries < 200; tries++) {
			stop_mid_atomic(pid);
			if (child_holds_slot(seg, pid))
				break;
			kill(pid, SIGCONT);
		}
		held += child_holds_slot(seg, pid);
		st = fetch_add();
		ok += st == IBV_WC_SUCCESS;
		if (st != IBV_WC_SUCCESS) { /* connected again for the next trial */
			qp_connect(S.qp, R.qp->qp_num, 7, 1);
			qp_connect(R.qp, S.qp->qp_num, 7, 1);
		}
		kill(pid, SIGCONT);
	}
	CHECK_EQ(ok, 8);
	CHECK_EQ(held, 8); /* each trial stopped it holding a request of its */
	__atomic_store_n(&race->finish, 1, __ATOMIC_RELEASE);
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(race->done > 0);
	CHECK_EQ(race->failed, 0);
	CHECK_EQ(*counter, start + (uint64_t)ok + race->done);
	alarm(0);
	ibv_destroy_qp(rq);
	for (int i = 0; i < 2; i++) {
		close(up[i]);
		close(down[i]);
	}
	munmap(race, sizeof(*race));
	munmap(seg, uro_seg_size());
	race = NULL;
}

/* One short-lived peer: a child that opens its own context (so the slot a
 * previous child left is its), connects an RC QP to ours, lets us write to
 * its buffer or send to it, and then exits cleanly, or is killed, or
 * leaves without closing (_exit, as a crash would). Its receives are in a
 * region without remote access, where a small SEND is staged in its
 * segment and placed by its poll (staged_payload.c): reaching it makes no
 * system call that would fail if it had gone. */
struct child_info {
	uint32_t qpn, rkey;
	uint64_t addr;
};

enum { CHILD_CLOSES = 1, CHILD_REPORTS = 2 }; /* the last byte the child reads */

/* n receives of 64 bytes each in mr, which starts 1 KiB into s's buffer. */
static int post_recvs(struct side *s, struct ibv_mr *mr, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge sge = {
		    .addr = (uintptr_t)s->buf + 1024 + 64 * i, .length = 64, .lkey = mr->lkey};
		struct ibv_recv_wr wr = {.sg_list = &sge, .num_sge = 1}, *bad;

		if (ibv_post_recv(s->qp, &wr, &bad))
			return -1;
	}
	return 0;
}

static pid_t start_child(int to_parent, int from_parent)
{
	pid_t pid = fork();

	if (pid == 0) {
		static struct side C;
		struct child_info ci;
		struct ibv_mr *local;
		struct ibv_wc wc;
		uint32_t peer_qpn;
		uint8_t how, got;

		if (side_open(&C, IBV_QPT_RC, 16, CAP))
			_exit(1);
		local = ibv_reg_mr(C.pd, C.buf + 1024, 128, IBV_ACCESS_LOCAL_WRITE);
		ci.qpn = C.qp->qp_num;
		ci.rkey = C.mr->rkey;
		ci.addr = (uintptr_t)C.buf;
		if (!local || write(to_parent, &ci, sizeof(ci)) != sizeof(ci) ||
		    read(from_parent, &peer_qpn, 4) != 4 || qp_connect(C.qp, peer_qpn, 7, 1) ||
		    post_recvs(&C, local, 2) || write(to_parent, "c", 1) != 1 ||
		    read(from_parent, &how, 1) != 1)
			_exit(1);
		if (how & CHILD_REPORTS) { /* the status of the receive, 0xff for none */
			got = poll_one(C.cq, &wc) == 1 ? (uint8_t)wc.status : 0xff;
			if (write(to_parent, &got, 1) != 1)
				_exit(1);
		}
		if (how & CHILD_CLOSES)
			side_close(&C);
		_exit(0);
	}
	return pid;
}

/* A 16-byte SEND on qp: the completion's status, or -1 for none. */
static int small_send(struct ibv_qp *qp)
{
	struct ibv_sge sge = {.addr = (uintptr_t)S.buf, .length = 16, .lkey = S.mr->lkey};
	struct ibv_send_wr wr = {
	    .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
	struct ibv_send_wr *bad;
	struct ibv_wc wc;

	if (ibv_post_send(qp, &wr, &bad) || poll_one(S.cq, &wc) != 1)
		return -1;
	return (int)wc.status;
}

static int write_to(struct ibv_qp *qp, const struct child_info *ci)
{
	struct ibv_sge sge = {.addr = (uintptr_t)S.buf, .length = 64, .lkey = S.mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;

	wr.wr.rdma.remote_addr = ci->addr;
	wr.wr.rdma.rkey = ci->rkey;
	if (ibv_post_send(qp, &wr, &bad) || poll_one(S.cq, &wc) != 1)
		return -1;
	return (int)wc.status;
}

/* A child started and connected to a new QP of ours, as test_successive_peers
 * does it; *qp is that QP. */
static pid_t connected_child(struct ibv_qp **qp, int up[2], int down[2], struct child_info *ci)
{
	struct ibv_qp_init_attr init = {
	    .send_cq = S.cq, .recv_cq = S.cq, .qp_type = IBV_QPT_RC, .cap = CAP};
	pid_t pid;
	char c;

	*qp = ibv_create_qp(S.pd, &init);
	if (!*qp || pipe(up) || pipe(down))
		return -1;
	pid = start_child(up[1], down[0]);
	/* The child's ends, so that a child gone early is an end of file. */
	close(up[1]);
	close(down[0]);
	up[1] = down[0] = -1;
	if (read(up[0], ci, sizeof(*ci)) != sizeof(*ci) || qp_connect(*qp, ci->qpn, 7, 1) ||
	    write(down[1], &(*qp)->qp_num, 4) != 4 || read(up[0], &c, 1) != 1)
		return -1;
	return pid;
}

static void close_pipes(int up[2], int down[2])
{
	close(up[0]);
	close(down[1]);
}

/* A long-lived process talks to successive short-lived peers that get the
 * same registry slot (and so the same QPNs), each on a new QP of its own as
 * a server makes one per client (rping -s -P); each new peer is reached,
 * whether the one before exited cleanly or was killed. */
static void test_successive_peers(void)
{
	struct ibv_qp *qps[4] = {0};
	unsigned first_slot = 0;

	for (int i = 0; i < 4; i++) {
		int up[2], down[2];
		struct child_info ci;
		uint8_t how = (uint8_t)(i & 1 ? CHILD_CLOSES : 0);
		pid_t pid = connected_child(&qps[i], up, down, &ci);

		CHECK(pid > 0);
		if (pid <= 0)
			break;
		if (i == 0)
			first_slot = ci.qpn >> 12;
		CHECK_EQ(ci.qpn >> 12, first_slot); /* the slot is reused */
		CHECK_EQ(write_to(qps[i], &ci), IBV_WC_SUCCESS);
		CHECK_EQ(write(down[1], &how, 1), 1);
		if (!(how & CHILD_CLOSES))
			kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		close_pipes(up, down);
	}
	for (int i = 0; i < 4; i++)
		if (qps[i])
			ibv_destroy_qp(qps[i]);
}

/* Successive peers that leave without closing their context (a crash, or
 * rsocket test's children that _exit), each with the same QP number: a
 * forked child starts its turn of slots where this process's stands
 * (registry.c), so each takes the slot the one before left. The previous
 * child's segment, still mapped here, held a QP of that number: the first
 * SEND to the new child was staged there and completed successfully, and
 * the new child never saw it (an rsocket reconnect after an rpoll test
 * hung). The peer is looked up again when a connection is made (qp.c
 * peer_check) and when a request finds the cached one gone or its slot
 * changed hands (peers.c uro_peer_refresh), so the SEND lands at once: the
 * ACK timeout here (4,096 us x 2^31) leaves no retransmission to do it. */
static void test_successor_of_vanished_peer(void)
{
	uint32_t first_qpn = 0;

	setenv("PAIR_TIMEOUT", "31", 1);
	for (int i = 0; i < 3; i++) {
		int up[2], down[2];
		uint8_t how = CHILD_REPORTS, got = 0xfe;
		struct child_info ci;
		struct ibv_qp *qp;
		pid_t pid = connected_child(&qp, up, down, &ci);

		CHECK(pid > 0);
		if (pid <= 0)
			break;
		if (i == 0)
			first_qpn = ci.qpn;
		CHECK_EQ(ci.qpn, first_qpn); /* the successor's QP has the same number */
		CHECK_EQ(small_send(qp), IBV_WC_SUCCESS);
		CHECK_EQ(write(down[1], &how, 1), 1);
		CHECK_EQ(read(up[0], &got, 1), 1);
		CHECK_EQ(got, IBV_WC_SUCCESS); /* the child's receive completed */
		waitpid(pid, NULL, 0);
		close_pipes(up, down);
		ibv_destroy_qp(qp);
	}
	unsetenv("PAIR_TIMEOUT");
}

/* A peer killed while connected: a small SEND to it afterwards, which
 * would be staged in its segment with no system call to fail, ends as
 * a NIC ends a request to a QP that no longer answers: RETRY_EXC_ERR once
 * retry_cnt retransmissions went unanswered. It completed successfully. */
static void test_send_to_killed_peer(void)
{
	int up[2], down[2];
	struct child_info ci;
	struct ibv_qp *qp;
	pid_t pid = connected_child(&qp, up, down, &ci);

	CHECK(pid > 0);
	if (pid <= 0)
		return;
	CHECK_EQ(small_send(qp), IBV_WC_SUCCESS);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	usleep(10000); /* past the time a peer is believed alive unchecked */
	CHECK_EQ(small_send(qp), IBV_WC_RETRY_EXC_ERR);
	close_pipes(up, down);
	ibv_destroy_qp(qp);
}

struct racer {
	struct ibv_context *ctx;
	uint32_t qpn;
	pthread_barrier_t *start;
	int ok;
};

static void *race_attach(void *arg)
{
	struct racer *r = arg;
	struct ibv_pd *pd = ibv_alloc_pd(r->ctx);
	struct ibv_cq *cq = ibv_create_cq(r->ctx, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr init = {
	    .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .cap = CAP};
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};

	if (qp)
		ibv_modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = r->qpn;
	a.ah_attr.port_num = 1;
	a.ah_attr.is_global = 1;
	ibv_query_gid(r->ctx, 1, 0, &a.ah_attr.grh.dgid);
	pthread_barrier_wait(r->start);
	/* RTR reaches the peer's process for the first time, in every thread
	 * at once. */
	r->ok = qp && ibv_modify_qp(qp, &a,
				    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
					IBV_QP_MIN_RNR_TIMER) == 0;
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	return NULL;
}

/* How many mappings this process has of the segment slot's owner (this
 * process) has now. Counted by the memfd's inode, not by its name: the name
 * says the slot only, and a context here may still map the segment of a
 * dead process that held the slot before (a cached peer is replaced when the
 * slot is looked up again, not when its owner dies): the sender of
 * test_send_to_killed_peer maps its killed peer's. Counted by name, a new
 * owner of that slot showed three mappings (6 rounds of 20 under parallel
 * load, when other processes' slots moved this one onto it). */
static int mappings_of(unsigned slot)
{
	struct uro_slot_record rec;
	char line[512];
	struct stat own;
	unsigned long ino;
	FILE *f;
	int n = 0;

	if (uro_registry_lookup(NULL, slot, &rec) != 1 || rec.pid != getpid() ||
	    fstat(rec.seg_fd, &own))
		return -1;
	f = fopen("/proc/self/maps", "r");
	/* address perms offset dev inode path */
	while (f && fgets(line, sizeof(line), f))
		n += strstr(line, "/memfd:uroce-seg-") &&
		     sscanf(line, "%*s %*s %*s %*s %lu", &ino) == 1 && ino == own.st_ino;
	if (f)
		fclose(f);
	return n;
}

/* Threads reaching a peer process for the first time at once all get it,
 * and it is mapped once (its own mapping, and one for the context that
 * reaches it). The peer's context is opened first, so that in every round
 * it takes the lowest free slot: the one test_send_to_killed_peer's child
 * held, whose old segment the sender's context still maps (counted by name,
 * 3 mappings in 20 rounds of 20). */
static void test_threads_reach_new_peer(void)
{
	for (int round = 0; round < 20; round++) {
		static struct side F;
		struct ibv_context *ctx;
		pthread_barrier_t start;
		struct racer r[4];
		pthread_t t[4];

		if (side_open(&F, IBV_QPT_RC, 16, CAP) || !(ctx = open_dev("uroce0"))) {
			CHECK(!"contexts");
			return;
		}
		pthread_barrier_init(&start, NULL, 4);
		for (int i = 0; i < 4; i++) {
			r[i] = (struct racer){ctx, F.qp->qp_num, &start, 0};
			pthread_create(&t[i], NULL, race_attach, &r[i]);
		}
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
		CHECK(r[0].ok && r[1].ok && r[2].ok && r[3].ok);
		CHECK_EQ(mappings_of(F.qp->qp_num >> 12), 2);
		pthread_barrier_destroy(&start);
		ibv_close_device(ctx);
		side_close(&F);
	}
}

struct late_recv {
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
};

static void *post_recv_later(void *arg)
{
	struct late_recv *l = arg;
	struct ibv_sge sge = {.addr = (uintptr_t)l->buf, .length = 64, .lkey = l->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = 99, .sg_list = &sge, .num_sge = 1}, *bad;

	usleep(100000);
	ibv_post_recv(l->qp, &wr, &bad);
	return NULL;
}

/* A SEND that met no receive (RNR) is retried while its program sleeps in
 * poll(2) on its completion channel, touching no verb: the receive posted
 * later is found, and the channel becomes readable. */
static void test_retry_while_asleep(void)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(S.ctx);
	struct ibv_cq *cq = ch ? ibv_create_cq(S.ctx, 4, NULL, ch, 0) : NULL;
	struct ibv_qp_init_attr a = {
	    .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .cap = CAP};
	struct ibv_qp_init_attr b = {
	    .send_cq = R.cq, .recv_cq = R.cq, .qp_type = IBV_QPT_RC, .cap = CAP};
	struct ibv_qp *qa = cq ? ibv_create_qp(S.pd, &a) : NULL;
	struct ibv_qp *qb = ibv_create_qp(R.pd, &b);
	struct ibv_sge sge = {.addr = (uintptr_t)S.buf, .length = 64, .lkey = S.mr->lkey};
	struct ibv_send_wr wr = {
	    .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
	struct ibv_send_wr *bad;
	struct late_recv late = {qb, R.mr, R.buf + 4096};
	struct pollfd pfd = {.fd = ch ? ch->fd : -1, .events = POLLIN};
	struct ibv_cq *ev_cq;
	struct ibv_wc wc;
	void *ev_ctx;
	pthread_t t;

	CHECK(qa && qb);
	if (!qa || !qb)
		return;
	CHECK_EQ(qp_connect(qa, qb->qp_num, 7, 1), 0);
	CHECK_EQ(qp_connect(qb, qa->qp_num, 7, 1), 0);
	CHECK_EQ(ibv_req_notify_cq(cq, 0), 0);
	CHECK_EQ(ibv_post_send(qa, &wr, &bad), 0);
	CHECK_EQ(ibv_poll_cq(cq, 1, &wc), 0); /* waiting for a receive */
	pthread_create(&t, NULL, post_recv_later, &late);
	CHECK_EQ(poll(&pfd, 1, 3000), 1);
	pthread_join(t, NULL);
	if (pfd.revents & POLLIN) {
		CHECK_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
		ibv_ack_cq_events(ev_cq, 1);
		CHECK_EQ(ibv_poll_cq(cq, 1, &wc), 1);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	}
	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);
	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(ch);
	while (ibv_poll_cq(R.cq, 1, &wc) > 0)
		;
}

/* The slots of this test's processes are numbered in a registry of their
 * own (UROCE_RUNTIME_DIR): successive peers get the same slot, and a new
 * one the lowest free, only when no other process of this user takes or
 * frees slots meanwhile. In the user's registry, under a parallel suite,
 * test_successive_peers' third child got another slot than the first (1
 * run in 50 beside another run of this test). */
static char runtime_dir[] = "/dev/shm/uroce-liveness-XXXXXX";

static void own_registry(void)
{
	if (!mkdtemp(runtime_dir) || setenv("UROCE_RUNTIME_DIR", runtime_dir, 1))
		runtime_dir[0] = 0;
}

static void drop_registry(void)
{
	char path[128];

	if (!runtime_dir[0])
		return;
	snprintf(path, sizeof(path), "%s/uroce-registry-%u", runtime_dir, (unsigned)geteuid());
	unlink(path);
	rmdir(runtime_dir);
}

int main(void)
{
	own_registry();
	CHECK(runtime_dir[0]);
	if (side_open(&S, IBV_QPT_RC, 64, CAP) || side_open(&R, IBV_QPT_RC, 2 * DEPTH, CAP)) {
		fprintf(stderr, "cannot open two contexts on uroce0\n");
		drop_registry();
		return 1;
	}
	CHECK_EQ(qp_connect(S.qp, R.qp->qp_num, 7, 1), 0);
	CHECK_EQ(qp_connect(R.qp, S.qp->qp_num, 7, 1), 0);
	test_resize_under_traffic();
	test_producer_died_mid_entry();
	test_successive_peers();
	test_successor_of_vanished_peer();
	test_send_to_killed_peer();
	test_threads_reach_new_peer();
	test_retry_while_asleep();
	/* Last: R keeps its mapping of the child's segment, whose slot a later
	 * test's new context would take (test_threads_reach_new_peer counts
	 * mappings). */
	test_stopped_atomic_holder();
	side_close(&S);
	side_close(&R);
	drop_registry();
	return check_report();
}
