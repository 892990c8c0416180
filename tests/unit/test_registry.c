/* The host registry: slots are exclusive while their owner lives and free
 * again the moment it dies, even by SIGKILL. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
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

/* Issue 9 item 1: what another user put at the registry's path is not
 * followed, chmodded or written: a symlink or a second hard link to one of
 * our private files, or a file of the wrong mode, is refused with EPERM,
 * and the file is left as it was. */
static void expect_refused_and_untouched(const char *victim)
{
	struct uro_slot s;
	struct uro_slot_record rec;
	struct stat st;

	errno = 0;
	CHECK_EQ(uro_registry_claim(dir, &s), -1);
	CHECK_EQ(errno, EPERM);
	CHECK_EQ(uro_registry_lookup(dir, 1, &rec), -1);
	CHECK_EQ(stat(victim, &st), 0);
	CHECK_EQ(st.st_mode & 07777, 0600);
	CHECK_EQ(st.st_size, 6);
}

static void test_planted_registry(void)
{
	char victim[300], path[300];
	int fd;

	snprintf(victim, sizeof(victim), "%s/private", dir);
	snprintf(path, sizeof(path), "%s/uroce-registry", dir);
	fd = open(victim, O_RDWR | O_CREAT | O_EXCL, 0600);
	CHECK_EQ(write(fd, "secret", 6), 6);
	close(fd);
	unlink(path);
	CHECK_EQ(symlink(victim, path), 0);
	expect_refused_and_untouched(victim);
	unlink(path);
	CHECK_EQ(link(victim, path), 0);
	expect_refused_and_untouched(victim);
	unlink(path);
	unlink(victim);
	CHECK_EQ(mkfifo(path, 0666), 0);
	CHECK_EQ(uro_registry_claim(dir, &(struct uro_slot){0}), -1); /* no hang on a FIFO */
	unlink(path);
}

int main(void)
{
	char path[256];

	if (!mkdtemp(dir))
		return 1;
	test_exclusive();
	test_reclaim_after_kill();
	test_lookup_errors();
	test_planted_registry();
	snprintf(path, sizeof(path), "%s/uroce-registry", dir);
	unlink(path);
	rmdir(dir);
	return check_report();
}
