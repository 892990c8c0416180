/* fork(2) copies each lock as another thread holds it, and the child has
 * none of those threads to let it go: a child forked while the CM thread
 * handled an event, or while another thread was in an rsocket call, waited
 * for ever in its first CM or rsocket call (a forked rstream -T f;
 * test_rsocket's server children). The library's global locks are taken
 * around every fork, outermost first as the code nests them (the CM lock,
 * the device table, the rsocket table), so that the child gets them free.
 * libibverbs registered its own handlers when it loaded, before these: its
 * prepare runs after this one, as its locks nest inside these. */
#include <pthread.h>

#include "cm.h"
#include "rsocket.h"

static void prepare(void)
{
	uro_cm_lock();
	uro_cm_devices_lock();
	rs_table_lock();
}

static void done(void)
{
	rs_table_unlock();
	uro_cm_devices_unlock();
	uro_cm_unlock();
}

__attribute__((constructor)) static void guard_fork(void)
{
	pthread_atfork(prepare, done, done);
}
