/* The sysfs helpers libibverbs exports. uroce's devices' directories
 * (ibdev_path) exist in the view uroce run gives a program (tools/
 * sysfs_view.h); elsewhere reads about them find nothing, while reads of
 * real sysfs files work as documented. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver_abi.h"
#include "verbs_ops.h"

static char sysfs_path[4096];
static pthread_once_t sysfs_once = PTHREAD_ONCE_INIT;

/* Read once, as rdma-core does: later changes to the environment do not
 * move it. */
static void find_sysfs(void)
{
	const char *env = getenv("SYSFS_PATH");
	size_t n;

	if (!env || !env[0] || strlen(env) >= sizeof(sysfs_path))
		env = "/sys";
	n = strlen(env);
	memcpy(sysfs_path, env, n + 1);
	while (n > 1 && sysfs_path[n - 1] == '/')
		sysfs_path[--n] = '\0';
}

URO_EXPORT const char *ibv_get_sysfs_path(void)
{
	pthread_once(&sysfs_once, find_sysfs);
	return sysfs_path;
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
