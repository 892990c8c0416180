#!/usr/bin/env bash
# uroce between two hosts: two network namespaces joined by a veth pair
# (addresses in 198.18.0.0/15, the benchmarking range), a uroce link on
# each veth, Debian's programs on either side. Their traffic is RoCEv2 on
# the veth: tcpdump captures it and tshark decodes it. Needs root (CI runs
# as root); skipped otherwise. Over IPv4 and, for some, IPv6.
. "$(dirname "$0")/lib.sh" 60
need_netns

a=uw$$a b=uw$$b net=198.18.$(($$ % 250)) dir=$(mktemp -d /tmp/uroce-wire-XXXXXX)
cleanup() {
	ip netns del $a 2>/dev/null
	ip netns del $b 2>/dev/null
	[ "$fails" -eq 0 ] || cp "$dir/wire.pcap" /tmp/uroce-wire-failed.pcap 2>/dev/null
	rm -rf "$dir" "$PAIR_DIR"
	rm -f "$UROCE_CONFIG"
}
trap cleanup EXIT
linked_hosts $a $b $net "$dir"
# The veths' IPv6 link-local addresses (GID 1 of each link) can be bound
# once duplicate address detection is through.
for _ in $(seq 50); do
	[ -z "$(ip -n $a -6 addr show dev ${a}v tentative)$(ip -n $b -6 addr show dev ${b}v tentative)" ] &&
		break
	sleep 0.1
done

# in_ns NS CMD...: CMD under uroce in namespace NS, with its link.
in_ns() {
	local s=$1
	shift
	ip netns exec $s env UROCE_CONFIG="$dir/$s.conf" timeout $T "$UROCE" run "$@"
}

# run_pair (lib.sh) with the server in a and the client in b, which
# reaches it at $net.1.
pair_server() { in_ns $a "$@"; }
pair_client() { in_ns $b "$@"; }
server_ss() { ip netns exec $a ss "$@"; }

port=$((10000 + ($$ % 4000)))
gid=0 # GID 0: the link's IPv4 address
pp() {
	local what=$1 prog=$2
	shift 2
	port=$((port + 1))
	run_pair "$what" $port "$prog -d roce1 -g $gid -p $port $*" \
		"$prog -d roce1 -g $gid -p $port $* $net.1" &&
		expect_match "$(cat "$PAIR_DIR/cli")" 'iters in' "$what reports"
}
perf() {
	local t=$1
	shift
	port=$((port + 1))
	run_pair "$t $* (GID $gid)" $port "$t -d roce1 -x $gid -F -p $port $*" \
		"$t -d roce1 -x $gid -F -p $port $* $net.1"
}

# The veths' UDP segmentation offload, on or off. Off, the stack cuts
# uroce's GSO messages (wire_burst.c) into their packets before the veth,
# as for a NIC without the offload, so that tcpdump records each as the
# wire carries it, with the IPv4 identification its ICRC covers (scapy
# checks them below); on, a message crosses the veth whole, recorded as
# one frame, and arrives whole at the peer's UDP_GRO socket.
uso() {
	for s in $a $b; do
		ip netns exec $s ethtool -K ${s}v tx-udp-segmentation $1 >/dev/null ||
			bad "ethtool -K ${s}v tx-udp-segmentation $1 (scripts/install-deps installs ethtool)"
	done
}

# The capture: every packet between the namespaces, on a's veth.
# Stopped below; the timeout only bounds it should the test die first.
uso off
ip netns exec $a timeout 600 tcpdump -i ${a}v -w "$dir/wire.pcap" udp port 4791 \
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
# XRC (IBTA Annex A14): each SEND names the XRC SRQ it is for in its
# XRCETH. With two clients, the server's initiators take turns sending to
# both clients' SRQs, so that one client's target QP receives for the
# other client's SRQ (both in b: one domain, the same file), another
# process of that host.
xsrq() {
	local what=$1
	shift
	port=$((port + 1))
	run_pair "$what" $port "ibv_xsrq_pingpong -d roce1 -g $gid -p $port $*" \
		"ibv_xsrq_pingpong -d roce1 -g $gid -p $port $* $net.1" &&
		expect_match "$(cat "$PAIR_DIR/cli")" '^success$' "$what reports success"
	srqns "$PAIR_DIR/cli"
}
# The SRQ numbers and target QPs ibv_xsrq_pingpong prints, for the
# capture's check below.
srqns() {
	grep -o 'SRQN [0-9a-f]*' "$@" | cut -d' ' -f2 >>"$dir/srqns"
	grep -o 'QPN RECV [0-9a-f]*' "$@" | cut -d' ' -f3 >>"$dir/xrc_qpns"
}
xsrq "xsrq" -n 50
xsrq "xsrq -e" -e -n 50
xsrq "xsrq -s 4096 (a message of 4 packets)" -s 4096 -n 50
port=$((port + 1))
in_ns $a ibv_xsrq_pingpong -d roce1 -g $gid -c 2 -n 20 -p $port >"$PAIR_DIR/srv" 2>&1 &
srv=$!
wait_listen $port || bad "xsrq -c 2: the server never listened"
in_ns $b ibv_xsrq_pingpong -d roce1 -g $gid -n 20 -p $port $net.1 >"$PAIR_DIR/c1" 2>&1 &
c1=$!
in_ns $b ibv_xsrq_pingpong -d roce1 -g $gid -n 20 -p $port $net.1 >"$PAIR_DIR/c2" 2>&1
expect_status 0 $? "xsrq -c 2: second client"
wait $c1
expect_status 0 $? "xsrq -c 2: first client"
wait $srv
expect_status 0 $? "xsrq -c 2: server"
for f in srv c1 c2; do
	expect_match "$(cat "$PAIR_DIR/$f")" '^success$' "xsrq -c 2: $f reports success"
done
srqns "$PAIR_DIR/srv"
# perftest's eight programs, their default (send/recv or RDMA) mode.
for t in ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw ib_write_lat ib_read_lat ib_send_lat \
	ib_atomic_lat; do
	perf $t -n 100
done
perf ib_read_bw -n 20 -s 1048576
# With -e, after the event that follows its signalled SEND, ib_send_lat
# polls the send CQ once, and its next post needs that completion: it
# counts on the ACK reaching it before the answer, as a NIC's does
# (answer_wait.c). On both sides, and on the server only, against a
# client that busy-polls: when a busy poller's ACKs waited for its answer,
# the -e side failed "Couldn't post send" within 1,300 iterations. On both
# sides the ACK must leave before the event that wakes the program
# (rc_responder.c, complete_recv): sent when the batch ended, it failed
# within 728 to 14,277 iterations, in 5 runs of 5.
perf ib_send_lat -e -n 20000
port=$((port + 1))
run_pair "ib_send_lat -e on the server only (GID $gid)" $port \
	"ib_send_lat -d roce1 -x $gid -F -p $port -e -n 2000" \
	"ib_send_lat -d roce1 -x $gid -F -p $port -n 2000 $net.1"
# RoCEv2 over IPv6 (IBTA A17.4): GID 1, the veths' link-local addresses.
# The programs' own TCP still meets at $net.1.
gid=1
pp "rc over IPv6 -s 4096" ibv_rc_pingpong -c -s 4096 -n 100
pp "uc over IPv6" ibv_uc_pingpong -c -s 1024 -n 100
pp "ud over IPv6" ibv_ud_pingpong -c -s 1024 -n 100
perf ib_read_bw -n 100
perf ib_atomic_bw -n 100
perf ib_write_lat -n 100
gid=0

# rdma_cm between the namespaces: the IB CM's MADs on QP 1, as between
# two kernel hosts, and the data on the wire.
port=$((port + 1))
PAIR_STATUS=rping_status run_pair "rping" $port "rping -s -a $net.1 -p $port -C 20 -v" "rping -c -a $net.1 -p $port -C 20 -v" &&
	expect_match "$(cat "$PAIR_DIR/cli")" 'rdma-ping-19' "rping's 20th ping"
port=$((port + 1))
run_pair "ucmatose" $port "ucmatose -p $port -c 4 -C 50" "ucmatose -s $net.1 -p $port -c 4 -C 50" &&
	expect_match "$(cat "$PAIR_DIR/cli")" '^return status 0$' "ucmatose status"
# udaddy's -p is its port space; it always uses port 7174.
run_pair "udaddy" 7174 "udaddy -c 2" "udaddy -s $net.1 -c 2" &&
	expect_match "$(cat "$PAIR_DIR/cli")" '^return status 0$' "udaddy status"
# Multicast: mckey's receiver joins a group on its link (IGMP), and the
# sender's datagrams to it cross the veth as UD SENDs to DestQP 0xFFFFFF
# at the group's address (wire_mcast.c). 239.18.0.1 is administratively
# scoped, and a TTL of 1 keeps it on the veth.
in_ns $a mckey -m 239.18.0.1 -b $net.1 -C 10 >"$PAIR_DIR/srv" 2>&1 &
mck=$!
for _ in $(seq 100); do
	ip netns exec $a ss -lun | grep -q '239\.18\.0\.1:4791 ' && break
	sleep 0.05
done
in_ns $b mckey -m 239.18.0.1 -s -b $net.2 -C 10 >"$PAIR_DIR/cli" 2>&1
expect_status 0 $? "mckey's sender"
stop_within 10 $mck
wait $mck
expect_status 0 $? "mckey's receiver"
expect_match "$(cat "$PAIR_DIR/srv")" '^data transfers complete$' "mckey's receiver got its datagrams"
port=$((port + 1))
run_pair "rdma_server/rdma_client" $port "rdma_server -p $port" "rdma_client -s $net.1 -p $port" &&
	expect_match "$(cat "$PAIR_DIR/cli")" 'rdma_client: end 0' "rdma_client ends 0"
port=$((port + 1))
run_pair "rdma_xserver/rdma_xclient -c x (XRC through the CM)" $port "rdma_xserver -c x -p $port" \
	"rdma_xclient -c x -s $net.1 -p $port" &&
	expect_match "$(cat "$PAIR_DIR/cli")" 'rdma_xclient: end 0' "rdma_xclient ends 0"
port=$((port + 1))
run_pair "cmtime" $port "cmtime -p $port -c 20" "cmtime -s $net.1 -p $port -c 20" forever &&
	expect_match "$(cat "$PAIR_DIR/cli")" '^connect +:' "cmtime reports connection setup"
# run_pair stopped the server itself, not only the shell that started it
# (lib.sh, stop_job): an orphan would keep its port and its QPs.
left=$(for p in $(ip netns pids $a); do cat /proc/$p/comm 2>/dev/null; done | grep -cx cmtime)
expect_status 0 "$left" "cmtime servers still running after run_pair"
# rsockets between the namespaces, librdmacm's protocol at both ends
# (docs/rsockets.md): streams over RC, connected by the CM on QP 1, each
# byte checked (-T v); riowrite into the peer's riomap'd buffer; a file
# copied and compared; datagram rsockets over UD echoing.
rs_pair() { # PROGRAM "OPTIONS" LINE
	port=$((port + 1))
	run_pair "$1 $2" $port "$1 -p $port $2" "$1 -s $net.1 -p $port $2" &&
		expect_match "$(cat "$PAIR_DIR/cli")" "$3" "$1 $2 reports its run"
}
rs_pair rstream "-T v -S 4096 -C 100" '^custom +4k +100 '
rs_pair rstream "-T b -T v -S 100000 -C 20" '^custom +97k +20 '
rs_pair riostream "-S 65536 -C 100" '^custom +64k +100 '
port=$((port + 1))
head -c 3000000 /dev/urandom >"$dir/src.bin"
(cd "$dir" && in_ns $a rcopy -p $port) >"$PAIR_DIR/srv" 2>&1 &
srv=$!
wait_listen $port || bad "rcopy: the server never listened"
in_ns $b rcopy "$dir/src.bin" "$net.1:$dir/dst.bin" -p $port >"$PAIR_DIR/cli" 2>&1
expect_status 0 $? "rcopy client"
stop_job $srv
wait $srv 2>/dev/null
if cmp -s "$dir/src.bin" "$dir/dst.bin"; then ok; else bad "rcopy: the copy differs from its source"; fi
port=$((port + 1))
in_ns $a udpong -b $net.1 -p $port -T e -C 200 -S 1000 >"$PAIR_DIR/srv" 2>&1 &
srv=$!
wait_listen $port udp || bad "udpong: the server never bound its port"
in_ns $b udpong -s $net.1 -p $port -T e -C 200 -S 1000 >"$PAIR_DIR/cli" 2>&1
expect_status 0 $? "udpong client"
expect_match "$(cat "$PAIR_DIR/cli")" '^custom +1000 +400 ' "udpong echoes its 200 datagrams"
stop_job $srv
wait $srv 2>/dev/null
# A CM MAD no CM could have sent (bad_mad.py: a REQ whose body is all 0)
# is dropped, counted and left unanswered by the process that holds port
# 4791 in a; before, it was answered with a REJ.
port=$((port + 1))
in_ns $a rping -s -a $net.1 -p $port -C 1 >/dev/null 2>&1 &
srv=$!
wait_listen $port || bad "the rping server for the malformed MAD never listened"
out=$(timeout $T ip netns exec $b /usr/bin/python3 "$(dirname "$0")/bad_mad.py" $net.2 $net.1 2>&1)
expect_match "$out" '^no answer$' "a malformed REQ is not answered"
out=$(ip netns exec $a env UROCE_CONFIG="$dir/$a.conf" timeout $T "$UROCE" stat roce1 2>&1)
expect_match "$out" 'drop_bad_mad 1( |$)' "uroce stat counts the malformed MAD"
stop_job $srv
wait $srv 2>/dev/null
# perftest's two other modes: its older post-send path, and the CM (-R).
for mode in --use_old_post_send -R; do
	for t in ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw ib_write_lat ib_read_lat \
		ib_send_lat ib_atomic_lat; do
		perf $t -n 100 $mode
	done
done
sleep 0.5
kill $dump 2>/dev/null
wait $dump 2>/dev/null
uso on

# Wireshark's dissector, not uroce, reads the packets: the opcodes the
# programs use, and no packet whose RoCE headers are malformed. The
# InfiniBand dissector also guesses a protocol for the payload from its
# first bytes (RPC-over-RDMA, an ethertype...), and those guesses fail on
# the programs' bytes: a frame malformed only past its InfiniBand layer is
# the payload's, not a header's.
decoded=$(tshark -r "$dir/wire.pcap" -T fields -e _ws.col.Info 2>&1 |
	sed 's/ QP=.*//' | sort | uniq -c)
echo "opcode census of the capture:"
echo "$decoded"
expect_match "$decoded" 'RC Send Only' "tshark decodes RC Send Only"
expect_match "$decoded" 'RC Send Middle' "tshark decodes a segmented RC SEND"
expect_match "$decoded" 'RC Acknowledge' "tshark decodes RC ACKs"
expect_match "$decoded" 'UC Send' "tshark decodes UC"
expect_match "$decoded" 'UD Send Only' "tshark decodes UD"
# perftest's READs and atomics went over the wire, not shared memory.
expect_match "$decoded" 'RC RDMA Read Request' "tshark decodes READ requests"
expect_match "$decoded" 'RC RDMA Read Response Middle' "tshark decodes READ responses"
expect_match "$decoded" 'RC (Fetch Add|Compare Swap)' "tshark decodes atomics"
expect_match "$decoded" 'RC Atomic Acknowledge' "tshark decodes atomic ACKs"
expect_match "$decoded" 'RC RDMA Write' "tshark decodes RDMA WRITEs"
# XRC: Debian 12's tshark (Wireshark 4.0) names no XRC opcode, but gives
# the BTH's opcode and the UDP payload. A request to one of
# ibv_xsrq_pingpong's target QPs (BTH bytes 5-7) has its XRCETH in bytes
# 12-15: a reserved 0, then an SRQ number the programs printed
# (rdma_xclient prints none, so its requests are counted, not checked).
# Responses (0xad-0xb2) carry none.
xrc=$(tshark -r "$dir/wire.pcap" -Y 'infiniband.bth.opcode >= 0xa0 && infiniband.bth.opcode <= 0xb7' \
	-T fields -e infiniband.bth.opcode -e udp.payload 2>/dev/null |
	awk -v known="$(sort -u "$dir/srqns" | tr '\n' ' ')" \
		-v targets="$(sort -u "$dir/xrc_qpns" | tr '\n' ' ')" '
		BEGIN { n = split(known, k, " "); for (i = 1; i <= n; i++) srqn[k[i]] = 1
			n = split(targets, k, " "); for (i = 1; i <= n; i++) tgt[k[i]] = 1 }
		$1 >= 173 && $1 <= 178 { responses++; acks += $1 == 177; next }
		{ requests++; middles += $1 == 161; x = substr($2, 25, 8) }
		substr($2, 11, 6) in tgt { checked++
		  if (substr(x, 1, 2) != "00" || !(substr(x, 3, 6) in srqn)) bad++ }
		END { printf "XRC requests %d (SEND middles %d), responses %d (ACKs %d); to xsrq targets %d, XRCETH not a known SRQ %d\n",
			requests, middles, responses, acks, checked, bad }')
echo "$xrc"
expect_match "$xrc" '^XRC requests [1-9][0-9]* \(SEND middles [1-9][0-9]*\), responses [1-9][0-9]* \(ACKs [1-9][0-9]*\); to xsrq targets [1-9][0-9]*, XRCETH not a known SRQ 0$' \
	"XRC SENDs, segmented too, each naming an SRQ, and XRC ACKs on the wire"
mcast=$(tshark -r "$dir/wire.pcap" -Y 'ip.dst == 239.18.0.1 && infiniband.bth.destqp == 0xffffff' \
	2>/dev/null | wc -l)
expect_status 10 "$mcast" "mckey's datagrams to the group on the wire"
# The CM's messages, every kind rping, ucmatose, udaddy and cmtime use.
for m in ConnectRequest ConnectReply ReadyToUse DisconnectRequest DisconnectReply \
	ServiceIDResReq ServiceIDResReqResp; do
	expect_match "$decoded" "CM: $m\$" "tshark decodes the CM's $m"
done
decoded6=$(tshark -r "$dir/wire.pcap" -Y ipv6 -T fields -e _ws.col.Info 2>&1 |
	sed 's/ QP=.*//' | sort | uniq -c)
echo "opcode census of its IPv6 packets:"
echo "$decoded6"
for op in 'RC Send Middle' 'RC Acknowledge' 'UC Send' 'UD Send Only' 'RC RDMA Read Request' \
	'RC RDMA Read Response' 'RC (Fetch Add|Compare Swap)' 'RC Atomic Acknowledge' \
	'RC RDMA Write'; do
	expect_match "$decoded6" "$op" "tshark decodes $op over IPv6"
done
malformed=$(tshark -r "$dir/wire.pcap" -Y _ws.malformed -T fields -e frame.number \
	-e frame.protocols 2>/dev/null | grep -Ev ':infiniband:[a-z]')
[ -z "$malformed" ] || echo "$malformed" | head -5 >&2
malformed=$(printf '%s' "$malformed" | grep -c .)
expect_status 0 "$malformed" "malformed packets in the capture"
# Every ICRC, recomputed by scapy's RoCE layer (one frame in 20: scapy
# reads some 5,000 a second).
icrc=$(timeout $T /usr/bin/python3 "$(dirname "$0")/icrc_check.py" "$dir/wire.pcap" 20 2>&1)
expect_status 0 $? "scapy's ICRC check"
expect_match "$icrc" ', 0 mismatched' "scapy recomputes the ICRCs"
expect_match "$icrc" '; [1-9][0-9]* over IPv6' "ICRCs over IPv6 recomputed too"
echo "$icrc"
# And every packet to QP 1, each: the CM's MADs both ways, and the
# malformed one bad_mad.py built itself (a sample of one in 20 found its
# ICRC wrong once, the kernel having numbered its IPv4 header).
tshark -r "$dir/wire.pcap" -Y 'infiniband.bth.destqp == 1' -F pcap -w "$dir/qp1.pcap" 2>/dev/null
icrc=$(timeout $T /usr/bin/python3 "$(dirname "$0")/icrc_check.py" "$dir/qp1.pcap" 1 2>&1)
expect_match "$icrc" '^[1-9][0-9]* RoCEv2 ICRCs recomputed.*, 0 mismatched' "every MAD's ICRC: $icrc"

# The link goes down under a running pingpong: an outage shorter than the
# retries (ibv_rc_pingpong's: 8 x 67 ms) is ridden out; a longer one ends
# each side with a SEND in flight in IBV_WC_RETRY_EXC_ERR, as a NIC's would,
# within a second or so. The other side then waits for a message that never
# comes, as on a NIC; its timeout (30 s) stops it. outage SECONDS: a's veth
# down for SECONDS, once a pingpong of OUTAGE_ITERS iterations is seen
# running; the sides' output in $dir/out.srv, out.cli.
rx_packets() { ip netns exec $a cat /sys/class/net/${a}v/statistics/rx_packets; }
# Until a's veth has received N packets more than it had at FROM (the
# pingpong's SENDs and ACKs, past its TCP exchange), 10 s at most.
until_received() {
	local from=$1 n=$2 tries=1000
	while [ $(($(rx_packets) - from)) -lt $n ] && [ $tries -gt 0 ]; do
		sleep 0.01
		tries=$((tries - 1))
	done
}
outage() {
	local srv cli t0 e first= rx0
	port=$((port + 1))
	rm -f "$dir"/end.*
	# Each side ends by itself: no pkill, which hung for minutes under the
	# ASan build's LD_PRELOAD.
	{
		T=30 in_ns $a ibv_rc_pingpong -d roce1 -g 0 -n $OUTAGE_ITERS -p $port >"$dir/out.srv" 2>&1
		date +%s%N >"$dir/end.srv"
	} &
	srv=$!
	wait_listen $port || bad "outage $1: the server never listened"
	rx0=$(rx_packets)
	{
		T=30 in_ns $b ibv_rc_pingpong -d roce1 -g 0 -n $OUTAGE_ITERS -p $port $net.1 >"$dir/out.cli" 2>&1
		date +%s%N >"$dir/end.cli"
	} &
	cli=$!
	# Not a fixed delay: under load a round trip took 0.4 ms in one
	# pingpong and 2.2 ms in the calibration before it, and the 2,000
	# round trips the calibration asked for were over before a second
	# (the outage came after the pingpong, and no retry ran out).
	until_received $rx0 200
	[ ! -e "$dir/end.cli" ] && [ ! -e "$dir/end.srv" ] ||
		bad "outage $1: the pingpong ended before the link went down"
	t0=$(date +%s%N)
	ip -n $a link set ${a}v down
	sleep "$1"
	ip -n $a link set ${a}v up
	wait $srv $cli 2>/dev/null
	for e in "$dir"/end.*; do
		[ -e "$e" ] || continue
		e=$((($(cat "$e") - t0) / 1000000))
		[ -n "$first" ] && [ "$first" -le "$e" ] || first=$e
	done
	OUTAGE_MS=$first
}
# The pingpong must still run after the link comes back, and end well
# within its 30 s: about 4 s of round trips as this machine runs them now,
# measured with a short pingpong first. A fixed count cannot do both:
# 200,000 round trips take 5 s on an idle machine, and 105-163 s under ASan
# beside two busy loops (0.5-0.8 ms each, each side waiting for a core the
# busy loops hold), where a 30 s limit cut both sides off before they had
# printed anything.
port=$((port + 1))
run_pair "the outage's calibration" $port "ibv_rc_pingpong -d roce1 -g 0 -n 2000 -p $port" \
	"ibv_rc_pingpong -d roce1 -g 0 -n 2000 -p $port $net.1"
usec=$(sed -n 's/.* = \([0-9.]*\) usec\/iter$/\1/p' "$PAIR_DIR/cli" | tail -1)
OUTAGE_ITERS=$(awk -v u="${usec:-25}" 'BEGIN { n = int(4e6 / u); print (n > 200000 ? 200000 : n < 2000 ? 2000 : n) }')
echo "outage pingpongs: $OUTAGE_ITERS iterations (a calibration round trip took ${usec:-?} us)"
# Static neighbours: the outage tests uroce's retries, not ARP. Without
# them, a solicitation b sent while its carrier was down was retried only
# a second later (the kernel's neighbour retrans_time), past the
# pingpong's 8 x 67 ms: one outage of 0.2 s in six ended in RETRY_EXC_ERR
# on both sides (a capture showed b's first ARP 1 s after the flap). a's
# entry goes with its admin down; its first packet after resolves at once.
mac() { ip -n $1 -br link show $2 | awk '{ print $3 }'; }
ip -n $a neigh replace $net.2 lladdr "$(mac $b ${b}v)" dev ${a}v nud permanent
ip -n $b neigh replace $net.1 lladdr "$(mac $a ${a}v)" dev ${b}v nud permanent
outage 0.2
expect_match "$(cat "$dir/out.srv")" "^$OUTAGE_ITERS iters in" "a 0.2 s outage: the server finishes"
expect_match "$(cat "$dir/out.cli")" "^$OUTAGE_ITERS iters in" "a 0.2 s outage: the client finishes"
outage 3
expect_match "$(cat "$dir/out.srv" "$dir/out.cli")" 'transport retry counter exceeded \(12\)' \
	"a 3 s outage: RETRY_EXC_ERR"
[ -n "$OUTAGE_MS" ] && [ "$OUTAGE_MS" -lt 3000 ] && ok ||
	bad "a 3 s outage: the first side ended ${OUTAGE_MS:-never} ms after the link went down"
echo "a 3 s outage: the first side ended ${OUTAGE_MS} ms after the link went down"

# A responder that answers every request with a PSN sequence error NAK at
# the same PSN (nak_peer.py in a, playing ibv_rc_pingpong's server): the
# requester spends its retry count, 1 + retry_cnt 7 = 8 transmissions of
# its one-packet SEND, each NAKed, and ends in RETRY_EXC_ERR, as a NIC
# would. Before, each NAK was a free retransmission and the client never
# ended. nak_peer COPIES: each NAK sent that many times, as a duplicating
# network would; a copy is not paid for again (twice as many NAKs for the
# same 8 transmissions; when copies were paid, 5% duplication ran the
# budget out under verbs_stress_faults_heavy once).
nak_run() { # COPIES NAKS
	port=$((port + 1))
	timeout $T ip netns exec $a /usr/bin/python3 "$(dirname "$0")/nak_peer.py" $net.1 $port 200 $1 \
		>"$dir/nak.out" 2>&1 &
	local nak=$!
	wait_listen $port
	out=$(T=10 in_ns $b ibv_rc_pingpong -d roce1 -g 0 -s 64 -p $port $net.1 2>&1)
	expect_status 1 $? "NAKed for ever (x$1): the client ends, with an error"
	expect_match "$out" 'transport retry counter exceeded \(12\)' "NAKed for ever (x$1): RETRY_EXC_ERR"
	wait $nak
	expect_match "$(cat "$dir/nak.out")" "^$2 sequence error NAKs sent\$" "NAKed for ever (x$1): $2 NAKs"
}
nak_run 1 8
nak_run 2 16

# Every RC operation exactly once between the two "hosts" under the faults
# of verbs_stress_faults (on the wire between namespaces, path MTU 1024):
# the stress program, a process in each namespace, every byte checked, every
# atomic counted; then clean, more of them. Before a message resumed from
# its first missing packet, a 64 KiB READ here was asked again until its
# 48-packet window came whole, and 1,000 operations did not end in 150 s;
# now 7 s. The seed's stream loses at most four packets in a row
# (test_stress.c MAX_LOSS_RUN). No ACK timeout (timeout 0: sent again
# every 10 ms, never given up), as verbs_stress_faults_heavy: with one, eight
# failed attempts in a row end a QP about once in 0.21^-8 operations at
# these rates (tests/CMakeLists.txt), and did once under ASan here.
stress_ns() { # FAULTS OPS
	local faults=()
	[ -z "$1" ] || faults=("UROCE_FAULTS=$1" PAIR_TIMEOUT=0)
	env "${faults[@]}" UROCE="$UROCE" STRESS_NETNS=$a,$b STRESS_CONF_DIR=$dir STRESS_DEV=roce1 \
		STRESS_OPS=$2 timeout 250 "$BUILD_DIR/bin/test_stress" 2>&1
}
out=$(stress_ns 'loss=10%,dup=5%,reorder=5%,corrupt=1%,seed=22' 1000)
expect_status 0 $? "the stress program between the namespaces under faults"
expect_match "$out" 'received and checked [0-9]+' "under faults, what came was checked"
printf '%s\n' "$out" | tail -3
out=$(stress_ns '' 5000)
expect_status 0 $? "the stress program between the namespaces"
expect_match "$out" 'received and checked [0-9]+' "what came was checked"

# UROCE_TRANSPORT=roce: two processes of one namespace over the wire
# path, the one that receives a packet for the other forwarding it.
pair_server() { UROCE_TRANSPORT=roce in_ns $a "$@"; }
pair_client() { UROCE_TRANSPORT=roce in_ns $a "$@"; }
port=$((port + 1))
run_pair "forced RoCEv2 within one namespace" $port \
	"ibv_rc_pingpong -d roce1 -g 0 -c -n 100 -p $port" \
	"ibv_rc_pingpong -d roce1 -g 0 -c -n 100 -p $port $net.1" &&
	expect_match "$(cat "$PAIR_DIR/cli")" 'iters in' "forced RoCEv2 reports"
finish
