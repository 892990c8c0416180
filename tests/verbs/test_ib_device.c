/* An IB-type device (uroce link add ... type ib): InfiniBand link layer, a
 * LID, GID[0] = fe80::/64 + GUID, and addresses without a GRH. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "../check.h"
#include "fixture.h"

static char conf[] = "/tmp/uroce-ib-XXXXXX";

static void write_config(void)
{
	int fd = mkstemp(conf);
	const char text[] = "link roce9 netdev lo\nlink ib7 netdev lo type ib lid 7\n"
			    "link ib8 netdev lo type ib lid 8\n";

	if (fd < 0 || write(fd, text, sizeof(text) - 1) != (ssize_t)sizeof(text) - 1)
		exit(1);
	close(fd);
	setenv("UROCE_CONFIG", conf, 1);
}

static void test_list(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);

	CHECK_EQ(n, 3);
	CHECK_STR(ibv_get_device_name(list[0]), "roce9");
	CHECK_STR(ibv_get_device_name(list[1]), "ib7");
	CHECK_EQ(ibv_get_device_index(list[1]), 1);
	CHECK_EQ(list[1]->transport_type, IBV_TRANSPORT_IB);
	CHECK_EQ(list[1]->node_type, IBV_NODE_CA);
	/* Named as a kernel device's, after the files uroce run's view has
	 * (UCX looks for /dev/infiniband/<dev_name>). */
	CHECK_STR(list[1]->dev_name, "uverbs1");
	CHECK_STR(list[1]->dev_path, "/sys/class/infiniband_verbs/uverbs1");
	CHECK_STR(list[1]->ibdev_path, "/sys/class/infiniband/ib7");
	CHECK(list[3] == NULL);
	ibv_free_device_list(list);
}

static uint64_t guid_of(struct ibv_device *dev)
{
	struct ibv_context *ctx = ibv_open_device(dev);
	struct ibv_device_attr a;
	uint64_t g = 0;

	if (ctx && !ibv_query_device(ctx, &a))
		g = a.node_guid;
	if (ctx)
		ibv_close_device(ctx);
	return g;
}

/* Links on one netdev each have a GUID of their own (so two IB links have
 * two GIDs), and a link's is the same at every open. */
static void test_guids(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	uint64_t g[3];

	for (int i = 0; i < 3; i++)
		g[i] = guid_of(list[i]);
	CHECK(g[0] && g[0] != g[1] && g[1] != g[2] && g[0] != g[2]);
	CHECK_EQ(guid_of(list[1]), g[1]);
	CHECK_EQ(ibv_get_device_guid(list[1]), g[1]);
	ibv_free_device_list(list);
}

static void test_port(struct ibv_context *ctx)
{
	struct ibv_port_attr port;
	struct ibv_gid_entry e;
	struct ibv_device_attr da;

	CHECK_EQ(ibv_query_port(ctx, 1, &port), 0);
	CHECK_EQ(port.link_layer, IBV_LINK_LAYER_INFINIBAND);
	CHECK_EQ(port.lid, 7);
	CHECK_EQ(ibv_query_gid_ex(ctx, 1, 0, &e, 0), 0);
	CHECK_EQ(e.gid_type, IBV_GID_TYPE_IB);
	CHECK_EQ(e.gid.raw[0], 0xfe);
	CHECK_EQ(e.gid.raw[1], 0x80);
	CHECK_EQ(ibv_query_device(ctx, &da), 0);
	CHECK(memcmp(e.gid.raw + 8, &da.node_guid, 8) == 0); /* GUID in the low half */
	CHECK_EQ(ibv_query_gid_ex(ctx, 1, 1, &e, 0), ENODATA);
}

static void test_lid_addressing(struct fixture *f)
{
	struct ibv_ah_attr aa = {.port_num = 1, .dlid = 7};
	struct ibv_qp_init_attr init = {
	    .send_cq = f->cq, .recv_cq = f->cq, .qp_type = IBV_QPT_RC, .cap = {.max_send_wr = 1}};
	struct ibv_qp *qp = ibv_create_qp(f->pd, &init);
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	struct ibv_ah *ah = ibv_create_ah(f->pd, &aa);

	CHECK(ah != NULL); /* no GRH needed on IB */
	if (ah)
		ibv_destroy_ah(ah);
	aa.dlid = 0;
	errno = 0;
	CHECK(ibv_create_ah(f->pd, &aa) == NULL);
	CHECK_EQ(errno, EINVAL);

	CHECK_EQ(ibv_modify_qp(
		     qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
		 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_2048;
	a.dest_qp_num = qp->qp_num;
	a.ah_attr.dlid = 7;
	a.ah_attr.port_num = 1;
	CHECK_EQ(ibv_modify_qp(qp, &a,
			       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				   IBV_QP_MIN_RNR_TIMER),
		 0);
	CHECK_EQ(qp->state, IBV_QPS_RTR);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
}

int main(void)
{
	struct fixture f;

	write_config();
	test_list();
	test_guids();
	if (fixture_open(&f, "ib7") == 0) {
		test_port(f.ctx);
		test_lid_addressing(&f);
		fixture_close(&f);
	} else {
		CHECK(!"ib7 opens");
	}
	unlink(conf);
	return check_report();
}
