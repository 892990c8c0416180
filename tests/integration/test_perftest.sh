#!/usr/bin/env bash
# Debian's perftest, unmodified, under `uroce run`: every benchmark with its
# default post-send path (ibv_wr_*), with --use_old_post_send, and over
# rdma_cm (-R); -a, -b and -q 4 on some. Short runs: speed is bench/'s.
. "$(dirname "$0")/lib.sh"
T=${T:-60}
port=$((31000 + ($$ % 3000)))
tmp=$(mktemp -d /tmp/uroce-pt-XXXXXX)
trap 'rm -rf "$tmp"; rm -f "$UROCE_CONFIG"' EXIT

wait_listen() {
	for _ in $(seq 100); do
		ss -ltn 2>/dev/null | grep -q ":$1 " && return 0
		sleep 0.05
	done
	return 1
}

# run_pt PROGRAM ARGS...: server and client exit 0 and the client prints
# a result row.
run_pt() {
	local what="$*"
	port=$((port + 1))
	timeout $T "$UROCE" run "$@" -d uroce0 -x 0 -p $port >"$tmp/srv" 2>&1 &
	local srv=$!
	wait_listen $port || bad "$what: the server never listened"
	timeout $T "$UROCE" run "$@" -d uroce0 -x 0 -p $port 127.0.0.1 >"$tmp/cli" 2>&1
	local cst=$?
	wait $srv
	local sst=$?
	if [ $cst -eq 0 ] && [ $sst -eq 0 ] && grep -Eq '^ +[0-9]+ +[0-9]+ ' "$tmp/cli"; then
		ok
	else
		bad "$what: client $cst, server $sst"
		tail -5 "$tmp/cli" | sed 's/^/    client| /' >&2
		tail -5 "$tmp/srv" | sed 's/^/    server| /' >&2
	fi
}

for prog in ib_write_bw ib_write_lat ib_read_bw ib_read_lat ib_send_bw ib_send_lat \
	ib_atomic_bw ib_atomic_lat; do
	run_pt $prog -n 200
	run_pt $prog -n 200 --use_old_post_send
	run_pt $prog -n 200 -R
done
run_pt ib_write_bw -a -n 20
run_pt ib_send_lat -a -n 20
run_pt ib_read_bw -a -n 20 -R
run_pt ib_write_bw -b -n 200
run_pt ib_send_bw -b -n 200
run_pt ib_read_bw -q 4 -n 200
run_pt ib_write_bw -q 4 -n 200 -R
finish
