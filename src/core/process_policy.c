#include "process_policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long uro_proc_number(const char *path)
{
	FILE *f = fopen(path, "re");
	long v = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

int uro_yama_scope(void)
{
	return (int)uro_proc_number("/proc/sys/kernel/yama/ptrace_scope");
}

int uro_seccomp_mode(int *filters)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	int mode = -1;

	if (filters)
		*filters = 0;
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Seccomp:", 8))
			mode = atoi(line + 8);
		else if (filters && !strncmp(line, "Seccomp_filters:", 16))
			*filters = atoi(line + 16);
	}
	fclose(f);
	return mode;
}
