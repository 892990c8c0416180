#ifndef URO_LINK_GONE_H
#define URO_LINK_GONE_H

#include "config.h"

/* Raises IBV_EVENT_DEVICE_FATAL in every process of this user with a
 * context on link as the configuration at config_path (canonical, as
 * uro_config_path gives it) defined it: not on a link of that name in
 * another configuration. Returns how many were told. */
unsigned uro_link_gone_notify(const char *config_path, const struct uro_link *link);

#endif
