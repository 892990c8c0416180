#include "remote_copy.h"

#include <errno.h>

#include "attach_probe.h"
#include "log.h"

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

/* A refused attach looks like a peer that never answers: its requests end
 * in a retry error. Why the kernel refuses is said once per peer, in the
 * words `uroce doctor` uses. */
static void tell_refused(struct uro_peer *p, int err)
{
	struct uro_attach_facts f;
	struct uro_diagnosis d;

	if (__atomic_exchange_n(&p->attach_told, 1, __ATOMIC_RELAXED))
		return;
	uro_attach_facts(err, p->pid, &f);
	uro_attach_diagnose(&f, &d);
	uro_warn("the kernel refuses cross-memory attach to pid %d: %s; %s", (int)p->pid, d.why,
		 d.remedy);
	errno = err;
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
		if (got < 0 && (errno == EPERM || errno == EACCES))
			tell_refused(p, errno);
		return got < 0 ? errno : EFAULT;
	}
	return 0;
}
