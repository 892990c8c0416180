#include "address_space.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Where a line's mapping starts and ends, and its access: all the walk
 * needs of the lines before the range. */
static int parse_line(const char *line, struct uro_mapping *m)
{
	char *p;

	m->start = (uintptr_t)strtoull(line, &p, 16);
	if (*p != '-')
		return -1;
	m->end = (uintptr_t)strtoull(p + 1, &p, 16);
	if (*p != ' ' || !p[1] || !p[2] || !p[3] || !p[4])
		return -1;
	m->readable = p[1] == 'r';
	m->writable = p[2] == 'w';
	m->shared = p[4] == 's';
	return 0;
}

/* The rest of the line of the mapping that holds the range's start. */
static void describe(const char *line, struct uro_mapping *m)
{
	int at = 0;

	m->path[0] = 0;
	if (sscanf(line, "%*x-%*x %*4s %" SCNx64 " %x:%x %" SCNu64 " %n", &m->offset, &m->major,
		   &m->minor, &m->ino, &at) < 4)
		m->shared = 0; /* unreadable: treated as private */
	else
		snprintf(m->path, sizeof(m->path), "%s", line + at);
}

/* Walks the maps in address order, which the kernel guarantees, until the
 * range is covered or a gap or a missing permission shows. The walk stops
 * at the range's end, so its cost is the mappings below it, never the
 * range's length. */
int uro_range_accessible(const void *addr, size_t len, int writable, struct uro_mapping *first)
{
	uintptr_t next = (uintptr_t)addr, end = next + len;
	char buf[8192]; /* a line holds a path of up to PATH_MAX */
	size_t have = 0;
	int fd, result = EFAULT;

	if (first)
		first->start = 0;
	if (!len)
		return 0;
	if (end < next)
		return EFAULT;
	fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return EFAULT;
	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);
		char *line = buf, *nl;

		if (n <= 0)
			break;
		have += (size_t)n;
		buf[have] = 0;
		while ((nl = strchr(line, '\n'))) {
			struct uro_mapping m;

			*nl = 0;
			if (parse_line(line, &m) || m.start > next)
				goto out; /* a gap before the rest of the range */
			if (m.end <= next) {
				line = nl + 1;
				continue;
			}
			if (first && next == (uintptr_t)addr) {
				*first = m;
				describe(line, first);
			}
			line = nl + 1;
			if (!m.readable || (writable && !m.writable))
				goto out;
			next = m.end;
			if (next >= end) {
				result = 0;
				goto out;
			}
		}
		have = (size_t)(buf + have - line);
		memmove(buf, line, have);
	}
out:
	close(fd);
	return result;
}
