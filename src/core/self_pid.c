#include "self_pid.h"

#include <pthread.h>
#include <unistd.h>

static uint32_t cached;
static pthread_once_t watching = PTHREAD_ONCE_INIT;

/* A forked child has a pid of its own: found again on first use. */
static void forget(void)
{
	__atomic_store_n(&cached, 0, __ATOMIC_RELAXED);
}

static void watch_fork(void)
{
	pthread_atfork(NULL, NULL, forget);
}

uint32_t uro_self_pid(void)
{
	uint32_t pid = __atomic_load_n(&cached, __ATOMIC_RELAXED);

	if (pid)
		return pid;
	pthread_once(&watching, watch_fork);
	pid = (uint32_t)getpid();
	__atomic_store_n(&cached, pid, __ATOMIC_RELAXED);
	return pid;
}
