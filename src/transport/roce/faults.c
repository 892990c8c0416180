/* The fault specification (faults.h): parsed once, then drawn from. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faults.h"

static int fail(char *err, size_t errlen, const char *what, const char *item)
{
	snprintf(err, errlen, "%s in \"%s\"", what, item);
	return -1;
}

/* "2%", "0.5%": parts per million. */
static int percent(const char *s, uint32_t *ppm)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || strcmp(end, "%") || v < 0 || v > 100)
		return -1;
	*ppm = (uint32_t)(v * 10000 + 0.5);
	return 0;
}

/* "50us", "1ms", "2s", "100ns": nanoseconds; *rest is what follows. */
static int duration(const char *s, uint64_t *ns, const char **rest)
{
	static const struct {
		const char *unit;
		double ns;
	} units[] = {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}};
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		size_t n = strlen(units[i].unit);

		if (!strncmp(end, units[i].unit, n) && v * units[i].ns <= 10e9) {
			*ns = (uint64_t)(v * units[i].ns + 0.5);
			*rest = end + n;
			return 0;
		}
	}
	return -1;
}

/* "1ms", "1ms~200us", "1ms±200us", "1ms+-200us": delay and jitter. */
static int parse_delay(char *s, struct uro_fault_spec *f)
{
	static const char *const sep[] = {"~", "\xc2\xb1", "+-"};
	const char *rest;

	f->jitter_ns = 0;
	if (duration(s, &f->delay_ns, &rest))
		return -1;
	if (!*rest)
		return 0;
	for (size_t i = 0; i < sizeof(sep) / sizeof(sep[0]); i++) {
		size_t n = strlen(sep[i]);

		if (!strncmp(rest, sep[i], n))
			return duration(rest + n, &f->jitter_ns, &rest) || *rest ||
				       f->jitter_ns > f->delay_ns
				   ? -1
				   : 0;
	}
	return -1;
}

/* "200ms/2s": silent T in every P, T shorter than P. */
static int parse_stall(char *s, struct uro_fault_spec *f)
{
	const char *rest;

	return duration(s, &f->stall_ns, &rest) || *rest != '/' ||
		       duration(rest + 1, &f->stall_period_ns, &rest) || *rest || !f->stall_ns ||
		       f->stall_ns >= f->stall_period_ns
		   ? -1
		   : 0;
}

/* "rc|ud": the transports' bits, as the BTH opcode's top three bits
 * number them (IBTA 9.2: RC 0, UC 1, UD 3, XRC 5). */
static int parse_types(char *s, struct uro_fault_spec *f)
{
	static const struct {
		const char *name;
		unsigned transport;
	} names[] = {{"rc", 0}, {"uc", 1}, {"ud", 3}, {"xrc", 5}};
	char *t;

	f->types = 0;
	/* strsep, not strtok: "rc|" has an empty name, and is refused. */
	while ((t = strsep(&s, "|"))) {
		size_t i = 0;

		while (i < sizeof(names) / sizeof(names[0]) && strcmp(t, names[i].name))
			i++;
		if (i == sizeof(names) / sizeof(names[0]))
			return -1;
		f->types |= 1u << names[i].transport;
	}
	return f->types ? 0 : -1;
}

/* A number as strtoull reads it (0x for hex), at most max. */
static int number(const char *s, unsigned long long max, unsigned long long *n)
{
	char *end;

	errno = 0;
	*n = strtoull(s, &end, 0);
	return errno || end == s || *end || *n > max ? -1 : 0;
}

static int parse_qpn(char *v, struct uro_fault_spec *f)
{
	unsigned long long n;

	if (number(v, 0xffffff, &n))
		return -1;
	f->qpn = (uint32_t)n;
	return 0;
}

static int parse_dev(char *v, struct uro_fault_spec *f)
{
	if (!*v || strlen(v) >= sizeof(f->dev))
		return -1;
	strcpy(f->dev, v);
	return 0;
}

static int parse_seed(char *v, struct uro_fault_spec *f)
{
	unsigned long long n;

	if (number(v, UINT64_MAX, &n))
		return -1;
	f->seed = n;
	return 0;
}

#define RATE(k)                                                                                    \
	{                                                                                          \
		.key = #k, .rate = offsetof(struct uro_fault_spec, k),                             \
		.expected = "a percentage from 0% to 100%"                                         \
	}

/* Each key, how its value is read (a rate, or a parser), and what the
 * error says it expected. */
static const struct fault_key {
	const char *key;
	size_t rate; /* a percentage into this field, unless parse */
	int (*parse)(char *value, struct uro_fault_spec *f);
	const char *expected;
} fault_keys[] = {
    RATE(loss),
    RATE(dup),
    RATE(reorder),
    RATE(corrupt),
    RATE(rnr),
    {.key = "delay",
     .parse = parse_delay,
     .expected = "a delay such as 1ms or 1ms~200us (at most 10s, the jitter at most the delay)"},
    {.key = "stall",
     .parse = parse_stall,
     .expected = "a stall such as 200ms/2s (silent 200ms in every 2s, the first shorter)"},
    {.key = "type",
     .parse = parse_types,
     .expected = "transports such as rc or rc|ud (rc, uc, ud, xrc)"},
    {.key = "qpn", .parse = parse_qpn, .expected = "a QP number below 2^24"},
    {.key = "dev", .parse = parse_dev, .expected = "a device name"},
    {.key = "seed", .parse = parse_seed, .expected = "a number"},
};

static int item(char *kv, struct uro_fault_spec *f, char *err, size_t errlen)
{
	char *value = strchr(kv, '='), what[96];

	if (!value)
		return fail(err, errlen, "expected key=value", kv);
	*value++ = '\0';
	for (size_t i = 0; i < sizeof(fault_keys) / sizeof(fault_keys[0]); i++) {
		const struct fault_key *k = &fault_keys[i];

		if (strcmp(kv, k->key))
			continue;
		if (k->parse ? k->parse(value, f)
			     : percent(value, (uint32_t *)((char *)f + k->rate))) {
			snprintf(what, sizeof(what), "expected %s", k->expected);
			return fail(err, errlen, what, value);
		}
		return 0;
	}
	return fail(err, errlen,
		    "unknown fault (loss, dup, reorder, corrupt, rnr, delay, stall, type, qpn, "
		    "dev, seed)",
		    kv);
}

int uro_faults_parse(const char *spec, struct uro_fault_spec *f, char *err, size_t errlen)
{
	char *copy = strdup(spec), *save = NULL;
	int rc = 0;

	memset(f, 0, sizeof(*f));
	f->seed = 1;
	f->qpn = UINT32_MAX;
	if (!copy)
		return fail(err, errlen, "out of memory", spec);
	for (char *kv = strtok_r(copy, ",", &save); kv && !rc; kv = strtok_r(NULL, ",", &save))
		rc = item(kv, f, err, errlen);
	free(copy);
	return rc;
}

/* splitmix64: small, fast, and every seed gives a full-period sequence. */
static uint64_t next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

int uro_faults_scoped(const struct uro_fault_spec *f, uint8_t opcode, uint32_t dest_qpn)
{
	return (!f->types || (f->types >> (opcode >> 5)) & 1) &&
	       (f->qpn == UINT32_MAX || f->qpn == dest_qpn);
}

int uro_faults_stalled(const struct uro_fault_spec *f, uint64_t since_first)
{
	return f->stall_ns && since_first % f->stall_period_ns >= f->stall_period_ns - f->stall_ns;
}

uint64_t uro_faults_below(uint64_t *state, uint64_t n)
{
	return n ? next(state) % n : 0;
}

int uro_faults_hit(uint64_t *state, uint32_t ppm)
{
	return ppm && uro_faults_below(state, 1000000) < ppm;
}
