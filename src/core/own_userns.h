/* A user namespace in which a user keeps its own ids: what an unprivileged
 * `uroce run` puts its device view in (tools/user_namespace.c says why one
 * for all of a user's programs). Making one, trying whether this process
 * could, and why not. */
#ifndef URO_OWN_USERNS_H
#define URO_OWN_USERNS_H

#include <sys/types.h>

#include "diagnosis.h"

/* Moves this process into a new user namespace mapping uid and gid (its
 * ids outside) to themselves: 0, or -1 with errno and the step that failed
 * in *step. */
int uro_userns_unshare_own(uid_t uid, gid_t gid, const char **step);

/* How a private mount namespace for the view is had here. */
enum uro_view_way { URO_VIEW_DIRECT, URO_VIEW_USERNS, URO_VIEW_NONE };

struct uro_userns_facts {
	enum uro_view_way way;
	int err;	   /* why URO_VIEW_NONE */
	const char *step;  /* the call that failed */
	long max_userns;   /* user.max_user_namespaces, -1 absent */
	long unpriv_clone; /* Debian's kernel.unprivileged_userns_clone, -1 absent */
	long apparmor;	   /* kernel.apparmor_restrict_unprivileged_userns, -1 absent */
	int seccomp;	   /* 0 off, 1 strict, 2 filter */
};

/* Tries, in a child, what uroce run does: a mount namespace, and on EPERM
 * the same inside a user namespace of one's own. */
void uro_userns_probe(struct uro_userns_facts *f);

/* The host's side of the facts, for a failure met elsewhere. */
void uro_userns_facts(int err, const char *step, struct uro_userns_facts *f);

void uro_userns_diagnose(const struct uro_userns_facts *f, struct uro_diagnosis *d);

#endif
