/* uroce demo: opens a device the way any verbs program does and walks the
 * control path a connection needs, printing what the device did. */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"

struct demo {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	void *buf;
};

static int fail(const char *what, int err)
{
	fprintf(stderr, "uroce demo: %s failed: %s\n", what, strerror(err));
	return 1;
}

static struct ibv_device *pick(struct ibv_device **list, const char *name)
{
	for (; *list; list++)
		if (!name || !strcmp(ibv_get_device_name(*list), name))
			return *list;
	return NULL;
}

static void print_device(struct ibv_context *ctx)
{
	struct ibv_port_attr port;
	union ibv_gid gid;
	char text[INET6_ADDRSTRLEN];

	if (ibv_query_port(ctx, 1, &port))
		return;
	printf("device %s: port 1 %s, link layer %s, active MTU %d\n",
	       ibv_get_device_name(ctx->device), ibv_port_state_str(port.state),
	       port.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet (RoCE v2)" : "InfiniBand",
	       128 << port.active_mtu);
	if (port.link_layer == IBV_LINK_LAYER_INFINIBAND)
		printf("  LID %u\n", port.lid);
	for (int i = 0; i < port.gid_tbl_len; i++) {
		if (ibv_query_gid(ctx, 1, i, &gid) || !gid.global.interface_id)
			continue;
		printf("  GID[%d] %s\n", i, inet_ntop(AF_INET6, gid.raw, text, sizeof(text)));
	}
}

static int make_objects(struct demo *d)
{
	struct ibv_qp_init_attr init = {
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1},
	};

	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd)
		return fail("ibv_alloc_pd", errno);
	d->buf = calloc(1, 1 << 20);
	d->mr = d->buf ? ibv_reg_mr(d->pd, d->buf, 1 << 20,
				    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
		       : NULL;
	if (!d->mr)
		return fail("ibv_reg_mr", errno);
	d->cq = ibv_create_cq(d->ctx, 32, NULL, NULL, 0);
	if (!d->cq)
		return fail("ibv_create_cq", errno);
	init.send_cq = init.recv_cq = d->cq;
	d->qp = ibv_create_qp(d->pd, &init);
	if (!d->qp)
		return fail("ibv_create_qp", errno);
	printf("PD, 1 MiB MR (lkey 0x%x rkey 0x%x), CQ of %d, RC QP 0x%06x\n", d->mr->lkey,
	       d->mr->rkey, d->cq->cqe, d->qp->qp_num);
	return 0;
}

static int step(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask, const char *name)
{
	int err = ibv_modify_qp(qp, a, mask | IBV_QP_STATE);

	if (err)
		return fail(name, err);
	printf(" -> %s", name);
	return 0;
}

/* RESET -> INIT -> RTR -> RTS, connected to itself through GID 0. */
static int connect_self(struct demo *d, int roce)
{
	struct ibv_port_attr port;
	struct ibv_qp_attr a;

	if (ibv_query_port(d->ctx, 1, &port))
		return fail("ibv_query_port", errno);
	printf("QP 0x%06x: RESET", d->qp->qp_num);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (step(d->qp, &a, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT"))
		return 1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = port.active_mtu;
	a.dest_qp_num = d->qp->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.port_num = 1;
	a.ah_attr.dlid = port.lid;
	a.ah_attr.is_global = roce;
	if (roce && ibv_query_gid(d->ctx, 1, 0, &a.ah_attr.grh.dgid))
		return fail("ibv_query_gid", errno);
	a.ah_attr.grh.hop_limit = 1;
	if (step(d->qp, &a,
		 IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
		 "RTR"))
		return 1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (step(d->qp, &a,
		 IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
		     IBV_QP_MAX_QP_RD_ATOMIC,
		 "RTS"))
		return 1;
	printf("\n");
	return 0;
}

static void teardown(struct demo *d)
{
	if (d->qp)
		ibv_destroy_qp(d->qp);
	if (d->cq)
		ibv_destroy_cq(d->cq);
	if (d->mr)
		ibv_dereg_mr(d->mr);
	if (d->pd)
		ibv_dealloc_pd(d->pd);
	if (d->ctx)
		ibv_close_device(d->ctx);
	free(d->buf);
}

int uro_cmd_demo(int argc, char **argv)
{
	const char *name = NULL;
	struct ibv_device **list;
	struct ibv_device *dev;
	struct ibv_port_attr port;
	struct demo d;
	int rc = 1;

	if (argc == 1 && uro_is_help(argv[0])) {
		puts("usage: uroce demo [-d DEVICE]\n\nOpens DEVICE (default: the first, "
		     "uroce0), creates a PD, an MR, a CQ and an RC QP, and connects the QP "
		     "to itself.");
		return 0;
	}
	if (argc == 2 && !strcmp(argv[0], "-d"))
		name = argv[1];
	else if (argc) {
		fputs("usage: uroce demo [-d DEVICE]\n", stderr);
		return 2;
	}
	memset(&d, 0, sizeof(d));
	list = ibv_get_device_list(NULL);
	if (!list)
		return fail("ibv_get_device_list", errno);
	dev = pick(list, name);
	if (!dev) {
		fprintf(stderr, "uroce demo: no device %s\n", name ? name : "configured");
		ibv_free_device_list(list);
		return 1;
	}
	d.ctx = ibv_open_device(dev);
	ibv_free_device_list(list);
	if (!d.ctx)
		return fail("ibv_open_device", errno);
	print_device(d.ctx);
	if (ibv_query_port(d.ctx, 1, &port) == 0 && !make_objects(&d) &&
	    !connect_self(&d, port.link_layer == IBV_LINK_LAYER_ETHERNET)) {
		printf("control path OK. Data movement (SEND/WRITE/READ between processes) "
		       "is not implemented yet: post_send fails with EOPNOTSUPP.\n");
		rc = 0;
	}
	teardown(&d);
	return rc;
}
