#include "remote_copy.h"

#include <errno.h>

#include "attach_probe.h"
#include "direct_map.h"
#include "log.h"
#include "self_pid.h"
#include "user_memory.h"

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

static uint64_t iov_total(const struct iovec *v, int n)
{
	uint64_t t = 0;

	for (int i = 0; i < n; i++)
		t += v[i].iov_len;
	return t;
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

/* Copies src's bytes into dst's, lists of equal length, within this
 * process, under the user-memory guard, so that a page gone is EFAULT as
 * process_vm_readv would answer it. Where one side is one buffer (a
 * WRITE's run of packets into the program's memory, a message cut into
 * packets), under one guard for the whole list. */
static int copy_within(const struct iovec *dst, int nd, const struct iovec *src, int ns)
{
	size_t doff = 0, soff = 0;
	int di = 0, si = 0;

	if (nd == 1)
		return uro_user_gather(dst->iov_base, src, ns) ? EFAULT : 0;
	if (ns == 1)
		return uro_user_scatter(dst, nd, src->iov_base) ? EFAULT : 0;

	while (di < nd && si < ns) {
		size_t dl = dst[di].iov_len - doff, sl = src[si].iov_len - soff;
		size_t n = dl < sl ? dl : sl;

		if (n && uro_user_copy((char *)dst[di].iov_base + doff,
				       (const char *)src[si].iov_base + soff, n))
			return EFAULT;
		doff += n;
		soff += n;
		if (doff == dst[di].iov_len) {
			di++;
			doff = 0;
		}
		if (soff == src[si].iov_len) {
			si++;
			soff = 0;
		}
	}
	return 0;
}

/* The context's own segment, or another context's of this process (two
 * devices, or two configurations, in one program): one address space. The
 * wire path's copies between a packet and a registered region are of this
 * kind, as are two contexts' on shared memory (XRC and multicast stay
 * there). They are copied under the user-memory guard, a memcpy that makes
 * a page gone EFAULT as process_vm_readv/writev would, without their system
 * call per copy (1-2 us whatever the size, against 0.1-0.2 us for a
 * memcpy of 1-4 KiB), and whatever a seccomp filter says of those calls. */
static int in_this_process(const struct uro_peer *p)
{
	return p->self || (uint32_t)p->pid == uro_self_pid();
}

/* One chunk's bytes, l to r (to_peer) or r to l: 0 or an errno. */
typedef int (*chunk_copy)(struct uro_peer *p, int to_peer, const struct iovec *l, int nl,
			  const struct iovec *r, int nr, uint64_t n);

/* Within this process's address space: the same process's memory, or a
 * peer's region mapped here (direct_map.h). */
static int chunk_mapped(struct uro_peer *p, int to_peer, const struct iovec *l, int nl,
			const struct iovec *r, int nr, uint64_t n)
{
	(void)p;
	(void)n;
	return to_peer ? copy_within(r, nr, l, nl) : copy_within(l, nl, r, nr);
}

static int chunk_attached(struct uro_peer *p, int to_peer, const struct iovec *l, int nl,
			  const struct iovec *r, int nr, uint64_t n)
{
	ssize_t got = to_peer
			  ? process_vm_writev(p->pid, l, (unsigned long)nl, r, (unsigned long)nr, 0)
			  : process_vm_readv(p->pid, l, (unsigned long)nl, r, (unsigned long)nr, 0);

	if (got == (ssize_t)n)
		return 0;
	if (got < 0 && errno == ESRCH)
		p->dead = 1;
	if (got < 0 && (errno == EPERM || errno == EACCES))
		tell_refused(p, errno);
	return got < 0 ? errno : EFAULT;
}

/* Inlined, so that each way's copy is a direct call: through a pointer,
 * a small WRITE's request cost about 1 % more. */
static inline __attribute__((always_inline)) int in_chunks(chunk_copy copy, struct uro_peer *p,
							   int to_peer, const struct iovec *l,
							   int nl, const struct iovec *r, int nr,
							   uint64_t len, const struct uro_holds *h)
{
	struct iovec lc[URO_MAX_SGE + 1], rc[URO_MAX_SGE + 1];

	/* One chunk, each list exactly len long: most requests, copied as
	 * they are. */
	if (len <= URO_COPY_CHUNK && iov_total(l, nl) == len && iov_total(r, nr) == len)
		return copy(p, to_peer, l, nl, r, nr, len);
	for (uint64_t off = 0; off < len; off += URO_COPY_CHUNK) {
		uint64_t n = len - off < URO_COPY_CHUNK ? len - off : URO_COPY_CHUNK;
		int nlc = uro_iov_slice(l, nl, off, n, lc), nrc = uro_iov_slice(r, nr, off, n, rc);
		int err;

		if (off && h && !uro_holds_valid(p, h))
			return ECANCELED;
		err = copy(p, to_peer, lc, nlc, rc, nrc, n);
		if (err)
			return err;
	}
	return 0;
}

int uro_remote_copy(struct uro_peer *p, int to_peer, const struct iovec *l, int nl,
		    const struct iovec *r, int nr, uint64_t len, const struct uro_holds *h)
{
	struct iovec mapped[URO_MAX_SGE + 1];
	int err;

	if (in_this_process(p))
		return in_chunks(chunk_mapped, p, to_peer, l, nl, r, nr, len, h);
	if (h && uro_direct_maybe(h) && uro_direct_begin(p, h, r, nr, mapped)) {
		err = in_chunks(chunk_mapped, p, to_peer, l, nl, mapped, nr, len, h);
		uro_direct_end(p);
		return err;
	}
	return in_chunks(chunk_attached, p, to_peer, l, nl, r, nr, len, h);
}
