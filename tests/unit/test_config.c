/* Link configuration: parsing, its errors with line numbers, add/delete
 * rules and a save/load round trip. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../check.h"
#include "config.h"

static char err[512];

static int parse(const char *text, struct uro_config *cfg)
{
	err[0] = '\0';
	return uro_config_parse(text, "links.conf", cfg, err, sizeof(err));
}

static void test_valid(void)
{
	struct uro_config cfg;

	CHECK_EQ(parse("# comment\n\nlink a netdev lo\nlink b netdev lo type ib lid 7 # x\n"
		       "  link c netdev eth0 type rxe\n",
		       &cfg),
		 0);
	CHECK_EQ(cfg.n, 3);
	CHECK_STR(cfg.links[0].name, "a");
	CHECK_EQ(cfg.links[0].type, URO_LINK_ROCE);
	CHECK_EQ(cfg.links[1].type, URO_LINK_IB);
	CHECK_EQ(cfg.links[1].lid, 7);
	CHECK_STR(cfg.links[2].netdev, "eth0");
	CHECK_EQ(parse("", &cfg), 0);
	CHECK_EQ(cfg.n, 0); /* an empty file means no devices at all */
}

static void expect_error(const char *text, const char *what)
{
	struct uro_config cfg;

	CHECK_EQ(parse(text, &cfg), -1);
	if (!strstr(err, what))
		fprintf(stderr, "  got '%s', expected '%s'\n", err, what);
	CHECK(strstr(err, what) != NULL);
}

static void test_errors(void)
{
	expect_error(
	    "link a netdev lo\nlink b netdev lo colour red\n",
	    "links.conf:2: unknown keyword 'colour' (the keywords are netdev, type and lid");
	expect_error("link a\n", "links.conf:1: link 'a' has no 'netdev IFACE'");
	expect_error("\n\nlink a netdev lo type iwarp\n", "links.conf:3: type 'iwarp': must be");
	expect_error("link a netdev lo type ib\n", "links.conf:1: ib link 'a' needs 'lid N'");
	expect_error("link a netdev lo lid 3\n",
		     "links.conf:1: link 'a': only an ib link has a lid");
	expect_error("link a netdev lo type ib lid 0\n", "links.conf:1: lid '0': must be");
	expect_error("link a netdev lo type ib lid 0xc000\n",
		     "links.conf:1: lid '0xc000': must be");
	expect_error("link a netdev lo\nlink a netdev lo\n", "links.conf:2: link 'a' already");
	expect_error("link a netdev lo type ib lid 4\nlink b netdev lo type ib lid 4\n",
		     "links.conf:2: LID 4");
	expect_error("link bad/name netdev lo\n", "links.conf:1: invalid link name");
	expect_error("device a netdev lo\n", "links.conf:1: 'device': a line starts with 'link'");
	expect_error("link a netdev\n", "links.conf:1: keyword 'netdev' without a value");
}

static void test_add_delete(void)
{
	struct uro_config cfg;
	struct uro_link l = {.name = "ib1", .netdev = "lo", .type = URO_LINK_IB};

	uro_config_default(&cfg);
	CHECK_EQ(cfg.n, 1);
	CHECK_STR(cfg.links[0].name, "uroce0");
	CHECK_STR(cfg.links[0].netdev, "lo");
	CHECK_EQ(uro_config_add(&cfg, &l, err, sizeof(err)), 0);
	CHECK_EQ(uro_config_find(&cfg, "ib1")->lid, 1); /* assigned */
	strcpy(l.name, "ib2");
	CHECK_EQ(uro_config_add(&cfg, &l, err, sizeof(err)), 0);
	CHECK_EQ(uro_config_find(&cfg, "ib2")->lid, 2); /* unique */
	CHECK_EQ(uro_config_add(&cfg, &l, err, sizeof(err)), -1);
	CHECK(strstr(err, "already exists") != NULL);
	CHECK_EQ(uro_config_delete(&cfg, "ib1", err, sizeof(err)), 0);
	CHECK_EQ(uro_config_delete(&cfg, "ib1", err, sizeof(err)), -1);
	CHECK(strstr(err, "no link named 'ib1'") != NULL);
	CHECK_EQ(cfg.n, 2);
}

static void test_round_trip(void)
{
	char dir[] = "/tmp/uroce-config-XXXXXX";
	char path[256];
	struct uro_config cfg, back;
	struct uro_link l = {.name = "ib9", .netdev = "lo", .type = URO_LINK_IB, .lid = 9};

	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/sub/links.conf", dir);
	CHECK_EQ(uro_config_load(path, &back, err, sizeof(err)), 0); /* no file: default */
	CHECK_EQ(back.n, 1);
	uro_config_default(&cfg);
	CHECK_EQ(uro_config_add(&cfg, &l, err, sizeof(err)), 0);
	CHECK_EQ(uro_config_save(path, &cfg, err, sizeof(err)), 0);
	CHECK_EQ(uro_config_load(path, &back, err, sizeof(err)), 0);
	CHECK_EQ(back.n, 2);
	CHECK_EQ(back.links[1].lid, 9);
	CHECK_EQ(back.links[1].type, URO_LINK_IB);
	unlink(path);
	snprintf(path, sizeof(path), "%s/sub", dir);
	rmdir(path);
	rmdir(dir);
}

static void test_path(void)
{
	char buf[256];

	setenv("UROCE_CONFIG", "/x/y.conf", 1);
	CHECK_EQ(uro_config_path(buf, sizeof(buf)), 0);
	CHECK_STR(buf, "/x/y.conf");
	unsetenv("UROCE_CONFIG");
	setenv("XDG_CONFIG_HOME", "/cfg", 1);
	CHECK_EQ(uro_config_path(buf, sizeof(buf)), 0);
	CHECK_STR(buf, "/cfg/uroce/links.conf");
}

static void path_of(const char *env, char *buf, size_t len)
{
	setenv("UROCE_CONFIG", env, 1);
	CHECK_EQ(uro_config_path(buf, len), 0);
	unsetenv("UROCE_CONFIG");
}

/* Every name of one file is one configuration, the file there or not yet. */
static void test_canonical_path(void)
{
	char dir[] = "/tmp/uroce-canon-XXXXXX";
	char real[4096], want[4200], got[4200], p[4200], cwd[4096];

	CHECK(mkdtemp(dir) != NULL);
	CHECK(realpath(dir, real) != NULL);
	snprintf(want, sizeof(want), "%s/d/links.conf", real);
	snprintf(p, sizeof(p), "%s/d", dir);
	CHECK_EQ(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/alias", dir);
	CHECK_EQ(symlink("d", p), 0);
	snprintf(p, sizeof(p), "%s/dangling.conf", dir);
	CHECK_EQ(symlink("d/links.conf", p), 0);

	snprintf(p, sizeof(p), "%s/d/links.conf", dir); /* no file yet */
	path_of(p, got, sizeof(got));
	CHECK_STR(got, want);
	snprintf(p, sizeof(p), "%s/alias/../d/./links.conf", dir);
	path_of(p, got, sizeof(got));
	CHECK_STR(got, want);
	snprintf(p, sizeof(p), "%s/dangling.conf", dir); /* to the file to be */
	path_of(p, got, sizeof(got));
	CHECK_STR(got, want);
	CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
	CHECK_EQ(chdir(dir), 0);
	path_of("alias/links.conf", got, sizeof(got));
	CHECK_STR(got, want);
	CHECK_EQ(chdir(cwd), 0);
	/* A symlinked directory, then directories not made yet. */
	snprintf(p, sizeof(p), "%s/alias/x/../y/links.conf", dir);
	path_of(p, got, sizeof(got));
	snprintf(want, sizeof(want), "%s/d/y/links.conf", real);
	CHECK_STR(got, want);
	/* Nothing of it exists: as written, so that creating it changes nothing. */
	snprintf(p, sizeof(p), "%s/new/sub/links.conf", dir);
	path_of(p, got, sizeof(got));
	snprintf(want, sizeof(want), "%s/new/sub/links.conf", real);
	CHECK_STR(got, want);

	snprintf(p, sizeof(p), "%s/alias", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/dangling.conf", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/d", dir);
	rmdir(p);
	rmdir(dir);
}

/* A link is its file's and its definition's, not its name's alone. */
static void test_link_id(void)
{
	struct uro_link a = {.name = "roce1", .netdev = "lo", .type = URO_LINK_ROCE};
	struct uro_link b = a;
	uint64_t id = uro_link_id("/a/links.conf", &a);

	CHECK(id != 0);
	CHECK_EQ(uro_link_id("/a/links.conf", &b), id);
	CHECK(uro_link_id("/b/links.conf", &a) != id);
	strcpy(b.netdev, "eth0");
	CHECK(uro_link_id("/a/links.conf", &b) != id);
	b = a;
	strcpy(b.name, "roce2");
	CHECK(uro_link_id("/a/links.conf", &b) != id);
	b = a;
	b.type = URO_LINK_IB;
	b.lid = 1;
	CHECK(uro_link_id("/a/links.conf", &b) != id);
}

int main(void)
{
	test_valid();
	test_errors();
	test_add_delete();
	test_round_trip();
	test_path();
	test_canonical_path();
	test_link_id();
	return check_report();
}
