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
# watch_in CONFIG DEVICE TAG [HOME]: a watcher of DEVICE, as a program of
# CONFIG sees it, its output in TAG; one that never watches is a failure,
# or a check that it heard nothing would pass for nothing.
watch_in() {
	UROCE_CONFIG=$1 HOME=${4:-$HOME} XDG_CONFIG_HOME= \
		timeout $T "$UROCE" run stdbuf -oL ibv_asyncwatch -d "$2" >"$PAIR_DIR/$3" 2>&1 &
	for _ in $(seq 100); do
		LD_PRELOAD= grep -q "async event FD" "$PAIR_DIR/$3" && return
		sleep 0.05
	done
	bad "$3: ibv_asyncwatch on $2 never started watching: $(cat "$PAIR_DIR/$3")"
}
watch() { watch_in "$UROCE_CONFIG" "$1" "$1"; }
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

# A link is its configuration's: a program that opened a link of the same
# name from another configuration file keeps its device. Each configuration
# is named here as programs name it (UROCE_CONFIG, or the default path
# under HOME), and a changed link tells only the programs of that file.
spared() { # TAG...: none heard DEVICE_FATAL (given time to, had it been sent)
	sleep 0.5
	for t in "$@"; do
		if LD_PRELOAD= grep -q DEVICE_FATAL "$PAIR_DIR/$t"; then
			bad "$t heard DEVICE_FATAL for a link of another configuration"
		else ok; fi
	done
}
other=$PAIR_DIR/other.conf
home=$PAIR_DIR/home
mkdir -p "$home/.config/uroce" "$PAIR_DIR/alias"
ln -s "$home/.config/uroce" "$PAIR_DIR/alias/dir"
for c in "$UROCE_CONFIG" "$other"; do
	UROCE_CONFIG=$c timeout $T "$UROCE" link add same1 netdev lo
	UROCE_CONFIG=$c timeout $T "$UROCE" link add same2 netdev lo
done
pids=()
watch_in "$UROCE_CONFIG" same1 a1; pids+=($!)
watch_in "$other" same1 b1; pids+=($!)
watch_in "$UROCE_CONFIG" same2 a2; pids+=($!)
watch_in "$other" same2 b2; pids+=($!)
watch_in "$other" uroce0 b0; pids+=($!)
# No file at the default path: the embedded uroce0, the default's.
watch_in "" uroce0 h0 "$home"; pids+=($!)
timeout $T "$UROCE" link delete same1; expect_status 0 $? "delete a link another configuration has too"
fatal_seen a1 && ok || bad "a1: no DEVICE_FATAL after its link was deleted: $(cat "$PAIR_DIR/a1")"
timeout $T "$UROCE" link set same2 name other2; expect_status 0 $? "rename a link another configuration has too"
fatal_seen a2 && ok || bad "a2: no DEVICE_FATAL after its link was renamed: $(cat "$PAIR_DIR/a2")"
# The default path's file is created by the first change, and named
# through a symlinked directory: the same file, so the same uroce0.
UROCE_CONFIG=$PAIR_DIR/alias/dir/links.conf timeout $T "$UROCE" link add new1 netdev lo
expect_status 0 $? "link add creates the default path's file"
UROCE_CONFIG=$PAIR_DIR/alias/dir/links.conf timeout $T "$UROCE" link delete uroce0
expect_status 0 $? "delete the embedded link"
fatal_seen h0 && ok || bad "h0: no DEVICE_FATAL when the default path's uroce0 was deleted: $(cat "$PAIR_DIR/h0")"
spared b1 b2 b0
[ -L "$PAIR_DIR/alias/dir" ] && [ -f "$home/.config/uroce/links.conf" ] && ok || bad "the change did not go to the symlink's target"
# The other file, named through a symlink to it, and relative to its
# directory: its programs are told, and the symlink stays one.
ln -s "$other" "$PAIR_DIR/other-link.conf"
UROCE_CONFIG=$PAIR_DIR/other-link.conf timeout $T "$UROCE" link delete same1
expect_status 0 $? "delete through a symlink to the file"
fatal_seen b1 && ok || bad "b1: not told when its file, named through a symlink, lost its link"
[ -L "$PAIR_DIR/other-link.conf" ] && ok || bad "an edit through a symlink replaced it with a file"
(cd "$PAIR_DIR" && UROCE_CONFIG=other.conf timeout $T "$UROCE" link set same2 type ib)
expect_status 0 $? "set through a relative name of the file"
fatal_seen b2 && ok || bad "b2: not told when its file, named relative to its directory, changed its link"
kill "${pids[@]}" 2>/dev/null
wait "${pids[@]}" 2>/dev/null
# `uroce stat` shows a link's own programs, not another configuration's.
timeout $T "$UROCE" run ibv_rc_pingpong -d uroce0 -g 0 -p 18777 >"$PAIR_DIR/srv" 2>&1 &
srv=$!
wait_listen 18777 || bad "ibv_rc_pingpong never listened"
out=$(timeout $T "$UROCE" stat qp uroce0 2>&1)
expect_match "$out" 'comm ibv_rc_pingpong' "stat qp lists its configuration's program"
out=$(UROCE_CONFIG=$other timeout $T "$UROCE" stat qp uroce0 2>&1)
expect_status 0 $? "stat qp of the other configuration's uroce0"
if printf '%s\n' "$out" | grep -q ibv_rc_pingpong; then bad "stat qp of another configuration's uroce0 lists this one's program"; else ok; fi
# ...nor takes it for a user of its uroce0 when asked by pid. (pgrep hangs
# with a sanitizer's runtime preloaded: not for it.)
pp=$(LD_PRELOAD= timeout $T pgrep -P $srv)
out=$(UROCE_CONFIG=$other timeout $T "$UROCE" stat --pid "$pp" uroce0 2>&1)
expect_status 1 $? "stat --pid of another configuration's program"
expect_match "$out" "^uroce stat: process $pp \(ibv_rc_pingpong\) does not have uroce0 open" "stat says the program has not this configuration's uroce0 open"
kill $srv 2>/dev/null
wait $srv 2>/dev/null

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
