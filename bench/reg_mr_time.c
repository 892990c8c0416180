/*
 * How long ibv_reg_mr(3) and ibv_dereg_mr take against the region's length,
 * beside mlock/munlock of the same region: the cost of pinning every page,
 * which a kernel verbs provider (Soft-RoCE included) pays at registration.
 * An ordinary verbs program: run it under `uroce run`.
 *
 * usage: reg_mr_time REPEATS SIZE...
 * prints one line per size: size and the median microseconds of reg, dereg,
 * mlock and munlock ("-" where mlock is not permitted).
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define MAX_REPEATS 1000

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), by_value);
	return v[n / 2];
}

static int time_reg(struct ibv_pd *pd, void *buf, size_t len, int repeats, double *reg,
		    double *dereg)
{
	double r[MAX_REPEATS], d[MAX_REPEATS];
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

	for (int i = 0; i < repeats; i++) {
		double t0 = now_us();
		struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, access);
		double t1 = now_us();
		if (!mr)
			return -1;
		if (ibv_dereg_mr(mr))
			return -1;
		r[i] = t1 - t0;
		d[i] = now_us() - t1;
	}
	*reg = median(r, repeats);
	*dereg = median(d, repeats);
	return 0;
}

/* 0 with the medians, or -1 when this user may not lock that much. */
static int time_mlock(void *buf, size_t len, int repeats, double *lock, double *unlock)
{
	double l[MAX_REPEATS], u[MAX_REPEATS];

	for (int i = 0; i < repeats; i++) {
		double t0 = now_us();
		if (mlock(buf, len))
			return -1;
		double t1 = now_us();
		munlock(buf, len);
		l[i] = t1 - t0;
		u[i] = now_us() - t1;
	}
	*lock = median(l, repeats);
	*unlock = median(u, repeats);
	return 0;
}

static int measure(struct ibv_pd *pd, size_t len, int repeats)
{
	double reg, dereg, lock, unlock;
	void *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (buf == MAP_FAILED)
		return -1;
	/* Touched first, so that mlock measures pinning and not page faults. */
	memset(buf, 1, len);
	if (time_reg(pd, buf, len, repeats, &reg, &dereg)) {
		munmap(buf, len);
		return -1;
	}
	printf("%zu %.3f %.3f", len, reg, dereg);
	if (time_mlock(buf, len, repeats, &lock, &unlock) == 0)
		printf(" %.3f %.3f\n", lock, unlock);
	else
		printf(" - -\n");
	fflush(stdout);
	munmap(buf, len);
	return 0;
}

int main(int argc, char **argv)
{
	int repeats = argc > 1 ? atoi(argv[1]) : 0;
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;

	if (argc < 3 || repeats < 1 || repeats > MAX_REPEATS) {
		fprintf(stderr, "usage: %s REPEATS(1..%d) SIZE...\n", argv[0], MAX_REPEATS);
		return 2;
	}
	list = ibv_get_device_list(NULL);
	if (!list || !list[0]) {
		fprintf(stderr, "reg_mr_time: no RDMA device (run it under `uroce run`)\n");
		return 1;
	}
	ctx = ibv_open_device(list[0]);
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (!pd) {
		fprintf(stderr, "reg_mr_time: cannot open %s: %s\n", ibv_get_device_name(list[0]),
			strerror(errno));
		return 1;
	}
	printf("# device %s\n# bytes reg_us dereg_us mlock_us munlock_us\n",
	       ibv_get_device_name(list[0]));
	for (int i = 2; i < argc; i++) {
		size_t len = strtoull(argv[i], NULL, 0);
		if (len == 0 || measure(pd, len, repeats)) {
			fprintf(stderr, "reg_mr_time: %s bytes: %s\n", argv[i], strerror(errno));
			return 1;
		}
	}
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
