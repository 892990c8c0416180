#!/usr/bin/env bash
# Debian's librdmacm programs, unmodified, between two processes under
# `uroce run` (which puts uroce's librdmacm.so.1 first too).
. "$(dirname "$0")/lib.sh" 60
# Below the ephemeral range (32768 and up), where a port may be some
# connection's; each test has its own range (bench/run uses 18600 and up).
port=$((15000 + ($$ % 3000)))

# pair DESCRIPTION "SERVER ARGS" "CLIENT ARGS" [forever]: PORT in the
# arguments becomes a fresh port; FIXED=N names a program's own fixed port.
pair() {
	local p=${FIXED:-$((port += 1))}
	run_pair "$1" "$p" "${2//PORT/$p}" "${3//PORT/$p}" ${4:-}
}

PAIR_STATUS=rping_status pair "rping -V -C 200" "rping -s -a 127.0.0.1 -p PORT -V -C 200" "rping -c -a 127.0.0.1 -p PORT -V -C 200"
# rping's own check takes at most 65535 bytes (it prints "23 to 65536").
PAIR_STATUS=rping_status pair "rping -S 65535" "rping -s -a 127.0.0.1 -p PORT -V -C 50 -S 65535" "rping -c -a 127.0.0.1 -p PORT -V -C 50 -S 65535"
# -q: rping moves its own QP (CONNECT_RESPONSE, then rdma_establish).
PAIR_STATUS=rping_status pair "rping -q" "rping -s -a 127.0.0.1 -p PORT -q -V -C 100" "rping -c -a 127.0.0.1 -p PORT -q -V -C 100"
pair "ucmatose -c 8 -C 100" "ucmatose -p PORT -c 8 -C 100" "ucmatose -s 127.0.0.1 -p PORT -c 8 -C 100"
expect_match "$(cat "$PAIR_DIR/cli")" '^return status 0$' "ucmatose status"
# udaddy's -p is its port space; it always uses port 7174.
FIXED=7174 pair "udaddy -c 4" "udaddy -c 4" "udaddy -s 127.0.0.1 -c 4"
expect_match "$(cat "$PAIR_DIR/cli")" '^return status 0$' "udaddy status"
pair "rdma_server/rdma_client" "rdma_server -p PORT" "rdma_client -s 127.0.0.1 -p PORT"
expect_match "$(cat "$PAIR_DIR/cli")" 'rdma_client: end 0' "rdma_client ends 0"
pair "rdma_xserver/rdma_xclient (RC)" "rdma_xserver -p PORT" "rdma_xclient -s 127.0.0.1 -p PORT"
# XRC through the CM: the server's target QP and XRC SRQ in the device's
# domain, the SRQ's number in the accept's private data.
pair "rdma_xserver/rdma_xclient -c x (XRC)" "rdma_xserver -c x -p PORT" "rdma_xclient -c x -s 127.0.0.1 -p PORT"
expect_match "$(cat "$PAIR_DIR/cli")" 'rdma_xclient: end 0' "rdma_xclient -c x ends 0"
pair "cmtime -c 100" "cmtime -p PORT -c 100" "cmtime -s 127.0.0.1 -p PORT -c 100" forever
expect_match "$(cat "$PAIR_DIR/cli")" '^connect +:' "cmtime reports connection setup"
cp "$PAIR_DIR/cli" "${CMTIME_OUT:-/dev/null}" 2>/dev/null

# mckey: one group, two receivers and a send-only sender; each receiver
# hears all 20 datagrams. Receivers are started first and must have joined
# (they post their receives before joining) before anything is sent: their
# output is line-buffered so that the wait sees it, and the wait's greps
# run without the sanitizer's preload, which makes each one slow.
mck() { timeout $T "$UROCE" run stdbuf -oL mckey -m 230.1.2.3 -b 127.0.0.1 -C 20 -S 512 "$@"; }
mck >"$PAIR_DIR/r1" 2>&1 &
r1=$!
mck >"$PAIR_DIR/r2" 2>&1 &
r2=$!
for _ in $(seq 200); do
	[ "$(LD_PRELOAD= grep -l "receiving data" "$PAIR_DIR/r1" "$PAIR_DIR/r2" | wc -l)" = 2 ] && break
	sleep 0.05
done
mck -s -o >"$PAIR_DIR/cli" 2>&1
expect_status 0 $? "mckey sender (send-only member)"
for r in $r1 $r2; do
	wait $r
	expect_status 0 $? "mckey receiver"
done
expect_match "$(cat "$PAIR_DIR/r1" "$PAIR_DIR/r2")" 'joined dgid: ::ffff:230.1.2.3' "mckey joins 230.1.2.3"
[ "$(grep -c '^data transfers complete' "$PAIR_DIR/r1" "$PAIR_DIR/r2" | awk -F: '{s += $2} END {print s}')" = 2 ] && ok ||
	bad "mckey: a receiver did not get its 20 datagrams"

finish
