/* The IBVERBS_1.0 compat versions of the verbs. They belong to the 2006 ABI,
 * whose structs (ibv_device_1_0, ibv_context_1_0, ...) wrap the current
 * ones; no program built since libibverbs 1.1 binds to them. uroce exports
 * them so that the symbol table matches rdma-core's, and fails them with
 * ENOSYS: a 1.0 program gets a clear error, never a wrong struct. */
#include <errno.h>
#include <stddef.h>

#include "verbs_ops.h"

#define COMPAT_PTR(name)                                                                           \
	URO_EXPORT void *uro_compat_1_0_##name(void);                                              \
	URO_EXPORT void *uro_compat_1_0_##name(void)                                               \
	{                                                                                          \
		errno = ENOSYS;                                                                    \
		return NULL;                                                                       \
	}                                                                                          \
	__asm__(".symver uro_compat_1_0_" #name ", " #name "@IBVERBS_1.0");

#define COMPAT_INT(name)                                                                           \
	URO_EXPORT int uro_compat_1_0_##name(void);                                                \
	URO_EXPORT int uro_compat_1_0_##name(void)                                                 \
	{                                                                                          \
		errno = ENOSYS;                                                                    \
		return -1;                                                                         \
	}                                                                                          \
	__asm__(".symver uro_compat_1_0_" #name ", " #name "@IBVERBS_1.0");

#define COMPAT_VOID(name)                                                                          \
	URO_EXPORT void uro_compat_1_0_##name(void);                                               \
	URO_EXPORT void uro_compat_1_0_##name(void)                                                \
	{                                                                                          \
	}                                                                                          \
	__asm__(".symver uro_compat_1_0_" #name ", " #name "@IBVERBS_1.0");

COMPAT_PTR(ibv_get_device_list)
COMPAT_VOID(ibv_free_device_list)
COMPAT_PTR(ibv_get_device_name)
COMPAT_INT(ibv_get_device_guid)
COMPAT_PTR(ibv_open_device)
COMPAT_INT(ibv_close_device)
COMPAT_INT(ibv_get_async_event)
COMPAT_VOID(ibv_ack_async_event)
COMPAT_INT(ibv_query_device)
COMPAT_INT(ibv_query_port)
COMPAT_INT(ibv_query_gid)
COMPAT_INT(ibv_query_pkey)
COMPAT_PTR(ibv_alloc_pd)
COMPAT_INT(ibv_dealloc_pd)
COMPAT_PTR(ibv_reg_mr)
COMPAT_INT(ibv_dereg_mr)
COMPAT_PTR(ibv_create_cq)
COMPAT_INT(ibv_resize_cq)
COMPAT_INT(ibv_destroy_cq)
COMPAT_INT(ibv_get_cq_event)
COMPAT_VOID(ibv_ack_cq_events)
COMPAT_PTR(ibv_create_srq)
COMPAT_INT(ibv_modify_srq)
COMPAT_INT(ibv_query_srq)
COMPAT_INT(ibv_destroy_srq)
COMPAT_PTR(ibv_create_qp)
COMPAT_INT(ibv_query_qp)
COMPAT_INT(ibv_modify_qp)
COMPAT_INT(ibv_destroy_qp)
COMPAT_PTR(ibv_create_ah)
COMPAT_INT(ibv_destroy_ah)
COMPAT_INT(ibv_attach_mcast)
COMPAT_INT(ibv_detach_mcast)

/* The libibverbs 1.1 provider registration (pre-rdma-core providers). No
 * provider's device is ever created here, so registering is accepted and
 * has no effect. */
URO_EXPORT void uro_compat_register_driver(const char *name, void *init_func);
URO_EXPORT void uro_compat_register_driver(const char *name, void *init_func)
{
	(void)name;
	(void)init_func;
}
__asm__(".symver uro_compat_register_driver, ibv_register_driver@IBVERBS_1.1");
