#!/usr/bin/env bash
# Two unrelated processes (neither started the other) that cross-memory
# attach cannot join: they meet on RoCEv2 over lo instead, and Debian's
# programs pass. A seccomp filter refusing process_vm_readv/writev (the
# seccomp_refuse helper) stands in for Yama's ptrace_scope 2 and 3 and a
# container's profile: on both sides, then on one side only (the other
# must follow it onto the wire). Then two users: the server as nobody, the
# client as root (root could attach nobody's process, nobody not root's:
# both must still take the wire).
. "$(dirname "$0")/lib.sh" 60
REFUSE=${SECCOMP_REFUSE:?path to the seccomp_refuse helper}
# A second user (setpriv) needs root, as CI runs.
need_netns
port=$((26000 + ($$ % 2000)))

as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups env -u UROCE_CONFIG HOME=/nonexistent "$@"; }
filtered() { "$REFUSE" --attach "$@"; }
plain() { "$@"; }
SRV=plain
CLI=plain
pair_server() { $SRV timeout $T "$UROCE" run "$@"; }
pair_client() { $CLI timeout $T "$UROCE" run "$@"; }

# The line a side prints when it takes the wire, by why.
SAID_FILTER='^uroce: cross-memory attach is refused here \(a seccomp filter refuses process_vm_readv/writev.*\): connections between this host.s processes take RoCEv2 over lo instead of shared memory$'
SAID_USER='^uroce: QP 0x[0-9a-f]{6}: the process owning QP 0x[0-9a-f]{6} belongs to another user, which cross-memory attach cannot reach: connections to such processes take RoCEv2 over lo$'

# said SIDE REGEX WHAT: the side's output (srv or cli) has the line.
said() { expect_match "$(cat "$PAIR_DIR/$1")" "$2" "$3"; }

# figures PROGRAM: the perftest client reported a figure above zero.
figures() {
	local col=4
	case $1 in *_lat) col=5 ;; esac
	awk -v c=$col '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && NF >= 5 { n++; if ($c + 0 <= 0) z = 1 }
		END { exit !(n == 1 && !z) }' "$PAIR_DIR/cli" && ok || bad "$1: no figure in the client's report"
}

# programs LABEL SRV_SAYS CLI_SAYS: the five programs between SRV and CLI;
# each side's output has the line its regex names ("" for none).
programs() {
	local label=$1 ss=$2 cs=$3 p
	check_said() {
		[ -n "$ss" ] && said srv "$ss" "$label: $1: the server says which path and why"
		[ -n "$cs" ] && said cli "$cs" "$label: $1: the client says which path and why"
	}
	p=$((port += 1))
	if run_pair "$label: ibv_rc_pingpong -c" $p "ibv_rc_pingpong -g 0 -p $p -n 100 -c" \
		"ibv_rc_pingpong -g 0 -p $p -n 100 -c 127.0.0.1"; then
		expect_match "$(cat "$PAIR_DIR/cli")" '^[0-9]+ iters in ' "$label: rc_pingpong's report"
	fi
	check_said ibv_rc_pingpong
	for prog in ib_write_bw ib_read_lat ib_atomic_bw; do
		p=$((port += 1))
		run_pair "$label: $prog" $p "$prog -n 200 -d uroce0 -x 0 -p $p" \
			"$prog -n 200 -d uroce0 -x 0 -p $p 127.0.0.1" && figures "$label: $prog"
		check_said $prog
	done
	p=$((port += 1))
	PAIR_STATUS=rping_status run_pair "$label: rping" $p "rping -s -a 127.0.0.1 -p $p -V -C 50" \
		"rping -c -a 127.0.0.1 -p $p -v -V -C 50" &&
		{ [ "$(grep -c '^ping data: rdma-ping-' "$PAIR_DIR/cli")" = 50 ] && ok ||
			bad "$label: rping: not 50 pings validated"; }
	check_said rping
}

# `uroce link show -d` says which path this host's processes get, and why.
out=$(timeout $T "$UROCE" link show -d 2>&1)
expect_match "$out" '^    same-host path: shared memory \(cross-memory attach works here\)$' "link show -d: shared memory"
out=$(filtered timeout $T "$UROCE" link show -d uroce0 2>&1)
expect_match "$out" '^    same-host path: RoCEv2 over lo \(cross-memory attach refused: a seccomp filter refuses process_vm_readv/writev' "link show -d under the filter: the wire, and why"
timeout $T "$UROCE" link add ib0 netdev lo type ib >/dev/null && timeout $T "$UROCE" link delete uroce0 >/dev/null
out=$(filtered timeout $T "$UROCE" link show -d 2>&1)
expect_match "$out" '^    same-host path: none, a type ib link has no wire \(cross-memory attach refused: ' "link show -d of a type ib link under the filter"
rm -f "$UROCE_CONFIG"

# Refused on both sides: each takes the wire and says why.
SRV=filtered CLI=filtered programs "both filtered" "$SAID_FILTER" "$SAID_FILTER"
# On one side only: the other meets it on the wire, and says nothing.
SRV=filtered CLI=plain programs "server filtered" "$SAID_FILTER" ""
SRV=plain CLI=filtered programs "client filtered" "" "$SAID_FILTER"
# Two users: each finds the other's slot held by a user not its own.
SRV=as_nobody CLI=plain programs "server nobody, client root" "$SAID_USER" "$SAID_USER"
rm -f /dev/shm/uroce-registry-65534 /dev/shm/uroce-userns-65534

# verbs_data_path's whole suite under the filter, on the wire as its _roce
# variant runs (the test knows the wire's differences only from
# UROCE_TRANSPORT): the wire's copies within the process, and those
# between two contexts of the process (XRC and multicast stay on shared
# memory), when process_vm_* is refused even towards the process itself.
out=$(filtered env UROCE_TRANSPORT=roce UROCE_CONFIG=/nonexistent/uroce.conf timeout $T "$BUILD_DIR/bin/test_data_path" 2>&1)
expect_status 0 $? "verbs_data_path under the filter"
expect_match "$out" '^[0-9]+ passed, 0 failed$' "verbs_data_path under the filter: every check"
finish
