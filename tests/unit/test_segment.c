/* The per-process segment: layout, arena allocation and reuse; and what a
 * peer believes of another process's segment (docs/design.md, A process is
 * a function of the device). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../check.h"
#include "peer.h"
#include "registry.h"
#include "segment.h"

static void test_layout(struct uro_segment *s)
{
	CHECK_EQ(uro_seg_header(s)->magic, URO_SEG_MAGIC);
	CHECK_EQ(uro_seg_header(s)->slot, 7);
	CHECK_EQ(uro_seg_header(s)->pid, getpid());
	struct uro_peer view;

	/* The tables as the owner (and any peer) sees them. */
	uro_peer_self(&view, s, 7);
	CHECK(view.hdr == uro_seg_header(s));
	CHECK((uint8_t *)view.qp < (uint8_t *)view.cq);
	CHECK((uint8_t *)view.mr + URO_MAX_MR * sizeof(struct uro_seg_mr) <=
	      s->base + uro_seg_header(s)->arena_off);
	CHECK_EQ(uro_seg_header(s)->arena_off + URO_ARENA_SIZE, s->size);
}

static void test_arena(struct uro_segment *s)
{
	uint64_t a = uro_arena_alloc(s, 100);
	uint64_t b = uro_arena_alloc(s, 4096);
	uint64_t c;

	CHECK(a >= uro_seg_header(s)->arena_off);
	CHECK_EQ(a % 64, 0);
	CHECK_EQ(b, a + 128); /* 100 rounded up to 64-byte lines */
	memset(uro_seg_ptr(s, b), 0xab, 4096);
	uro_arena_free(s, a, 100);
	c = uro_arena_alloc(s, 64);
	CHECK_EQ(c, a); /* first fit reuses the freed range */
	uro_arena_free(s, c, 64);
	uro_arena_free(s, b, 4096);
	/* Everything merged back: one allocation can take the whole arena. */
	c = uro_arena_alloc(s, URO_ARENA_SIZE);
	CHECK_EQ(c, uro_seg_header(s)->arena_off);
	CHECK_EQ(uro_arena_alloc(s, 64), 0);
	uro_arena_free(s, c, URO_ARENA_SIZE);
}

/* A QP's index given back comes again last (a stale packet must not find
 * a new QP under the old number); a key's index first (the key's
 * generation tells them apart). index_pool.h. */
static void test_ids(struct uro_segment *s)
{
	CHECK_EQ(uro_index_take(&s->qp_ids), 0);
	CHECK_EQ(uro_index_take(&s->qp_ids), 1);
	uro_index_give(&s->qp_ids, 0);
	CHECK_EQ(uro_index_take(&s->qp_ids), 2);
	for (unsigned i = 3; i < URO_MAX_QP; i++)
		CHECK_EQ(uro_index_take(&s->qp_ids), i);
	CHECK_EQ(uro_index_take(&s->qp_ids), 0);
	CHECK_EQ(uro_index_take(&s->qp_ids), -1);
	uro_index_give(&s->qp_ids, 5);
	uro_index_give(&s->qp_ids, 3);
	CHECK_EQ(uro_index_take(&s->qp_ids), 5);
	CHECK_EQ(uro_index_take(&s->qp_ids), 3);

	CHECK_EQ(uro_index_take(&s->mr_ids), 0);
	CHECK_EQ(uro_index_take(&s->mr_ids), 1);
	uro_index_give(&s->mr_ids, 0);
	CHECK_EQ(uro_index_take(&s->mr_ids), 0);
	CHECK_EQ(uro_index_take(&s->mr_ids), 2);
}

static char dir[] = "/tmp/uroce-seg-test-XXXXXX";

/* Publishes rec for a slot this process claims in the test's registry. */
static int publish(struct uro_slot *slot, struct uro_slot_record *rec)
{
	rec->magic = URO_REGISTRY_MAGIC;
	rec->netns = uro_registry_netns();
	return uro_registry_claim(dir, slot) || uro_registry_publish(slot, rec) ? -1 : 0;
}

/* A record pointing at a file the victim has open, with a header that looks
 * right and table offsets far outside it, is not a segment: the peer
 * refuses it rather than follow the offsets. */
static void test_forged_header(void)
{
	char path[] = "/tmp/uroce-forged-XXXXXX";
	int fd = mkstemp(path);
	struct uro_seg_header h;
	struct uro_slot slot;
	struct uro_slot_record rec = {.pid = getpid()};
	struct uro_peer peer;
	int rc;

	unlink(path);
	CHECK_EQ(publish(&slot, &rec), 0);
	memset(&h, 0, sizeof(h));
	h.magic = URO_SEG_MAGIC;
	h.version = URO_SEG_VERSION;
	h.slot = slot.slot;
	h.pid = getpid();
	h.size = uro_seg_size();
	h.qp_off = h.cq_off = h.srq_off = h.mr_off = 1ull << 46;
	CHECK_EQ(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	CHECK_EQ(ftruncate(fd, (off_t)uro_seg_size()), 0);
	rec.seg_fd = fd;
	rec.seg_size = uro_seg_size();
	CHECK_EQ(uro_registry_publish(&slot, &rec), 0);
	rc = uro_peer_attach(&peer, dir, slot.slot);
	CHECK_EQ(rc, -ESRCH);
	if (!rc) {
		CHECK(peer.qp == (void *)(peer.base + 4096)); /* never past the mapping */
		uro_peer_detach(&peer);
	}
	close(fd);
	uro_registry_release(&slot);
}

/* A genuine segment of this process, published in a slot of dir. */
static void publish_segment(struct uro_slot *slot, struct uro_segment *seg)
{
	struct uro_slot_record rec = {.pid = getpid()};

	CHECK_EQ(publish(slot, &rec), 0);
	CHECK_EQ(uro_segment_create(seg, slot->slot), 0);
	rec.seg_fd = seg->fd;
	rec.seg_size = seg->size;
	CHECK_EQ(uro_registry_publish(slot, &rec), 0);
}

/* The permissions of the mapping at base, from /proc/self/maps ("r--s"). */
static void mapping_perms(const void *base, char perms[5])
{
	char line[512], want[32];
	FILE *f = fopen("/proc/self/maps", "r");

	snprintf(want, sizeof(want), "%lx-", (unsigned long)(uintptr_t)base);
	strcpy(perms, "none");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, want, strlen(want)))
			sscanf(strchr(line, ' ') + 1, "%4s", perms);
	if (f)
		fclose(f);
}

/* A reader (`uroce stat`) maps a peer's segment read-only; a data-path
 * peer maps it read-write. */
static void test_observe(void)
{
	struct uro_segment seg;
	struct uro_slot slot;
	struct uro_peer peer;
	char perms[5];

	publish_segment(&slot, &seg);
	CHECK_EQ(uro_peer_observe(&peer, dir, slot.slot), 0);
	mapping_perms(peer.base, perms);
	CHECK_STR(perms, "r--s");
	CHECK_EQ(peer.hdr->slot, slot.slot);
	uro_peer_detach(&peer);
	CHECK_EQ(uro_peer_attach(&peer, dir, slot.slot), 0);
	mapping_perms(peer.base, perms);
	CHECK_STR(perms, "rw-s");
	uro_peer_detach(&peer);
	uro_segment_destroy(&seg);
	uro_registry_release(&slot);
}

/* A genuine segment is believed; an index or a ring offset read from it
 * that points outside is refused before use. */
static void test_checked_indices(void)
{
	struct uro_segment seg;
	struct uro_slot slot;
	struct uro_peer peer;

	publish_segment(&slot, &seg);
	CHECK_EQ(uro_peer_attach(&peer, dir, slot.slot), 0);
	CHECK(uro_peer_cq(&peer, URO_MAX_CQ) == NULL);
	CHECK(uro_peer_srq(&peer, 0) == NULL);
	CHECK(uro_peer_srq(&peer, URO_MAX_SRQ + 1) == NULL);
	CHECK(uro_peer_mr(&peer, 0xffffffffu) == NULL);
	CHECK(uro_peer_range(&peer, 0, 64) == NULL); /* the header is no ring */
	CHECK(uro_peer_range(&peer, peer.size - 64, 128) == NULL);
	CHECK(uro_peer_range(&peer, UINT64_MAX - 8, 64) == NULL);
	CHECK(uro_peer_range(&peer, peer.arena_off, 4096) != NULL);
	uro_peer_detach(&peer);
	uro_segment_destroy(&seg);
	uro_registry_release(&slot);
}

/* Whose a process is, the kernel says (the owner of /proc/<pid>), not the
 * record: a record naming a process of another user (made by the test when
 * it runs as root) is refused with EACCES even in our own registry. */
static void test_forged_uid(void)
{
	int fds[2];
	struct uro_slot slot;
	struct uro_slot_record rec = {0};
	struct uro_peer peer;
	pid_t pid;

	if (getuid() != 0) {
		printf("forged uid: skipped, needs root to create another user\n");
		return;
	}
	CHECK_EQ(pipe(fds), 0);
	pid = fork();
	if (pid == 0) {
		struct uro_segment seg;

		if (setgid(65534) || setuid(65534) || uro_segment_create(&seg, 1) ||
		    write(fds[1], &seg.fd, sizeof(seg.fd)) != sizeof(seg.fd))
			_exit(1);
		pause();
		_exit(0);
	}
	CHECK_EQ(read(fds[0], &rec.seg_fd, sizeof(rec.seg_fd)), (ssize_t)sizeof(rec.seg_fd));
	rec.pid = pid;
	rec.seg_size = uro_seg_size();
	CHECK_EQ(publish(&slot, &rec), 0);
	CHECK_EQ(uro_peer_attach(&peer, dir, slot.slot), -EACCES);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	uro_registry_release(&slot);
	close(fds[0]);
	close(fds[1]);
}

int main(void)
{
	struct uro_segment s;

	CHECK_EQ(uro_segment_create(&s, 7), 0);
	test_layout(&s);
	test_arena(&s);
	test_ids(&s);
	uro_segment_destroy(&s);
	if (!mkdtemp(dir))
		return 1;
	test_forged_header();
	test_checked_indices();
	test_observe();
	test_forged_uid();
	{
		char path[64];

		snprintf(path, sizeof(path), "%s/uroce-registry-%u", dir, (unsigned)geteuid());
		unlink(path);
		rmdir(dir);
	}
	return check_report();
}
