/* The uroce command's subcommands; each returns the process exit status. */
#ifndef URO_COMMANDS_H
#define URO_COMMANDS_H

int uro_cmd_link(int argc, char **argv);
int uro_cmd_run(int argc, char **argv);
int uro_cmd_demo(int argc, char **argv);
int uro_cmd_stat(int argc, char **argv);

int uro_is_help(const char *arg);

/* Shared by demo: a fault spec's check (run_cmd.c); a port's counters,
 * summed over the live processes (pid 0: all) with dev open (stat_cmd.c). */
struct uro_seg_counters;
int uro_faults_check(const char *spec, char *err, size_t len);
void uro_stat_port(const char *dev, long pid, struct uro_seg_counters *sum);
void uro_counters_add(struct uro_seg_counters *sum, const struct uro_seg_counters *c);

#endif
