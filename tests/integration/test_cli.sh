#!/usr/bin/env bash
# The uroce command's messages as a new user meets them: each error names
# what was wrong (the word, option, file and line) and what to do, with
# exit status 2 for a misused command, 1 for a failure, 0 for help.
. "$(dirname "$0")/lib.sh"

# run_cli WANT_STATUS DESCRIPTION ARGS...: $out holds what it printed.
run_cli() {
	local want=$1 what=$2
	shift 2
	out=$(timeout $T "$UROCE" "$@" 2>&1)
	expect_status "$want" $? "$what"
}

# --help and -h on every command print its usage on stdout and exit 0.
for cmd in "link add" "link delete" "link set" "link show" "run" "demo" "stat" "stat qp"; do
	for flag in --help -h; do
		got=$(timeout $T "$UROCE" $cmd $flag 2>/dev/null)
		expect_status 0 $? "uroce $cmd $flag"
		expect_match "$got" "^(usage: |       )uroce $cmd" "uroce $cmd $flag prints its usage"
	done
done
run_cli 0 "link add NAME --help" link add x1 --help
expect_match "$out" '^usage: uroce link add' "help after a link's name"
[ -e "$UROCE_CONFIG" ] && bad "link add --help wrote a link" || ok

# The top-level usage lists every command's options.
run_cli 0 "uroce --help" --help
for opt in 'run \[--faults SPEC\] \[--pcap FILE \[--pcap-snap N\]\] CMD' \
	'demo \[-d DEVICE\] \[--faults SPEC\]' 'stat \[DEV\[/PORT\]\] \[--pid PID\] \[--json\]' \
	'stat qp \[DEV\] \[--pid PID\] \[--json\]' 'link set NAME \[netdev IFACE\] \[type roce\|ib\] \[name NEW\]' \
	'--version'; do
	expect_match "$out" "$opt" "the usage lists $opt"
done

# The version, from CMake's project version (and git describe), is the
# device's firmware version too.
run_cli 0 "uroce --version" --version
expect_match "$out" '^uroce [0-9]+\.[0-9]+\.[0-9]+' "--version prints the version"
version=${out#uroce }
run_cli 0 "uroce version" version
[ "$out" = "uroce $version" ] && ok || bad "'uroce version' printed '$out', not 'uroce $version'"
run_cli 0 "ibv_devinfo" run ibv_devinfo
expect_match "$out" "^[[:space:]]+fw_ver:[[:space:]]+${version//[()]/.}$" "fw_ver is uroce's version"

# Misused commands name the word and say what was expected.
run_cli 2 "link add without a netdev" link add x1
expect_match "$out" "link 'x1' needs a netdev: uroce link add x1 netdev IFACE" "add names the netdev it needs"
run_cli 2 "link add with a misspelled keyword" link add x1 netdv lo
expect_match "$out" "unknown keyword 'netdv'" "add names the keyword"
run_cli 1 "link add on a missing netdev" link add x1 netdev no-such-if
expect_match "$out" "unknown netdev 'no-such-if': name one that 'ip link' lists" "add names the netdev"
run_cli 2 "demo with an unknown option" demo -x
expect_match "$out" "^uroce demo: unknown option '-x'" "demo names the option"
run_cli 2 "run with an unknown option" run --pacp x true
expect_match "$out" "^uroce run: unknown option '--pacp': the options are --faults SPEC, --pcap FILE, --pcap-snap N" \
	"run names the option and lists its options"
run_cli 2 "run --pcap without a value" run --pcap
expect_match "$out" '^uroce run: --pcap needs a value' "run names the option without a value"
run_cli 2 "stat --pid without a value" stat --pid
expect_match "$out" '^uroce stat: --pid needs a PID' "stat names the option without a value"

# A device that is not there: the ones that are.
run_cli 1 "demo on a missing device" demo -d nosuchdev
expect_match "$out" "^uroce demo: no device named 'nosuchdev'; the devices are: uroce0 \('uroce link show'" \
	"demo names the device and lists those there are"
if printf '%s\n' "$out" | grep -q Success; then bad "demo printed errno 0: $out"; else ok; fi

# A trace the user asked for and cannot have stops the command.
run_cli 1 "run --pcap to a missing directory" run --pcap /nonexistent/x.pcap true
expect_match "$out" '^uroce run: --pcap /nonexistent/x.pcap: cannot write the trace there \(directory /nonexistent: No such file or directory\)' \
	"--pcap names the option, the file and why"

# --pid of a process that is not a uroce process.
run_cli 1 "stat --pid of no process" stat --pid 999999
expect_match "$out" '^uroce stat: no process 999999 is running; your processes using uroce now:' "stat says there is no such process"
run_cli 1 "stat qp --pid of no process" stat qp --pid 999999
expect_match "$out" '^uroce stat: no process 999999 is running' "stat qp says there is no such process"
run_cli 1 "stat --pid of a process without uroce" stat --pid $$
expect_match "$out" "^uroce stat: process $$ \(.*\) does not use uroce" "stat says the process does not use uroce"
# ...and of one that does: its counters, and it is listed for a wrong pid.
port=$((18700 + RANDOM % 200))
timeout $T "$UROCE" run ibv_rc_pingpong -g 0 -p $port >/dev/null 2>&1 &
waiter=$!
wait_listen $port || bad "the pingpong server never listened"
# (pgrep hangs with a sanitizer's runtime preloaded: not for it.)
server=$(LD_PRELOAD= timeout $T pgrep -P $waiter)
run_cli 0 "stat --pid of a uroce process" stat --pid "$server"
expect_match "$out" '^link uroce0/1 ' "stat shows the process's port"
run_cli 0 "stat qp --pid of a uroce process" stat qp --pid "$server"
expect_match "$out" "^link uroce0/1 lqpn [0-9]+ .* pid $server comm ibv_rc_pingpong$" "stat qp shows its QP"
run_cli 1 "stat --pid of no process, with one running" stat --pid 999999
# (Other tests' programs of this user may be listed too.)
expect_match "$out" "your processes using uroce now: (.*, )?$server \(ibv_rc_pingpong\) on uroce0" "stat lists the processes that use uroce"
kill $server 2>/dev/null
wait $waiter 2>/dev/null

# An empty GID slot given to an example: the hint names the index read.
port=$((port + 1))
timeout $T "$UROCE" run ibv_rc_pingpong -g 7 -p $port >"$PAIR_DIR/srv" 2>&1 &
waiter=$!
wait_listen $port || bad "the -g 7 server never listened"
timeout $T "$UROCE" run ibv_rc_pingpong -g 7 -p $port 127.0.0.1 >"$PAIR_DIR/cli" 2>&1
expect_status 1 $? "a pingpong on an empty GID slot fails"
wait $waiter 2>/dev/null
# The server moves its QP to RTR first, and so is the side refused.
out=$(cat "$PAIR_DIR/srv" "$PAIR_DIR/cli")
expect_match "$out" "uroce0 is a RoCE port: an address needs a GRH, and the GID index this program read, 7, is empty \(the port's GIDs are indexes 0 to [0-9]+\)" \
	"the hint names the empty index and the ones that hold GIDs"

# A misspelled keyword in the file: its file, line and word, the keywords
# there are, and in every program, why there is no device.
printf 'link uroce0 netdev lo\nlink roce1 netdv lo\n' >"$UROCE_CONFIG"
run_cli 1 "link show with a misspelled keyword in the file" link show
expect_match "$out" "^uroce: $UROCE_CONFIG:2: unknown keyword 'netdv' \(the keywords are netdev, type and lid" \
	"the file's error names its line, the word and the keywords"
run_cli 1 "a program with a misspelled keyword in the file" run ibv_devices
expect_match "$out" "^uroce: $UROCE_CONFIG:2: unknown keyword 'netdv' .*; there are no devices until it is fixed" \
	"the library names the line and the word"

# An empty file: no devices, said, with how to get the default back.
: >"$UROCE_CONFIG"
run_cli 0 "link show of an empty file" link show
expect_match "$out" "^uroce: $UROCE_CONFIG defines no link, so there are no devices: delete the file to get the default uroce0 on lo back" \
	"link show says why there is no device"
out=$(timeout $T "$UROCE" run ibv_devinfo 2>&1) # its status is its own
[ "$(printf '%s\n' "$out" | grep -c 'defines no link')" = 1 ] && ok ||
	bad "the library did not say once that the file defines no link: $out"
rm -f "$UROCE_CONFIG"
run_cli 0 "deleting the last link" link delete uroce0
expect_match "$out" "defines no link, so there are no devices" "deleting the last link says so"
run_cli 0 "link show after deleting the last link" link show
expect_match "$out" "defines no link" "...and link show too"
rm -f "$UROCE_CONFIG"
finish
