/* This process's pid without a system call: on some virtual machines a
 * getpid() costs a microsecond, more than a small RDMA operation. */
#ifndef URO_SELF_PID_H
#define URO_SELF_PID_H

#include <stdint.h>

uint32_t uro_self_pid(void);

#endif
