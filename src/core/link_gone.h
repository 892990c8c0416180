#ifndef URO_LINK_GONE_H
#define URO_LINK_GONE_H

/* Raises IBV_EVENT_DEVICE_FATAL in every process of this user with a
 * context on device (a link name); returns how many were told. */
unsigned uro_link_gone_notify(const char *device);

#endif
