/* `uroce stat` against what the test did (issue 12 scope 2): N sends and a
 * WRITE on an RC pair count as N rdma_sends and N rdma_recvs, N + 1
 * posted sends and send CQEs on one QP and N posted receives and receive
 * CQEs on the other; a SEND with no receive and rnr_retry 0 counts one
 * RNR-retry-exceeded error. Over RoCEv2 (UROCE_TRANSPORT=roce) packets are
 * counted too, and under UROCE_FAULTS the losses become retransmits while
 * every message is still counted once, unless the spec scopes them away
 * from this RC traffic (type, qpn, dev). The counters are read by the
 * uroce command, from another process, while this one runs. */
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "../check.h"
#include "faults.h"
#include "pair.h"

#define N 200

static struct side A, B;
static const struct ibv_qp_cap CAP = {
    .max_send_wr = 64, .max_recv_wr = N + 1, .max_send_sge = 1, .max_recv_sge = 1};

/* The value after `name ` in a line of `uroce stat` output, or -1. */
static long long field(const char *line, const char *name)
{
	char key[64];
	const char *at;

	snprintf(key, sizeof(key), " %s ", name);
	at = strstr(line, key);
	return at ? atoll(at + strlen(key)) : -1;
}

/* Runs `uroce stat ARGS --pid <this process>` and keeps the line that
 * contains `match`; with none, line is empty and every field reads -1. */
static void stat_line(const char *args, const char *match, char *line, size_t len)
{
	char cmd[512];
	FILE *f;
	int found = 0;

	snprintf(cmd, sizeof(cmd), "timeout 20 %s stat %s --pid %d", getenv("UROCE"), args,
		 (int)getpid());
	f = popen(cmd, "r");
	CHECK(f != NULL);
	while (f && !found && fgets(line, (int)len, f))
		found = strstr(line, match) != NULL;
	while (f && fgets(cmd, sizeof(cmd), f))
		;
	CHECK_EQ(f ? pclose(f) : -1, 0);
	CHECK(found);
	if (!found)
		line[0] = 0;
}

static void post_send(struct side *s, enum ibv_wr_opcode op, uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf, .length = len, .lkey = s->mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	wr.wr.rdma.remote_addr = (uintptr_t)B.buf + 4096;
	wr.wr.rdma.rkey = B.mr->rkey;
	CHECK_EQ(ibv_post_send(s->qp, &wr, &bad), 0);
}

static int complete(struct ibv_cq *cq, int n, enum ibv_wc_status want)
{
	struct ibv_wc wc;
	int got = 0;

	while (got < n && poll_one(cq, &wc) == 1 && wc.status == want)
		got++;
	return got;
}

static void traffic(void)
{
	for (int i = 0; i < N; i++)
		CHECK_EQ(post_recv_buf(&B, i, B.buf, 256), 0);
	for (int i = 0; i < N; i++) {
		post_send(&A, IBV_WR_SEND, 64);
		CHECK_EQ(complete(A.cq, 1, IBV_WC_SUCCESS), 1);
	}
	post_send(&A, IBV_WR_RDMA_WRITE, 64);
	CHECK_EQ(complete(A.cq, 1, IBV_WC_SUCCESS), 1);
	CHECK_EQ(complete(B.cq, N, IBV_WC_SUCCESS), N);
}

/* Whether UROCE_FAULTS loses packets of this test's RC traffic on
 * uroce0 (an RC SEND to B's QP stands for all of it). */
static int loses_packets(void)
{
	const char *spec = getenv("UROCE_FAULTS");
	struct uro_fault_spec f;
	char err[160];

	if (!spec || uro_faults_parse(spec, &f, err, sizeof(err)))
		return 0;
	return f.loss && (!f.dev[0] || !strcmp(f.dev, "uroce0")) &&
	       uro_faults_scoped(&f, 0x04 /* RC SEND Only */, B.qp->qp_num);
}

static void check_port(int on_wire, int faulty)
{
	char line[4096];

	stat_line("uroce0", "link uroce0/1 ", line, sizeof(line));
	fputs(line, stdout); /* what was checked, in the test's log */
	CHECK_EQ(field(line, "rdma_sends"), N);
	CHECK_EQ(field(line, "rdma_recvs"), N);
	CHECK_EQ(field(line, "retry_exceeded_err"), 0);
	if (!on_wire) {
		CHECK_EQ(field(line, "sent_pkts"), 0);
		CHECK_EQ(field(line, "rcvd_pkts"), 0);
		return;
	}
	/* Every request, and its ACKs: one packet each at this size. */
	CHECK(field(line, "sent_pkts") >= N + 1);
	CHECK(field(line, "rcvd_pkts") >= N + 1);
	if (!faulty) {
		CHECK_EQ(field(line, "completer_retry_err"), 0);
		CHECK_EQ(field(line, "injected_loss"), 0);
	} else {
		/* 10% of 400 packets: losses there are, each made good. */
		CHECK(field(line, "injected_loss") > 0);
		CHECK(field(line, "completer_retry_err") > 0);
	}
}

/* On the wire the PSNs move, one a packet (IBTA 9.7.1): N sends and the
 * WRITE from 0. */
static void check_qps(int on_wire)
{
	struct ibv_sge sge[2] = {{.addr = (uintptr_t)A.buf, .length = 8, .lkey = A.mr->lkey},
				 {.addr = (uintptr_t)A.buf, .length = 8, .lkey = A.mr->lkey}};
	struct ibv_send_wr bad_wr = {.sg_list = sge, .num_sge = 2, .opcode = IBV_WR_SEND}, *bad;
	char line[4096], match[64];

	/* More SGEs than the QP takes: refused, and not counted as posted. */
	CHECK_EQ(ibv_post_send(A.qp, &bad_wr, &bad), EINVAL);
	CHECK(bad == &bad_wr);

	snprintf(match, sizeof(match), " lqpn %u ", A.qp->qp_num);
	stat_line("qp uroce0", match, line, sizeof(line));
	fputs(line, stdout);
	CHECK_EQ(field(line, "rqpn"), B.qp->qp_num);
	CHECK(strstr(line, " type RC state RTS ") != NULL);
	CHECK_EQ(field(line, "posted-sends"), N + 1);
	CHECK_EQ(field(line, "send-cqes"), N + 1);
	CHECK_EQ(field(line, "recv-cqes"), 0);
	CHECK_EQ(field(line, "error-cqes"), 0);
	CHECK_EQ(field(line, "pid"), getpid());
	CHECK_EQ(field(line, "sq-psn"), on_wire ? N + 1 : 0);
	snprintf(match, sizeof(match), " lqpn %u ", B.qp->qp_num);
	stat_line("qp uroce0", match, line, sizeof(line));
	CHECK_EQ(field(line, "posted-recvs"), N);
	CHECK_EQ(field(line, "rq-psn"), on_wire ? N + 1 : 0);
	CHECK_EQ(field(line, "recv-cqes"), N);
	CHECK_EQ(field(line, "posted-sends"), 0);
}

/* --json parses as JSON, whatever the process calls itself. */
static void check_json(void)
{
	char cmd[512], out[256] = "";
	FILE *f;

	prctl(PR_SET_NAME, "te\"st\\x");
	snprintf(cmd, sizeof(cmd),
		 "timeout 20 %s stat qp uroce0 --pid %d --json | /usr/bin/python3 -c "
		 "'import json, sys; q = json.load(sys.stdin); print(len(q), q[0][\"comm\"])'",
		 getenv("UROCE"), (int)getpid());
	f = popen(cmd, "r");
	CHECK(f && fgets(out, sizeof(out), f));
	CHECK_EQ(f ? pclose(f) : -1, 0);
	CHECK_STR(out, "2 te\"st\\x\n");
}

/* B has no receive left and A may not wait for one (rnr_retry 0): the
 * SEND ends in IBV_WC_RNR_RETRY_EXC_ERR (IBTA 9.7.5.2.8). */
static void check_rnr_exceeded(void)
{
	char line[4096], match[64];

	post_send(&A, IBV_WR_SEND, 64);
	CHECK_EQ(complete(A.cq, 1, IBV_WC_RNR_RETRY_EXC_ERR), 1);
	stat_line("uroce0", "link uroce0/1 ", line, sizeof(line));
	CHECK_EQ(field(line, "retry_rnr_exceeded_err"), 1);
	snprintf(match, sizeof(match), " lqpn %u ", A.qp->qp_num);
	stat_line("qp uroce0", match, line, sizeof(line));
	CHECK(strstr(line, " state ERR ") != NULL);
	CHECK_EQ(field(line, "error-cqes"), 1);
	CHECK(field(line, "rnr-waits") >= 1);
}

int main(void)
{
	const char *transport = getenv("UROCE_TRANSPORT");
	/* UROCE_FAULTS puts the QPs on the wire too (design.md decision 5). */
	int on_wire = (transport && !strcmp(transport, "roce")) || getenv("UROCE_FAULTS");

	if (!getenv("UROCE")) {
		fprintf(stderr, "UROCE: the uroce command's path, please\n");
		return 2;
	}
	CHECK_EQ(side_open(&A, IBV_QPT_RC, 2 * N, CAP), 0);
	CHECK_EQ(side_open(&B, IBV_QPT_RC, 2 * N, CAP), 0);
	if (check_failed)
		return 1;
	CHECK_EQ(qp_connect(A.qp, B.qp->qp_num, 0, 1), 0);
	CHECK_EQ(qp_connect(B.qp, A.qp->qp_num, 0, 1), 0);
	RUN(traffic(), 60);
	RUN(check_port(on_wire, loses_packets()), 30);
	RUN(check_qps(on_wire), 30);
	RUN(check_json(), 30);
	RUN(check_rnr_exceeded(), 60);
	side_close(&A);
	side_close(&B);
	return check_report();
}
