/* The ICRC's CRC-32 from two well-kept libraries, side by side, to measure
 * before picking one: zlib's crc32 and ISA-L's crc32_gzip_refl, the same
 * function (reflected IEEE 802.3, all-ones initial value and final XOR).
 * Prints the time per call at the sizes a RoCEv2 packet has, after checking
 * that both give the same CRC. */
#include <isa-l/crc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <zlib.h>

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static uint32_t with_zlib(const uint8_t *b, size_t n)
{
	return (uint32_t)crc32(0L, b, (uInt)n);
}

static uint32_t with_isal(const uint8_t *b, size_t n)
{
	return crc32_gzip_refl(0, b, (uint64_t)n);
}

/* The best of 5 runs of iters calls, per call. */
static double time_ns(uint32_t (*f)(const uint8_t *, size_t), const uint8_t *b, size_t n,
		      long iters, uint32_t *sink)
{
	double best = 1e30;

	for (int r = 0; r < 5; r++) {
		double t0 = now_ns();

		for (long i = 0; i < iters; i++)
			*sink ^= f(b, n);
		if ((now_ns() - t0) / (double)iters < best)
			best = (now_ns() - t0) / (double)iters;
	}
	return best;
}

int main(void)
{
	static const size_t sizes[] = {64, 256, 1024, 4096, 9000};
	static uint8_t buf[9000];
	uint32_t sink = 0;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 131 + 7);
	printf("| bytes | zlib crc32 (ns) | ISA-L crc32_gzip_refl (ns) | zlib / ISA-L |\n");
	printf("|---|---|---|---|\n");
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s];
		long iters = (long)(20000000 / n) + 1000;
		double z, i;

		if (with_zlib(buf, n) != with_isal(buf, n)) {
			fprintf(stderr, "the two CRCs differ at %zu bytes\n", n);
			return 1;
		}
		z = time_ns(with_zlib, buf, n, iters, &sink);
		i = time_ns(with_isal, buf, n, iters, &sink);
		printf("| %zu | %.1f | %.1f | %.2f |\n", n, z, i, z / i);
	}
	return sink == 0x12345678; /* keeps the calls */
}
