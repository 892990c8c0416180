/* What a host probe tells a user when something is refused: why, in the
 * host's own terms, and what would change it. The library prints it where
 * it meets the refusal and `uroce doctor` prints it before anything runs,
 * from the same functions, so the two never disagree. */
#ifndef URO_DIAGNOSIS_H
#define URO_DIAGNOSIS_H

#include <stdarg.h>
#include <stdio.h>

struct uro_diagnosis {
	char why[384];
	char remedy[384];
};

__attribute__((format(printf, 3, 4))) static inline void
uro_diagnose(struct uro_diagnosis *d, const char *remedy, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d->why, sizeof(d->why), fmt, ap);
	va_end(ap);
	snprintf(d->remedy, sizeof(d->remedy), "%s", remedy ? remedy : "");
}

#endif
