/* Two connected QPs on uroce0, each in its own context (its own registry
 * slot and segment, as two processes would have), for the data-path
 * tests. */
#ifndef URO_TEST_PAIR_H
#define URO_TEST_PAIR_H

#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIDE_BUF (1 << 16)

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t buf[SIDE_BUF] __attribute__((aligned(64)));
};

static inline struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return ctx;
}

static inline int side_open(struct side *s, enum ibv_qp_type type, int cqe, struct ibv_qp_cap cap)
{
	struct ibv_qp_init_attr init = {.qp_type = type, .cap = cap};

	s->ctx = open_dev("uroce0");
	if (!s->ctx)
		return -1;
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, cqe, NULL, NULL, 0);
	s->mr = ibv_reg_mr(s->pd, s->buf, sizeof(s->buf),
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	init.send_cq = init.recv_cq = s->cq;
	s->qp = s->pd && s->cq && s->mr ? ibv_create_qp(s->pd, &init) : NULL;
	return s->qp ? 0 : -1;
}

static inline void side_close(struct side *s)
{
	ibv_destroy_qp(s->qp);
	ibv_dereg_mr(s->mr);
	ibv_destroy_cq(s->cq);
	ibv_dealloc_pd(s->pd);
	ibv_close_device(s->ctx);
}

/* The GID index the pairs use, source and destination: PAIR_GID, or 0
 * (on lo, GID 0 is ::ffff:127.0.0.1 and GID 1 is ::1). */
static inline uint8_t pair_gid_index(void)
{
	const char *g = getenv("PAIR_GID");

	return g ? (uint8_t)atoi(g) : 0;
}

/* The remote access a connected QP gets at INIT: a test may narrow it. */
static unsigned pair_access =
    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
/* The RC requester's transport retries (IBTA 9.7.6.1.3). */
static uint8_t pair_retry_cnt = 7;

/* RESET -> INIT -> RTR -> RTS towards remote_qpn at dgid. */
static inline int qp_connect_to(struct ibv_qp *qp, uint32_t remote_qpn, uint8_t rnr_retry,
				uint8_t min_rnr_timer, const union ibv_gid *dgid)
{
	struct ibv_qp_attr a;
	int ud = qp->qp_type == IBV_QPT_UD;
	const char *pair_mtu = getenv("PAIR_MTU");
	/* XRC's halves take the attributes of the side they have (IBTA A14). */
	int xrc_ini = qp->qp_type == IBV_QPT_XRC_SEND, xrc_tgt = qp->qp_type == IBV_QPT_XRC_RECV;
	int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		  (xrc_ini ? 0 : IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	int rts = xrc_tgt ? IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN
			  : IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = 0x11111111;
	a.qp_access_flags = pair_access;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			      (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS)))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (!ud) {
		struct ibv_port_attr port;

		/* 4096 on lo; a veth's 1500 bytes take 1024. PAIR_MTU (bytes)
		 * sets a smaller one. */
		a.path_mtu = ibv_query_port(qp->context, 1, &port) ? IBV_MTU_1024 : port.active_mtu;
		for (int m = IBV_MTU_256; pair_mtu && m <= IBV_MTU_4096; m++)
			if (atoi(pair_mtu) == 128 << m)
				a.path_mtu = (enum ibv_mtu)m;
		a.dest_qp_num = remote_qpn;
		a.max_dest_rd_atomic = 4;
		a.min_rnr_timer = min_rnr_timer;
		a.ah_attr.port_num = 1;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.hop_limit = 1;
		a.ah_attr.grh.sgid_index = pair_gid_index();
		a.ah_attr.grh.dgid = *dgid;
	}
	if (ibv_modify_qp(qp, &a, ud ? IBV_QP_STATE : rtr))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	/* 67 ms; under injected loss 17 ms, as the user of a lossy link
	 * would tune it: far above lo's round trip, and eight of them above
	 * the longest a busy 2-core machine was seen to leave a process
	 * unscheduled (about 100 ms; 4 ms timeouts ran out). PAIR_TIMEOUT
	 * sets another (IBTA 9.7.6.1.3: 4.096 us x 2^timeout). */
	a.timeout = getenv("PAIR_TIMEOUT")   ? (uint8_t)atoi(getenv("PAIR_TIMEOUT"))
		    : getenv("UROCE_FAULTS") ? 12
					     : 14;
	a.retry_cnt = pair_retry_cnt;
	a.rnr_retry = rnr_retry;
	a.max_rd_atomic = 4;
	return ibv_modify_qp(qp, &a, ud ? IBV_QP_STATE | IBV_QP_SQ_PSN : rts);
}

/* The same towards a QP of this host, through its own GID pair_gid_index(). */
static inline int qp_connect(struct ibv_qp *qp, uint32_t remote_qpn, uint8_t rnr_retry,
			     uint8_t min_rnr_timer)
{
	union ibv_gid gid;

	if (ibv_query_gid(qp->context, 1, pair_gid_index(), &gid))
		return -1;
	return qp_connect_to(qp, remote_qpn, rnr_retry, min_rnr_timer, &gid);
}

/* The QP's state as ibv_query_qp(3) reports it. */
static inline enum ibv_qp_state state_of(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;

	return ibv_query_qp(qp, &a, IBV_QP_STATE, &i) ? IBV_QPS_UNKNOWN : a.qp_state;
}

/* Polls until one completion arrives or about a second passes. */
static inline int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	struct timespec start, now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec > 2)
			return 0;
	}
}

static inline int post_recv_buf(struct side *s, uint64_t wr_id, void *addr, uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = s->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;

	return ibv_post_recv(s->qp, &wr, &bad);
}

#endif
