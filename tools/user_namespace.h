/* The one user namespace an unprivileged user's device views share
 * (user_namespace.c says why one). */
#ifndef URO_USER_NAMESPACE_H
#define URO_USER_NAMESPACE_H

#include <stddef.h>

/* Moves this single-threaded process into the user's namespace, starting
 * its holder if there is none; -1 with the reason in err. */
int uro_userns_join(char *err, size_t len);

#endif
