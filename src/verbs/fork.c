/* Fork support (ibv_fork_init(3), ibv_is_fork_initialized(3)). uroce pins
 * no memory, so a fork never splits a registered page from the device:
 * there is nothing to set up and nothing to exclude.
 *
 * What a fork does need: fork(2) copies each lock as another thread holds
 * it, and the child has no such thread to let it go. The library's global
 * locks (the device list, the open contexts; both leaves) are taken around
 * every fork so that a child gets them free and can open devices of its
 * own. librdmacm, which loads after this library, registers its handlers
 * later, so its prepare runs first: its locks nest outside these. */
#include <pthread.h>

#include "verbs_ops.h"

static void prepare(void)
{
	uro_devices_lock();
	uro_contexts_lock();
}

static void done(void)
{
	uro_contexts_unlock();
	uro_devices_unlock();
}

__attribute__((constructor)) static void guard_fork(void)
{
	pthread_atfork(prepare, done, done);
}

URO_EXPORT int ibv_fork_init(void)
{
	return 0;
}

URO_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

URO_EXPORT int ibv_dontfork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}

URO_EXPORT int ibv_dofork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}
