#!/usr/bin/env bash
# `uroce run --pcap` traces the RoCEv2 packets a program
# sends and takes; tshark decodes the trace, scapy recomputes its ICRCs,
# and its opcodes and PSNs are the operations the program posted. A traced
# (or faulted) process takes the wire path, and so does a peer on this host
# that connects to it or sends it datagrams, whether or not that peer is
# traced.
. "$(dirname "$0")/lib.sh" 60
here=$(dirname "$0")
command -v tshark >/dev/null || { echo "SKIP: tshark is missing"; exit 77; }
port=$((25000 + ($$ % 3000)))
dir=$PAIR_DIR
fields="-T fields -e infiniband.bth.opcode -e infiniband.bth.psn -e infiniband.bth.destqp -e infiniband.aeth.syndrome"

# decode FILE: tshark's fields of the trace (its error output kept apart).
decode() { tshark -r "$1" $fields 2>"$dir/tshark.err"; }
# side_field OUTPUT local|remote QPN|PSN: from ibv_rc_pingpong's address lines.
side_field() { sed -n "s/.*$2 address:.*$3 \(0x[0-9a-f]*\).*/\1/p" "$1" | head -1; }

# pingpong WHAT "SERVER OPTIONS" "CLIENT OPTIONS" ARGS...: one
# ibv_rc_pingpong pair with uroce run's options for each side.
pingpong() {
	local what=$1 sopt=$2 copt=$3
	shift 3
	port=$((port + 1))
	run_pair "$what" $port "$sopt ibv_rc_pingpong -g 0 -c -p $port $*" \
		"$copt ibv_rc_pingpong -g 0 -c -p $port $* 127.0.0.1"
}

# A clean run, both sides traced: 20 SENDs of 5 packets (MTU 1024) each way.
pingpong "traced pair" "--pcap $dir/srv.pcap" "--pcap $dir/cli.pcap" -s 5000 -n 20
cq=$(side_field "$dir/cli" local QPN) cpsn=$(side_field "$dir/cli" local PSN)
sq=$(side_field "$dir/srv" local QPN) spsn=$(side_field "$dir/srv" local PSN)
for t in cli srv; do
	[ -s "$dir/$t.pcap" ] && ok || bad "$t: no trace written"
	expect_status 0 "$(tshark -r "$dir/$t.pcap" -Y _ws.malformed 2>/dev/null | wc -l)" \
		"$t: malformed packets in the trace"
	out=$(decode "$dir/$t.pcap" | "$here/trace_check.py" sends "$sq" "$cpsn" 20 5)
	expect_status 0 $? "$t: the client's SENDs as posted ($out)"
	out=$(decode "$dir/$t.pcap" | "$here/trace_check.py" sends "$cq" "$spsn" 20 5)
	expect_status 0 $? "$t: the server's SENDs as posted ($out)"
	out=$("$here/icrc_check.py" "$dir/$t.pcap")
	expect_match "$out" ', 0 mismatched' "$t: scapy recomputes the trace's ICRCs"
done
expect_match "$(tshark -r "$dir/cli.pcap" 2>/dev/null)" 'RC Acknowledge' "the trace holds the ACKs"

# Only the client is traced: the server, on shared memory otherwise, takes
# the wire too (a one-sided trace used to leave the pair unable to talk).
pingpong "traced client, plain server" "" "--pcap $dir/one.pcap" -s 64 -n 50
sq=$(side_field "$dir/srv" local QPN)
out=$(decode "$dir/one.pcap" | "$here/trace_check.py" sends "$sq" "$(side_field "$dir/cli" local PSN)" 50 1)
expect_status 0 $? "the one-sided trace holds the client's SENDs ($out)"

# The same with faults on the server alone (it used to end the client in
# RETRY_EXC_ERR: the plain client took shared memory, the server the wire).
pingpong "faulted server, plain client" "--faults loss=2%,seed=5" "" -s 5000 -n 20

# Loss on the client's packets: the server NAKs the gaps and the client
# sends again; both show in the traces, and the run still passes.
pingpong "lossy pair" "--pcap $dir/lsrv.pcap" "--faults loss=5%,seed=3 --pcap $dir/lcli.pcap" -s 5000 -n 50
cq=$(side_field "$dir/cli" local QPN) sq=$(side_field "$dir/srv" local QPN)
out=$(decode "$dir/lsrv.pcap" | "$here/trace_check.py" naks "$cq")
expect_status 0 $? "the server's trace shows its NAKs ($out)"
out=$(decode "$dir/lcli.pcap" | "$here/trace_check.py" retransmits "$sq")
expect_status 0 $? "the client's trace shows its retransmissions ($out)"

# --pcap-snap keeps the headers and cuts the payload: a 1 KiB SEND First
# keeps IPv4, UDP, BTH, 16 bytes and the ICRC, and still decodes whole.
pingpong "snapped trace" "" "--pcap $dir/snap.pcap --pcap-snap 16" -s 4000 -n 5
lens=$(tshark -r "$dir/snap.pcap" -Y 'infiniband.bth.opcode == 0' -T fields -e frame.cap_len \
	-e frame.len 2>/dev/null | sort -u)
expect_match "$lens" '^60	1068$' "--pcap-snap 16 keeps 16 payload bytes of a 1 KiB SEND"
expect_status 0 "$(tshark -r "$dir/snap.pcap" -Y _ws.malformed 2>/dev/null | wc -l)" \
	"malformed packets in a snapped trace"
out=$(decode "$dir/snap.pcap" | "$here/trace_check.py" sends "$(side_field "$dir/srv" local QPN)" \
	"$(side_field "$dir/cli" local PSN)" 5 4)
expect_status 0 $? "a snapped trace still holds the SENDs as posted ($out)"
expect_match "$("$here/icrc_check.py" "$dir/snap.pcap")" ', 0 mismatched' "a snapped packet's ICRC is its own"

# A QP's packets keep one UDP source port, and QPs spread over several (the
# source port is flow entropy): 16 QPs a side, every packet to one QP from
# one port.
port=$((port + 1))
run_pair "16 QPs, traced" $port "--pcap $dir/q16.pcap ibv_srq_pingpong -g 0 -c -q 16 -n 50 -p $port" \
	"ibv_srq_pingpong -g 0 -c -q 16 -n 50 -p $port 127.0.0.1"
flows=$(tshark -r "$dir/q16.pcap" -T fields -e infiniband.bth.destqp -e udp.srcport 2>/dev/null | sort -u)
most=$(printf '%s\n' "$flows" | awk 'NF == 2 { n[$1]++ } END { for (q in n) if (n[q] > m) m = n[q]; print m + 0 }')
expect_status 1 "$most" "source ports seen by the QP that sees the most"
ports=$(printf '%s\n' "$flows" | awk 'NF == 2 { print $2 }' | sort -u | wc -l)
[ "$ports" -ge 4 ] && ok || bad "32 QPs sent from $ports UDP source port(s)"

# "%p": a file per process.
pingpong "a trace per process" "--pcap $dir/p-%p.pcap" "--pcap $dir/p-%p.pcap" -n 10
expect_status 2 "$(ls "$dir"/p-*.pcap 2>/dev/null | wc -l)" "two processes, two traces"

# UD, traced on both sides.
port=$((port + 1))
run_pair "traced UD" $port "--pcap $dir/ud.pcap ibv_ud_pingpong -g 0 -c -p $port -n 20" \
	"--pcap $dir/udc.pcap ibv_ud_pingpong -g 0 -c -p $port -n 20 127.0.0.1"
expect_match "$(tshark -r "$dir/ud.pcap" 2>/dev/null)" 'UD Send Only' "tshark decodes the UD trace"

# Only the UD server is traced: the plain client's datagrams, which would
# take shared memory, come to it on the wire, and so into its trace; its
# own to the client, which does not listen on the wire, go over shared
# memory and into its trace as the packets they would have been.
port=$((port + 1))
run_pair "UD, traced server" $port "--pcap $dir/uds.pcap ibv_ud_pingpong -g 0 -c -p $port -n 20" \
	"ibv_ud_pingpong -g 0 -c -p $port -n 20 127.0.0.1"
for side in srv cli; do
	qpn=$(side_field "$dir/$side" local QPN)
	got=$(tshark -r "$dir/uds.pcap" -Y "infiniband.bth.opcode == 100 && infiniband.bth.destqp == $qpn" \
		2>/dev/null | wc -l)
	[ "$got" -ge 20 ] && ok || bad "the server's trace holds $got datagrams to the $side, not 20 or more"
done
expect_match "$("$here/icrc_check.py" "$dir/uds.pcap")" ', 0 mismatched' "the UD trace's ICRCs"

# A trace that cannot be written: typed as --pcap, the command fails before
# the program starts; set as UROCE_PCAP, the library names the variable and
# the program runs on.
out=$("$UROCE" run --pcap /nonexistent/dir/x.pcap true 2>&1)
expect_status 1 $? "--pcap to an unwritable file is refused"
expect_match "$out" '^uroce run: --pcap /nonexistent/dir/x.pcap: .*directory /nonexistent/dir: No such file' \
	"the refusal names --pcap, the file and why"
export UROCE_PCAP=/nonexistent/dir/x.pcap
pingpong "unwritable trace" "" "" -n 10
unset UROCE_PCAP
expect_match "$(cat "$dir/cli")" '^uroce: UROCE_PCAP=/nonexistent/dir/x.pcap: running without the trace it asks for: .*/nonexistent/dir/x.pcap' "the lost trace is reported"
out=$("$UROCE" run --pcap-snap 70000 true 2>&1)
expect_status 2 $? "--pcap-snap 70000 is refused"
expect_match "$out" 'snap length' "the refusal says why"
finish
