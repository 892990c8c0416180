/* uroce run's device view (what UCX and other stacks look for): the sysfs
 * files and device nodes a Soft-RoCE device has, shown for uroce's links in
 * a private mount namespace of the program. */
#ifndef URO_SYSFS_VIEW_H
#define URO_SYSFS_VIEW_H

#include <stddef.h>

#include "config.h"

/* Writes infiniband/<link>/... and infiniband_verbs/uverbsN/... (N = the
 * link's index, as ibv_get_device_index reports it) under class_fd, the
 * directory that is /sys/class in the view. */
int uro_sysfs_view_write(int class_fd, const struct uro_config *cfg);

/* Moves this (single-threaded) process into a mount namespace of its own,
 * and of its own user namespace where it lacks CAP_SYS_ADMIN, keeping its
 * uid and gid, where /dev/infiniband and /sys/class/infiniband{,_verbs}
 * show cfg's links. On failure (-1) err says why and the process's view of
 * the file system is unchanged. */
int uro_view_enter(const struct uro_config *cfg, char *err, size_t errlen);

#endif
