/* The host's registry of uroce processes (design.md decision 3).
 *
 * One file, <dir>/uroce-registry, holds a fixed-size record a slot. A
 * process owns slot N while it holds an OFD write lock on record N: the
 * kernel drops the lock when the process dies, so a dead process's slot is
 * free again at once, with no daemon and no clean-up pass. The record says
 * where the owner's segment is (pid and memfd number). */
#ifndef URO_REGISTRY_H
#define URO_REGISTRY_H

#include <stdint.h>
#include <sys/types.h>

#include "limits.h"

#define URO_REGISTRY_MAGIC 0x55524f31u /* "URO1" */

struct uro_slot_record {
	uint32_t magic;
	int32_t pid;
	uint32_t uid;
	int32_t seg_fd; /* the owner's memfd: /proc/<pid>/fd/<seg_fd> */
	uint64_t seg_size;
	char device[URO_NAME_MAX];
	uint8_t reserved[40];
};

struct uro_slot {
	int fd;	       /* the registry file, holding our lock */
	unsigned slot; /* 1 .. URO_MAX_SLOTS-1 */
};

/* dir NULL: $UROCE_RUNTIME_DIR, else /dev/shm. */
const char *uro_registry_dir(const char *dir);
int uro_registry_claim(const char *dir, struct uro_slot *s);
int uro_registry_publish(const struct uro_slot *s, const struct uro_slot_record *rec);
void uro_registry_release(struct uro_slot *s);
/* 1 and *rec filled when a live process owns slot, 0 when it is free. */
int uro_registry_lookup(const char *dir, unsigned slot, struct uro_slot_record *rec);

/* The live processes whose records name device (at most max, into out),
 * to be attached and checked by the caller. */
struct uro_slot_owner {
	unsigned slot;
	pid_t pid;
};
unsigned uro_registry_owners_of(const char *dir, const char *device, struct uro_slot_owner *out,
				unsigned max);

#endif
