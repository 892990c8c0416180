/* The converters between rdma-core's structs and the kernel uverbs ABI
 * structs (<rdma/ib_user_verbs.h>, <rdma/ib_user_sa.h>) that rdma-core
 * exports for librdmacm and old providers. Plain field copies. */
#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <string.h>

#include "driver_abi.h"
#include "verbs_ops.h"

URO_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src)
{
	memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid));
	dst->grh.flow_label = src->grh.flow_label;
	dst->grh.sgid_index = src->grh.sgid_index;
	dst->grh.hop_limit = src->grh.hop_limit;
	dst->grh.traffic_class = src->grh.traffic_class;
	dst->dlid = src->dlid;
	dst->sl = src->sl;
	dst->src_path_bits = src->src_path_bits;
	dst->static_rate = src->static_rate;
	dst->is_global = src->is_global;
	dst->port_num = src->port_num;
}

URO_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src)
{
	dst->cur_qp_state = src->cur_qp_state;
	dst->path_mtu = src->path_mtu;
	dst->path_mig_state = src->path_mig_state;
	dst->qkey = src->qkey;
	dst->rq_psn = src->rq_psn;
	dst->sq_psn = src->sq_psn;
	dst->dest_qp_num = src->dest_qp_num;
	dst->qp_access_flags = src->qp_access_flags;
	dst->cap.max_send_wr = src->max_send_wr;
	dst->cap.max_recv_wr = src->max_recv_wr;
	dst->cap.max_send_sge = src->max_send_sge;
	dst->cap.max_recv_sge = src->max_recv_sge;
	dst->cap.max_inline_data = src->max_inline_data;
	ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
	ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
	dst->pkey_index = src->pkey_index;
	dst->alt_pkey_index = src->alt_pkey_index;
	dst->en_sqd_async_notify = src->en_sqd_async_notify;
	dst->sq_draining = src->sq_draining;
	dst->max_rd_atomic = src->max_rd_atomic;
	dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	dst->min_rnr_timer = src->min_rnr_timer;
	dst->port_num = src->port_num;
	dst->timeout = src->timeout;
	dst->retry_cnt = src->retry_cnt;
	dst->rnr_retry = src->rnr_retry;
	dst->alt_port_num = src->alt_port_num;
	dst->alt_timeout = src->alt_timeout;
}

/* The path-record fields the two structs share, in either direction. */
#define COPY_PATH_REC(d, s)                                                                        \
	do {                                                                                       \
		(d)->dlid = (s)->dlid;                                                             \
		(d)->slid = (s)->slid;                                                             \
		(d)->raw_traffic = (s)->raw_traffic;                                               \
		(d)->flow_label = (s)->flow_label;                                                 \
		(d)->reversible = (s)->reversible;                                                 \
		(d)->mtu = (s)->mtu;                                                               \
		(d)->pkey = (s)->pkey;                                                             \
		(d)->hop_limit = (s)->hop_limit;                                                   \
		(d)->traffic_class = (s)->traffic_class;                                           \
		(d)->numb_path = (s)->numb_path;                                                   \
		(d)->sl = (s)->sl;                                                                 \
		(d)->mtu_selector = (s)->mtu_selector;                                             \
		(d)->rate_selector = (s)->rate_selector;                                           \
		(d)->rate = (s)->rate;                                                             \
		(d)->packet_life_time_selector = (s)->packet_life_time_selector;                   \
		(d)->packet_life_time = (s)->packet_life_time;                                     \
		(d)->preference = (s)->preference;                                                 \
	} while (0)

URO_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
					    struct ib_user_path_rec *src)
{
	COPY_PATH_REC(dst, src);
	memcpy(dst->dgid.raw, src->dgid, 16);
	memcpy(dst->sgid.raw, src->sgid, 16);
}

URO_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src)
{
	COPY_PATH_REC(dst, src);
	memcpy(dst->dgid, src->dgid.raw, 16);
	memcpy(dst->sgid, src->sgid.raw, 16);
}
