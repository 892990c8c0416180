/* What `uroce stat` says, read by a test from the uroce command (its path
 * in UROCE) as a script would read it. */
#ifndef URO_STAT_READ_H
#define URO_STAT_READ_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"

/* The value after `name ` in a line of `uroce stat` output, or -1. */
static inline long long field(const char *line, const char *name)
{
	char key[64];
	const char *at;

	snprintf(key, sizeof(key), " %s ", name);
	at = strstr(line, key);
	return at ? atoll(at + strlen(key)) : -1;
}

/* Runs `uroce stat ARGS --pid <this process>` and keeps the line that
 * contains `match`; with none, line is empty and every field reads -1. */
static inline void stat_line(const char *args, const char *match, char *line, size_t len)
{
	char cmd[512];
	FILE *f;
	int found = 0;

	snprintf(cmd, sizeof(cmd), "timeout 20 %s stat %s --pid %d", getenv("UROCE"), args,
		 (int)getpid());
	f = popen(cmd, "r");
	CHECK(f != NULL);
	while (f && !found && fgets(line, (int)len, f))
		found = strstr(line, match) != NULL;
	while (f && fgets(cmd, sizeof(cmd), f))
		;
	CHECK_EQ(f ? pclose(f) : -1, 0);
	CHECK(found);
	if (!found)
		line[0] = 0;
}

#endif
