#!/usr/bin/env bash
# Debian's ibv_*_pingpong, unmodified, between two processes under
# `uroce run`, with -c (the receiver checks every byte).
. "$(dirname "$0")/lib.sh" 60
# Below the ephemeral range (32768 and up), where a port may be some
# connection's; each test has its own 4000.
port=$((10000 + ($$ % 4000)))

# pair DESCRIPTION PROGRAM ARGS...: both sides exit 0 and report.
pair() {
	local what=$1
	shift
	port=$((port + 1))
	run_pair "$what" $port "$* -p $port" "$* -p $port 127.0.0.1" &&
		expect_match "$(cat "$PAIR_DIR/cli")" 'iters in' "$what reports"
}

for ev in "" "-e"; do
	for s in 1 4096 65536 1048576; do
		n=$([ $s -ge 65536 ] && echo 50 || echo 500)
		pair "rc $ev -s $s" ibv_rc_pingpong -g 0 -c $ev -s $s -n $n
		pair "uc $ev -s $s" ibv_uc_pingpong -g 0 -c $ev -s $s -n $n
		pair "srq $ev -s $s" ibv_srq_pingpong -g 0 -c $ev -q 16 -s $s -n $n
	done
	for s in 1 1024 4096; do
		pair "ud $ev -s $s" ibv_ud_pingpong -g 0 -c $ev -s $s -n 500
	done
done
# XRC: the server's XRC SRQ hears each client through its own target QP;
# with two clients, each of the server's initiators sends, in turn, to both
# clients' SRQs (their domains are one: the same file, two processes).
for ev in "" "-e"; do
	port=$((port + 1))
	run_pair "xsrq $ev" $port "ibv_xsrq_pingpong -g 0 $ev -n 50 -p $port" \
		"ibv_xsrq_pingpong -g 0 $ev -n 50 -p $port 127.0.0.1" &&
		expect_match "$(cat "$PAIR_DIR/cli")" '^success$' "xsrq $ev reports success"
done
port=$((port + 1))
timeout $T "$UROCE" run ibv_xsrq_pingpong -g 0 -c 2 -n 20 -p $port >"$PAIR_DIR/srv" 2>&1 &
srv=$!
wait_listen $port || bad "xsrq -c 2: the server never listened"
timeout $T "$UROCE" run ibv_xsrq_pingpong -g 0 -n 20 -p $port 127.0.0.1 >"$PAIR_DIR/c1" 2>&1 &
c1=$!
timeout $T "$UROCE" run ibv_xsrq_pingpong -g 0 -n 20 -p $port 127.0.0.1 >"$PAIR_DIR/c2" 2>&1
expect_status 0 $? "xsrq -c 2: second client"
wait $c1
expect_status 0 $? "xsrq -c 2: first client"
wait $srv
expect_status 0 $? "xsrq -c 2: server"
pair "rc -N (ibv_wr_* API)" ibv_rc_pingpong -g 0 -c -N -n 500
pair "rc -N -e -s 65536" ibv_rc_pingpong -g 0 -c -N -e -s 65536 -n 50

# On an IB-type device, LID addressing: no -g.
printf 'link uroce0 netdev lo\nlink ibdev netdev lo type ib lid 9\n' >"$UROCE_CONFIG"
pair "rc by LID on an IB device" ibv_rc_pingpong -d ibdev -c -n 200
pair "ud by LID on an IB device" ibv_ud_pingpong -d ibdev -c -n 200
rm -f "$UROCE_CONFIG"

# On a RoCE device, an address without a GRH is refused, as RoCE NICs do.
# Below the ephemeral range (32768 and up), where a port may be some
# connection's; each test has its own 4000.
port=$((port + 1))
timeout 10 "$UROCE" run ibv_rc_pingpong -p $port >"$PAIR_DIR/srv" 2>&1 &
srv=$!
wait_listen $port
out=$(timeout 10 "$UROCE" run ibv_rc_pingpong -p $port 127.0.0.1 2>&1); st=$?
wait $srv
sst=$?
[ $st -ne 0 ] && [ $sst -ne 0 ] && ok || bad "rc without -g on RoCE succeeded"
out="$out
$(cat "$PAIR_DIR/srv")"
expect_match "$out" 'RoCE port: an address needs a GRH' "the refusal says why"
expect_match "$out" 'Failed to modify QP to RTR' "the program sees RTR fail"
finish
