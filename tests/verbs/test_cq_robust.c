/* A CQ stays whole while other processes complete into it: resized under
 * traffic it loses nothing (issue 9 item 11), and a producer that reserved
 * an entry and died before writing it does not hide the completions after
 * it (item 10). Two contexts stand for two processes; the sender runs in a
 * thread of its own. */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../check.h"
#include "pair.h"
#include "segment.h"

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

/* The receiver's CQ as its segment holds it, through the segment's memfd
 * (what a peer process maps). */
static struct uro_seg_cq *shared_cq(struct ibv_cq *cq, unsigned slot, void **map)
{
	struct uro_seg_header layout;
	char want[64], path[64], link[64];

	snprintf(want, sizeof(want), "/memfd:uroce-seg-%u (deleted)", slot);
	for (int fd = 3; fd < 1024; fd++) {
		ssize_t n;
		int mfd;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, link, sizeof(link) - 1);
		if (n < 0)
			continue;
		link[n] = 0;
		if (strcmp(link, want))
			continue;
		mfd = open(path, O_RDWR);
		*map = mmap(NULL, uro_seg_size(), PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
		close(mfd);
		if (*map == MAP_FAILED)
			return NULL;
		uro_seg_table_offsets(&layout);
		return (struct uro_seg_cq *)((uint8_t *)*map + layout.cq_off) + cq->handle;
	}
	return NULL;
}

static void test_producer_died_mid_entry(void)
{
	void *map = NULL;
	struct uro_seg_cq *cq = shared_cq(R.cq, R.qp->qp_num >> 12, &map);
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

int main(void)
{
	if (side_open(&S, IBV_QPT_RC, 64, CAP) || side_open(&R, IBV_QPT_RC, 2 * DEPTH, CAP)) {
		fprintf(stderr, "cannot open two contexts on uroce0\n");
		return 1;
	}
	CHECK_EQ(qp_connect(S.qp, R.qp->qp_num, 7, 1), 0);
	CHECK_EQ(qp_connect(R.qp, S.qp->qp_num, 7, 1), 0);
	test_resize_under_traffic();
	test_producer_died_mid_entry();
	side_close(&S);
	side_close(&R);
	return check_report();
}
