/* The program's own buffers, touched without faulting the program.
 *
 * A NIC pins a region's pages at registration and keeps reading and writing
 * them whatever the program later does to its mappings. uroce pins nothing
 * (registration is O(1) in the region's length), so a buffer the program
 * unmapped or protected after ibv_reg_mr is simply not there: every place
 * where uroce's own code reads or writes the program's memory goes through
 * here, and a missing page becomes EFAULT, which the caller turns into the
 * completion error a NIC reports for the same request (IBV_WC_LOC_PROT_ERR
 * for a requester's buffer, a malformed receive for a responder's).
 *
 * The system calls that move bytes between processes (process_vm_readv and
 * writev) already answer EFAULT by themselves; these cover the copies that
 * run in this process: staged and inline payloads, atomics' results, and
 * the probe that finds a requester's own buffer gone before its request
 * reaches anyone.
 *
 * Only a fault on the access's own memory is taken; every other fault
 * goes to the handler the program had before, or to the default action.
 * A handler the program installs after uroce's takes over uroce's faults
 * too, and the program then faults as it would without uroce. */
#ifndef URO_USER_MEMORY_H
#define URO_USER_MEMORY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* An address no process of any supported architecture can map: outside
 * both x86-64's canonical halves, and, with arm64's ignored top byte, in
 * the kernel's half. A request whose inline data could not be read when
 * it was posted names it instead of the program's buffer, so that every
 * later gather fails as that copy did, whatever the program maps at the
 * buffer's address meanwhile. */
#define URO_USER_NOWHERE 0x8080000000000000ull

/* memcpy, or EFAULT (and dst partly written) when either side faults. */
int uro_user_copy(void *dst, const void *src, size_t len);

/* The iovecs' bytes one after another into dst, likewise. */
int uro_user_gather(void *dst, const struct iovec *iov, int n);

/* src's bytes over the iovecs, one after another, likewise. */
int uro_user_scatter(const struct iovec *iov, int n, const void *src);

/* 0 when every byte of the iovecs can be read (write: and written), else
 * EFAULT. Probing touches one byte a page and changes nothing: a write is
 * probed with an atomic OR of zero. */
int uro_user_probe(const struct iovec *iov, int n, int write);

/* An atomic on 8 aligned bytes of this process's memory: a fetch-and-add
 * (operand added), a compare-and-swap (operand stored when the bytes equal
 * compare) or an ATOMIC WRITE (operand stored). old is what they held.
 * With a result buffer (8 bytes, any alignment), old is stored there too,
 * in the same guarded access: the buffer is probed first, so that one
 * gone faults before the atomic changes anything. The probe reads and
 * writes its bytes back without a locked instruction: until the request
 * completes the buffer is the request's, not the program's
 * (ibv_post_send(3)). */
enum uro_user_atomic_kind { URO_ATOMIC_FETCH_ADD, URO_ATOMIC_CMP_SWAP, URO_ATOMIC_WRITE };
struct uro_user_atomic {
	enum uro_user_atomic_kind kind;
	uint64_t operand, compare;
	uint64_t old;
	void *result;	  /* or NULL */
	int result_fault; /* after EFAULT: the result buffer's, not the atomic's */
};

/* Executes a at addr as one CPU atomic: 0, or EFAULT when the memory is
 * not there or not writable (a->old then means nothing), or when the
 * result buffer is not (a->result_fault: one gone before the request
 * faults in the probe, and the atomic is not executed). */
int uro_user_atomic(void *addr, struct uro_user_atomic *a);

#endif
