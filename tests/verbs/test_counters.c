/* `uroce stat` against what the test did: N sends and a WRITE on an RC pair
 * count as N rdma_sends and N rdma_recvs, N + 1 posted sends and send CQEs
 * on one QP and N posted receives and receive CQEs on the other; a SEND
 * with no receive and rnr_retry 0 counts one RNR-retry-exceeded error. Over
 * RoCEv2 (UROCE_TRANSPORT=roce) packets are counted too, and under
 * UROCE_FAULTS the losses become retransmits while every message is still
 * counted once, unless the spec scopes them away from this RC traffic
 * (type, qpn, dev); a delay with jitter keeps a multi-packet WRITE in
 * order; under loss a READ's lost response is asked for again without
 * waiting for the ACK timer; without faults the WRITE leaves by UDP GSO and
 * arrives by GRO, or, where the kernel refuses GSO, one datagram a packet. The counters are read by
 * the uroce command, from another process, while this one runs. */
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "../check.h"
#include "faults.h"
#include "pair.h"
#include "stat_read.h"

#define N 200
/* The WRITE: 8 packets at the pair's MTU of 4096, in flight together. */
#define WRITE_LEN  (8 * 4096)
#define WRITE_PKTS 8

static struct side A, B;
static const struct ibv_qp_cap CAP = {
    .max_send_wr = 64, .max_recv_wr = N + 1, .max_send_sge = 1, .max_recv_sge = 1};

static void post_send(struct side *s, enum ibv_wr_opcode op, uint32_t len)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf, .length = len, .lkey = s->mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	wr.wr.rdma.remote_addr = (uintptr_t)B.buf + SIDE_BUF - WRITE_LEN;
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
	post_send(&A, IBV_WR_RDMA_WRITE, WRITE_LEN);
	CHECK_EQ(complete(A.cq, 1, IBV_WC_SUCCESS), 1);
	CHECK_EQ(complete(B.cq, N, IBV_WC_SUCCESS), N);
}

/* What UROCE_FAULTS does to this test's RC traffic on uroce0 (an RC SEND
 * to B's QP stands for all of it). */
enum fault_kind { CLEAN, LOSSY, DELAYED };

static enum fault_kind fault_kind(void)
{
	const char *spec = getenv("UROCE_FAULTS");
	struct uro_fault_spec f;
	char err[160];

	if (!spec || uro_faults_parse(spec, &f, err, sizeof(err)) ||
	    (f.dev[0] && strcmp(f.dev, "uroce0")) ||
	    !uro_faults_scoped(&f, 0x04 /* RC SEND Only */, B.qp->qp_num))
		return CLEAN;
	if (f.loss)
		return LOSSY;
	return f.delay_ns && !f.dup && !f.reorder && !f.corrupt ? DELAYED : CLEAN;
}

static void check_port(int on_wire, enum fault_kind faults)
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
	/* Every request, and its ACKs. */
	CHECK(field(line, "sent_pkts") >= N + WRITE_PKTS);
	CHECK(field(line, "rcvd_pkts") >= N + WRITE_PKTS);
	switch (faults) {
	case LOSSY: /* 10% of 400 packets: losses there are, each made good */
		CHECK(field(line, "injected_loss") > 0);
		CHECK(field(line, "completer_retry_err") > 0);
		break;
	case DELAYED: /* jitter, and still the WRITE's packets in order */
		CHECK(field(line, "injected_delay") >= N + WRITE_PKTS);
		CHECK_EQ(field(line, "out_of_seq_request"), 0);
		CHECK_EQ(field(line, "completer_retry_err"), 0);
		break;
	case CLEAN:
		CHECK_EQ(field(line, "completer_retry_err"), 0);
		CHECK_EQ(field(line, "injected_loss"), 0);
		break;
	}
	/* The WRITE's MIDDLEs and LAST, of one size, leave as one UDP GSO
	 * message and arrive as one GRO datagram (lo offloads both); a
	 * faulted endpoint sends each packet alone, and one whose kernel
	 * refuses GSO (gso_refuse.c preloaded) falls back once. */
	if (getenv("GSO_REFUSED")) {
		CHECK(field(line, "gso_refused") >= 1);
		CHECK_EQ(field(line, "gso_msgs"), 0);
		CHECK_EQ(field(line, "send_err"), 0);
	} else if (!getenv("UROCE_FAULTS")) {
		CHECK(field(line, "gso_msgs") >= 1);
		CHECK(field(line, "gro_msgs") >= 1);
		CHECK_EQ(field(line, "gso_refused"), 0);
	}
}

/* On the wire the PSNs move, one a packet (IBTA 9.7.1): N sends and the
 * WRITE's packets from 0. */
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
	CHECK_EQ(field(line, "sq-psn"), on_wire ? N + WRITE_PKTS : 0);
	snprintf(match, sizeof(match), " lqpn %u ", B.qp->qp_num);
	stat_line("qp uroce0", match, line, sizeof(line));
	CHECK_EQ(field(line, "posted-recvs"), N);
	CHECK_EQ(field(line, "rq-psn"), on_wire ? N + WRITE_PKTS : 0);
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

/* Under loss, a READ whose response was lost asks again at once from the
 * gap (IBTA 9.7.5.1.4), not after an ACK timeout: over 20 READs of 16
 * response packets, the ACK timer runs out far less often than packets
 * are lost (before: about once a loss). */
static void check_read_gaps(void)
{
	struct ibv_sge sge = {.addr = (uintptr_t)A.buf, .length = SIDE_BUF, .lkey = A.mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_READ,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	long long timeouts, losses;
	char line[4096];

	wr.wr.rdma.remote_addr = (uintptr_t)B.buf;
	wr.wr.rdma.rkey = B.mr->rkey;
	stat_line("uroce0", "link uroce0/1 ", line, sizeof(line));
	timeouts = field(line, "ack_timeouts");
	losses = field(line, "injected_loss");
	for (int i = 0; i < 20; i++) {
		CHECK_EQ(ibv_post_send(A.qp, &wr, &bad), 0);
		CHECK_EQ(complete(A.cq, 1, IBV_WC_SUCCESS), 1);
	}
	stat_line("uroce0", "link uroce0/1 ", line, sizeof(line));
	timeouts = field(line, "ack_timeouts") - timeouts;
	losses = field(line, "injected_loss") - losses;
	printf("20 READs of 64 KiB: %lld packets lost, %lld ACK timeouts\n", losses, timeouts);
	CHECK(losses > 0);
	CHECK(timeouts * 3 < losses);
}

/* The packets sent (both sides: requests, responses, ACKs, NAKs) for ten
 * of op of 64 KiB from c to d, one at a time. */
static long long packets_for(struct side *c, struct side *d, enum ibv_wr_opcode op)
{
	struct ibv_sge sge = {(uintptr_t)c->buf, SIDE_BUF, c->mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	long long before;
	char line[4096];

	wr.wr.rdma.remote_addr = (uintptr_t)d->buf;
	wr.wr.rdma.rkey = d->mr->rkey;
	stat_line("uroce0", "link uroce0/1 ", line, sizeof(line));
	before = field(line, "sent_pkts");
	for (int i = 0; i < 10; i++) {
		CHECK_EQ(ibv_post_send(c->qp, &wr, &bad), 0);
		CHECK_EQ(complete(c->cq, 1, IBV_WC_SUCCESS), 1);
	}
	stat_line("uroce0", "link uroce0/1 ", line, sizeof(line));
	return field(line, "sent_pkts") - before;
}

/* At path MTU 1024 a message of 64 KiB is 64 packets, more than a
 * window. Sent or asked again under loss, it resumes from its first
 * missing packet (IBTA 9.7): ten of them send less than 5 times their 640
 * packets under 10% loss (about 3.7: go-back-N sends again what was in
 * flight past a loss). From the start (WRITE) or the window's start
 * (READ) they sent 7.5 and 140 times as many. */
static void check_resume(void)
{
	struct side c, d;
	long long writes, reads;

	setenv("PAIR_MTU", "1024", 1);
	CHECK_EQ(side_open(&c, IBV_QPT_RC, 4, CAP), 0);
	CHECK_EQ(side_open(&d, IBV_QPT_RC, 4, CAP), 0);
	CHECK_EQ(qp_connect(c.qp, d.qp->qp_num, 0, 1), 0);
	CHECK_EQ(qp_connect(d.qp, c.qp->qp_num, 0, 1), 0);
	unsetenv("PAIR_MTU");
	writes = packets_for(&c, &d, IBV_WR_RDMA_WRITE);
	reads = packets_for(&c, &d, IBV_WR_RDMA_READ);
	printf("10 WRITEs, 10 READs of 64 KiB at MTU 1024: %lld, %lld packets sent\n", writes,
	       reads);
	CHECK(writes < 5 * 640);
	CHECK(reads < 5 * 640);
	side_close(&c);
	side_close(&d);
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
	/* UROCE_FAULTS puts the QPs on the wire too (docs/design.md,
	 * Inter-host: RoCEv2 on the wire). */
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
	RUN(check_port(on_wire, fault_kind()), 30);
	RUN(check_qps(on_wire), 30);
	RUN(check_json(), 30);
	if (fault_kind() == LOSSY) {
		RUN(check_read_gaps(), 60);
		RUN(check_resume(), 120);
	}
	RUN(check_rnr_exceeded(), 60);
	side_close(&A);
	side_close(&B);
	return check_report();
}
