/* Moving a request's bytes between this process and a peer with
 * cross-memory attach (docs/design.md, Intra-host: the initiator is the
 * NIC), in chunks: between two, the keys the copy goes through are checked
 * again, so that an owner who deregisters or invalidates one waits for one
 * chunk, not for the whole transfer (key_hold.h). */
#ifndef URO_REMOTE_COPY_H
#define URO_REMOTE_COPY_H

#include <sys/uio.h>

#include "key_hold.h"

/* Bytes moved between two checks of the keys: long enough that the
 * per-call cost is lost in the copy (1 MiB cost 8 MiB WRITEs a fifth of
 * their bandwidth here, 4 MiB about 4 %), short enough to be waited for
 * (a few hundred microseconds). */
#define URO_COPY_CHUNK (4u << 20)

/* Copies len bytes from l to r (to_peer) or from r to l. 0, or an errno:
 * ECANCELED when a held key stopped naming its memory mid-copy, ESRCH
 * (and p->dead set) when the peer has gone, EFAULT when memory was not
 * there. */
int uro_remote_copy(struct uro_peer *p, int to_peer, const struct iovec *l, int nl,
		    const struct iovec *r, int nr, uint64_t len, const struct uro_holds *h);

/* The part [off, off+len) of an iovec list, as a list of its own in out;
 * returns its length. */
int uro_iov_slice(const struct iovec *in, int n, uint64_t off, uint64_t len, struct iovec *out);

#endif
