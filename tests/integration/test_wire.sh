#!/usr/bin/env bash
# uroce between two hosts: two network namespaces joined by a veth pair
# (addresses in 198.18.0.0/15, the benchmarking range), a uroce link on
# each veth, Debian's programs on either side. Their traffic is RoCEv2 on
# the veth: tcpdump captures it and tshark decodes it. Needs root (CI runs
# as root); skipped otherwise.
. "$(dirname "$0")/lib.sh" 60
if [ "$(id -u)" -ne 0 ] || ! ip netns add "uw$$-probe" 2>/dev/null; then
	echo "SKIP: creating network namespaces needs root"
	exit 77
fi
ip netns del "uw$$-probe"

a=uw$$a b=uw$$b net=198.18.$(($$ % 250)) dir=$(mktemp -d /tmp/uroce-wire-XXXXXX)
cleanup() {
	ip netns del $a 2>/dev/null
	ip netns del $b 2>/dev/null
	rm -rf "$dir" "$PAIR_DIR"
	rm -f "$UROCE_CONFIG"
}
trap cleanup EXIT
ip netns add $a && ip netns add $b &&
	ip link add ${a}v type veth peer name ${b}v &&
	ip link set ${a}v netns $a && ip link set ${b}v netns $b &&
	ip -n $a addr add $net.1/24 dev ${a}v && ip -n $b addr add $net.2/24 dev ${b}v &&
	ip -n $a link set ${a}v up && ip -n $b link set ${b}v up &&
	ip -n $a link set lo up && ip -n $b link set lo up || {
	echo "FAIL: cannot build the namespaces"
	exit 1
}
for s in $a $b; do
	ip netns exec $s env UROCE_CONFIG="$dir/$s.conf" "$UROCE" link add roce1 netdev ${s}v ||
		bad "uroce link add in $s"
done

# in_ns NS CMD...: CMD under uroce in namespace NS, with its link.
in_ns() {
	local s=$1
	shift
	ip netns exec $s env UROCE_CONFIG="$dir/$s.conf" timeout $T "$UROCE" run "$@"
}

# wire_pair WHAT PORT "SERVER ARGS" "CLIENT ARGS" PROGRAM: the server in a,
# the client in b reaching it at $net.1; both must exit 0.
wire_pair() {
	local what=$1 p=$2 srv=$3 cli=$4 prog=$5 cst sst
	in_ns $a $prog $srv >"$dir/srv" 2>&1 &
	local pid=$!
	for _ in $(seq 100); do
		ip netns exec $a ss -ltn 2>/dev/null | grep -q ":$p " && break
		sleep 0.05
	done
	in_ns $b $prog $cli >"$dir/cli" 2>&1
	cst=$?
	wait $pid
	sst=$?
	if [ $cst -eq 0 ] && [ $sst -eq 0 ]; then
		ok
		return 0
	fi
	bad "$what: client $cst, server $sst"
	tail -5 "$dir/cli" | sed 's/^/    client| /' >&2
	tail -5 "$dir/srv" | sed 's/^/    server| /' >&2
	return 1
}

port=$((10000 + ($$ % 4000)))
pp() {
	local what=$1 prog=$2
	shift 2
	port=$((port + 1))
	wire_pair "$what" $port "-d roce1 -g 0 -p $port $*" "-d roce1 -g 0 -p $port $* $net.1" $prog &&
		expect_match "$(cat "$dir/cli")" 'iters in' "$what reports"
}

# The capture: every packet of a few pingpongs, on a's veth.
ip netns exec $a timeout $T tcpdump -i ${a}v -w "$dir/wire.pcap" udp port 4791 \
	>/dev/null 2>&1 &
dump=$!
sleep 1
for ev in "" "-e"; do
	for s in 1 4096 65536; do
		pp "rc $ev -s $s" ibv_rc_pingpong -c $ev -s $s -n 100
		pp "uc $ev -s $s" ibv_uc_pingpong -c $ev -s $s -n 100
		pp "srq $ev -s $s" ibv_srq_pingpong -c -q 16 $ev -s $s -n 100
	done
	pp "ud $ev" ibv_ud_pingpong -c $ev -s 1024 -n 100
done
sleep 0.5
kill $dump 2>/dev/null
wait $dump 2>/dev/null

# Wireshark's dissector, not uroce, reads the packets: no malformed one,
# and the opcodes the pingpongs use.
# A 1-byte payload is taken for RPC-over-RDMA by a heuristic, which then
# fails on it: the payload is the program's, not a RoCE header.
decoded=$(tshark -r "$dir/wire.pcap" --disable-protocol rpcordma 2>&1)
expect_match "$decoded" 'RC Send Only' "tshark decodes RC Send Only"
expect_match "$decoded" 'RC Send Middle' "tshark decodes a segmented RC SEND"
expect_match "$decoded" 'RC Acknowledge' "tshark decodes RC ACKs"
expect_match "$decoded" 'UC Send' "tshark decodes UC"
expect_match "$decoded" 'UD Send Only' "tshark decodes UD"
malformed=$(tshark -r "$dir/wire.pcap" --disable-protocol rpcordma -Y '_ws.malformed' 2>/dev/null | wc -l)
expect_status 0 "$malformed" "malformed packets in the capture"

# perftest's eight programs, their default (send/recv or RDMA) mode.
for t in ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw ib_write_lat ib_read_lat ib_send_lat \
	ib_atomic_lat; do
	port=$((port + 1))
	wire_pair "$t" $port "-d roce1 -x 0 -F -n 100 -p $port" \
		"-d roce1 -x 0 -F -n 100 -p $port $net.1" $t
done
port=$((port + 1))
wire_pair "ib_read_bw 1 MiB" $port "-d roce1 -x 0 -F -n 20 -s 1048576 -p $port" \
	"-d roce1 -x 0 -F -n 20 -s 1048576 -p $port $net.1" ib_read_bw

# The CM over TCP between the namespaces, the data on the wire.
port=$((port + 1))
wire_pair "rping" $port "-s -a $net.1 -p $port -C 20 -v" "-c -a $net.1 -p $port -C 20 -v" rping &&
	expect_match "$(cat "$dir/cli")" 'rdma-ping-19' "rping's 20th ping"

# UROCE_TRANSPORT=roce: two processes of one namespace over the wire
# path, the one that receives a packet for the other forwarding it.
port=$((port + 1))
ip netns exec $a env UROCE_TRANSPORT=roce UROCE_CONFIG="$dir/$a.conf" timeout $T \
	"$UROCE" run ibv_rc_pingpong -d roce1 -g 0 -c -n 100 -p $port >"$dir/srv" 2>&1 &
srv=$!
sleep 0.5
out=$(ip netns exec $a env UROCE_TRANSPORT=roce UROCE_CONFIG="$dir/$a.conf" timeout $T \
	"$UROCE" run ibv_rc_pingpong -d roce1 -g 0 -c -n 100 -p $port $net.1 2>&1)
expect_status 0 $? "forced RoCEv2 within one namespace"
wait $srv
expect_status 0 $? "forced RoCEv2 within one namespace, server"
expect_match "$out" 'iters in' "forced RoCEv2 reports"
finish
