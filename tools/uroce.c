/* uroce: manage soft RDMA devices and run programs on them. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "uroce_version.h"

static const char usage[] =
    "usage: uroce COMMAND [ARGS...]\n"
    "\n"
    "  link show [NAME]                         list devices as 'rdma link show' does\n"
    "  link add NAME netdev IFACE [type roce|ib]  create a device bound to a netdev\n"
    "  link delete NAME                         remove a device\n"
    "  link set NAME [netdev IFACE] [type roce|ib] [name NEW]\n"
    "  run [--faults SPEC] [--pcap FILE [--pcap-snap N]] CMD [ARGS...]\n"
    "                                           run an unmodified RDMA program on uroce\n"
    "  demo [-d DEVICE] [--faults SPEC]         two processes on a device: latency and bandwidth\n"
    "  stat [DEV[/PORT]] [--pid PID] [--json]   a port's counters, as 'rdma statistic show'\n"
    "  stat qp [DEV] [--pid PID] [--json]       QPs with their state, PSNs and counters\n"
    "  version, --version                       uroce's version\n"
    "  doctor [--json]                          what this host gives uroce, and why\n"
    "\n"
    "Devices live in $UROCE_CONFIG (default ~/.config/uroce/links.conf); with no\n"
    "file there is one device, uroce0 on lo. 'uroce COMMAND --help' for more.\n";

int uro_is_help(const char *arg)
{
	return !strcmp(arg, "--help") || !strcmp(arg, "-h") || !strcmp(arg, "help");
}

int main(int argc, char **argv)
{
	if (argc < 2 || uro_is_help(argv[1])) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("uroce %s\n", UROCE_VERSION_FULL);
		return 0;
	}
	if (!strcmp(argv[1], "link"))
		return uro_cmd_link(argc - 2, argv + 2);
	if (!strcmp(argv[1], "run"))
		return uro_cmd_run(argc - 2, argv + 2);
	if (!strcmp(argv[1], "demo"))
		return uro_cmd_demo(argc - 2, argv + 2);
	if (!strcmp(argv[1], "stat"))
		return uro_cmd_stat(argc - 2, argv + 2);
	if (!strcmp(argv[1], "doctor"))
		return uro_cmd_doctor(argc - 2, argv + 2);
	fprintf(stderr, "uroce: unknown command '%s'\n\n%s", argv[1], usage);
	return 2;
}
