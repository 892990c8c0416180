#include "address_space.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One line of /proc/self/maps: "start-end perms offset dev inode path". */
struct mapping {
	uintptr_t start, end;
	int readable, writable;
};

static int parse_line(const char *line, struct mapping *m)
{
	char *p;

	m->start = (uintptr_t)strtoull(line, &p, 16);
	if (*p != '-')
		return -1;
	m->end = (uintptr_t)strtoull(p + 1, &p, 16);
	if (*p != ' ' || !p[1] || !p[2])
		return -1;
	m->readable = p[1] == 'r';
	m->writable = p[2] == 'w';
	return 0;
}

/* Walks the maps in address order, which the kernel guarantees, until the
 * range is covered or a gap or a missing permission shows. The walk stops
 * at the range's end, so its cost is the mappings below it, never the
 * range's length. */
int uro_range_accessible(const void *addr, size_t len, int writable)
{
	uintptr_t next = (uintptr_t)addr, end = next + len;
	char buf[8192]; /* a line holds a path of up to PATH_MAX */
	size_t have = 0;
	int fd, result = EFAULT;

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
			struct mapping m;

			*nl = 0;
			if (parse_line(line, &m) || m.start > next)
				goto out; /* a gap before the rest of the range */
			line = nl + 1;
			if (m.end <= next)
				continue;
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
