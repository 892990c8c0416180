/* This process's CM agent on the wire (mad_route.h): the abstract name
 * the host's endpoints pass its MADs to, the communication IDs that name
 * it, the names its listeners hold, and a UD QP per device that sends its
 * MADs to a peer's QP 1 and keeps the device's endpoint on port 4791 (a
 * listener with no QP yet must still hear its requests). Called with the
 * CM lock held. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cm_mad.h"

#define MAX_PORTS  16
#define SEND_DEPTH 16
/* Names tried before the agent gives up: 65535 numbers, few taken. */
#define NAME_TRIES 64
/* MADs that may wait for the CM thread: cmtime's 20 requests at once, and
 * more. */
#define BACKLOG 1024

struct gsi_port {
	struct ibv_context *ctx;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t buf[URO_MAD_LEN];
};

static struct {
	pid_t pid; /* whose agent this is: a forked child makes its own */
	int fd;
	unsigned number;
	uint16_t next_id;
	struct gsi_port *ports[MAX_PORTS];
} agent = {.fd = -1};

/* A socket listening on an abstract name, or -1 and errno. Each MAD
 * comes on a connection of its own (gsi.c). */
static int bind_name(const struct sockaddr_un *a, socklen_t len)
{
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd >= 0 && (bind(fd, (const struct sockaddr *)a, len) || listen(fd, BACKLOG))) {
		int err = errno;

		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

int uro_mad_agent_fd(void)
{
	if (agent.pid == getpid() && agent.fd >= 0)
		return agent.fd;
	if (agent.pid != getpid()) { /* the parent's: its name and QPs stay its own */
		if (agent.fd >= 0)
			close(agent.fd);
		memset(&agent, 0, sizeof(agent));
		agent.fd = -1;
		agent.pid = getpid();
	}
	for (int i = 0; i < NAME_TRIES && agent.fd < 0; i++) {
		uint16_t n = 0;
		struct sockaddr_un a;
		socklen_t len;

		if (getrandom(&n, sizeof(n), 0) != sizeof(n) || !n)
			continue;
		len = uro_mad_agent_name(NULL, n, &a);
		if (!len)
			return -1;
		agent.fd = bind_name(&a, len);
		agent.number = n;
	}
	if (agent.fd >= 0 && !uro_cm_watch_fd(agent.fd, NULL)) {
		close(agent.fd);
		agent.fd = -1;
	}
	return agent.fd;
}

uint32_t uro_mad_comm_id(void)
{
	if (!++agent.next_id)
		agent.next_id = 1; /* 0 means "unknown" to a CM */
	return (uint32_t)agent.number << 16 | agent.next_id;
}

int uro_mad_service_fd(uint64_t sid, const union ibv_gid *gid)
{
	struct sockaddr_un a;
	socklen_t len = uro_mad_service_name(NULL, sid, gid ? gid->raw : NULL, &a);

	return len ? bind_name(&a, len) : -1;
}

static int modify(struct ibv_qp *qp, enum ibv_qp_state s, int extra, struct ibv_qp_attr *a)
{
	a->qp_state = s;
	return ibv_modify_qp(qp, a, IBV_QP_STATE | extra);
}

static struct gsi_port *port_new(struct ibv_context *ctx)
{
	struct gsi_port *p = calloc(1, sizeof(*p));
	struct ibv_pd *pd = uro_cm_default_pd(ctx);
	struct ibv_qp_init_attr init = {
	    .qp_type = IBV_QPT_UD,
	    .cap = {.max_send_wr = SEND_DEPTH,
		    .max_recv_wr = 1,
		    .max_send_sge = 1,
		    .max_recv_sge = 1},
	};
	struct ibv_qp_attr a = {.pkey_index = 0, .port_num = 1, .qkey = URO_GSI_QKEY};

	if (!p || !pd)
		goto fail;
	p->ctx = ctx;
	p->cq = ibv_create_cq(ctx, SEND_DEPTH, NULL, NULL, 0);
	if (!p->cq)
		goto fail;
	init.send_cq = init.recv_cq = p->cq;
	p->qp = ibv_create_qp(pd, &init);
	p->mr = ibv_reg_mr(pd, p->buf, sizeof(p->buf), IBV_ACCESS_LOCAL_WRITE);
	if (!p->qp || !p->mr ||
	    modify(p->qp, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, &a) ||
	    modify(p->qp, IBV_QPS_RTR, 0, &a) || modify(p->qp, IBV_QPS_RTS, IBV_QP_SQ_PSN, &a))
		goto fail;
	return p;
fail:
	if (p && p->mr)
		ibv_dereg_mr(p->mr);
	if (p && p->qp)
		ibv_destroy_qp(p->qp);
	if (p && p->cq)
		ibv_destroy_cq(p->cq);
	free(p);
	return NULL;
}

static struct gsi_port *port_of(struct ibv_context *ctx)
{
	int i;

	if (uro_mad_agent_fd() < 0)
		return NULL;
	for (i = 0; i < MAX_PORTS && agent.ports[i]; i++)
		if (agent.ports[i]->ctx == ctx)
			return agent.ports[i];
	if (i == MAX_PORTS)
		return NULL;
	agent.ports[i] = port_new(ctx);
	return agent.ports[i];
}

int uro_mad_port_open(struct ibv_context *ctx)
{
	return port_of(ctx) ? 0 : -1;
}

/* UD sends complete when posted here; the wait is bounded all the same. */
static void reap(struct gsi_port *p)
{
	struct ibv_wc wc;

	for (int i = 0; i < 100000; i++)
		if (ibv_poll_cq(p->cq, 1, &wc) != 0)
			return;
}

int uro_mad_send(struct ibv_context *ctx, const union ibv_gid *sgid, const union ibv_gid *dgid,
		 const uint8_t mad[URO_MAD_LEN])
{
	struct gsi_port *p = port_of(ctx);
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1};
	struct ibv_send_wr wr = {.num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_sge sge;
	struct ibv_ah *ah;
	int rc;

	if (!p)
		return -1;
	aa.grh.dgid = *dgid;
	aa.grh.sgid_index = (uint8_t)uro_cm_gid_index(ctx, sgid);
	aa.grh.hop_limit = 64;
	ah = ibv_create_ah(uro_cm_default_pd(ctx), &aa);
	if (!ah)
		return -1;
	memcpy(p->buf, mad, URO_MAD_LEN);
	sge =
	    (struct ibv_sge){.addr = (uintptr_t)p->buf, .length = URO_MAD_LEN, .lkey = p->mr->lkey};
	wr.sg_list = &sge;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = URO_GSI_QPN;
	wr.wr.ud.remote_qkey = URO_GSI_QKEY;
	rc = ibv_post_send(p->qp, &wr, &bad);
	if (!rc)
		reap(p);
	ibv_destroy_ah(ah);
	return rc ? -1 : 0;
}
