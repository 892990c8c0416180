#!/usr/bin/env bash
# rdma_cm on a host whose only uroce link is on another netdev than lo, as
# on a kernel host with Soft-RoCE on eth0: the kernel's CM counts 127/8 and
# ::1 as "any" address (cma.c, cma_any_addr), so a server bound to
# 127.0.0.1 listens on every device and takes requests for any address,
# and a client resolving 127.0.0.1 is given the first active device
# (cma_bind_loopback). Unmodified rping in a network namespace this test
# creates and removes (198.18.0.0/15), the link on one end of a veth pair.
. "$(dirname "$0")/lib.sh" 30

need_netns
ns=uroce-lb-$$
ns_with_link $ns vlb0 vlb1 198.18.7 lb0
pair_server() { timeout $T ip netns exec $ns "$UROCE" run "$@"; }
pair_client() { timeout $T ip netns exec $ns "$UROCE" run "$@"; }
server_ss() { ip netns exec $ns ss "$@"; }
port=$((19000 + ($$ % 1000)))

PAIR_STATUS=rping_status run_pair "rping over 127.0.0.1, no link on lo" $((port += 1)) \
	"rping -s -a 127.0.0.1 -p $port -V -C 20" "rping -c -a 127.0.0.1 -p $port -V -C 20"
PAIR_STATUS=rping_status run_pair "rping to the link's address, server bound to 127.0.0.1" \
	$((port += 1)) "rping -s -a 127.0.0.1 -p $port -V -C 20" \
	"rping -c -a 198.18.7.1 -p $port -V -C 20"
PAIR_STATUS=rping_status run_pair "rping over ::1, no link on lo" $((port += 1)) \
	"rping -s -a ::1 -p $port -V -C 20" "rping -c -a ::1 -p $port -V -C 20"
# A listener is ready for other hosts (its service name bound for the
# CM's REQs on QP 1) before its TCP port, which wait_listen watches,
# listens: bound to the link's address, to any address, and to 0.0.0.0
# and :: (AFONLY) side by side on one port, as their TCP sockets may.
for a in 198.18.7.1 0.0.0.0 "0.0.0.0 ::"; do
	out=$(timeout $T ip netns exec $ns "$UROCE" run "$LISTEN_READY" $((port += 1)) $a 2>&1)
	expect_status 0 $? "listen_ready $a: $out"
done
# An address of a netdev without a uroce link is still no device's.
out=$(pair_client rping -s -a 198.18.7.2 -p $((port += 1)) -C 1 2>&1)
expect_match "$out" 'rdma_bind_addr: No such device' "rping -s on a netdev without a link"
finish
