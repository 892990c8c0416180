/* What this process's address space holds: the check a pinning provider
 * makes when it registers memory (ibv_reg_mr(3): EFAULT for a range it
 * cannot pin). */
#ifndef URO_ADDRESS_SPACE_H
#define URO_ADDRESS_SPACE_H

#include <stddef.h>

/* 0 when every byte of [addr, addr+len) is mapped readable (and, with
 * writable, writable); EFAULT otherwise, or when the map cannot be read. */
int uro_range_accessible(const void *addr, size_t len, int writable);

#endif
