#!/usr/bin/env bash
# Debian's perftest, unmodified, under `uroce run`: every benchmark with its
# default post-send path (ibv_wr_*), with --use_old_post_send, and over
# rdma_cm (-R); -a, -b and -q 4 on some. Short runs: speed is bench/'s.
. "$(dirname "$0")/lib.sh" 60
# Below the ephemeral range (32768 and up), where a port may be some
# connection's; each test has its own 4000.
port=$((20000 + ($$ % 4000)))

# run_pt PROGRAM ARGS...: both sides exit 0 and the client reports a
# figure above zero for every size: the average bandwidth (column 4) of a
# _bw test, t_typical (column 5) of a _lat test; -a reports all 23 sizes,
# 2 B to 8 MiB.
run_pt() {
	port=$((port + 1))
	local args="$* -d uroce0 -x 0 -p $port" col=4 want=1 rows
	case $1 in *_lat) col=5 ;; esac
	case " $* " in *" -a "*) want=23 ;; esac
	run_pair "$*" $port "$args" "$args 127.0.0.1" || return
	rows=$(awk -v c=$col '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && NF >= 5 { n++; if ($c + 0 <= 0) bad = 1 }
		END { print bad ? "zero" : n + 0 }' "$PAIR_DIR/cli")
	if [ "$rows" = "$want" ]; then ok; else bad "$*: $rows result rows with figures, expected $want"; fi
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
