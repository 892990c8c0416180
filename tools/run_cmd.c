/* uroce run: execute a program with uroce's libibverbs.so.1 (and, later,
 * librdmacm.so.1) ahead of the system's, so an unmodified binary uses
 * uroce. exec keeps the pid, the signals and the exit status the program's. */
#include <errno.h>
#include <limits.h>
#include <linux/limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "config.h"
#include "faults.h"
#include "pcap_trace.h"
#include "sysfs_view.h"

static const char run_usage[] =
    "usage: uroce run [--faults SPEC] [--pcap FILE [--pcap-snap N]] CMD [ARGS...]\n"
    "\n"
    "Runs CMD with uroce's RDMA libraries first on LD_LIBRARY_PATH.\n"
    "UROCE_LIBDIR overrides where they are looked for.\n"
    "\n"
    "--faults SPEC injects faults into the RoCEv2 packets CMD sends (and puts\n"
    "its QPs on the wire path, on one host too), as UROCE_FAULTS=SPEC does:\n"
    "  loss=2%,dup=1%,reorder=5%,corrupt=0.1%,rnr=10%,delay=1ms~200us,seed=7\n"
    "  stall=200ms/2s: silent for the last 200ms of every 2s, a peer that stops answering\n"
    "  type=rc|uc|ud|xrc, qpn=N, dev=NAME: only those packets, or that device's\n"
    "\n"
    "--pcap FILE writes every RoCEv2 packet CMD sends or takes on the wire path\n"
    "to FILE, a pcap trace that Wireshark and tshark decode (UROCE_PCAP=FILE;\n"
    "\"%p\" in FILE becomes each process's pid). --pcap-snap N keeps N bytes of\n"
    "each packet's payload and all its headers (UROCE_PCAP_SNAP=N; 0: all).\n"
    "A traced or faulted process's QPs take the wire path, on one host too,\n"
    "and so do the QPs of this host's processes that connect to them.\n"
    "\n"
    "CMD also sees uroce's links as a Soft-RoCE device's files in\n"
    "/sys/class/infiniband, /sys/class/infiniband_verbs and /dev/infiniband,\n"
    "in a mount namespace of its own (UROCE_VIEW=0: without them).\n";

static int has_library(const char *dir)
{
	char path[PATH_MAX + 32];

	if (snprintf(path, sizeof(path), "%s/libibverbs.so.1", dir) >= (int)sizeof(path))
		return 0;
	return access(path, R_OK) == 0;
}

/* Next to this executable: the build tree keeps the libraries in ../lib,
 * an installed prefix in its private library directory. */
static int find_libdir(char *out, size_t len)
{
	static const char *const rel[] = {UROCE_RELATIVE_LIBDIR, "../lib"};
	const char *env = getenv("UROCE_LIBDIR");
	char exe[PATH_MAX];
	ssize_t n;

	if (env && *env) {
		snprintf(out, len, "%s", env);
		return has_library(out) ? 0 : -1;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return -1;
	exe[n] = '\0';
	*strrchr(exe, '/') = '\0';
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		char cand[PATH_MAX + 64];
		char real[PATH_MAX];

		if (snprintf(cand, sizeof(cand), "%s/%s", exe, rel[i]) >= (int)sizeof(cand))
			continue;
		if (has_library(cand) && realpath(cand, real)) {
			snprintf(out, len, "%s", real);
			return 0;
		}
	}
	return -1;
}

/* The device view (sysfs_view.h) is best effort: a program that needs no
 * sysfs runs without it, told once why it is missing. */
static void enter_view(void)
{
	const char *env = getenv("UROCE_VIEW");
	struct uro_config cfg;
	char path[4096], err[512];

	if (env && !strcmp(env, "0"))
		return;
	if (uro_config_path(path, sizeof(path)) || uro_config_load(path, &cfg, err, sizeof(err)))
		return; /* the library reports a bad configuration itself */
	if (uro_view_enter(&cfg, err, sizeof(err)))
		fprintf(stderr,
			"uroce: running without /sys/class/infiniband and /dev/infiniband: %s\n",
			err);
}

int uro_faults_check(const char *spec, char *err, size_t len)
{
	struct uro_fault_spec f;

	return uro_faults_parse(spec, &f, err, len);
}

static int check_snap(const char *n, char *err, size_t len)
{
	uint32_t snap;

	return uro_pcap_snap_parse(n, &snap, err, len);
}

/* Checked here, where the user typed it: the library, which opens the
 * file, could only warn and run on without the trace asked for. */
static int check_pcap(const char *file, char *err, size_t len)
{
	char why[4400];

	if (!uro_pcap_check(file, why, sizeof(why)))
		return 0;
	snprintf(err, len, "cannot write the trace there (%s); name a file you can write", why);
	return -1;
}

/* The options run takes, each carried to the program by an environment
 * variable, so that a program started otherwise can have it too. */
static const struct run_option {
	const char *name;
	const char *env;
	const char *value; /* what the value is, for messages */
	int (*check)(const char *value, char *err, size_t len); /* NULL: any value */
	int status; /* the exit status when check refuses the value */
} run_options[] = {
    {.name = "--faults",
     .env = "UROCE_FAULTS",
     .value = "SPEC",
     .check = uro_faults_check,
     .status = 2},
    {.name = "--pcap", .env = "UROCE_PCAP", .value = "FILE", .check = check_pcap, .status = 1},
    {.name = "--pcap-snap",
     .env = "UROCE_PCAP_SNAP",
     .value = "N",
     .check = check_snap,
     .status = 2},
};

#define N_RUN_OPTIONS (sizeof(run_options) / sizeof(run_options[0]))

/* "--name VALUE" or "--name=VALUE" at argv[0]: the value, with *took set to
 * the arguments it spans; NULL when argv[0] is not that option, or is it
 * without a value (*took then 0). */
static const char *option_value(const char *name, int argc, char **argv, int *took)
{
	size_t n = strlen(name);

	*took = -1;
	if (strncmp(argv[0], name, n) || (argv[0][n] && argv[0][n] != '='))
		return NULL;
	*took = 0;
	if (argv[0][n] == '=') {
		*took = 1;
		return argv[0] + n + 1;
	}
	if (argc < 2)
		return NULL;
	*took = 2;
	return argv[1];
}

static int unknown_option(const char *arg)
{
	fprintf(stderr, "uroce run: unknown option '%s': the options are", arg);
	for (size_t i = 0; i < N_RUN_OPTIONS; i++)
		fprintf(stderr, " %s %s%s", run_options[i].name, run_options[i].value,
			i + 1 < N_RUN_OPTIONS ? "," : "");
	fprintf(stderr, ", before CMD ('uroce run --help')\n");
	return -2;
}

/* Takes run's own options from the front of argv into the environment.
 * Returns how many arguments they were, or minus the exit status after
 * saying what is wrong. */
static int take_options(int argc, char **argv)
{
	int at = 0;

	while (at < argc && !strncmp(argv[at], "--", 2) && strcmp(argv[at], "--help")) {
		const struct run_option *o = NULL;
		const char *value = NULL;
		char err[4600];
		int took = -1;

		for (size_t i = 0; i < N_RUN_OPTIONS && took < 0; i++) {
			value = option_value(run_options[i].name, argc - at, argv + at, &took);
			o = &run_options[i];
		}
		if (took < 0)
			return unknown_option(argv[at]);
		if (!value) {
			fprintf(stderr, "uroce run: %s needs a value: %s %s CMD [ARGS...]\n",
				o->name, o->name, o->value);
			return -2;
		}
		if (o->check && o->check(value, err, sizeof(err))) {
			fprintf(stderr, "uroce run: %s %s: %s\n", o->name, value, err);
			return -o->status;
		}
		setenv(o->env, value, 1);
		at += took;
	}
	return at;
}

int uro_cmd_run(int argc, char **argv)
{
	char libdir[PATH_MAX];
	const char *old = getenv("LD_LIBRARY_PATH");
	char *path;
	int took = take_options(argc, argv);

	if (took < 0)
		return -took;
	argc -= took;
	argv += took;
	if (argc >= 1 && uro_is_help(argv[0])) {
		fputs(run_usage, stdout);
		return 0;
	}
	if (argc < 1) {
		fprintf(stderr, "uroce run: no CMD to run\n%s", run_usage);
		return 2;
	}
	if (find_libdir(libdir, sizeof(libdir))) {
		fprintf(stderr, "uroce: cannot find uroce's libibverbs.so.1 (set UROCE_LIBDIR)\n");
		return 127;
	}
	if (asprintf(&path, "%s%s%s", libdir, old && *old ? ":" : "", old ? old : "") < 0)
		return 127;
	setenv("LD_LIBRARY_PATH", path, 1);
	free(path);
	enter_view();
	execvp(argv[0], argv);
	fprintf(stderr, "uroce: cannot run %s: %s\n", argv[0], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}
