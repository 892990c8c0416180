/* The uroce command's subcommands; each returns the process exit status. */
#ifndef URO_COMMANDS_H
#define URO_COMMANDS_H

#include <stddef.h>
#include <stdint.h>

int uro_cmd_link(int argc, char **argv);
int uro_cmd_run(int argc, char **argv);
int uro_cmd_demo(int argc, char **argv);
int uro_cmd_stat(int argc, char **argv);
int uro_cmd_doctor(int argc, char **argv);

int uro_is_help(const char *arg);

#include <string.h>

/* A subcommand's help: "help" in first place (a later "help" may be a
 * name), --help or -h anywhere among its arguments. */
static inline int uro_asks_help(int argc, char **argv)
{
	if (argc > 0 && uro_is_help(argv[0]))
		return 1;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return 1;
	return 0;
}

/* Shared by demo: a fault spec's check (run_cmd.c); a port's counters,
 * summed over the live processes (pid 0: all) with the link open
 * (stat_cmd.c): link_id's (uro_link_id), or with link_id 0, any link named
 * dev, which only a caller that names its own pid may ask. */
struct uro_seg_counters;
int uro_faults_check(const char *spec, char *err, size_t len);
void uro_stat_port(const char *dev, uint64_t link_id, long pid, struct uro_seg_counters *sum);
void uro_counters_add(struct uro_seg_counters *sum, const struct uro_seg_counters *c);

#endif
