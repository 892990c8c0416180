/* The sysfs helpers libibverbs exports. uroce's devices have no sysfs
 * directory (their ibdev_path is empty), so reads about them find nothing,
 * while reads of real sysfs files work as documented. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "objects.h"

URO_EXPORT int ibv_get_sysfs_path(char *buf, size_t size)
{
	int n = snprintf(buf, size, "/sys");

	return n > 0 && (size_t)n < size ? 0 : -1;
}

/* Reads dir/file into buf, NUL-terminated and without a trailing newline;
 * returns the length, or -1. */
URO_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	char path[4096];
	ssize_t n;
	int fd;

	if (!dir[0] || size == 0 ||
	    snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path)) {
		errno = ENOENT;
		return -1;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, size);
	close(fd);
	if (n < 0)
		return -1;
	if ((size_t)n == size)
		n--;
	buf[n] = '\0';
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	return (int)n;
}
