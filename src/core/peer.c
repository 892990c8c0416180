#include "peer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "registry.h"

static void set_tables(struct uro_peer *p)
{
	p->hdr = (struct uro_seg_header *)p->base;
	p->qp = (struct uro_seg_qp *)(p->base + p->hdr->qp_off);
	p->cq = (struct uro_seg_cq *)(p->base + p->hdr->cq_off);
	p->srq = (struct uro_seg_srq *)(p->base + p->hdr->srq_off);
	p->mr = (struct uro_seg_mr *)(p->base + p->hdr->mr_off);
}

void uro_peer_self(struct uro_peer *p, struct uro_segment *own, unsigned slot)
{
	memset(p, 0, sizeof(*p));
	p->slot = slot;
	p->pid = getpid();
	p->self = 1;
	p->base = own->base;
	p->size = own->size;
	set_tables(p);
}

static int header_ok(const struct uro_seg_header *h, unsigned slot, pid_t pid, size_t size)
{
	return h->magic == URO_SEG_MAGIC && h->version == URO_SEG_VERSION && h->slot == slot &&
	       h->pid == pid && h->size == size && h->arena_off < size;
}

int uro_peer_attach(struct uro_peer *p, const char *registry_dir, unsigned slot)
{
	struct uro_slot_record rec;
	char path[64];
	void *base;
	int fd;

	memset(p, 0, sizeof(*p));
	p->slot = slot;
	if (uro_registry_lookup(registry_dir, slot, &rec) != 1 || rec.magic != URO_REGISTRY_MAGIC)
		return -ESRCH;
	if (rec.uid != (uint32_t)getuid())
		return -EACCES;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", rec.pid, rec.seg_fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	base = mmap(NULL, rec.seg_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (base == MAP_FAILED)
		return -errno;
	if (!header_ok(base, slot, rec.pid, rec.seg_size)) {
		munmap(base, rec.seg_size);
		return -ESRCH;
	}
	p->pid = rec.pid;
	p->base = base;
	p->size = rec.seg_size;
	set_tables(p);
	return 0;
}

void uro_peer_detach(struct uro_peer *p)
{
	for (int i = 0; i < p->nfds; i++)
		if (!p->self)
			close(p->fds[i].local);
	if (p->base && !p->self)
		munmap(p->base, p->size);
	memset(p, 0, sizeof(*p));
}

int uro_peer_pipe(struct uro_peer *p, int remote_fd)
{
	char path[64];
	int fd;

	if (p->self)
		return remote_fd;
	for (int i = 0; i < p->nfds; i++)
		if (p->fds[i].remote == remote_fd)
			return p->fds[i].local;
	if (p->nfds == URO_PEER_FDS)
		return -1;
	/* A pipe can be opened again through /proc by its owner's user. */
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", p->pid, remote_fd);
	fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	p->fds[p->nfds].remote = remote_fd;
	p->fds[p->nfds].local = fd;
	p->nfds++;
	return fd;
}
