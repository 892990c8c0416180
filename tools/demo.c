/* uroce demo: two processes on a uroce device, connected by an RC QP, as
 * any verbs program connects them; prints the latency and bandwidth of RDMA
 * WRITE and SEND next to the raw cross-memory-attach copy they are built
 * on, measured in the same run. Needs no other program. */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "segment_layout.h"

#define LAT_ITERS 20000
#define BW_ITERS  4000
/* Under --faults a lost packet costs an ACK timeout (17 ms): fewer. */
#define FAULTY_LAT_ITERS 1000
#define FAULTY_BW_ITERS	 400
#define BW_SIZE		 65536
#define DEPTH		 64
#define BUF		 (BW_SIZE * DEPTH)

struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	int wfd, rfd; /* pipes to the other process */
	pid_t peer_pid;
	uint32_t peer_rkey;
	uint64_t peer_addr;
	unsigned done[2]; /* completions polled, sends [0] and receives [1] */
	unsigned want[2]; /* ...and how many the program has waited for */
	int lat_iters, bw_iters;
	int faulty; /* --faults: the QP on the wire, under injected faults */
};

struct wire {
	uint32_t qpn, rkey;
	uint64_t addr;
	pid_t pid;
};

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int sync_peer(struct end *e)
{
	char c = 's';

	return write(e->wfd, &c, 1) == 1 && read(e->rfd, &c, 1) == 1 ? 0 : -1;
}

static void pin(int cpu)
{
	cpu_set_t set;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static struct ibv_context *open_named(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!name || !strcmp(ibv_get_device_name(list[i]), name)) {
			ctx = ibv_open_device(list[i]);
			break;
		}
	ibv_free_device_list(list);
	return ctx;
}

static int open_end(struct end *e, const char *dev)
{
	struct ibv_qp_init_attr init = {
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = DEPTH,
		    .max_recv_wr = 2 * DEPTH, /* bandwidth's DEPTH, plus latency's */
		    .max_send_sge = 1,
		    .max_recv_sge = 1,
		    .max_inline_data = 64},
	};

	e->ctx = open_named(dev);
	if (!e->ctx)
		return -1;
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 2 * DEPTH, NULL, NULL, 0);
	e->buf = aligned_alloc(4096, BUF);
	if (!e->pd || !e->cq || !e->buf)
		return -1;
	memset(e->buf, 0, BUF);
	e->mr = ibv_reg_mr(e->pd, e->buf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	init.send_cq = init.recv_cq = e->cq;
	e->qp = e->mr ? ibv_create_qp(e->pd, &init) : NULL;
	return e->qp ? 0 : -1;
}

static void close_end(struct end *e)
{
	if (e->qp)
		ibv_destroy_qp(e->qp);
	if (e->mr)
		ibv_dereg_mr(e->mr);
	if (e->cq)
		ibv_destroy_cq(e->cq);
	if (e->pd)
		ibv_dealloc_pd(e->pd);
	if (e->ctx)
		ibv_close_device(e->ctx);
	free(e->buf);
}

/* RESET -> INIT -> RTR -> RTS towards the peer's QP (GRH on RoCE). */
static int connect_qp(struct end *e, uint32_t qpn)
{
	struct ibv_port_attr port;
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};

	if (ibv_query_port(e->ctx, 1, &port) ||
	    ibv_modify_qp(e->qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = port.active_mtu;
	a.dest_qp_num = qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.dlid = port.lid;
	a.ah_attr.is_global = port.link_layer == IBV_LINK_LAYER_ETHERNET;
	a.ah_attr.grh.hop_limit = 1;
	if (ibv_query_gid(e->ctx, 1, 0, &a.ah_attr.grh.dgid) ||
	    ibv_modify_qp(e->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = e->faulty ? 12 : 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(e->qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int exchange(struct end *e)
{
	struct wire me = {e->qp->qp_num, e->mr->rkey, (uintptr_t)e->buf, getpid()}, peer;

	if (write(e->wfd, &me, sizeof(me)) != sizeof(me) ||
	    read(e->rfd, &peer, sizeof(peer)) != sizeof(peer))
		return -1;
	e->peer_rkey = peer.rkey;
	e->peer_addr = peer.addr;
	e->peer_pid = peer.pid;
	return connect_qp(e, peer.qpn) ? -1 : sync_peer(e);
}

static int post(struct end *e, enum ibv_wr_opcode op, void *addr, uint32_t len, uint64_t remote,
		unsigned flags)
{
	struct ibv_sge sge = {(uintptr_t)addr, len, e->mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = op, .send_flags = flags},
			   *bad;

	wr.wr.rdma.remote_addr = remote;
	wr.wr.rdma.rkey = e->peer_rkey;
	return ibv_post_send(e->qp, &wr, &bad);
}

static int post_recv(struct end *e, void *addr, uint32_t len)
{
	struct ibv_sge sge = {(uintptr_t)addr, len, e->mr->lkey};
	struct ibv_recv_wr wr = {.sg_list = &sge, .num_sge = 1}, *bad;

	return ibv_post_recv(e->qp, &wr, &bad);
}

/* Waits for n more completions of one kind (send or receive). Either
 * kind may arrive first (a reply can land before the send's own
 * completion), so both are counted against running totals. */
static int wait_wc(struct end *e, int n, int recv)
{
	struct ibv_wc wc;

	e->want[recv] += (unsigned)n;
	while (e->done[recv] < e->want[recv]) {
		int got = ibv_poll_cq(e->cq, 1, &wc);

		if (got < 0 || (got && wc.status != IBV_WC_SUCCESS)) {
			fprintf(stderr, "uroce demo: completion %s\n",
				got < 0 ? "poll failed" : ibv_wc_status_str(wc.status));
			return -1;
		}
		if (got)
			e->done[(wc.opcode & IBV_WC_RECV) != 0]++;
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Half a round trip of 2-byte RDMA WRITEs, each side polling its memory
 * for the other's write, as ib_write_lat measures: the median in us. */
static double write_latency(struct end *e, int client, double *samples)
{
	volatile uint16_t *mine = (volatile uint16_t *)e->buf;
	uint16_t *out = (uint16_t *)(e->buf + 64);

	for (int i = 1; i <= e->lat_iters; i++) {
		double t0 = now_us();

		if (!client)
			while (*mine != (uint16_t)i)
				;
		*out = (uint16_t)i;
		if (post(e, IBV_WR_RDMA_WRITE, out, 2, e->peer_addr,
			 IBV_SEND_INLINE | IBV_SEND_SIGNALED) ||
		    wait_wc(e, 1, 0))
			return -1;
		if (client)
			while (*mine != (uint16_t)i)
				;
		samples[i - 1] = (now_us() - t0) / 2;
	}
	qsort(samples, e->lat_iters, sizeof(*samples), cmp_double);
	return samples[e->lat_iters / 2];
}

/* Half a round trip of 2-byte SENDs, as ib_send_lat measures. Receives are
 * BW_SIZE long: one is still posted when the bandwidth phase starts. */
static double send_latency(struct end *e, int client, double *samples)
{
	if (post_recv(e, e->buf, BW_SIZE))
		return -1;
	if (sync_peer(e))
		return -1;
	for (int i = 0; i < e->lat_iters; i++) {
		double t0 = now_us();

		if (!client && wait_wc(e, 1, 1))
			return -1;
		if (post_recv(e, e->buf, BW_SIZE) ||
		    post(e, IBV_WR_SEND, e->buf + 64, 2, 0, IBV_SEND_INLINE | IBV_SEND_SIGNALED) ||
		    wait_wc(e, 1, 0))
			return -1;
		if (client && wait_wc(e, 1, 1))
			return -1;
		samples[i] = (now_us() - t0) / 2;
	}
	qsort(samples, e->lat_iters, sizeof(*samples), cmp_double);
	return samples[e->lat_iters / 2];
}

/* The sender's side: bw_iters messages of BW_SIZE, every 16th signaled,
 * a WRITE cycling over DEPTH remote buffers. GB/s, or -1. */
static double stream(struct end *e, enum ibv_wr_opcode op)
{
	double t0 = now_us();

	for (int i = 0; i < e->bw_iters; i++) {
		unsigned flags = (i % 16 == 15) ? IBV_SEND_SIGNALED : 0;
		uint64_t raddr = e->peer_addr + (uint64_t)(i % DEPTH) * BW_SIZE;

		if (post(e, op, e->buf, BW_SIZE, op == IBV_WR_RDMA_WRITE ? raddr : 0, flags) ||
		    (flags && wait_wc(e, 1, 0)))
			return -1;
	}
	return sync_peer(e) ? -1 : (double)e->bw_iters * BW_SIZE / (now_us() - t0) / 1e3;
}

static double write_bandwidth(struct end *e, int client)
{
	if (!client)
		return sync_peer(e) ? -1 : 0;
	return stream(e, IBV_WR_RDMA_WRITE);
}

static double send_bandwidth(struct end *e, int client)
{
	if (!client) {
		for (int i = 0; i < DEPTH; i++)
			if (post_recv(e, e->buf + (size_t)i * BW_SIZE, BW_SIZE))
				return -1;
		if (sync_peer(e))
			return -1;
		for (int i = 0; i < e->bw_iters; i++)
			if (wait_wc(e, 1, 1) ||
			    post_recv(e, e->buf + (size_t)(i % DEPTH) * BW_SIZE, BW_SIZE))
				return -1;
		return sync_peer(e) ? -1 : 0;
	}
	return sync_peer(e) ? -1 : stream(e, IBV_WR_SEND);
}

/* The copy underneath: process_vm_writev of the same sizes, no verbs. */
static double raw_bandwidth(struct end *e, int client)
{
	double t0;

	if (!client)
		return sync_peer(e) ? -1 : 0;
	t0 = now_us();
	for (int i = 0; i < e->bw_iters; i++) {
		struct iovec l = {e->buf, BW_SIZE};
		struct iovec r = {
		    (void *)(uintptr_t)(e->peer_addr + (uint64_t)(i % DEPTH) * BW_SIZE), BW_SIZE};

		if (process_vm_writev(e->peer_pid, &l, 1, &r, 1, 0) != BW_SIZE)
			return -1;
	}
	return sync_peer(e) ? -1 : (double)e->bw_iters * BW_SIZE / (now_us() - t0) / 1e3;
}

struct results {
	double write_lat, send_lat, write_bw, send_bw, raw_bw;
	int lat_iters;
	/* Both processes' port counters, summed: what the faults did and
	 * what RC did about them. */
	struct uro_seg_counters n;
};

static int measure(struct end *e, int client, struct results *r)
{
	double *samples = malloc((size_t)e->lat_iters * sizeof(*samples));
	int rc = -1;

	if (!samples)
		return -1;
	r->lat_iters = e->lat_iters;
	r->write_lat = write_latency(e, client, samples);
	if (r->write_lat >= 0 && sync_peer(e) == 0)
		r->send_lat = send_latency(e, client, samples);
	if (r->write_lat >= 0 && r->send_lat >= 0 && sync_peer(e) == 0) {
		r->write_bw = write_bandwidth(e, client);
		r->send_bw = r->write_bw >= 0 ? send_bandwidth(e, client) : -1;
		r->raw_bw = r->send_bw >= 0 ? raw_bandwidth(e, client) : -1;
		rc = r->raw_bw >= 0 ? 0 : -1;
	}
	free(samples);
	return rc;
}

/* Each process's counts end with it: the server hands its own to the
 * client, which adds them to its own, before either closes its device. */
static int gather_counters(struct end *e, const char *dev, int client, struct results *r)
{
	struct uro_seg_counters peer;

	uro_stat_port(dev, 0, getpid(), &r->n); /* our own process: its name is its link */
	if (!client)
		return write(e->wfd, &r->n, sizeof(r->n)) == sizeof(r->n) ? 0 : -1;
	if (read(e->rfd, &peer, sizeof(peer)) != sizeof(peer))
		return -1;
	uro_counters_add(&r->n, &peer);
	return 0;
}

struct demo_opts {
	const char *dev;
	const char *faults; /* UROCE_FAULTS's spec, or NULL */
};

static int side(const struct demo_opts *o, int client, int wfd, int rfd, struct results *r)
{
	struct end e = {.wfd = wfd,
			.rfd = rfd,
			.faulty = o->faults != NULL,
			.lat_iters = o->faults ? FAULTY_LAT_ITERS : LAT_ITERS,
			.bw_iters = o->faults ? FAULTY_BW_ITERS : BW_ITERS};
	int rc;

	pin(client);
	rc = open_end(&e, o->dev) || exchange(&e) || measure(&e, client, r) ||
		     gather_counters(&e, o->dev, client, r)
		 ? -1
		 : 0;
	close_end(&e);
	return rc;
}

static void print_table(const struct demo_opts *o, const struct results *r)
{
	const struct uro_seg_counters *n = &r->n;

	printf("uroce demo: two processes on %s, one RC QP, %d-byte latency and %d KiB "
	       "bandwidth%s%s\n\n",
	       o->dev, 2, BW_SIZE / 1024, o->faults ? ", faults " : "", o->faults ? o->faults : "");
	printf("  %-22s %14s %18s\n", "operation", "latency (us)", "bandwidth (GB/s)");
	printf("  %-22s %14.2f %18.2f\n", "RDMA WRITE", r->write_lat, r->write_bw);
	printf("  %-22s %14.2f %18.2f\n", "SEND / RECV", r->send_lat, r->send_bw);
	printf("  %-22s %14s %18.2f\n", "process_vm_writev", "-", r->raw_bw);
	printf("\nLatency: the median of half round trips (%d). process_vm_writev is the copy\n"
	       "uroce's RDMA is made of, measured in the same run without verbs.\n",
	       r->lat_iters);
	if (!o->faults)
		return;
	/* sent and received count what left and arrived: a packet the
	 * injected loss dropped never left, so the two agree beside a loss
	 * count, which reads as a contradiction unless said. */
	printf("\nRoCEv2 packets: %llu sent and %llu received; the faults dropped %llu more "
	       "before they left,\n"
	       "and duplicated %llu, reordered %llu, corrupted %llu, delayed %llu, and answered "
	       "%llu with RNR NAKs.\n"
	       "RC recovered: lost packets were retransmitted (%llu retransmissions, go-back-N),\n"
	       "%llu repeated requests were answered again, %llu sequence-error NAKs asked for\n"
	       "resends, %llu RNR NAKs were waited out. Every operation completed successfully:\n"
	       "nothing was lost to the application.\n",
	       (unsigned long long)n->sent, (unsigned long long)n->received,
	       (unsigned long long)n->injected_loss, (unsigned long long)n->injected_dup,
	       (unsigned long long)n->injected_reorder, (unsigned long long)n->injected_corrupt,
	       (unsigned long long)n->injected_delay, (unsigned long long)n->injected_rnr,
	       (unsigned long long)n->retransmits, (unsigned long long)n->duplicates,
	       (unsigned long long)n->seq_naks_sent, (unsigned long long)n->rnr_naks_received);
}

static void usage(FILE *f)
{
	fputs("usage: uroce demo [-d DEVICE] [--faults SPEC]\n\n"
	      "Runs two processes on DEVICE (default: the first, uroce0), connects them with\n"
	      "an RC QP and prints RDMA WRITE and SEND latency and bandwidth, next to the raw\n"
	      "process_vm_writev bandwidth measured in the same run.\n"
	      "--faults SPEC (as 'uroce run --faults') runs them over RoCEv2 with those faults\n"
	      "and counts what was injected and how RC recovered (fewer iterations).\n",
	      f);
}

static int parse(int argc, char **argv, struct demo_opts *o)
{
	char err[256];

	for (int i = 0; i < argc; i += 2) {
		if (strcmp(argv[i], "-d") && strcmp(argv[i], "--faults")) {
			fprintf(stderr, "uroce demo: unknown option '%s'\n", argv[i]);
			return -1;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "uroce demo: %s needs a value\n", argv[i]);
			return -1;
		}
		if (!strcmp(argv[i], "-d")) {
			o->dev = argv[i + 1];
			continue;
		}
		o->faults = argv[i + 1];
		if (uro_faults_check(o->faults, err, sizeof(err))) {
			fprintf(stderr, "uroce demo: --faults: %s\n", err);
			return -1;
		}
	}
	return 0;
}

/* Says why dev (NULL: the first device) cannot be opened: a name that is
 * not a device, with the ones there are, or the open's own error. The
 * library has already said why a configuration gives no list. */
static void no_device(const char *dev, int err)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	int found = 0;

	if (!list) {
		fprintf(stderr,
			"uroce demo: no device list (see the line above); 'uroce link show'\n");
		return;
	}
	for (int i = 0; list[i]; i++)
		found |= !dev || !strcmp(ibv_get_device_name(list[i]), dev);
	if (found) {
		fprintf(stderr, "uroce demo: cannot open %s: %s\n",
			dev ? dev : ibv_get_device_name(list[0]), strerror(err));
	} else if (!list[0]) {
		fprintf(stderr, "uroce demo: there are no devices ('uroce link show'; "
				"'uroce link add NAME netdev IFACE' makes one)\n");
	} else {
		fprintf(stderr, "uroce demo: no device named '%s'; the devices are:", dev);
		for (int i = 0; list[i]; i++)
			fprintf(stderr, " %s", ibv_get_device_name(list[i]));
		fprintf(stderr, " ('uroce link show' lists them; -d NAME picks one)\n");
	}
	ibv_free_device_list(list);
}

int uro_cmd_demo(int argc, char **argv)
{
	int to_child[2], to_parent[2], status = 0;
	struct demo_opts o = {0};
	struct results r = {0}, ignored;
	struct ibv_context *probe;
	pid_t pid;

	if (uro_asks_help(argc, argv)) {
		usage(stdout);
		return 0;
	}
	if (parse(argc, argv, &o)) {
		usage(stderr);
		return 2;
	}
	/* Read when a context opens its first QP on the wire: both
	 * processes, forked after this, take it. */
	if (o.faults && setenv("UROCE_FAULTS", o.faults, 1))
		return 1;
	probe = open_named(o.dev);
	if (!probe) {
		no_device(o.dev, errno);
		return 1;
	}
	o.dev = o.dev ? o.dev : ibv_get_device_name(probe->device);
	ibv_close_device(probe);
	if (pipe(to_child) || pipe(to_parent))
		return 1;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(to_child[1]);
		close(to_parent[0]);
		_exit(side(&o, 0, to_parent[1], to_child[0], &ignored) ? 1 : 0);
	}
	/* Each keeps only its own ends: a peer that dies is EOF, not a hang. */
	close(to_child[0]);
	close(to_parent[1]);
	if (side(&o, 1, to_child[1], to_parent[0], &r)) {
		fprintf(stderr, "uroce demo: the measurement failed\n");
		kill(pid, SIGTERM);
		waitpid(pid, NULL, 0);
		return 1;
	}
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		return 1;
	print_table(&o, &r);
	return 0;
}
