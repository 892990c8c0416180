/* Functions libibverbs exports in its public versions (IBVERBS_1.0/1.1)
 * whose prototypes live in rdma-core 44's driver.h and marshall.h, which
 * Debian does not install. They are declared here exactly as rdma-core
 * declares them, and every file that defines one includes this header, so
 * the compiler holds each definition to the ABI programs were built against
 * (a wrong ibv_get_sysfs_path once crashed Open MPI). */
#ifndef URO_DRIVER_ABI_H
#define URO_DRIVER_ABI_H

#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <stddef.h>

/* The sysfs mount point: SYSFS_PATH when set, else /sys. */
const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);

void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src);

#endif
