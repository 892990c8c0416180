/*
 * The copy limits under uroce's intra-host data path, measured the way
 * perftest's bandwidth tests move data: the same source buffer copied again
 * and again into the same destination. memcpy is the bound for a copy inside
 * one process; process_vm_writev/readv (process_vm_readv(2)) into and out of
 * another process are the calls uroce's RDMA WRITE and READ are made of.
 *
 * A memcpy between two mappings of one memfd is the bound for uroce's direct
 * path, where a peer maps the target's shareable region and copies into it.
 *
 * usage: copy_limits SECONDS SIZE...
 * prints one line per size: size, GB/s for memcpy, process_vm_writev and
 * process_vm_readv, process_vm_writev calls per second, and GB/s for a
 * memcpy from one mapping of a memfd into another mapping of it.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct target {
	pid_t pid;
	char *buf;	 /* same address in both processes: allocated before fork */
	char *from, *to; /* two mappings of one memfd, at different offsets */
};

typedef int (*copy_fn)(const struct target *t, char *local, size_t len);

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int copy_memcpy(const struct target *t, char *local, size_t len)
{
	memcpy(t->buf, local, len);
	/* Keeps the compiler from dropping a copy nobody reads. */
	__asm__ volatile("" ::: "memory");
	return 0;
}

static int copy_memfd(const struct target *t, char *local, size_t len)
{
	(void)local;
	memcpy(t->to, t->from, len);
	__asm__ volatile("" ::: "memory");
	return 0;
}

/* The memfd's first half seen through one mapping, its second through
 * another: a copy between them is what a peer's memcpy into a region it
 * mapped costs, with the owner's mapping beside it. */
static int map_memfd(struct target *t, size_t bytes)
{
	int fd = memfd_create("copy_limits", MFD_CLOEXEC);
	char *a, *b;

	if (fd < 0 || ftruncate(fd, (off_t)(2 * bytes)))
		return -1;
	a = mmap(NULL, 2 * bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	b = mmap(NULL, 2 * bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (a == MAP_FAILED || b == MAP_FAILED)
		return -1;
	memset(a, 3, 2 * bytes);
	t->from = a;
	t->to = b + bytes;
	return 0;
}

static int copy_writev(const struct target *t, char *local, size_t len)
{
	struct iovec l = {local, len}, r = {t->buf, len};
	return process_vm_writev(t->pid, &l, 1, &r, 1, 0) == (ssize_t)len ? 0 : -1;
}

static int copy_readv(const struct target *t, char *local, size_t len)
{
	struct iovec l = {local, len}, r = {t->buf, len};
	return process_vm_readv(t->pid, &l, 1, &r, 1, 0) == (ssize_t)len ? 0 : -1;
}

/* Copies until SECONDS have passed (checking the clock every few copies so
 * that the clock is not what is measured); returns copies per second. */
static double rate(copy_fn fn, const struct target *t, char *local, size_t len, double seconds)
{
	unsigned batch = len < 65536 ? 256 : 4;
	unsigned long n = 0;
	for (unsigned i = 0; i < batch; i++) /* warm up caches and page tables */
		if (fn(t, local, len))
			return -1;
	double start = now(), elapsed;
	do {
		for (unsigned i = 0; i < batch; i++)
			if (fn(t, local, len))
				return -1;
		n += batch;
		elapsed = now() - start;
	} while (elapsed < seconds);
	return (double)n / elapsed;
}

/* A child that owns the destination buffer, touches it, and then sleeps
 * until killed: the copies into it are made by the parent alone. */
static int start_target(struct target *t, size_t max)
{
	int ready[2];
	if (pipe(ready))
		return -1;
	t->pid = fork();
	if (t->pid < 0)
		return -1;
	if (t->pid == 0) {
		memset(t->buf, 1, max);
		char c = 'r';
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	char c;
	int ok = read(ready[0], &c, 1) == 1;
	close(ready[0]);
	close(ready[1]);
	return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s SECONDS SIZE...\n", argv[0]);
		return 2;
	}
	double seconds = strtod(argv[1], NULL);
	size_t max = 0;
	for (int i = 2; i < argc; i++) {
		size_t s = strtoull(argv[i], NULL, 0);
		if (s == 0) {
			fprintf(stderr, "copy_limits: bad size '%s'\n", argv[i]);
			return 2;
		}
		max = s > max ? s : max;
	}
	/* Page-aligned, as perftest's buffers are. */
	size_t bytes = (max + 4095) & ~(size_t)4095;
	struct target t = {.buf = aligned_alloc(4096, bytes)};
	char *local = aligned_alloc(4096, bytes);
	if (!t.buf || !local || map_memfd(&t, bytes) || start_target(&t, max)) {
		perror("copy_limits");
		return 1;
	}
	memset(local, 2, max);
	printf("# bytes memcpy_GBps pvwritev_GBps pvreadv_GBps pvwritev_calls_per_s memfd_GBps\n");
	int status = 0;
	for (int i = 2; i < argc && status == 0; i++) {
		size_t s = strtoull(argv[i], NULL, 0);
		double m = rate(copy_memcpy, &t, local, s, seconds);
		double w = rate(copy_writev, &t, local, s, seconds);
		double r = rate(copy_readv, &t, local, s, seconds);
		double f = rate(copy_memfd, &t, local, s, seconds);
		if (w < 0 || r < 0) {
			fprintf(stderr, "copy_limits: %s\n", strerror(errno));
			status = 1;
			break;
		}
		printf("%zu %.3f %.3f %.3f %.0f %.3f\n", s, m * (double)s / 1e9,
		       w * (double)s / 1e9, r * (double)s / 1e9, w, f * (double)s / 1e9);
		fflush(stdout);
	}
	kill(t.pid, SIGKILL);
	waitpid(t.pid, NULL, 0);
	return status;
}
