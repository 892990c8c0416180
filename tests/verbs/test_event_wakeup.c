/* Completion channels never miss a wake-up: two threads, each with its
 * own context (as two processes), ping-pong 1-byte SENDs 20,000 times,
 * each waiting for its receive in ibv_get_cq_event after arming the CQ and
 * finding it empty (ibv_req_notify_cq(3)'s arm, poll, wait loop). A
 * completion published while the arm is being set must still wake its
 * waiter: a lost one stalls a round trip, and the test counts it after a
 * 2-second wait instead of hanging. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>

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

static int setup(struct pinger *p)
{
	struct ibv_qp_init_attr init = {
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};

	p->s.ctx = open_dev("uroce0");
	if (!p->s.ctx)
		return -1;
	p->s.pd = ibv_alloc_pd(p->s.ctx);
	p->ch = ibv_create_comp_channel(p->s.ctx);
	p->s.cq = ibv_create_cq(p->s.ctx, 8, NULL, NULL, 0);
	p->rcq = ibv_create_cq(p->s.ctx, 8, NULL, p->ch, 0);
	p->s.mr = ibv_reg_mr(p->s.pd, p->s.buf, 64, IBV_ACCESS_LOCAL_WRITE);
	if (!p->s.pd || !p->ch || !p->s.cq || !p->rcq || !p->s.mr)
		return -1;
	init.send_cq = p->s.cq;
	init.recv_cq = p->rcq;
	p->s.qp = ibv_create_qp(p->s.pd, &init);
	return p->s.qp ? 0 : -1;
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
	for (int i = 0; i < 2; i++) {
		ibv_destroy_qp(P[i].s.qp);
		ibv_dereg_mr(P[i].s.mr);
		ibv_destroy_cq(P[i].rcq);
		ibv_destroy_cq(P[i].s.cq);
		ibv_destroy_comp_channel(P[i].ch);
		ibv_dealloc_pd(P[i].s.pd);
		ibv_close_device(P[i].s.ctx);
	}
	return check_report();
}
