/* The host's registry of uroce processes (docs/design.md, A process is a
 * function of the device).
 *
 * A slot is held by two things the kernel keeps and drops when its holder
 * dies: a unix socket bound to the slot's abstract name, which makes it
 * the holder's among every user of the network namespace, and an OFD write
 * lock on the slot's record in the holder's user's own registry file
 * (<dir>/uroce-registry-<uid>, mode 0600), which says where the holder's
 * segment is (pid and memfd number). No other user can write that file,
 * nor unbind a name another process holds: nobody can corrupt or revoke a
 * slot (docs/architecture.md, "Trust model"). */
#ifndef URO_REGISTRY_H
#define URO_REGISTRY_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include "limits.h"

#define URO_REGISTRY_MAGIC 0x55524f32u /* "URO2" */

struct uro_slot_record {
	uint32_t magic;
	int32_t pid;
	int32_t seg_fd;	    /* the owner's memfd: /proc/<pid>/fd/<seg_fd> */
	uint32_t reserved0; /* (the user is the file's owner) */
	uint64_t seg_size;
	char device[URO_NAME_MAX];
	uint64_t netns; /* the inode of the owner's network namespace */
	/* Which link device is (uro_link_id): one name may be a link of
	 * several configurations. 0 in a record of a version without it. */
	uint64_t link_id;
	uint8_t reserved[24];
};

struct uro_slot {
	int fd;	       /* this user's registry file, holding our lock */
	int sock;      /* bound to the slot's name (the wire's relay listens on it) */
	unsigned slot; /* 1 .. URO_MAX_SLOTS-1 */
};

/* dir NULL: $UROCE_RUNTIME_DIR, else /dev/shm. */
const char *uro_registry_dir(const char *dir);
int uro_registry_claim(const char *dir, struct uro_slot *s);
int uro_registry_publish(const struct uro_slot *s, const struct uro_slot_record *rec);
void uro_registry_release(struct uro_slot *s);
/* In this user's registry: 1 and *rec filled when a live process owns
 * slot, 0 when none of this user's does. */
int uro_registry_lookup(const char *dir, unsigned slot, struct uro_slot_record *rec);
/* 1 when a process of this network namespace, of any user, holds slot. */
int uro_registry_held(const char *dir, unsigned slot);
/* The abstract unix name of what (a slot's, a CM agent's: mad_route.h)
 * among those of this registry's directory: its length, or 0 and errno. */
socklen_t uro_registry_name(const char *dir, const char *what, struct sockaddr_un *a);
/* The slot's abstract unix name, in *a: its length, or 0 and errno. */
socklen_t uro_registry_slot_name(const char *dir, unsigned slot, struct sockaddr_un *a);
/* The inode of this process's network namespace, as records hold it. */
uint64_t uro_registry_netns(void);

/* The live processes of this user whose records name the link link_id (at
 * most max, into out), to be attached and checked by the caller. */
struct uro_slot_owner {
	unsigned slot;
	pid_t pid;
};
unsigned uro_registry_owners_of(const char *dir, uint64_t link_id, struct uro_slot_owner *out,
				unsigned max);

#endif
