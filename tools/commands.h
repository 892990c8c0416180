/* The uroce command's subcommands; each returns the process exit status. */
#ifndef URO_COMMANDS_H
#define URO_COMMANDS_H

int uro_cmd_link(int argc, char **argv);
int uro_cmd_run(int argc, char **argv);
int uro_cmd_demo(int argc, char **argv);
int uro_cmd_stat(int argc, char **argv);

int uro_is_help(const char *arg);

#endif
