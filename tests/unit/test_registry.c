/* The host registry: slots are exclusive while their owner lives and free
 * again the moment it dies, even by SIGKILL; no other user can corrupt,
 * revoke or deny them. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../check.h"
#include "registry.h"

static char dir[] = "/tmp/uroce-registry-XXXXXX";

/* A child that runs hold(arg, &out), reports out and stays until killed,
 * so that what it holds is a live process's: its pid, or -1. */
static pid_t child_holding(int (*hold)(const void *arg, unsigned *out), const void *arg,
			   unsigned *out)
{
	int fds[2];
	pid_t pid;

	if (pipe(fds))
		return -1;
	pid = fork();
	if (pid == 0) {
		unsigned v = 0;

		if (hold(arg, &v) || write(fds[1], &v, sizeof(v)) != sizeof(v))
			_exit(1);
		pause(); /* killed by the parent */
		_exit(0);
	}
	close(fds[1]);
	if (read(fds[0], out, sizeof(*out)) != sizeof(*out)) {
		waitpid(pid, NULL, 0);
		pid = -1;
	}
	close(fds[0]);
	return pid;
}

static int claim_and_publish(const void *arg, unsigned *slot)
{
	struct uro_slot s;
	struct uro_slot_record rec = {.magic = URO_REGISTRY_MAGIC, .pid = getpid()};

	(void)arg;
	if (uro_registry_claim(dir, &s) || uro_registry_publish(&s, &rec))
		return -1;
	*slot = s.slot;
	return 0;
}

static pid_t child_holding_slot(unsigned *slot)
{
	return child_holding(claim_and_publish, NULL, slot);
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
	/* The dead process's slot is claimed again, in its turn
	 * (uro_registry_claim tries the first slots in turn). */
	struct uro_slot held[64];
	unsigned n = 0;

	while (n < 64 && !uro_registry_claim(dir, &held[n]) && held[n++].slot != slot)
		;
	CHECK(n > 0 && held[n - 1].slot == slot);
	while (n)
		uro_registry_release(&held[--n]);
}

static void test_lookup_errors(void)
{
	struct uro_slot_record rec;

	CHECK_EQ(uro_registry_lookup(dir, 0, &rec), -1);
	CHECK_EQ(uro_registry_lookup(dir, URO_MAX_SLOTS, &rec), -1);
	CHECK_EQ(uro_registry_lookup("/nonexistent-uroce", 1, &rec), 0);
}

static void registry_path(char *path, size_t len, unsigned uid)
{
	snprintf(path, len, "%s/uroce-registry-%u", dir, uid);
}

/* What another user put at the registry's path is not followed, chmodded or
 * written: a symlink or a second hard link to one of our private files, a
 * file open to others, or another user's file is refused with EPERM, and
 * the file is left as it was. */
static void expect_refused_and_untouched(const char *victim, mode_t mode)
{
	struct uro_slot s;
	struct uro_slot_record rec;
	struct stat st;

	errno = 0;
	CHECK_EQ(uro_registry_claim(dir, &s), -1);
	CHECK_EQ(errno, EPERM);
	CHECK_EQ(uro_registry_lookup(dir, 1, &rec), -1);
	CHECK_EQ(stat(victim, &st), 0);
	CHECK_EQ(st.st_mode & 07777, mode);
	CHECK_EQ(st.st_size, 6);
}

static void make_secret(const char *file, mode_t mode)
{
	int fd = open(file, O_RDWR | O_CREAT | O_EXCL, mode);

	CHECK_EQ(write(fd, "secret", 6), 6);
	CHECK_EQ(fchmod(fd, mode), 0);
	close(fd);
}

static void test_planted_registry(void)
{
	char victim[300], path[300];

	snprintf(victim, sizeof(victim), "%s/private", dir);
	registry_path(path, sizeof(path), geteuid());
	make_secret(victim, 0600);
	unlink(path);
	CHECK_EQ(symlink(victim, path), 0);
	expect_refused_and_untouched(victim, 0600);
	unlink(path);
	CHECK_EQ(link(victim, path), 0);
	expect_refused_and_untouched(victim, 0600);
	unlink(path);
	unlink(victim);
	make_secret(path, 0644); /* ours, but others could read it */
	expect_refused_and_untouched(path, 0644);
	unlink(path);
	CHECK_EQ(mkfifo(path, 0666), 0);
	CHECK_EQ(uro_registry_claim(dir, &(struct uro_slot){0}), -1); /* no hang on a FIFO */
	unlink(path);
}

struct slot_range {
	unsigned first, count;
};

/* Binds the names of the slots in *arg (struct slot_range), with no
 * record: a process of another user holding them looks so from here. */
static int bind_names(const void *arg, unsigned *out)
{
	const struct slot_range *r = arg;
	struct rlimit rl;

	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	for (unsigned slot = r->first; slot < r->first + r->count; slot++) {
		struct sockaddr_un a;
		socklen_t len = uro_registry_slot_name(dir, slot, &a);
		int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);

		if (!len || fd < 0 || bind(fd, (struct sockaddr *)&a, len))
			return -1;
	}
	*out = r->count;
	return 0;
}

static pid_t child_binding_names(unsigned first, unsigned count)
{
	struct slot_range r = {first, count};
	unsigned bound;

	return child_holding(bind_names, &r, &bound);
}

static void end_child(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* A slot another user holds is skipped, and known to be held (a connection
 * to it is refused with EACCES, peer.c); it is free again the moment its
 * holder dies. */
static void test_held_by_another(void)
{
	struct uro_slot_record rec;
	struct uro_slot s;
	pid_t pid = child_binding_names(1, 1);

	CHECK(pid > 0);
	CHECK_EQ(uro_registry_held(dir, 1), 1);
	CHECK_EQ(uro_registry_lookup(dir, 1, &rec), 0);
	CHECK_EQ(uro_registry_claim(dir, &s), 0);
	CHECK(s.slot != 1);
	CHECK_EQ(uro_registry_held(dir, s.slot), 1);
	uro_registry_release(&s);
	end_child(pid);
	CHECK_EQ(uro_registry_held(dir, 1), 0);
	CHECK_EQ(uro_registry_claim(dir, &s), 0);
	uro_registry_release(&s);
}

/* A slot let go is not taken again by the next claim: a context opened
 * after another closed does not get its QP numbers (index_pool.h); the
 * first slots come in turn. */
static void test_slot_comes_back_later(void)
{
	struct uro_slot a, b;

	CHECK_EQ(uro_registry_claim(dir, &a), 0);
	uro_registry_release(&a);
	CHECK_EQ(uro_registry_claim(dir, &b), 0);
	CHECK(b.slot != a.slot);
	CHECK(b.slot < 64);
	uro_registry_release(&b);
}

/* Every slot held (one user squatting them all) is a clear ENOSPC at once,
 * not a hang. */
static void test_all_held(void)
{
	struct rlimit rl;
	struct uro_slot s;
	pid_t pid;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_max < URO_MAX_SLOTS + 64) {
		printf("all slots held: skipped, RLIMIT_NOFILE's hard limit is below %u\n",
		       URO_MAX_SLOTS + 64);
		return;
	}
	pid = child_binding_names(1, URO_MAX_SLOTS - 1);
	CHECK(pid > 0);
	errno = 0;
	CHECK_EQ(uro_registry_claim(dir, &s), -1);
	CHECK_EQ(errno, ENOSPC);
	end_child(pid);
	CHECK_EQ(uro_registry_claim(dir, &s), 0);
	uro_registry_release(&s);
}

/* Runs fn as user nobody in a child: its exit status. */
static int as_nobody(int (*fn)(void))
{
	int status = -1;
	pid_t pid = fork();

	if (pid == 0)
		_exit(setgid(65534) || setuid(65534) ? 100 : fn());
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static unsigned our_slot;

/* What another user could try against our registry: truncate or zero it,
 * chmod it, remove it; each must fail. Exit 0 when all did. */
static int try_revoking(void)
{
	char path[300];
	int fd;

	registry_path(path, sizeof(path), 0);
	fd = open(path, O_WRONLY | O_TRUNC);
	if (fd >= 0 || errno != EACCES)
		return 1;
	if (truncate(path, 0) == 0 || chmod(path, 0666) == 0 || unlink(path) == 0)
		return 2;
	return uro_registry_held(dir, our_slot) == 1 ? 0 : 3;
}

/* The squatter: it makes the file our next open would use. */
static int plant_file(void)
{
	char path[300];
	int fd;

	registry_path(path, sizeof(path), 0);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0666);
	return fd >= 0 && write(fd, "secret", 6) == 6 && fchmod(fd, 0666) == 0 ? 0 : 1;
}

/* The same as a second user would do it (root runs the test, nobody
 * attacks): our slot and record stay ours, and the slot nobody takes is
 * refused to us. A file it plants at our registry's path denies us the
 * device with EPERM, not a hang, and is left as it was. */
static void test_other_user(void)
{
	struct uro_slot_record rec = {.magic = URO_REGISTRY_MAGIC};
	char path[300];
	struct uro_slot s;

	if (getuid() != 0) {
		printf("other user: skipped, needs root to create one\n");
		return;
	}
	CHECK_EQ(chmod(dir, 01777), 0); /* as /dev/shm */
	CHECK_EQ(uro_registry_claim(dir, &s), 0);
	rec.pid = getpid();
	CHECK_EQ(uro_registry_publish(&s, &rec), 0);
	our_slot = s.slot;
	CHECK_EQ(as_nobody(try_revoking), 0);
	CHECK_EQ(uro_registry_lookup(dir, s.slot, &rec), 1);
	CHECK_EQ(rec.pid, getpid());
	uro_registry_release(&s);

	registry_path(path, sizeof(path), 0);
	CHECK_EQ(unlink(path), 0);
	CHECK_EQ(as_nobody(plant_file), 0);
	expect_refused_and_untouched(path, 0666);
	CHECK_EQ(unlink(path), 0);
	CHECK_EQ(chmod(dir, 0700), 0);
}

int main(void)
{
	char path[300];

	if (!mkdtemp(dir))
		return 1;
	test_exclusive();
	test_reclaim_after_kill();
	test_lookup_errors();
	test_planted_registry();
	test_held_by_another();
	test_slot_comes_back_later();
	test_all_held();
	test_other_user();
	registry_path(path, sizeof(path), geteuid());
	unlink(path);
	rmdir(dir);
	return check_report();
}
