#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <linux/limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Unicast LIDs are 0x0001-0xBFFF (IBTA 4.1.3); 0 is never assigned. */
#define LID_MAX 0xbfff

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/* Appends the components of tail ("/a/b") to the directory out, "." and
 * ".." taken as the kernel takes them in a directory that exists. */
static int append(char *out, size_t len, const char *tail)
{
	while (*tail == '/') {
		const char *name = tail + 1;
		size_t n = strcspn(name, "/"), at = strlen(out);

		tail = name + n;
		if (n == 0 || (n == 1 && name[0] == '.'))
			continue;
		if (n == 2 && !strncmp(name, "..", 2)) {
			char *up = strrchr(out, '/');

			up[up == out] = '\0'; /* the root's parent is the root */
			continue;
		}
		if (at > 0 && out[at - 1] == '/')
			at--; /* the root */
		if (snprintf(out + at, len - at, "/%.*s", (int)n, name) >= (int)(len - at))
			return -1;
	}
	return 0;
}

/* Where the dangling symlink at path (absolute) points, in place: 0, or
 * -1 when path is not a symlink. */
static int follow(char *path, size_t len)
{
	char target[PATH_MAX], dir[PATH_MAX];
	ssize_t n = readlink(path, target, sizeof(target) - 1);
	int w;

	if (n <= 0)
		return -1;
	target[n] = '\0';
	if (target[0] == '/') {
		w = snprintf(path, len, "%s", target);
	} else {
		snprintf(dir, sizeof(dir), "%s", path);
		*strrchr(dir, '/') = '\0';
		w = snprintf(path, len, "%s/%s", dir, target);
	}
	return w < (int)len ? 0 : -1;
}

/* path (absolute) with its symlinks, "." and ".." resolved as far as it
 * exists; the rest, the file or directories `uroce link` will create, is
 * appended, so that the name does not change when they appear. What cannot
 * be resolved (a directory that may not be searched, a loop) is kept as
 * written: loading it reports why. Iterative, with no recursion: a program
 * may list devices on a small thread stack. */
static int canonical(const char *path, char *out, size_t len)
{
	char cur[PATH_MAX], tail[PATH_MAX] = "", real[PATH_MAX];
	const char *base = cur;

	if (snprintf(cur, sizeof(cur), "%s", path) >= (int)sizeof(cur))
		return -1;
	for (int step = 0; step < 256; step++) {
		char *slash = strrchr(cur, '/');
		size_t name = strlen(slash), rest = strlen(tail);

		if (realpath(cur, real)) {
			base = real;
			break;
		}
		if (errno != ENOENT)
			break;
		if (follow(cur, sizeof(cur)) == 0)
			continue;
		if (name + rest >= sizeof(tail))
			return -1;
		/* The last component does not exist: it goes to the tail. */
		memmove(tail + name, tail, rest + 1);
		memcpy(tail, slash, name);
		slash[slash == cur] = '\0';
	}
	if (snprintf(out, len, "%s", base) >= (int)len)
		return -1;
	return append(out, len, tail);
}

/* The path is canonical: every name of one file (UROCE_CONFIG or the
 * default path, through symlinks, relative to any directory) is one
 * configuration, which is what a program records of the link it opened
 * (uro_link_id), and an edit through a symlink rewrites the file it names
 * instead of replacing the link. */
int uro_config_path(char *buf, size_t len)
{
	const char *env = getenv("UROCE_CONFIG");
	const char *xdg = getenv("XDG_CONFIG_HOME");
	const char *home = getenv("HOME");
	char given[PATH_MAX], cwd[PATH_MAX];
	int n;

	if (env && *env && env[0] != '/' && getcwd(cwd, sizeof(cwd)))
		n = snprintf(given, sizeof(given), "%s/%s", cwd, env);
	else if (env && *env)
		n = snprintf(given, sizeof(given), "%s", env);
	else if (xdg && *xdg)
		n = snprintf(given, sizeof(given), "%s/uroce/links.conf", xdg);
	else if (home && *home)
		n = snprintf(given, sizeof(given), "%s/.config/uroce/links.conf", home);
	else
		n = snprintf(given, sizeof(given), "/etc/uroce/links.conf");
	if (n <= 0 || (size_t)n >= sizeof(given))
		return -1;
	if (given[0] != '/') /* a relative XDG_CONFIG_HOME or HOME, or no cwd */
		return snprintf(buf, len, "%s", given) < (int)len ? 0 : -1;
	return canonical(given, buf, len);
}

/* FNV-1a: a digest, not a defence (a user's own processes are the only
 * ones told); a collision would tell a program of a change that was not
 * its link's. */
static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* The definition is part of it: a program that opened the link before it
 * was changed holds a device the file no longer describes, and one that
 * opened it after, while the command was still telling the others, holds
 * the new one and must not be told. */
uint64_t uro_link_id(const char *config_path, const struct uro_link *l)
{
	uint64_t h = 0xcbf29ce484222325ull;
	uint8_t type = (uint8_t)l->type;

	h = fnv1a(h, config_path, strlen(config_path) + 1);
	h = fnv1a(h, l->name, strnlen(l->name, sizeof(l->name)) + 1);
	h = fnv1a(h, l->netdev, strnlen(l->netdev, sizeof(l->netdev)) + 1);
	h = fnv1a(h, &type, 1);
	h = fnv1a(h, &l->lid, sizeof(l->lid));
	return h ? h : 1; /* 0 is a record that names no link */
}

void uro_config_default(struct uro_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->links[0].name, sizeof(cfg->links[0].name), "uroce0");
	snprintf(cfg->links[0].netdev, sizeof(cfg->links[0].netdev), "lo");
	cfg->links[0].type = URO_LINK_ROCE;
	cfg->n = 1;
}

const char *uro_link_type_name(enum uro_link_type type)
{
	return type == URO_LINK_IB ? "ib" : "roce";
}

int uro_link_type_parse(const char *s, enum uro_link_type *type)
{
	if (!strcmp(s, "roce") || !strcmp(s, "rxe")) {
		*type = URO_LINK_ROCE;
		return 0;
	}
	if (!strcmp(s, "ib")) {
		*type = URO_LINK_IB;
		return 0;
	}
	return -1;
}

/* Names end up in ibv_device.name and in file names: keep them plain. */
int uro_link_name_valid(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n >= URO_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && !strchr("_-.", name[i]))
			return 0;
	return 1;
}

const struct uro_link *uro_config_find(const struct uro_config *cfg, const char *name)
{
	for (int i = 0; i < cfg->n; i++)
		if (!strcmp(cfg->links[i].name, name))
			return &cfg->links[i];
	return NULL;
}

static int lid_taken(const struct uro_config *cfg, uint16_t lid)
{
	for (int i = 0; i < cfg->n; i++)
		if (cfg->links[i].type == URO_LINK_IB && cfg->links[i].lid == lid)
			return 1;
	return 0;
}

static uint16_t free_lid(const struct uro_config *cfg)
{
	for (unsigned lid = 1; lid <= LID_MAX; lid++)
		if (!lid_taken(cfg, (uint16_t)lid))
			return (uint16_t)lid;
	return 0;
}

static int check_link(const struct uro_config *cfg, const struct uro_link *l, char *err,
		      size_t errlen)
{
	if (!uro_link_name_valid(l->name))
		return fail(err, errlen, "invalid link name '%s' (letters, digits, '_-.')",
			    l->name);
	if (uro_config_find(cfg, l->name))
		return fail(err, errlen, "link '%s' already exists", l->name);
	if (cfg->n >= URO_MAX_LINKS)
		return fail(err, errlen, "too many links (at most %d)", URO_MAX_LINKS);
	if (!l->netdev[0])
		return fail(err, errlen, "link '%s' has no netdev", l->name);
	if (l->type == URO_LINK_IB && l->lid && (l->lid > LID_MAX || lid_taken(cfg, l->lid)))
		return fail(err, errlen, "LID %u of link '%s' is taken or not unicast", l->lid,
			    l->name);
	return 0;
}

int uro_config_add(struct uro_config *cfg, const struct uro_link *link, char *err, size_t errlen)
{
	struct uro_link l = *link;

	if (check_link(cfg, &l, err, errlen))
		return -1;
	if (l.type == URO_LINK_IB && !l.lid)
		l.lid = free_lid(cfg);
	if (l.type != URO_LINK_IB)
		l.lid = 0;
	cfg->links[cfg->n++] = l;
	return 0;
}

int uro_config_delete(struct uro_config *cfg, const char *name, char *err, size_t errlen)
{
	for (int i = 0; i < cfg->n; i++) {
		if (strcmp(cfg->links[i].name, name))
			continue;
		memmove(&cfg->links[i], &cfg->links[i + 1],
			(size_t)(cfg->n - i - 1) * sizeof(cfg->links[0]));
		cfg->n--;
		return 0;
	}
	return fail(err, errlen, "no link named '%s'", name);
}

#define LINK_SYNTAX "'link NAME netdev IFACE [type roce|ib] [lid N]'"

/* Parses "link NAME key value ..." into *l; 0, or -1 with why set to what
 * is wrong, naming the word that is. */
static int parse_link_words(char **w, int nw, struct uro_link *l, char *why, size_t len)
{
	memset(l, 0, sizeof(*l));
	if (strcmp(w[0], "link"))
		return fail(why, len, "'%s': a line starts with 'link': %s", w[0], LINK_SYNTAX);
	if (nw < 2)
		return fail(why, len, "'link' without a name: %s", LINK_SYNTAX);
	if (strlen(w[1]) >= sizeof(l->name))
		return fail(why, len, "link name '%s' too long (at most %d characters)", w[1],
			    URO_NAME_MAX - 1);
	strcpy(l->name, w[1]);
	for (int i = 2; i < nw; i += 2) {
		if (i + 1 >= nw)
			return fail(why, len, "keyword '%s' without a value: %s", w[i],
				    LINK_SYNTAX);
		if (!strcmp(w[i], "netdev")) {
			if (strlen(w[i + 1]) >= sizeof(l->netdev))
				return fail(why, len, "netdev name '%s' too long", w[i + 1]);
			strcpy(l->netdev, w[i + 1]);
		} else if (!strcmp(w[i], "type")) {
			if (uro_link_type_parse(w[i + 1], &l->type))
				return fail(why, len, "type '%s': must be roce (or rxe) or ib",
					    w[i + 1]);
		} else if (!strcmp(w[i], "lid")) {
			char *end;
			unsigned long v = strtoul(w[i + 1], &end, 0);

			if (*end || v == 0 || v > LID_MAX)
				return fail(why, len, "lid '%s': must be a unicast LID (1-0xbfff)",
					    w[i + 1]);
			l->lid = (uint16_t)v;
		} else {
			return fail(
			    why, len,
			    "unknown keyword '%s' (the keywords are netdev, type and lid: %s)",
			    w[i], LINK_SYNTAX);
		}
	}
	if (!l->netdev[0])
		return fail(why, len, "link '%s' has no 'netdev IFACE'", l->name);
	if (l->type == URO_LINK_IB && !l->lid)
		return fail(why, len, "ib link '%s' needs 'lid N'", l->name);
	if (l->type != URO_LINK_IB && l->lid)
		return fail(why, len, "link '%s': only an ib link has a lid", l->name);
	return 0;
}

static int split_words(char *line, char **w, int max)
{
	int n = 0;

	for (char *tok = strtok(line, " \t\r"); tok; tok = strtok(NULL, " \t\r")) {
		if (n == max)
			return -1;
		w[n++] = tok;
	}
	return n;
}

int uro_config_parse(const char *text, const char *file, struct uro_config *cfg, char *err,
		     size_t errlen)
{
	char *copy = strdup(text);
	char *save = NULL;
	int lineno = 0;
	int rc = 0;

	if (!copy)
		return fail(err, errlen, "%s: out of memory", file);
	memset(cfg, 0, sizeof(*cfg));
	for (char *p = copy; p && !rc; lineno++) {
		char *line = p;
		char *w[16];
		struct uro_link l;
		char why[384];
		int nw;

		save = strchr(p, '\n');
		if (save)
			*save++ = '\0';
		p = save;
		if (strchr(line, '#'))
			*strchr(line, '#') = '\0';
		nw = split_words(line, w, 16);
		if (nw == 0)
			continue;
		if (nw < 0)
			snprintf(why, sizeof(why), "too many words: %s", LINK_SYNTAX);
		if (nw > 0 && parse_link_words(w, nw, &l, why, sizeof(why)) == 0 &&
		    check_link(cfg, &l, why, sizeof(why)) == 0) {
			cfg->links[cfg->n++] = l;
			continue;
		}
		rc = fail(err, errlen, "%s:%d: %s", file, lineno + 1, why);
	}
	free(copy);
	return rc;
}

int uro_config_load(const char *path, struct uro_config *cfg, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *text = NULL;
	size_t len = 0;
	int rc;

	if (!f) {
		if (errno != ENOENT)
			return fail(err, errlen, "%s: %s", path, strerror(errno));
		uro_config_default(cfg);
		return 0;
	}
	FILE *mem = open_memstream(&text, &len);
	char buf[4096];
	size_t n;

	while (mem && (n = fread(buf, 1, sizeof(buf), f)) > 0)
		fwrite(buf, 1, n, mem);
	fclose(f);
	if (!mem)
		return fail(err, errlen, "%s: out of memory", path);
	fclose(mem);
	rc = uro_config_parse(text, path, cfg, err, errlen);
	free(text);
	return rc;
}

void uro_config_no_links_note(const char *path, char *buf, size_t len)
{
	snprintf(buf, len,
		 "%s defines no link, so there are no devices: delete the file to get the "
		 "default uroce0 on lo back, or add one with 'uroce link add NAME netdev IFACE'",
		 path);
}

static int make_parent_dirs(const char *path)
{
	char dir[4096];

	snprintf(dir, sizeof(dir), "%s", path);
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0755) && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return 0;
}

int uro_config_save(const char *path, const struct uro_config *cfg, char *err, size_t errlen)
{
	char tmp[4200];
	FILE *f;

	if (make_parent_dirs(path))
		return fail(err, errlen, "%s: %s", path, strerror(errno));
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	f = fopen(tmp, "w");
	if (!f)
		return fail(err, errlen, "%s: %s", tmp, strerror(errno));
	fprintf(f, "# uroce links: written by 'uroce link'; one line a link\n");
	for (int i = 0; i < cfg->n; i++) {
		const struct uro_link *l = &cfg->links[i];

		fprintf(f, "link %s netdev %s type %s", l->name, l->netdev,
			uro_link_type_name(l->type));
		if (l->type == URO_LINK_IB)
			fprintf(f, " lid %u", l->lid);
		fputc('\n', f);
	}
	/* Write to a temporary file and rename: a reader never sees half a file. */
	if (fclose(f) || rename(tmp, path)) {
		unlink(tmp);
		return fail(err, errlen, "%s: %s", path, strerror(errno));
	}
	return 0;
}
