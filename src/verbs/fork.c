/* Fork support (ibv_fork_init(3), ibv_is_fork_initialized(3)). uroce pins
 * no memory, so a fork never splits a registered page from the device:
 * there is nothing to set up and nothing to exclude. */
#include "objects.h"

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
