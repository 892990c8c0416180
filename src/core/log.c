#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most verbose level printed; -1 prints nothing. */
static int threshold(void)
{
	const char *v = getenv("UROCE_LOG");

	if (v && !strcmp(v, "quiet"))
		return -1;
	if (v && !strcmp(v, "debug"))
		return URO_LOG_DEBUG;
	return URO_LOG_WARN;
}

void uro_log(enum uro_log_level level, const char *fmt, ...)
{
	va_list ap;

	if ((int)level > threshold())
		return;
	va_start(ap, fmt);
	fputs("uroce: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}
