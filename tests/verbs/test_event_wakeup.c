/* Completion channels never miss a wake-up: two threads, each with its
 * own context (as two processes), ping-pong 1-byte SENDs 20,000 times,
 * each waiting for its receive in ibv_get_cq_event after arming the CQ and
 * finding it empty (ibv_req_notify_cq(3)'s arm, poll, wait loop). A
 * completion published while the arm is being set must still wake its
 * waiter: a lost one stalls a round trip, and the test counts it after a
 * 2-second wait instead of hanging. Then a channel made again. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "../check.h"
#include "pair.h"

#define ROUND_TRIPS 20000

struct pinger {
	struct side s;
	struct ibv_comp_channel *ch;
	struct ibv_cq *rcq;
	int first; /* sends first */
	int stalls, errors;
};

static struct pinger P[2];

/* The receive side's channel, CQ and QP: made again by
 * test_channel_made_again. */
static int make_queues(struct pinger *p)
{
	struct ibv_qp_init_attr init = {
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};

	p->ch = ibv_create_comp_channel(p->s.ctx);
	p->rcq = p->ch ? ibv_create_cq(p->s.ctx, 8, NULL, p->ch, 0) : NULL;
	if (!p->rcq)
		return -1;
	init.send_cq = p->s.cq;
	init.recv_cq = p->rcq;
	p->s.qp = ibv_create_qp(p->s.pd, &init);
	return p->s.qp ? 0 : -1;
}

static void drop_queues(struct pinger *p)
{
	ibv_destroy_qp(p->s.qp);
	ibv_destroy_cq(p->rcq);
	ibv_destroy_comp_channel(p->ch);
}

static int setup(struct pinger *p)
{
	p->s.ctx = open_dev("uroce0");
	if (!p->s.ctx)
		return -1;
	p->s.pd = ibv_alloc_pd(p->s.ctx);
	p->s.cq = ibv_create_cq(p->s.ctx, 8, NULL, NULL, 0);
	p->s.mr = ibv_reg_mr(p->s.pd, p->s.buf, 64, IBV_ACCESS_LOCAL_WRITE);
	if (!p->s.pd || !p->s.cq || !p->s.mr)
		return -1;
	return make_queues(p);
}

static int send_one(struct pinger *p)
{
	struct ibv_sge sge = {.addr = (uintptr_t)p->s.buf + 32, .length = 1, .lkey = p->s.mr->lkey};
	struct ibv_send_wr wr = {
	    .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED};
	struct ibv_send_wr *bad;
	struct ibv_wc wc;

	if (ibv_post_send(p->s.qp, &wr, &bad) || poll_one(p->s.cq, &wc) != 1)
		return -1;
	return wc.status == IBV_WC_SUCCESS ? 0 : -1;
}

/* The receive's completion, by the arm-poll-wait loop. */
static int wait_recv(struct pinger *p)
{
	struct pollfd pfd = {.fd = p->ch->fd, .events = POLLIN};
	struct ibv_cq *cq;
	struct ibv_wc wc;
	void *ctx;

	for (;;) {
		int n = ibv_poll_cq(p->rcq, 1, &wc);

		if (n)
			return n == 1 && wc.status == IBV_WC_SUCCESS ? 0 : -1;
		if (ibv_req_notify_cq(p->rcq, 0))
			return -1;
		n = ibv_poll_cq(p->rcq, 1, &wc);
		if (n)
			return n == 1 && wc.status == IBV_WC_SUCCESS ? 0 : -1;
		if (poll(&pfd, 1, 2000) != 1) {
			p->stalls++;
			return -1;
		}
		if (ibv_get_cq_event(p->ch, &cq, &ctx))
			return -1;
		ibv_ack_cq_events(cq, 1);
	}
}

static void *run(void *arg)
{
	struct pinger *p = arg;

	for (int i = 0; i < ROUND_TRIPS; i++) {
		if (post_recv_buf(&p->s, (uint64_t)i, p->s.buf, 16)) {
			p->errors++;
			break;
		}
		if (p->first && send_one(p)) {
			p->errors++;
			break;
		}
		if (wait_recv(p)) {
			p->errors++;
			break;
		}
		if (!p->first && send_one(p)) {
			p->errors++;
			break;
		}
	}
	return NULL;
}

/* A channel destroyed and made again gets the same fd numbers in its
 * process: a peer that had notified the first one's pipe must notify the
 * new one's, not the old pipe it still held (rstream -T b's server slept
 * for ever on its second connection). */
static void *waiter(void *arg)
{
	struct pinger *p = arg;

	p->errors += wait_recv(p) != 0;
	return NULL;
}

static void test_channel_made_again(void)
{
	int old_fd = P[1].ch->fd;
	pthread_t t;

	for (int i = 0; i < 2; i++) {
		drop_queues(&P[i]);
		CHECK_EQ(make_queues(&P[i]), 0);
	}
	CHECK_EQ(P[1].ch->fd, old_fd); /* the case at hand: the number again */
	CHECK_EQ(qp_connect(P[0].s.qp, P[1].s.qp->qp_num, 7, 1), 0);
	CHECK_EQ(qp_connect(P[1].s.qp, P[0].s.qp->qp_num, 7, 1), 0);
	P[1].stalls = 0;
	CHECK_EQ(post_recv_buf(&P[1].s, 1, P[1].s.buf, 16), 0);
	/* The receiver armed and asleep first, so that the SEND must wake it. */
	pthread_create(&t, NULL, waiter, &P[1]);
	usleep(200 * 1000);
	CHECK_EQ(send_one(&P[0]), 0);
	pthread_join(t, NULL);
	CHECK_EQ(P[1].errors, 0);
	CHECK_EQ(P[1].stalls, 0);
}

int main(void)
{
	pthread_t t[2];

	if (setup(&P[0]) || setup(&P[1])) {
		fprintf(stderr, "cannot open two contexts on uroce0\n");
		return 1;
	}
	P[0].first = 1;
	CHECK_EQ(qp_connect(P[0].s.qp, P[1].s.qp->qp_num, 7, 1), 0);
	CHECK_EQ(qp_connect(P[1].s.qp, P[0].s.qp->qp_num, 7, 1), 0);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, run, &P[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(P[0].stalls + P[1].stalls, 0);
	CHECK_EQ(P[0].errors + P[1].errors, 0);
	test_channel_made_again();
	for (int i = 0; i < 2; i++) {
		drop_queues(&P[i]);
		ibv_dereg_mr(P[i].s.mr);
		ibv_destroy_cq(P[i].s.cq);
		ibv_dealloc_pd(P[i].s.pd);
		ibv_close_device(P[i].s.ctx);
	}
	return check_report();
}
