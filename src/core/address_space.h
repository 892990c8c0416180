/* What this process's address space holds: the check a pinning provider
 * makes when it registers memory (ibv_reg_mr(3): EFAULT for a range it
 * cannot pin). */
#ifndef URO_ADDRESS_SPACE_H
#define URO_ADDRESS_SPACE_H

#include <stddef.h>
#include <stdint.h>

/* One line of /proc/self/maps (proc(5)): "start-end perms offset dev inode
 * path". */
struct uro_mapping {
	uintptr_t start, end;
	int readable, writable, shared;
	uint64_t offset, ino;
	unsigned major, minor;
	char path[4096];
};

/* 0 when every byte of [addr, addr+len) is mapped readable (and, with
 * writable, writable); EFAULT otherwise, or when the map cannot be read.
 * first, unless NULL, receives the mapping that holds addr (its start is
 * 0 when there is none). */
int uro_range_accessible(const void *addr, size_t len, int writable, struct uro_mapping *first);

#endif
