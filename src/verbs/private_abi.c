/* IBVERBS_PRIVATE_34: what rdma-core's hardware providers (libmlx5.so.1,
 * libefa.so.1, ...) import from libibverbs. perftest, UCX and pyverbs link
 * those providers, and Debian links everything BIND_NOW, so these symbols
 * must exist for such programs to start. There is no such hardware here:
 * a provider's registration is accepted and never produces a device, so
 * nothing reaches the kernel-command calls; if something does, each fails
 * with EOPNOTSUPP. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "verbs_ops.h"

URO_EXPORT bool verbs_allow_disassociate_destroy;

#define CMD(name)                                                                                  \
	URO_EXPORT int name(void);                                                                 \
	URO_EXPORT int name(void)                                                                  \
	{                                                                                          \
		return EOPNOTSUPP;                                                                 \
	}

CMD(execute_ioctl)
CMD(ibv_cmd_advise_mr)
CMD(ibv_cmd_alloc_dm)
CMD(ibv_cmd_alloc_mw)
CMD(ibv_cmd_alloc_pd)
CMD(ibv_cmd_attach_mcast)
CMD(ibv_cmd_close_xrcd)
CMD(ibv_cmd_create_ah)
CMD(ibv_cmd_create_counters)
CMD(ibv_cmd_create_cq)
CMD(ibv_cmd_create_cq_ex)
CMD(ibv_cmd_create_flow)
CMD(ibv_cmd_create_flow_action_esp)
CMD(ibv_cmd_create_qp)
CMD(ibv_cmd_create_qp_ex)
CMD(ibv_cmd_create_qp_ex2)
CMD(ibv_cmd_create_rwq_ind_table)
CMD(ibv_cmd_create_srq)
CMD(ibv_cmd_create_srq_ex)
CMD(ibv_cmd_create_wq)
CMD(ibv_cmd_dealloc_mw)
CMD(ibv_cmd_dealloc_pd)
CMD(ibv_cmd_dereg_mr)
CMD(ibv_cmd_destroy_ah)
CMD(ibv_cmd_destroy_counters)
CMD(ibv_cmd_destroy_cq)
CMD(ibv_cmd_destroy_flow)
CMD(ibv_cmd_destroy_flow_action)
CMD(ibv_cmd_destroy_qp)
CMD(ibv_cmd_destroy_rwq_ind_table)
CMD(ibv_cmd_destroy_srq)
CMD(ibv_cmd_destroy_wq)
CMD(ibv_cmd_detach_mcast)
CMD(ibv_cmd_free_dm)
CMD(ibv_cmd_get_context)
CMD(ibv_cmd_modify_cq)
CMD(ibv_cmd_modify_flow_action_esp)
CMD(ibv_cmd_modify_qp)
CMD(ibv_cmd_modify_qp_ex)
CMD(ibv_cmd_modify_srq)
CMD(ibv_cmd_modify_wq)
CMD(ibv_cmd_open_qp)
CMD(ibv_cmd_open_xrcd)
CMD(ibv_cmd_poll_cq)
CMD(ibv_cmd_post_recv)
CMD(ibv_cmd_post_send)
CMD(ibv_cmd_post_srq_recv)
CMD(ibv_cmd_query_context)
CMD(ibv_cmd_query_device_any)
CMD(ibv_cmd_query_mr)
CMD(ibv_cmd_query_port)
CMD(ibv_cmd_query_qp)
CMD(ibv_cmd_query_srq)
CMD(ibv_cmd_read_counters)
CMD(ibv_cmd_reg_dm_mr)
CMD(ibv_cmd_reg_dmabuf_mr)
CMD(ibv_cmd_reg_mr)
CMD(ibv_cmd_req_notify_cq)
CMD(ibv_cmd_rereg_mr)
CMD(ibv_cmd_resize_cq)

URO_EXPORT void verbs_register_driver_34(const void *ops);
URO_EXPORT void verbs_register_driver_34(const void *ops)
{
	(void)ops;
}

URO_EXPORT void *verbs_open_device(void *device, void *private_data);
URO_EXPORT void *verbs_open_device(void *device, void *private_data)
{
	(void)device;
	(void)private_data;
	return uro_fail_null(EOPNOTSUPP);
}

URO_EXPORT void *_verbs_init_and_alloc_context(void *device, int cmd_fd, size_t alloc_size,
					       void *context_offset, uint32_t driver_id);
URO_EXPORT void *_verbs_init_and_alloc_context(void *device, int cmd_fd, size_t alloc_size,
					       void *context_offset, uint32_t driver_id)
{
	(void)device;
	(void)cmd_fd;
	(void)alloc_size;
	(void)context_offset;
	(void)driver_id;
	return uro_fail_null(EOPNOTSUPP);
}

URO_EXPORT void verbs_uninit_context(void *context);
URO_EXPORT void verbs_uninit_context(void *context)
{
	(void)context;
}

URO_EXPORT void verbs_set_ops(void *context, const void *ops);
URO_EXPORT void verbs_set_ops(void *context, const void *ops)
{
	(void)context;
	(void)ops;
}

URO_EXPORT void verbs_init_cq(void *cq, void *context, void *channel, void *cq_context);
URO_EXPORT void verbs_init_cq(void *cq, void *context, void *channel, void *cq_context)
{
	(void)cq;
	(void)context;
	(void)channel;
	(void)cq_context;
}

/* Providers log through this; uroce has no provider logging to join. */
URO_EXPORT void __verbs_log(void *ctx, const char *fmt, ...);
URO_EXPORT void __verbs_log(void *ctx, const char *fmt, ...)
{
	(void)ctx;
	(void)fmt;
}

URO_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void *type);
URO_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void *type)
{
	(void)type;
	return num_attrs;
}

URO_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size, void *sysfs_dev, const char *fnfmt,
					 ...);
URO_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size, void *sysfs_dev, const char *fnfmt,
					 ...)
{
	(void)buf;
	(void)size;
	(void)sysfs_dev;
	(void)fnfmt;
	errno = ENOENT;
	return -1;
}
