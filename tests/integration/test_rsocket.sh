#!/usr/bin/env bash
# rsockets: Debian's rstream, riostream and rcopy, unmodified, between two
# processes under `uroce run`, every byte they check checked, and udpong
# (datagram rsockets over UD).
. "$(dirname "$0")/lib.sh" 60
port=$((18000 + ($$ % 500)))

pair() { # DESCRIPTION "SERVER ARGS" "CLIENT ARGS"
	local p=$((port += 1))
	run_pair "$1" "$p" "${2//PORT/$p}" "${3//PORT/$p}"
}

# Each program's default run: latency then bandwidth, 64 B to 1 MiB, on
# a second connection for the bandwidth half. Non-blocking calls (the
# programs' default), rpoll (-T a) and the programs' own data checks (-T v).
for opt in "" "-T a" "-T v" "-T n -T v"; do
	pair "rstream $opt" "rstream -p PORT $opt" "rstream -s 127.0.0.1 -p PORT $opt"
	expect_match "$(cat "$PAIR_DIR/cli")" '^1m_bw +1m +100 ' "rstream $opt reaches its 1 MiB bandwidth test"
done
# Blocking calls (MSG_WAITALL), on one connection, then rstream's two.
# The second connection's completion channel took the first one's fd
# number in the server, and the client's notification went to the first
# one's pipe: the server slept for ever (4 runs of 4) until a peer's pipe
# was known by its inode too (peer.c uro_peer_pipe).
pair "rstream -T b" "rstream -p PORT -T b -T v -S 100000 -C 50 -I 4" \
	"rstream -s 127.0.0.1 -p PORT -T b -T v -S 100000 -C 50 -I 4"
expect_match "$(cat "$PAIR_DIR/cli")" '^custom +97k +50 +4 ' "rstream -T b moves its 4 x 50 x 100,000 B"
pair "rstream -T b" "rstream -p PORT -T b" "rstream -s 127.0.0.1 -p PORT -T b"
expect_match "$(cat "$PAIR_DIR/cli")" '^1m_bw +1m +100 ' "rstream -T b reaches its 1 MiB bandwidth test"
# rpoll before each blocking call: rpoll once slept with a message queued
# (rsocket_poll.c rs_events), and rstream stalled in its 64 B latency test.
pair "rstream -T a -T b" "rstream -p PORT -T a -T b" "rstream -s 127.0.0.1 -p PORT -T a -T b"
expect_match "$(cat "$PAIR_DIR/cli")" '^1m_bw +1m +100 ' "rstream -T a -T b reaches its 1 MiB bandwidth test"

# riowrite into the peer's riomap'd buffer, the last byte polled for.
for opt in "" "-T a"; do
	pair "riostream $opt" "riostream -p PORT $opt" "riostream -s 127.0.0.1 -p PORT $opt"
	expect_match "$(cat "$PAIR_DIR/cli")" '^1m_bw +1m +100 ' "riostream $opt reaches its 1 MiB bandwidth test"
done

# rcopy: a 3 MB file, byte for byte. Its server serves for ever.
src=$PAIR_DIR/src.bin
head -c 3000000 /dev/urandom >"$src"
p=$((port += 1))
(cd "$PAIR_DIR" && exec timeout $T "$UROCE" run rcopy -p $p) >"$PAIR_DIR/srv" 2>&1 &
srv=$!
wait_listen $p || bad "rcopy: the server never listened"
timeout $T "$UROCE" run rcopy "$src" "127.0.0.1:$PAIR_DIR/dst.bin" -p $p >"$PAIR_DIR/cli" 2>&1
expect_status 0 $? "rcopy client"
kill $srv 2>/dev/null
wait $srv 2>/dev/null
if cmp -s "$src" "$PAIR_DIR/dst.bin"; then ok; else bad "rcopy: the copy differs from its source"; fi

# udpong: datagram rsockets over UD, non-blocking (its default) and with
# blocking calls: 2,000 echoes of 1,000 B, then 20,000 datagrams of
# 1,500 B one way, its server counting what came: any count but none, as
# datagrams that find no receive posted are dropped, as UDP drops them
# (884 of 20,000 came in a suite run, the sender far ahead of a server
# asleep in its blocking receive). Its server serves for
# ever. Not its default run of 180,000 echoes: udpong resends the last
# message it received when a reply is over 1 ms late, and from then on
# echoes that stale message for ever (client_send_recv); kernel UDP
# sockets (udpong -T s -T a) end the same way on a loaded 2-core machine,
# and one late reply in 180,000 is too many to count on (docs/rsockets.md).
udpong_pair() { # WHAT "OPTIONS" LINE [ADDRESS]
	local p=$((port += 1)) srv a=${4:-127.0.0.1}
	timeout $T "$UROCE" run udpong -b $a -p $p $2 >"$PAIR_DIR/srv" 2>&1 &
	srv=$!
	wait_listen $p udp || bad "$1: the server never bound its port"
	timeout $T "$UROCE" run udpong -s $a -p $p $2 >"$PAIR_DIR/cli" 2>&1
	expect_status 0 $? "$1 client"
	expect_match "$(cat "$PAIR_DIR/cli")" "$3" "$1 reports its run"
	kill $srv 2>/dev/null
	wait $srv 2>/dev/null
}
for opt in "" "-T b"; do
	udpong_pair "udpong $opt echo" "$opt -T e -C 2000 -S 1000" '^custom +1000 +4k '
	udpong_pair "udpong $opt one way" "$opt -C 20000 -S 1500" '^custom +1.4k +[1-9][0-9]*k? '
done
# Over IPv6, where lo has ::1: librdmacm's headers of version 6, with
# 16-byte addresses (docs/rsockets.md).
if ip -6 addr show dev lo 2>/dev/null | grep -q ' ::1/128'; then
	udpong_pair "udpong over IPv6" "-T e -C 2000 -S 1000" '^custom +1000 +4k ' ::1
else
	echo "note: no ::1 on lo, udpong over IPv6 not run"
fi
finish
