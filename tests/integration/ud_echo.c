/* A UD echo that rides out loss, for tests whose network is not usable
 * yet when the program starts (test_address_late.sh). The server's QP
 * reaches RTS before anything else, then the two sides swap QPN and GID
 * over TCP; the client sends a datagram every 50 ms until it has ECHOES
 * answers, and gives up after TRIES. Exit status 0 only then.
 *
 *   ud_echo server DEV GID_INDEX PORT
 *   ud_echo client DEV GID_INDEX PORT SERVER_IPV4 */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../verbs/pair.h"

#define ECHOES 20
#define TRIES  400 /* 20 s of 50 ms */
#define GRH    40
#define QKEY   0x11111111u /* pair.h's */
#define MSG    64
#define RECVS  16

struct dest {
	uint32_t qpn;
	union ibv_gid gid;
};

struct ud {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t buf[RECVS + 1][GRH + MSG]; /* the receives', then the send's */
};

static int die(const char *what)
{
	fprintf(stderr, "ud_echo: %s\n", what);
	return 1;
}

static int post_failed(int err)
{
	fprintf(stderr, "ud_echo: post_send: %s\n", strerror(err));
	return 1;
}

static int ud_open(struct ud *u, const char *dev)
{
	/* Room for more sends than the echoes that can be answered before
	 * their completions are polled: the client's first datagrams, queued
	 * by its kernel while the server's IPv6 address is tentative (the
	 * neighbour is not answered until DAD ends), arrive in a burst, and
	 * a receive polled ahead of the previous echo's send completion is
	 * answered while that send still holds its slot (with one slot,
	 * post_send then failed: ENOMEM, a full queue); up to RECVS
	 * receives complete ahead of the first echo's send. Room for a
	 * burst's datagrams too: with one receive, the server answered a
	 * burst's datagrams that came one after another, and the client
	 * dropped an echo that came while its only receive was taken (a UD
	 * datagram with no receive posted is dropped, IBTA 9.8.4): "19
	 * echoes" against the server's 20, in 1 run of 9. */
	struct ibv_qp_init_attr init = {.qp_type = IBV_QPT_UD,
					.cap = {.max_send_wr = 2 * RECVS,
						.max_recv_wr = RECVS,
						.max_send_sge = 1,
						.max_recv_sge = 1}};

	u->ctx = open_dev(dev);
	if (!u->ctx)
		return -1;
	u->pd = ibv_alloc_pd(u->ctx);
	u->cq = ibv_create_cq(u->ctx, 64, NULL, NULL, 0);
	u->mr = u->pd ? ibv_reg_mr(u->pd, u->buf, sizeof(u->buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	init.send_cq = init.recv_cq = u->cq;
	u->qp = u->mr && u->cq ? ibv_create_qp(u->pd, &init) : NULL;
	/* A UD QP's walk to RTS names no destination: pair.h's, with its Q_Key. */
	return u->qp && !qp_connect_to(u->qp, 0, 0, 0, &(union ibv_gid){0}) ? 0 : -1;
}

/* Receive i, into buffer i. */
static int post_recv(struct ud *u, uint64_t i)
{
	struct ibv_sge sge = {(uintptr_t)u->buf[i], sizeof(u->buf[i]), u->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1}, *bad;

	return ibv_post_recv(u->qp, &wr, &bad);
}

static int send_to(struct ud *u, struct ibv_ah *ah, uint32_t qpn)
{
	struct ibv_sge sge = {(uintptr_t)u->buf[RECVS], MSG, u->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = RECVS,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = QKEY;
	return ibv_post_send(u->qp, &wr, &bad);
}

/* Polls for up to ms: 1 when a datagram arrived (its receive posted
 * again), 0 when none did, -1 on an error completion. */
static int wait_datagram(struct ud *u, int ms)
{
	struct timespec start, now;
	struct ibv_wc wc;

	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		int n = ibv_poll_cq(u->cq, 1, &wc);

		if (n && wc.status != IBV_WC_SUCCESS)
			return -1;
		if (n && wc.opcode == IBV_WC_RECV)
			return post_recv(u, wc.wr_id) ? -1 : 1;
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < ms);
	return 0;
}

static struct ibv_ah *ah_to(struct ud *u, const struct dest *d, int gid_index)
{
	struct ibv_ah_attr a = {.is_global = 1, .port_num = 1};

	a.grh.dgid = d->gid;
	a.grh.sgid_index = (uint8_t)gid_index;
	a.grh.hop_limit = 64;
	return ibv_create_ah(u->pd, &a);
}

/* Swaps destinations over TCP: the server accepts one client. */
static int exchange(const char *server, int port, const struct dest *mine, struct dest *theirs)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0), c = -1, ok;

	if (fd < 0)
		return -1;
	if (server) {
		inet_pton(AF_INET, server, &sa.sin_addr);
		for (int i = 0; i < 100 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)); i++)
			usleep(100000);
		c = fd;
	} else {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (!bind(fd, (struct sockaddr *)&sa, sizeof(sa)) && !listen(fd, 1))
			c = accept(fd, NULL, NULL);
	}
	ok = c >= 0 && write(c, mine, sizeof(*mine)) == (ssize_t)sizeof(*mine) &&
	     read(c, theirs, sizeof(*theirs)) == (ssize_t)sizeof(*theirs);
	if (c >= 0 && c != fd)
		close(c);
	close(fd);
	return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	static struct ud u;
	struct dest mine, theirs;
	struct ibv_ah *ah;
	int client = argc == 6 && !strcmp(argv[1], "client"), gid_index, echoes = 0;

	if (!client && !(argc == 5 && !strcmp(argv[1], "server")))
		return die("usage: ud_echo server DEV GID PORT | client DEV GID PORT SERVER");
	gid_index = atoi(argv[3]);
	if (ud_open(&u, argv[2]))
		return die("cannot make a UD QP on the device");
	for (uint64_t i = 0; i < RECVS; i++)
		if (post_recv(&u, i))
			return die("cannot post a receive");
	printf("ready\n");
	fflush(stdout);
	mine.qpn = u.qp->qp_num;
	if (ibv_query_gid(u.ctx, 1, gid_index, &mine.gid) ||
	    exchange(client ? argv[5] : NULL, atoi(argv[4]), &mine, &theirs))
		return die("cannot swap destinations");
	ah = ah_to(&u, &theirs, gid_index);
	if (!ah)
		return die("cannot make an address handle");
	for (int tries = 0; echoes < ECHOES && tries < TRIES; tries++) {
		int got;

		int err = client ? send_to(&u, ah, theirs.qpn) : 0;

		if (err)
			return post_failed(err);
		got = wait_datagram(&u, 50);
		if (got < 0)
			return die("an error completion");
		err = got && !client ? send_to(&u, ah, theirs.qpn) : 0;
		if (err)
			return post_failed(err);
		echoes += got;
	}
	printf("%d echoes\n", echoes);
	return echoes == ECHOES ? 0 : 1;
}
