#include "remote_copy.h"

#include <errno.h>

/* The part [off, off+len) of an iovec list, as a list of its own. */
int uro_iov_slice(const struct iovec *in, int n, uint64_t off, uint64_t len, struct iovec *out)
{
	int k = 0;

	for (int i = 0; i < n && len; i++) {
		uint64_t size = in[i].iov_len;

		if (off >= size) {
			off -= size;
			continue;
		}
		out[k].iov_base = (char *)in[i].iov_base + off;
		out[k].iov_len = size - off < len ? size - off : len;
		len -= out[k].iov_len;
		off = 0;
		k++;
	}
	return k;
}

int uro_remote_copy(struct uro_peer *p, int to_peer, const struct iovec *l, int nl,
		    const struct iovec *r, int nr, uint64_t len, const struct uro_holds *h)
{
	struct iovec lc[URO_MAX_SGE + 1], rc[URO_MAX_SGE + 1];

	for (uint64_t off = 0; off < len; off += URO_COPY_CHUNK) {
		uint64_t n = len - off < URO_COPY_CHUNK ? len - off : URO_COPY_CHUNK;
		int nlc = uro_iov_slice(l, nl, off, n, lc), nrc = uro_iov_slice(r, nr, off, n, rc);
		ssize_t got;

		if (off && h && !uro_holds_valid(p, h))
			return ECANCELED;
		got = to_peer ? process_vm_writev(p->pid, lc, (unsigned long)nlc, rc,
						  (unsigned long)nrc, 0)
			      : process_vm_readv(p->pid, lc, (unsigned long)nlc, rc,
						 (unsigned long)nrc, 0);
		if (got == (ssize_t)n)
			continue;
		if (got < 0 && errno == ESRCH)
			p->dead = 1;
		return got < 0 ? errno : EFAULT;
	}
	return 0;
}
