/* A minimal test harness: CHECK records a failure and goes on; the program
 * ends with "N passed, N failed" and exits non-zero on any failure. */
#ifndef URO_CHECK_H
#define URO_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_passed, check_failed;

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (cond) {                                                                        \
			check_passed++;                                                            \
		} else {                                                                           \
			check_failed++;                                                            \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
		}                                                                                  \
	} while (0)

#define CHECK_EQ(a, b)                                                                             \
	do {                                                                                       \
		long long check_a_ = (long long)(a), check_b_ = (long long)(b);                    \
		if (check_a_ == check_b_) {                                                        \
			check_passed++;                                                            \
		} else {                                                                           \
			check_failed++;                                                            \
			fprintf(stderr,                                                            \
				"%s:%d: CHECK_EQ failed: %s == %lld, expected %s == %lld\n",       \
				__FILE__, __LINE__, #a, check_a_, #b, check_b_);                   \
		}                                                                                  \
	} while (0)

#define CHECK_STR(a, b) CHECK(strcmp((a), (b)) == 0)

static inline int check_report(void)
{
	printf("%d passed, %d failed\n", check_passed, check_failed);
	return check_failed ? 1 : 0;
}

#endif
