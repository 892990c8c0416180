/* Public verbs that uroce does not implement yet. Each fails with the errno
 * rdma-core returns when a device lacks the feature (docs/design.md, The
 * specification's semantics); the README and the device capabilities say
 * the same. */
#include <errno.h>

#include "verbs_ops.h"

/* Device memory: uroce has none to import. */
URO_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	(void)context;
	(void)dm_handle;
	return uro_fail_null(EOPNOTSUPP);
}

URO_EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
	(void)dm;
}

/* dma-buf regions are device memory exported by a GPU driver. */
URO_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
					    uint64_t iova, int fd, int access)
{
	(void)pd;
	(void)offset;
	(void)length;
	(void)iova;
	(void)fd;
	(void)access;
	return uro_fail_null(EOPNOTSUPP);
}

/* Enhanced Connection Establishment: no options to negotiate. */
URO_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp;
	(void)ece;
	return EOPNOTSUPP;
}

URO_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp;
	(void)ece;
	return EOPNOTSUPP;
}

/* Resolving a GID to an Ethernet MAC serves hardware providers building
 * RoCE headers; uroce addresses peers by GID and QPN alone. */
URO_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
					   uint8_t eth_mac[6], uint16_t *vid)
{
	(void)context;
	(void)attr;
	(void)eth_mac;
	(void)vid;
	return EOPNOTSUPP;
}

/* ibv_query_qp_data_in_order(3): 0 promises nothing about the order in which
 * a message's bytes land, which is true of cross-memory attach. */
URO_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)qp;
	(void)op;
	(void)flags;
	return 0;
}

/* Default versions beside the IBVERBS_1.0 compat ones (compat_1_0.c). */
