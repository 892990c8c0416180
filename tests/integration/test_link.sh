#!/usr/bin/env bash
# `uroce link`: show/add/delete/set, its errors, and that a failed command
# changes nothing.
. "$(dirname "$0")/lib.sh"

out=$(timeout $T "$UROCE" link show 2>&1); st=$?
expect_status 0 $st "link show"
[ "$out" = "link uroce0/1 state ACTIVE physical_state LINK_UP netdev lo" ] && ok || bad "default link show: '$out'"

timeout $T "$UROCE" link add roce1 type rxe netdev lo; expect_status 0 $? "link add (rdma argument order)"
timeout $T "$UROCE" link add ib1 netdev lo type ib; expect_status 0 $? "link add type ib"
timeout $T "$UROCE" link add ib2 netdev lo type ib; expect_status 0 $? "second ib link"
out=$(timeout $T "$UROCE" link show 2>&1)
expect_match "$out" '^link roce1/1 state ACTIVE physical_state LINK_UP netdev lo$' "roce1 listed"
expect_match "$out" '^link ib1/1 subnet_prefix fe80:0000:0000:0000 lid 1 sm_lid 0 lmc 0 state ACTIVE physical_state LINK_UP netdev lo$' "ib1 has LID 1"
expect_match "$out" '^link ib2/1 .* lid 2 ' "ib2 has its own LID"
out=$(timeout $T "$UROCE" link show ib2/1 2>&1)
expect_match "$out" '^link ib2/1 ' "link show NAME/PORT"

before=$(cat "$UROCE_CONFIG")
out=$(timeout $T "$UROCE" link add ib1 netdev lo 2>&1); st=$?
expect_status 1 $st "duplicate name"
expect_match "$out" "link 'ib1' already exists" "duplicate name message"
out=$(timeout $T "$UROCE" link add x1 netdev no-such-if 2>&1); st=$?
expect_status 1 $st "unknown netdev"
expect_match "$out" "unknown netdev 'no-such-if'" "unknown netdev message"
out=$(timeout $T "$UROCE" link add x1 netdev lo type iwarp 2>&1); st=$?
expect_status 1 $st "unknown type"
out=$(timeout $T "$UROCE" link delete nope 2>&1); st=$?
expect_status 1 $st "delete unknown"
expect_match "$out" "no link named 'nope'" "delete unknown message"
[ "$before" = "$(cat "$UROCE_CONFIG")" ] && ok || bad "a failed command changed the configuration"

timeout $T "$UROCE" link set ib2 type roce; expect_status 0 $? "link set type"
out=$(timeout $T "$UROCE" link show ib2 2>&1)
expect_match "$out" '^link ib2/1 state ACTIVE physical_state LINK_UP netdev lo$' "ib2 is RoCE now"
timeout $T "$UROCE" link set ib2 name renamed; expect_status 0 $? "link set name"
out=$(timeout $T "$UROCE" run ibv_devices 2>&1)
expect_match "$out" 'renamed' "renamed device is listed by ibv_devices"
timeout $T "$UROCE" link delete renamed; expect_status 0 $? "link delete"
out=$(timeout $T "$UROCE" link show 2>&1)
if printf '%s\n' "$out" | grep -q renamed; then bad "deleted link still shown"; else ok; fi

# A link deleted or changed under a running program: the program hears
# IBV_EVENT_DEVICE_FATAL once, as rxe's users do on 'rdma link delete'
# (ibv_asyncwatch prints each async event; line-buffered for the wait).
watch() {
	timeout $T "$UROCE" run stdbuf -oL ibv_asyncwatch -d "$1" >"$PAIR_DIR/$1" 2>&1 &
	for _ in $(seq 100); do
		LD_PRELOAD= grep -q "async event FD" "$PAIR_DIR/$1" && return
		sleep 0.05
	done
}
fatal_seen() {
	for _ in $(seq 100); do
		LD_PRELOAD= grep -q "IBV_EVENT_DEVICE_FATAL" "$PAIR_DIR/$1" && return 0
		sleep 0.05
	done
	return 1
}
timeout $T "$UROCE" link add gone1 netdev lo && timeout $T "$UROCE" link add kept1 netdev lo
watch gone1
w_gone=$!
watch kept1
w_kept=$!
timeout $T "$UROCE" link delete gone1; expect_status 0 $? "link delete under a running program"
fatal_seen gone1 && ok || bad "no DEVICE_FATAL after its link was deleted: $(cat "$PAIR_DIR/gone1")"
timeout $T "$UROCE" link set kept1 type ib; expect_status 0 $? "link set under a running program"
fatal_seen kept1 && ok || bad "no DEVICE_FATAL after its link was changed: $(cat "$PAIR_DIR/kept1")"
kill $w_gone $w_kept 2>/dev/null
wait $w_gone $w_kept 2>/dev/null
[ "$(LD_PRELOAD= grep -c DEVICE_FATAL "$PAIR_DIR/gone1")" = 1 ] && ok || bad "DEVICE_FATAL reported $(LD_PRELOAD= grep -c DEVICE_FATAL "$PAIR_DIR/gone1") times, not once"
timeout $T "$UROCE" link delete kept1

# A malformed configuration names its line, and programs see no device.
printf 'link uroce0 netdev lo\nlink broken netdev lo colour red\n' > "$UROCE_CONFIG"
out=$(timeout $T "$UROCE" link show 2>&1); st=$?
expect_status 1 $st "malformed config"
expect_match "$out" "$UROCE_CONFIG:2: unknown keyword" "malformed config names line 2"
out=$(timeout $T "$UROCE" run ibv_devices 2>&1)
expect_match "$out" "$UROCE_CONFIG:2: unknown keyword" "the library reports the bad line too"

out=$(timeout $T "$UROCE" link --help 2>&1); st=$?
expect_status 0 $st "link --help"
expect_match "$out" 'usage: uroce link' "link usage"
finish
