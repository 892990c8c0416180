/* librdmacm's connection management through <rdma/rdma_cma.h>: rejection
 * with private data, an address no device reaches, a listener or a peer
 * killed, and 100 connect/disconnect cycles that leak no fd. The passive
 * side is a forked process, as it would be in use. */
#include <arpa/inet.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/rdmacm/cm.h"
#include "../check.h"

static int port;
/* The servers write here the type of each event that ends a connection
 * attempt other than CONNECT_REQUEST and DISCONNECTED. */
static int report[2];

static struct sockaddr_in addr_of(int p)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

/* The next event, waiting at most ms; NULL on timeout. */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ch, int ms)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev;

	if (poll(&p, 1, ms) != 1 || rdma_get_cm_event(ch, &ev))
		return NULL;
	return ev;
}

static enum rdma_cm_event_type expect(struct rdma_event_channel *ch, int ms)
{
	struct rdma_cm_event *ev = next_event(ch, ms);
	enum rdma_cm_event_type t;

	if (!ev)
		return (enum rdma_cm_event_type) - 1;
	t = ev->event;
	rdma_ack_cm_event(ev);
	return t;
}

static struct ibv_qp_init_attr qp_attr(void)
{
	struct ibv_qp_init_attr a = {
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	return a;
}

/* The passive side: what to do with each request. */
enum server_mode { SERVE_REJECT, SERVE_ACCEPT, SERVE_STALL, SERVE_FEW_FDS };

/* Leaves the process room for two more fds. */
static void limit_fds(void)
{
	struct rlimit r;

	r.rlim_cur = r.rlim_max = (rlim_t)open_fds() + 2;
	setrlimit(RLIMIT_NOFILE, &r);
}

static void serve(int p, enum server_mode mode, int ready_fd, int cycles)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *listen;
	struct sockaddr_in a = addr_of(p);
	int done = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL); /* a test that fails for time takes it along */
	if (!ch || rdma_create_id(ch, &listen, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(listen, (struct sockaddr *)&a) || rdma_listen(listen, 8))
		_exit(1);
	if (mode == SERVE_FEW_FDS)
		limit_fds();
	if (write(ready_fd, "r", 1) != 1)
		_exit(1);
	while (done < cycles) {
		struct rdma_cm_event *ev;
		struct ibv_qp_init_attr qa = qp_attr();
		struct rdma_cm_id *id;

		if (rdma_get_cm_event(ch, &ev))
			_exit(2);
		id = ev->id;
		switch (ev->event) {
		case RDMA_CM_EVENT_CONNECT_REQUEST:
			rdma_ack_cm_event(ev);
			if (mode == SERVE_STALL)
				pause(); /* killed here, mid-connection */
			if (mode == SERVE_REJECT) {
				rdma_reject(id, "nope", 5);
				rdma_destroy_id(id);
				done++;
				break;
			}
			if (rdma_create_qp(id, NULL, &qa) || rdma_accept(id, NULL))
				_exit(3);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			rdma_ack_cm_event(ev);
			rdma_destroy_qp(id);
			rdma_destroy_id(id);
			done++;
			break;
		case RDMA_CM_EVENT_CONNECT_ERROR: {
			char t = (char)ev->event;

			rdma_ack_cm_event(ev);
			if (write(report[1], &t, 1) != 1)
				_exit(4);
			rdma_destroy_qp(id);
			rdma_destroy_id(id);
			done++;
			break;
		}
		default:
			rdma_ack_cm_event(ev);
			break;
		}
	}
	rdma_destroy_id(listen);
	rdma_destroy_event_channel(ch);
	_exit(0);
}

/* A server done with: killed and reaped. */
static void kill_server(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Waits at most ms for a server to end its cycles, killing it after that
 * (a server left waiting fails the test rather than hanging it); returns
 * its exit status as waitpid(2) gives it, -1 when it had to be killed. */
static int finish_server(pid_t pid, int ms)
{
	int status = -1;

	for (int waited = 0; waited < ms; waited += 10) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return status;
		usleep(10000);
	}
	fprintf(stderr, "server %d still running after %d ms: killed\n", (int)pid, ms);
	kill_server(pid);
	return -1;
}

static pid_t start_server(enum server_mode mode, int cycles)
{
	int fds[2];
	char c;
	pid_t pid;

	port++;
	if (pipe(fds))
		return -1;
	pid = fork();
	if (pid == 0)
		serve(port, mode, fds[1], cycles);
	close(fds[1]);
	if (read(fds[0], &c, 1) != 1)
		pid = -1;
	close(fds[0]);
	return pid;
}

/* An id resolved to the server's port, with a QP, ready to connect. */
static int client_prepare(struct rdma_event_channel *ch, struct rdma_cm_id **out)
{
	struct sockaddr_in a = addr_of(port);
	struct ibv_qp_init_attr qa = qp_attr();
	struct rdma_cm_id *id;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		return -1;
	*out = id;
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&a, 2000) ||
	    expect(ch, 2000) != RDMA_CM_EVENT_ADDR_RESOLVED || rdma_resolve_route(id, 2000) ||
	    expect(ch, 2000) != RDMA_CM_EVENT_ROUTE_RESOLVED || rdma_create_qp(id, NULL, &qa))
		return -1;
	return 0;
}

static struct rdma_conn_param conn_param(void)
{
	struct rdma_conn_param cp = {
	    .responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7};
	return cp;
}

/* Prepares and connects; returns the first event after connect (or -1),
 * leaving the id in *out and the event in *ev_out. */
static int client_connect(struct rdma_event_channel *ch, struct rdma_cm_id **out,
			  struct rdma_cm_event **ev_out)
{
	struct rdma_conn_param cp = conn_param();

	*ev_out = NULL;
	if (client_prepare(ch, out) || rdma_connect(*out, &cp))
		return -1;
	*ev_out = next_event(ch, 5000);
	return *ev_out ? (int)(*ev_out)->event : -1;
}

static void test_rejected(struct rdma_event_channel *ch)
{
	pid_t pid = start_server(SERVE_REJECT, 1);
	struct rdma_cm_event *ev = NULL;
	struct rdma_cm_id *id = NULL;

	CHECK_EQ(client_connect(ch, &id, &ev), RDMA_CM_EVENT_REJECTED);
	if (ev) {
		CHECK_EQ(ev->status, 28); /* IB CM: consumer-defined reject */
		CHECK_EQ(ev->param.conn.private_data_len, 5);
		CHECK(ev->param.conn.private_data &&
		      !memcmp(ev->param.conn.private_data, "nope", 5));
		rdma_ack_cm_event(ev);
	}
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	CHECK_EQ(finish_server(pid, 5000), 0);
}

static void test_no_listener(struct rdma_event_channel *ch)
{
	struct rdma_cm_event *ev = NULL;
	struct rdma_cm_id *id = NULL;

	port++; /* nobody listens here: an invalid service ID, IB CM reason 8 */
	CHECK_EQ(client_connect(ch, &id, &ev), RDMA_CM_EVENT_REJECTED);
	if (ev) {
		CHECK_EQ(ev->status, 8);
		rdma_ack_cm_event(ev);
	}
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
}

/* With no devices at all, as the kernel's CM answers (cma.c): an address
 * no device reaches is an ADDR_ERROR event; a loopback destination, which
 * takes the first device there is (cma_resolve_loopback), fails the call
 * itself with ENODEV; and a bind to 127.0.0.1, an "any" address to the
 * kernel (cma_any_addr), succeeds without a device. */
static void test_addr_error(void)
{
	char conf[] = "/tmp/uroce-cm-XXXXXX";
	int fd = mkstemp(conf);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in a = addr_of(1), far = addr_of(1);
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	const char *old = getenv("UROCE_CONFIG");
	char *saved = old ? strdup(old) : NULL;

	close(fd); /* an empty configuration: no devices at all */
	setenv("UROCE_CONFIG", conf, 1);
	far.sin_addr.s_addr = htonl(0xc612fffe); /* 198.18.255.254 */
	CHECK_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	CHECK_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&far, 500), 0);
	ev = next_event(ch, 1000);
	CHECK(ev != NULL);
	if (ev) {
		CHECK_EQ(ev->event, RDMA_CM_EVENT_ADDR_ERROR);
		CHECK(ev->status < 0);
		rdma_ack_cm_event(ev);
	}
	rdma_destroy_id(id);
	CHECK_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	CHECK_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&a, 500), -1);
	CHECK_EQ(errno, ENODEV);
	CHECK(next_event(ch, 100) == NULL);
	rdma_destroy_id(id);
	CHECK_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	a.sin_port = 0;
	CHECK_EQ(rdma_bind_addr(id, (struct sockaddr *)&a), 0);
	CHECK(id->verbs == NULL);
	CHECK_EQ(rdma_get_src_port(id) != 0, 1);
	CHECK_EQ(((struct sockaddr_in *)rdma_get_local_addr(id))->sin_addr.s_addr,
		 htonl(INADDR_LOOPBACK));
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	if (saved)
		setenv("UROCE_CONFIG", saved, 1);
	else
		unsetenv("UROCE_CONFIG");
	free(saved);
	unlink(conf);
}

/* A raw TCP connection to the test's listener, speaking the CM's wire
 * format by hand as a hostile or broken peer would. */
static int raw_connect(void)
{
	struct sockaddr_in a = addr_of(port);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof(a))) {
		close(s);
		return -1;
	}
	return s;
}

static int raw_send(int s, enum uro_cm_msg_type type, uint32_t qpn, uint8_t pdata_len)
{
	struct uro_cm_msg m;

	memset(&m, 0, sizeof(m));
	m.magic = URO_CM_MAGIC;
	m.type = (uint8_t)type;
	m.peer.qpn = qpn;
	m.peer.retry_count = m.peer.rnr_retry = 7;
	m.pdata_len = pdata_len;
	return send(s, &m, sizeof(m), MSG_NOSIGNAL) == (ssize_t)sizeof(m) ? 0 : -1;
}

/* The next message the listener sends on s within ms: its type, 0 when
 * the connection closed, -1 on timeout. */
static int raw_next(int s, int ms)
{
	struct pollfd p = {.fd = s, .events = POLLIN};
	struct uro_cm_msg m;
	size_t have = 0;

	while (have < sizeof(m)) {
		ssize_t n;

		if (poll(&p, 1, ms) != 1)
			return -1;
		n = recv(s, (char *)&m + have, sizeof(m) - have, 0);
		if (n <= 0)
			return 0;
		have += (size_t)n;
	}
	return m.type;
}

/* A REQ whose fields no CM could send (196 bytes of private data on RC,
 * where 56 is the limit; QPN 0xffffffff) and a SIDR REQ on an RC listener
 * reach no program: the listener closes the first and rejects the second,
 * and a genuine client is the server's first request. */
static void test_forged_requests(struct rdma_event_channel *ch)
{
	pid_t pid = start_server(SERVE_REJECT, 1);
	struct rdma_cm_event *ev = NULL;
	struct rdma_cm_id *id = NULL;
	int s = raw_connect();

	CHECK_EQ(raw_send(s, MSG_REQ, 0xffffffff, URO_PDATA_REP), 0);
	CHECK_EQ(raw_next(s, 2000), 0);
	close(s);
	s = raw_connect();
	CHECK_EQ(raw_send(s, MSG_SIDR_REQ, 0x2000, 0), 0);
	CHECK_EQ(raw_next(s, 2000), MSG_REJ);
	close(s);
	CHECK_EQ(client_connect(ch, &id, &ev), RDMA_CM_EVENT_REJECTED);
	if (ev) {
		CHECK_EQ(ev->status, 28); /* the server's own rejection, not "no listener" */
		rdma_ack_cm_event(ev);
	}
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	CHECK_EQ(finish_server(pid, 5000), 0);
}

/* A peer that sends part of a message and stays stalls nobody: a genuine
 * client connects meanwhile, and the silent connection is closed once the
 * CM response timeout passes. */
static void test_partial_message(struct rdma_event_channel *ch)
{
	pid_t pid = start_server(SERVE_ACCEPT, 2); /* alive after the client */
	struct rdma_cm_event *ev = NULL;
	struct rdma_cm_id *id = NULL;
	int s = raw_connect();

	CHECK_EQ(send(s, "0123456789", 10, MSG_NOSIGNAL), 10);
	usleep(100000);
	CHECK_EQ(client_connect(ch, &id, &ev), RDMA_CM_EVENT_ESTABLISHED);
	if (ev) {
		rdma_ack_cm_event(ev);
		rdma_disconnect(id);
		CHECK_EQ(expect(ch, 5000), RDMA_CM_EVENT_DISCONNECTED);
	}
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	CHECK_EQ(raw_next(s, URO_CM_RESPONSE_MS + 3000), 0);
	close(s);
	kill_server(pid);
}

/* The active side goes after the REP and before its RTU: the passive side
 * was never connected, and hears CONNECT_ERROR. */
static void test_gone_before_rtu(struct rdma_event_channel *ch)
{
	pid_t pid = start_server(SERVE_ACCEPT, 1);
	struct rdma_cm_id *id = NULL;
	struct pollfd p = {.fd = report[0], .events = POLLIN};
	char t = 0;
	int s;

	CHECK_EQ(client_prepare(ch, &id), 0); /* a real QP for the server to aim at */
	s = raw_connect();
	CHECK_EQ(raw_send(s, MSG_REQ, id->qp->qp_num, 0), 0);
	CHECK_EQ(raw_next(s, 2000), MSG_MRA);
	CHECK_EQ(raw_next(s, 2000), MSG_REP);
	close(s);
	CHECK_EQ(poll(&p, 1, 5000), 1);
	CHECK_EQ(read(report[0], &t, 1), 1);
	CHECK_EQ(t, RDMA_CM_EVENT_CONNECT_ERROR);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	CHECK_EQ(finish_server(pid, 5000), 0);
}

/* A server that is stopped never answers the REQ: the client hears
 * UNREACHABLE (ETIMEDOUT) after the CM response timeout, not never. */
static void test_stopped_server(struct rdma_event_channel *ch)
{
	pid_t pid = start_server(SERVE_ACCEPT, 1);
	struct rdma_conn_param cp = conn_param();
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id = NULL;

	/* Stopped before it can answer: a stop signal is taken by one thread
	 * first, and until it is the others (the CM's) still run. */
	kill(pid, SIGSTOP);
	CHECK_EQ(waitpid(pid, NULL, WUNTRACED), pid);
	CHECK_EQ(client_prepare(ch, &id), 0);
	CHECK_EQ(rdma_connect(id, &cp), 0);
	ev = next_event(ch, URO_CM_RESPONSE_MS + 3000);
	CHECK(ev != NULL);
	if (ev) {
		CHECK_EQ(ev->event, RDMA_CM_EVENT_UNREACHABLE);
		CHECK_EQ(ev->status, -ETIMEDOUT);
		rdma_ack_cm_event(ev);
	}
	kill_server(pid);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
}

/* CPU time a process has used, in clock ticks (proc(5): utime + stime). */
static long cpu_ticks(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	return (long)(ut + st);
}

/* A listener whose fd table is full leaves the connection it cannot accept
 * queued and sleeps, instead of spinning on it: over a second of that, the
 * server uses a small part of a core. */
static void test_fd_table_full(void)
{
	pid_t pid = start_server(SERVE_FEW_FDS, 1);
	long hz = sysconf(_SC_CLK_TCK), before;
	int s[8];

	for (int i = 0; i < 8; i++)
		s[i] = raw_connect();
	usleep(200000);
	before = cpu_ticks(pid);
	sleep(1);
	CHECK(before >= 0);
	CHECK(cpu_ticks(pid) - before < hz / 5);
	kill_server(pid);
	for (int i = 0; i < 8; i++)
		close(s[i]);
}

static void test_listener_killed(struct rdma_event_channel *ch)
{
	pid_t pid = start_server(SERVE_STALL, 1);
	struct rdma_conn_param cp = conn_param();
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id = NULL;

	CHECK_EQ(client_prepare(ch, &id), 0);
	CHECK_EQ(rdma_connect(id, &cp), 0);
	usleep(100000); /* the request is at the listener, unanswered */
	kill_server(pid);
	ev = next_event(ch, 5000);
	CHECK(ev != NULL);
	if (ev) {
		CHECK_EQ(ev->event, RDMA_CM_EVENT_CONNECT_ERROR);
		rdma_ack_cm_event(ev);
	}
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
}

static void test_peer_killed(struct rdma_event_channel *ch)
{
	pid_t pid = start_server(SERVE_ACCEPT, 1000);
	struct rdma_cm_event *ev = NULL;
	struct rdma_cm_id *id = NULL;

	CHECK_EQ(client_connect(ch, &id, &ev), RDMA_CM_EVENT_ESTABLISHED);
	if (ev)
		rdma_ack_cm_event(ev);
	kill_server(pid);
	CHECK_EQ(expect(ch, 5000), RDMA_CM_EVENT_DISCONNECTED);
	/* The CM moved the survivor's QP to ERR (its receives flush). */
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK_EQ(ibv_query_qp(id->qp, &qa, IBV_QP_STATE, &qi), 0);
	CHECK_EQ(qa.qp_state, IBV_QPS_ERR);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
}

/* The client disconnects and goes; its server (one cycle) ends. */
static void hang_up(struct rdma_event_channel *ch, struct rdma_cm_id *id, pid_t server)
{
	rdma_disconnect(id);
	CHECK_EQ(expect(ch, 5000), RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	CHECK_EQ(finish_server(server, 5000), 0);
}

/* RDMA_MAX_RESP_RES and RDMA_MAX_INIT_DEPTH ask for the device's maximum,
 * and retry counts above 7 are clamped to 7, as the kernel CM does
 * (libfabric and fio pass them); an explicit depth above the device's is
 * EINVAL. RDMA_OPTION_ID_ACK_TIMEOUT is the QP's timeout. */
static void test_connection_options(struct rdma_event_channel *ch)
{
	pid_t pid = start_server(SERVE_ACCEPT, 1);
	struct rdma_conn_param cp = {.responder_resources = RDMA_MAX_RESP_RES,
				     .initiator_depth = RDMA_MAX_INIT_DEPTH,
				     .retry_count = 15,
				     .rnr_retry_count = 15};
	struct ibv_device_attr d;
	struct ibv_qp_init_attr qi;
	struct ibv_qp_attr qa;
	struct rdma_cm_id *id = NULL;
	struct rdma_conn_param big;
	uint8_t timeout = 20;

	CHECK_EQ(client_prepare(ch, &id), 0);
	CHECK_EQ(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout,
				 sizeof(timeout)),
		 0);
	CHECK_EQ(ibv_query_device(id->verbs, &d), 0);
	big = cp;
	big.responder_resources = (uint8_t)(d.max_qp_rd_atom + 1);
	CHECK_EQ(rdma_connect(id, &big), -1);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(rdma_connect(id, &cp), 0);
	CHECK_EQ(expect(ch, 5000), RDMA_CM_EVENT_ESTABLISHED);
	CHECK_EQ(ibv_query_qp(id->qp, &qa,
			      IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY,
			      &qi),
		 0);
	CHECK_EQ(qa.max_rd_atomic, d.max_qp_init_rd_atom);
	CHECK_EQ(qa.max_dest_rd_atomic, d.max_qp_rd_atom);
	CHECK_EQ(qa.retry_cnt, 7);
	CHECK_EQ(qa.rnr_retry, 7);
	hang_up(ch, id, pid);
}

/* A server that accepts with NULL offers what the REQ asked for, and each
 * side counts the other's depths its own way round (rdma-core's cma.c,
 * rdma_accept; Linux's cm_rep_handler): the client asks to answer 3 READs
 * at once and to send 2, and its QP then sends 2 and answers 3, its
 * ESTABLISHED event saying so. A kernel client of an rping server (which
 * accepts with NULL) got 0 and refused the server's READs. */
static void test_accept_without_param(struct rdma_event_channel *ch)
{
	pid_t pid = start_server(SERVE_ACCEPT, 1);
	struct rdma_conn_param cp = {
	    .responder_resources = 3, .initiator_depth = 2, .retry_count = 7, .rnr_retry_count = 7};
	struct rdma_cm_event *ev;
	struct ibv_qp_init_attr qi;
	struct ibv_qp_attr qa;
	struct rdma_cm_id *id = NULL;

	CHECK_EQ(client_prepare(ch, &id), 0);
	CHECK_EQ(rdma_connect(id, &cp), 0);
	ev = next_event(ch, 5000);
	CHECK(ev && ev->event == RDMA_CM_EVENT_ESTABLISHED);
	if (ev) {
		CHECK_EQ(ev->param.conn.responder_resources, 3);
		CHECK_EQ(ev->param.conn.initiator_depth, 2);
		rdma_ack_cm_event(ev);
	}
	CHECK_EQ(
	    ibv_query_qp(id->qp, &qa, IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC, &qi), 0);
	CHECK_EQ(qa.max_rd_atomic, 2);
	CHECK_EQ(qa.max_dest_rd_atomic, 3);
	hang_up(ch, id, pid);
}

/* An IPv6 id with RDMA_OPTION_ID_AFONLY shares its port with an IPv4 id on
 * 0.0.0.0 (an iSER target binds both); without it, :: takes IPv4 too and
 * the second bind finds the port taken. */
static void test_afonly(void)
{
	struct sockaddr_in a4 = addr_of(++port);
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = a4.sin_port};
	struct rdma_cm_id *v4, *v6, *both;
	int one = 1, zero = 0, s6 = socket(AF_INET6, SOCK_STREAM, 0);

	if (s6 < 0) {
		printf("test_afonly skipped: no IPv6 on this machine\n");
		return;
	}
	close(s6);
	a4.sin_addr.s_addr = htonl(INADDR_ANY);
	a6.sin6_addr = in6addr_any;
	CHECK_EQ(rdma_create_id(NULL, &v4, NULL, RDMA_PS_TCP), 0);
	CHECK_EQ(rdma_create_id(NULL, &v6, NULL, RDMA_PS_TCP), 0);
	CHECK_EQ(rdma_create_id(NULL, &both, NULL, RDMA_PS_TCP), 0);
	CHECK_EQ(rdma_bind_addr(v4, (struct sockaddr *)&a4), 0);
	CHECK_EQ(rdma_listen(v4, 4), 0);
	CHECK_EQ(rdma_set_option(both, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &zero, sizeof(zero)),
		 0);
	CHECK_EQ(rdma_bind_addr(both, (struct sockaddr *)&a6), -1);
	CHECK_EQ(errno, EADDRINUSE);
	CHECK_EQ(rdma_set_option(v6, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one, sizeof(one)), 0);
	CHECK_EQ(rdma_bind_addr(v6, (struct sockaddr *)&a6), 0);
	CHECK_EQ(rdma_listen(v6, 4), 0);
	/* Too late once bound, as in the kernel CM. */
	CHECK_EQ(rdma_set_option(v6, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one, sizeof(one)), -1);
	rdma_destroy_id(both);
	rdma_destroy_id(v6);
	rdma_destroy_id(v4);
}

/* rdma_create_id leaves the program's random(3) sequence alone: its PSN
 * comes from getrandom(2), as the kernel's rdma_cm draws it. Before, it
 * took one number from random(), so a program that seeds it to repeat a
 * run did not, and a child forked while another thread was in random()
 * could wait for ever on its lock. */
static void test_program_random_untouched(void)
{
	struct rdma_cm_id *id;
	long first, again;

	srandom(7);
	first = random();
	srandom(7);
	CHECK_EQ(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	again = random();
	CHECK_EQ(again, first);
	rdma_destroy_id(id);
}

/* An id with an address has its device's default PD in id->pd, as librdmacm
 * sets it (programs create QPs and AHs on it). */
static void test_default_pd(struct rdma_event_channel *ch)
{
	struct sockaddr_in a = addr_of(++port);
	struct rdma_cm_id *active, *passive;

	CHECK_EQ(rdma_create_id(ch, &active, NULL, RDMA_PS_TCP), 0);
	CHECK_EQ(rdma_resolve_addr(active, NULL, (struct sockaddr *)&a, 2000), 0);
	CHECK_EQ(expect(ch, 2000), RDMA_CM_EVENT_ADDR_RESOLVED);
	CHECK(active->pd != NULL && active->pd->context == active->verbs);
	CHECK_EQ(rdma_create_id(NULL, &passive, NULL, RDMA_PS_TCP), 0);
	CHECK_EQ(rdma_bind_addr(passive, (struct sockaddr *)&a), 0);
	CHECK(passive->pd != NULL && passive->pd == active->pd);
	rdma_destroy_id(passive);
	rdma_destroy_id(active);
}

/* An id destroyed with an event queued takes it away: the channel's fd
 * is no longer readable, so a program that polls before it reads never
 * blocks in rdma_get_cm_event for an event that is gone. In CI the
 * dropped event still counted, and test_cycles hung in such a read. */
static void test_destroyed_id_events(struct rdma_event_channel *ch)
{
	struct sockaddr_in a = addr_of(++port);
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_id *id;

	CHECK_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	CHECK_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&a, 2000), 0);
	CHECK_EQ(poll(&p, 1, 2000), 1); /* ADDR_RESOLVED, not retrieved */
	rdma_destroy_id(id);
	CHECK_EQ(poll(&p, 1, 0), 0);
	CHECK(next_event(ch, 200) == NULL);
}

/* Destroying a channel that another thread waits on (rping never joins
 * its CM thread) leaves that thread waiting, as a read of the kernel's
 * closed channel does, until a signal ends the wait with EINTR; the
 * channel is freed by the last of the two (ASan and valgrind see a use
 * after free or a leak). */
static int waited = 1, wait_errno;

static void *wait_event(void *arg)
{
	struct rdma_cm_event *ev;

	waited = rdma_get_cm_event(arg, &ev);
	wait_errno = errno;
	return NULL;
}

static void on_usr1(int sig)
{
	(void)sig;
}

static void test_channel_destroyed_under_reader(void)
{
	struct rdma_event_channel *c = rdma_create_event_channel();
	struct sigaction sa = {.sa_handler = on_usr1}; /* no SA_RESTART */
	pthread_t t;

	CHECK(c != NULL);
	sigaction(SIGUSR1, &sa, NULL);
	if (!c || pthread_create(&t, NULL, wait_event, c))
		return;
	usleep(50 * 1000); /* the thread is in its wait */
	rdma_destroy_event_channel(c);
	usleep(50 * 1000);
	CHECK_EQ(waited, 1); /* still waiting */
	pthread_kill(t, SIGUSR1);
	pthread_join(t, NULL);
	CHECK_EQ(waited, -1);
	CHECK_EQ(wait_errno, EINTR);
}

/* A reader that an event woke, whose id and channel are destroyed before
 * it looks (rping's client ends so, its CM thread never joined), goes on
 * waiting as the kernel's does (ucma.c's ucma_get_event waits while the
 * list is empty); and one that took the event first holds up
 * rdma_destroy_id until it acknowledges it. In CI the woken reader
 * returned ENODEV, and Debian's rping exited 255 after a clean run. */
static pid_t reader_tid;

static void *take_event(void *arg)
{
	struct rdma_cm_event *ev;

	__atomic_store_n(&reader_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	waited = rdma_get_cm_event(arg, &ev);
	wait_errno = errno;
	if (!waited)
		rdma_ack_cm_event(ev);
	return NULL;
}

/* Until the thread that stored its id there sleeps (in its poll): a call
 * begun after the channel is destroyed would be a use after free. */
static void wait_asleep(pid_t *tid)
{
	char path[64], stat[256] = "", *state;
	int tries;

	for (tries = 0; tries < 5000; tries++) {
		pid_t t = __atomic_load_n(tid, __ATOMIC_ACQUIRE);
		FILE *f;

		snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)t);
		f = t ? fopen(path, "r") : NULL;
		if (f && !fgets(stat, sizeof(stat), f))
			stat[0] = 0;
		if (f)
			fclose(f);
		state = strrchr(stat, ')');
		if (state && state[1] == ' ' && state[2] == 'S') {
			*tid = 0;
			return;
		}
		usleep(100);
	}
	CHECK(!"the reader never went to sleep");
}

static void test_channel_destroyed_under_woken_reader(void)
{
	enum { ROUNDS = 1000 };
	struct sigaction sa = {.sa_handler = on_usr1}; /* no SA_RESTART */
	int round, taken = 0;

	sigaction(SIGUSR1, &sa, NULL);
	for (round = 0; round < ROUNDS; round++) {
		struct rdma_event_channel *c = rdma_create_event_channel();
		struct sockaddr_in a = addr_of(port);
		struct rdma_cm_id *id;
		pthread_t t;

		waited = 1;
		CHECK(c != NULL);
		if (!c || rdma_create_id(c, &id, NULL, RDMA_PS_TCP) ||
		    pthread_create(&t, NULL, take_event, c))
			return;
		wait_asleep(&reader_tid);
		CHECK_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&a, 2000), 0);
		rdma_destroy_id(id);
		rdma_destroy_event_channel(c);
		usleep(1000);
		while (__atomic_load_n(&waited, __ATOMIC_ACQUIRE) == 1) {
			pthread_kill(t, SIGUSR1); /* lost if it comes between two waits */
			usleep(1000);
		}
		pthread_join(t, NULL);
		taken += !waited;
		if (waited)
			CHECK_EQ(wait_errno, EINTR);
	}
	printf("# %d of %d readers took their event before it was destroyed\n", taken, ROUNDS);
}

/* A connect that arrives between the server's rdma_bind_addr and its
 * rdma_listen waits for the listener instead of being rejected (qperf
 * publishes its port in between). Both sides are in this process, on
 * channels of their own. */
static void test_request_before_listen(struct rdma_event_channel *ch)
{
	struct rdma_event_channel *sch = rdma_create_event_channel();
	struct sockaddr_in a = addr_of(++port);
	struct rdma_conn_param cp = conn_param();
	struct ibv_qp_init_attr qa = qp_attr();
	struct rdma_cm_id *srv = NULL, *id = NULL, *req;
	struct rdma_cm_event *ev;

	CHECK_EQ(rdma_create_id(sch, &srv, NULL, RDMA_PS_TCP), 0);
	CHECK_EQ(rdma_bind_addr(srv, (struct sockaddr *)&a), 0);
	CHECK_EQ(client_prepare(ch, &id), 0);
	CHECK_EQ(rdma_connect(id, &cp), 0);
	usleep(200000); /* the request is there before the listener */
	CHECK_EQ(rdma_listen(srv, 4), 0);
	ev = next_event(sch, 5000);
	CHECK(ev && ev->event == RDMA_CM_EVENT_CONNECT_REQUEST);
	if (ev) {
		req = ev->id;
		rdma_ack_cm_event(ev);
		CHECK_EQ(rdma_create_qp(req, NULL, &qa), 0);
		CHECK_EQ(rdma_accept(req, NULL), 0);
		CHECK_EQ(expect(ch, 5000), RDMA_CM_EVENT_ESTABLISHED);
		CHECK_EQ(expect(sch, 5000), RDMA_CM_EVENT_ESTABLISHED);
		rdma_disconnect(id);
		CHECK_EQ(expect(ch, 5000), RDMA_CM_EVENT_DISCONNECTED);
		CHECK_EQ(expect(sch, 5000), RDMA_CM_EVENT_DISCONNECTED);
		rdma_destroy_qp(req);
		rdma_destroy_id(req);
	}
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_id(srv);
	rdma_destroy_event_channel(sch);
}

/* The CM carries RDMA port P on TCP port P (the decision is in
 * docs/architecture.md), so a TCP service on P keeps a uroce listener off
 * it: EADDRINUSE, with a message saying why. */
static void test_port_taken_by_tcp(void)
{
	struct sockaddr_in a = addr_of(++port);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct rdma_cm_id *id;

	CHECK(s >= 0 && !bind(s, (struct sockaddr *)&a, sizeof(a)) && !listen(s, 1));
	CHECK_EQ(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	CHECK_EQ(rdma_bind_addr(id, (struct sockaddr *)&a), -1);
	CHECK_EQ(errno, EADDRINUSE);
	rdma_destroy_id(id);
	close(s);
}

/* With neither node nor service, the addresses are the hints' own
 * (libfabric resolves so); with none there either, EINVAL. */
static void test_getaddrinfo_hints(void)
{
	struct sockaddr_in dst = addr_of(port), src = addr_of(0);
	struct rdma_addrinfo hints = {.ai_port_space = RDMA_PS_TCP}, *res = NULL;

	CHECK_EQ(rdma_getaddrinfo(NULL, NULL, &hints, &res), -1);
	CHECK_EQ(errno, EINVAL);
	hints.ai_dst_addr = (struct sockaddr *)&dst;
	hints.ai_dst_len = sizeof(dst);
	hints.ai_src_addr = (struct sockaddr *)&src;
	hints.ai_src_len = sizeof(src);
	CHECK_EQ(rdma_getaddrinfo(NULL, NULL, &hints, &res), 0);
	CHECK(res != NULL);
	if (!res)
		return;
	CHECK_EQ(res->ai_family, AF_INET);
	CHECK_EQ(res->ai_qp_type, IBV_QPT_RC);
	CHECK(res->ai_dst_len == sizeof(dst) && !memcmp(res->ai_dst_addr, &dst, sizeof(dst)));
	CHECK(res->ai_src_len == sizeof(src) && !memcmp(res->ai_src_addr, &src, sizeof(src)));
	CHECK(res->ai_next == NULL);
	rdma_freeaddrinfo(res);
}

static void test_cycles(struct rdma_event_channel *ch)
{
	const int cycles = 100;
	pid_t pid = start_server(SERVE_ACCEPT, cycles);
	int fds_before = -1, ok = 0;

	for (int i = 0; i < cycles; i++) {
		struct rdma_cm_event *ev = NULL;
		struct rdma_cm_id *id = NULL;

		if (client_connect(ch, &id, &ev) == RDMA_CM_EVENT_ESTABLISHED &&
		    !rdma_disconnect(id)) {
			rdma_ack_cm_event(ev);
			ev = NULL;
			ok += expect(ch, 5000) == RDMA_CM_EVENT_DISCONNECTED;
		}
		if (ev)
			rdma_ack_cm_event(ev);
		rdma_destroy_qp(id);
		rdma_destroy_id(id);
		if (i == 0)
			fds_before = open_fds(); /* after the device is first opened */
	}
	CHECK_EQ(ok, cycles);
	CHECK_EQ(open_fds(), fds_before);
	CHECK_EQ(finish_server(pid, 5000), 0);
}

int main(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();

	/* Below the ephemeral range (32768 and up), where a port may be some
	 * connection's, and apart from the integration tests' (10000-24999). */
	port = 25000 + getpid() % 4000;
	if (!ch || pipe(report))
		return 1;
	RUN(test_rejected(ch), 30);
	RUN(test_no_listener(ch), 30);
	RUN(test_addr_error(), 30);
	RUN(test_forged_requests(ch), 30);
	RUN(test_partial_message(ch), 20);
	RUN(test_gone_before_rtu(ch), 30);
	RUN(test_stopped_server(ch), 20);
	RUN(test_fd_table_full(), 30);
	RUN(test_listener_killed(ch), 30);
	RUN(test_peer_killed(ch), 30);
	RUN(test_connection_options(ch), 30);
	RUN(test_accept_without_param(ch), 30);
	RUN(test_afonly(), 10);
	RUN(test_program_random_untouched(), 10);
	RUN(test_getaddrinfo_hints(), 10);
	RUN(test_default_pd(ch), 10);
	RUN(test_request_before_listen(ch), 30);
	RUN(test_port_taken_by_tcp(), 10);
	RUN(test_destroyed_id_events(ch), 10);
	RUN(test_channel_destroyed_under_reader(), 10);
	RUN(test_channel_destroyed_under_woken_reader(), 30);
	RUN(test_cycles(ch), 120);
	rdma_destroy_event_channel(ch);
	return check_report();
}
