/* The host registry: slots are exclusive while their owner lives and free
 * again the moment it dies, even by SIGKILL. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../check.h"
#include "registry.h"

static char dir[] = "/tmp/uroce-registry-XXXXXX";

static pid_t child_holding_slot(unsigned *slot)
{
	int fds[2];
	pid_t pid;

	if (pipe(fds))
		return -1;
	pid = fork();
	if (pid == 0) {
		struct uro_slot s;
		struct uro_slot_record rec = {.magic = URO_REGISTRY_MAGIC, .pid = getpid()};

		if (uro_registry_claim(dir, &s) || uro_registry_publish(&s, &rec))
			_exit(1);
		if (write(fds[1], &s.slot, sizeof(s.slot)) != sizeof(s.slot))
			_exit(1);
		pause(); /* killed by the parent */
		_exit(0);
	}
	close(fds[1]);
	if (read(fds[0], slot, sizeof(*slot)) != sizeof(*slot))
		pid = -1;
	close(fds[0]);
	return pid;
}

static void test_exclusive(void)
{
	struct uro_slot a, b;

	CHECK_EQ(uro_registry_claim(dir, &a), 0);
	CHECK_EQ(uro_registry_claim(dir, &b), 0);
	CHECK(a.slot != b.slot);
	CHECK(a.slot >= 1 && b.slot >= 1);
	uro_registry_release(&a);
	uro_registry_release(&b);
}

static void test_reclaim_after_kill(void)
{
	struct uro_slot_record rec;
	struct uro_slot mine;
	unsigned slot = 0;
	pid_t pid = child_holding_slot(&slot);

	CHECK(pid > 0);
	CHECK_EQ(uro_registry_lookup(dir, slot, &rec), 1);
	CHECK_EQ(rec.pid, pid);
	CHECK_EQ(rec.magic, URO_REGISTRY_MAGIC);
	/* While the child lives, its slot is not handed out again. */
	CHECK_EQ(uro_registry_claim(dir, &mine), 0);
	CHECK(mine.slot != slot);
	uro_registry_release(&mine);

	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	CHECK_EQ(uro_registry_lookup(dir, slot, &rec), 0);
	CHECK_EQ(uro_registry_claim(dir, &mine), 0);
	CHECK_EQ(mine.slot, slot); /* the dead process's slot, reclaimed */
	uro_registry_release(&mine);
}

static void test_lookup_errors(void)
{
	struct uro_slot_record rec;

	CHECK_EQ(uro_registry_lookup(dir, 0, &rec), -1);
	CHECK_EQ(uro_registry_lookup(dir, URO_MAX_SLOTS, &rec), -1);
	CHECK_EQ(uro_registry_lookup("/nonexistent-uroce", 1, &rec), 0);
}

int main(void)
{
	char path[256];

	if (!mkdtemp(dir))
		return 1;
	test_exclusive();
	test_reclaim_after_kill();
	test_lookup_errors();
	snprintf(path, sizeof(path), "%s/uroce-registry", dir);
	unlink(path);
	rmdir(dir);
	return check_report();
}
