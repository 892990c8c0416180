/* A minimal test harness: CHECK records a failure and goes on; the program
 * ends with "N passed, N failed" and exits non-zero on any failure. */
#ifndef URO_CHECK_H
#define URO_CHECK_H

#include <dirent.h>
#include <execinfo.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

/* RUN(test(...), seconds): a test that does not end in time ends the
 * program with its name, so a hang reads as a failure of that test and not
 * as the whole program's timeout. */
static const char *check_running;

/* Where the overdue test stood is printed too: a hang seen once in a
 * suite run is then more than a name. */
static inline void check_overdue(int sig)
{
	static const char msg[] = "overdue, the program ends: ";
	void *where[32];
	ssize_t r;

	(void)sig;
	r = write(2, msg, sizeof(msg) - 1);
	r = write(2, check_running, strlen(check_running));
	r = write(2, "\n", 1);
	(void)r;
	backtrace_symbols_fd(where, backtrace(where, 32), 2);
	_exit(124);
}

/* backtrace(3) loads its unwinder on first use: done here, not in the
 * signal handler. */
static inline void check_arm_backtrace(void)
{
	void *one[1];

	(void)backtrace(one, 1);
}

/* CHECK_ONLY=name runs only the tests whose call contains name: a loop
 * that hunts a rare failure of one test runs that one. */
static inline int check_selected(const char *call)
{
	const char *only = getenv("CHECK_ONLY");

	return !only || strstr(call, only);
}

#define RUN(call, seconds)                                                                         \
	do {                                                                                       \
		if (!check_selected(#call))                                                        \
			break;                                                                     \
		check_running = #call;                                                             \
		check_arm_backtrace();                                                             \
		signal(SIGALRM, check_overdue);                                                    \
		alarm(seconds);                                                                    \
		call;                                                                              \
		alarm(0);                                                                          \
	} while (0)

static inline int check_report(void)
{
	printf("%d passed, %d failed\n", check_passed, check_failed);
	return check_failed ? 1 : 0;
}

/* The descriptors this process holds: a test's count before and after
 * tells a leak, or what an object costs. */
static inline int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

#endif
