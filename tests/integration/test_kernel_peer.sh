#!/usr/bin/env bash
# uroce and a Linux kernel's RDMA stack on two hosts: Debian's own kernel
# in a QEMU guest (tests/kernel_peer/) with Soft-RoCE (rdma_rxe) and the
# kernel's rdma_cm, uroce on the host end of its tap. Unmodified programs
# on both sides, each side serving in turn: the verbs data path (RC, UD),
# the IB CM's MADs on QP 1 (rping, ucmatose, udaddy's SIDR, rdma_server,
# cmtime, perftest -R), multicast (mckey), a REJ for a port nobody listens
# on, and rsockets (rstream, riostream, udpong). Needs root (CI runs as root) for its namespace and tap;
# skipped otherwise.
. "$(dirname "$0")/lib.sh" 120
. "$(dirname "$0")/../kernel_peer/peer.sh"
need_netns
ns=ukp$$ net=198.18.$((100 + $$ % 150))
trap 'peer_stop; ip netns del $ns 2>/dev/null; rm -rf "$PAIR_DIR"; rm -f "$UROCE_CONFIG"' EXIT
peer_up $ns $net
echo "link roce1 netdev kp0" >"$UROCE_CONFIG"
# The guest's rxe0: GID 1 is its IPv4 address (rxe orders them so);
# uroce's roce1: GID 0.
host() { ip netns exec $ns timeout $T "$UROCE" run "$@"; }
server_ss() { ip netns exec $ns ss "$@"; }
guest() { # CMD...: in the guest, its output on stdout, its status
	local tag=g$(date +%s%N) rc # unique, from a subshell too
	peer_start $tag "timeout $T $*"
	rc=$(peer_wait $tag $((T + 10)))
	cat "$PEER_SHARE/out.$tag" 2>/dev/null
	return "$rc"
}
guest_serves() { # PORT CMD...: a guest server; "listening.sPORT.*" once it listens
	local port=$1 tag=s$1.$BASHPID rc
	shift
	rm -f "$PEER_SHARE"/listening.s$port.* # a run again (run_pair) waits anew
	peer_start $tag "serve $port timeout $T $*"
	rc=$(peer_wait $tag $((T + 10)))
	cat "$PEER_SHARE/out.$tag" 2>/dev/null
	return "$rc"
}

# both WHAT "SERVER ARGS" "CLIENT ARGS" [REGEX]: a program between the two, the
# kernel serving uroce (unless UROCE_SERVES_ONLY), then uroce serving the
# kernel (run_pair, lib.sh); each client's output has a line REGEX matches.
# In the arguments @P is the port, @S the server's address, @D the side's
# device and @G its IPv4 GID index (rxe puts the IPv4 address at 1, uroce
# at 0). With FIXED_PORT, the program's own port instead of a new one.
port=$((20000 + $$ % 4000))
args() { # ARGS SERVER_ADDR DEV GID
	local a=${1//@P/$port}
	a=${a//@S/$2}
	a=${a//@D/$3}
	echo "${a//@G/$4}"
}
both() {
	local what=$1 srv=$2 cli=$3 says=${4:-}
	port=${FIXED_PORT:-$((port + 1))}
	pair_server() { guest_serves $port "$@"; }
	pair_client() { host "$@"; }
	# The guest's listeners as ss prints them, for wait_listen.
	server_ss() { ls "$PEER_SHARE" | sed -n 's/^listening\.s\([0-9]*\)\..*/ :\1 /p'; }
	[ -n "${UROCE_SERVES_ONLY:-}" ] ||
		run_pair "$what: the kernel serves uroce" $port "$(args "$srv" $net.2 rxe0 1)" \
			"$(args "$cli" $net.2 roce1 0)" ${PAIR_FOREVER:-} && client_says "$what" "$says"
	port=${FIXED_PORT:-$((port + 1))}
	pair_server() { host "$@"; }
	pair_client() { guest "$@"; }
	server_ss() { ip netns exec $ns ss "$@"; }
	run_pair "$what: uroce serves the kernel" $port "$(args "$srv" $net.1 roce1 0)" \
		"$(args "$cli" $net.1 rxe0 1)" ${PAIR_FOREVER:-} && client_says "$what" "$says"
}
client_says() { # WHAT REGEX: the client's output has a line REGEX matches
	[ -z "$2" ] || expect_match "$(cat "$PAIR_DIR/cli")" "$2" "$1's client"
}
# A guest program starts from the host's root over 9p under TCG: its
# server may take seconds to listen.
LISTEN_WAIT=600

# The verbs data path; the programs meet on TCP.
both "ibv_rc_pingpong" "ibv_rc_pingpong -d @D -g @G -p @P -n 20" \
	"ibv_rc_pingpong -d @D -g @G -p @P -n 20 @S" '20 iters in'
both "ibv_ud_pingpong" "ibv_ud_pingpong -d @D -g @G -p @P -s 512 -n 20" \
	"ibv_ud_pingpong -d @D -g @G -p @P -s 512 -n 20 @S" '20 iters in'
# The IB CM on QP 1.
PAIR_STATUS=rping_status both "rping" "rping -s -a @S -p @P -C 100 -V -v" \
	"rping -c -a @S -p @P -C 100 -V -v" 'rdma-ping-99: '
both "ucmatose" "ucmatose -p @P -c 2 -C 10" "ucmatose -s @S -p @P -c 2 -C 10" '^return status 0$'
# udaddy's port is 7174 whatever -p says (its port space).
FIXED_PORT=7174 both "udaddy (SIDR)" "udaddy -c 2" "udaddy -s @S -c 2" '^return status 0$'
both "rdma_server/rdma_client" "rdma_server -p @P" "rdma_client -s @S -p @P" 'rdma_client: end 0'
# cmtime's server serves until stopped: run_pair's "forever" stops the
# uroce one, and the guest's is ended in the guest.
PAIR_FOREVER=forever both "cmtime" "cmtime -p @P -c 10" "cmtime -s @S -p @P -c 10" '^connect +:'
guest pkill -x cmtime
# perftest: its READ depth is the peer's (rxe offers 128), and with -R its
# own handshake and its data connection go through the CM. A perftest -R
# server only listens for the data connection after the handshake, and a
# client that comes first is rejected (lib.sh, perftest_own_failure): a
# server in the slow guest loses that race most of the time, so the
# kernel serves perftest without -R.
both "ib_read_lat" "ib_read_lat -F -d @D -x @G -p @P -n 100" \
	"ib_read_lat -F -d @D -x @G -p @P -n 100 @S"
both "ib_atomic_lat" "ib_atomic_lat -F -d @D -x @G -p @P -n 100" \
	"ib_atomic_lat -F -d @D -x @G -p @P -n 100 @S"
UROCE_SERVES_ONLY=1 both "ib_send_bw -R" "ib_send_bw -R -F -d @D -x @G -p @P -n 100" \
	"ib_send_bw -R -F -d @D -x @G -p @P -n 100 @S"
UROCE_SERVES_ONLY=1 both "ib_read_lat -R" "ib_read_lat -R -F -d @D -x @G -p @P -n 100" \
	"ib_read_lat -R -F -d @D -x @G -p @P -n 100 @S"
UROCE_SERVES_ONLY=1 both "ib_atomic_lat -R" "ib_atomic_lat -R -F -d @D -x @G -p @P -n 100" \
	"ib_atomic_lat -R -F -d @D -x @G -p @P -n 100 @S"

# A server bound to 127.0.0.1 on a host whose RDMA link is not on lo: the
# kernel's CM counts 127/8 as any address (cma.c, cma_any_addr) and its
# listener takes a request for any of the host's addresses
# (cma_match_private_data); uroce's does the same.
both "rping, the server bound to 127.0.0.1" "rping -s -a 127.0.0.1 -p @P -C 10 -V -v" \
	"rping -c -a @S -p @P -C 10 -V -v" 'rdma-ping-9: '

# Multicast: each side's mckey receiver joins a group on its netdev (the
# kernel's rdma_cm with IGMP, uroce's wire_mcast.c) and the other side's
# sender reaches it. 239.18.0.0/24 is administratively scoped.
peer_start mrecv "timeout $T mckey -m 239.18.0.2 -b $net.2 -C 10"
peer_start mjoin "for i in \$(seq 300); do ip maddr show dev eth0 | grep -q 239.18.0.2 && exit 0; sleep 0.1; done; exit 1"
expect_status 0 "$(peer_wait mjoin 60)" "the kernel's mckey joins its group"
out=$(host mckey -m 239.18.0.2 -s -b $net.1 -C 10 2>&1)
expect_status 0 $? "uroce's mckey sends to the kernel's group: $out"
expect_status 0 "$(peer_wait mrecv $((T + 10)))" "the kernel's mckey receiver"
expect_match "$(cat "$PEER_SHARE/out.mrecv")" '^data transfers complete$' \
	"the kernel's mckey receiver got uroce's datagrams"
host mckey -m 239.18.0.3 -b $net.1 -C 10 >"$PAIR_DIR/srv" 2>&1 &
mck=$!
for _ in $(seq 100); do
	ip netns exec $ns ss -lun | grep -q '239\.18\.0\.3:4791 ' && break
	sleep 0.05
done
out=$(guest mckey -m 239.18.0.3 -s -b $net.2 -C 10 2>&1)
expect_status 0 $? "the kernel's mckey sends to uroce's group: $out"
stop_within 10 $mck
wait $mck
expect_status 0 $? "uroce's mckey receiver"
expect_match "$(cat "$PAIR_DIR/srv")" '^data transfers complete$' \
	"uroce's mckey receiver got the kernel's datagrams"

# A REQ for a port nobody listens on: each host's CM rejects it (reason
# 8, invalid service ID). On the uroce host, whichever uroce process holds
# port 4791 answers for the host: here a server on another port.
port=$((port + 1))
out=$(host rping -c -a $net.2 -p $port -C 1 -v 2>&1)
expect_match "$out" 'REJECTED' "uroce's rping to a port the kernel has no listener on"
host rping -s -a $net.1 -p $port -C 1 -v >"$PAIR_DIR/srv" 2>&1 &
srv=$!
wait_listen $port || bad "the uroce server for the REJ test never listened"
out=$(guest rping -c -a $net.1 -p $((port + 1)) -C 1 -v 2>&1)
expect_match "$out" 'REJECTED' "the kernel's rping to a port no uroce process listens on"
stop_job $srv
wait $srv 2>/dev/null

# Stream rsockets, librdmacm's protocol at both ends (docs/rsockets.md):
# rstream's bytes checked (-T v), also blocking (-T b); riostream's
# riowrite into the peer's riomap'd buffer, and its messages. The guest
# runs under TCG: short runs.
both "rstream" "rstream -p @P -S 10000 -C 20 -T v" "rstream -s @S -p @P -S 10000 -C 20 -T v" \
	'^custom +9.7k +20 '
both "rstream -T b" "rstream -p @P -S 100000 -C 10 -T b -T v" \
	"rstream -s @S -p @P -S 100000 -C 10 -T b -T v" '^custom +97k +10 '
both "riostream" "riostream -p @P -S 65536 -C 20" "riostream -s @S -p @P -S 65536 -C 20" \
	'^custom +64k +20 '

# udpong: datagram rsockets, librdmacm's protocol at both ends: a datagram
# goes over UDP behind a header that names the sender's QP until the
# answer names the peer's, then as a UD SEND (docs/rsockets.md). One way,
# 32 datagrams of 1000 B, each one counted by the server. One way has no
# flow control, as UDP has none: a burst the server does not read as fast
# as it comes is dropped by the kernel when its UDP socket's buffer is
# full (seen: of 200, the ASan build's server counted 143 and `ss` showed
# 58 dropped on its socket, while the TCG guest shared the 2 CPUs and sent
# them all over UDP). 32 fit in the socket's buffer alone (208 KiB,
# 6 KiB a datagram), however late the server reads. udpong's echo
# resends after 1 ms and from then on echoes a stale message for ever
# (docs/rsockets.md), and the guest under TCG answers later than that.
# rdma-core's own side cannot run on a RoCE port: its ds_add_qp_dest asks
# for an AH to its own QP with no GRH, which ibv_create_ah refuses on
# every RoCE device (EINVAL on rxe; the guest's udpong fails its rconnect
# with the ENOENT its cleanup leaves, and its server drops every
# datagram), in rdma-core 44 as upstream. The guest's udpong runs with an
# ibv_create_ah that gives such an AH the port's IPv4 GID, so that the
# rest of librdmacm's protocol meets uroce's.
cat >"$PEER_SHARE/ah_grh.c" <<'CODE'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <string.h>

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	static const uint8_t v4[12] = {[10] = 0xff, [11] = 0xff};
	struct ibv_ah *(*create)(struct ibv_pd *, struct ibv_ah_attr *) =
	    dlvsym(RTLD_NEXT, "ibv_create_ah", "IBVERBS_1.1");
	struct ibv_ah_attr a = *attr;
	struct ibv_port_attr port;

	if (a.is_global || ibv_query_port(pd->context, a.port_num, &port) ||
	    port.link_layer != IBV_LINK_LAYER_ETHERNET)
		return create(pd, attr);
	a.is_global = 1;
	a.grh.hop_limit = 64;
	for (int i = 0; !ibv_query_gid(pd->context, a.port_num, i, &a.grh.dgid); i++)
		if (!memcmp(a.grh.dgid.raw, v4, sizeof(v4))) {
			a.grh.sgid_index = (uint8_t)i;
			break;
		}
	return create(pd, &a);
}
CODE
LD_PRELOAD= ${CC:-cc} -shared -fPIC -o "$PEER_SHARE/ah_grh.so" "$PEER_SHARE/ah_grh.c" -libverbs ||
	bad "udpong: cannot build the guest's ibv_create_ah"
grh='env LD_PRELOAD=$share/ah_grh.so' # expanded in the guest
udpong_args="-C 32 -S 1000" counted='^custom +1000 +32 ' # its report of all 32
port=$((port + 1))
# Its server has a UDP port and nothing else (no cm_id, no TCP port) until
# a datagram comes: what is waited for here.
peer_start udps "$grh timeout $T udpong -b $net.2 -p $port $udpong_args &
	for i in \$(seq 600); do ss -lun | grep -q ':$port ' && break; sleep 0.1; done
	touch \$share/bound.$port; wait"
for _ in $(seq 700); do
	[ -e "$PEER_SHARE/bound.$port" ] && break
	sleep 0.1
done
host udpong -s $net.2 -p $port $udpong_args >"$PAIR_DIR/cli" 2>&1
expect_status 0 $? "udpong: uroce's client of the kernel's server"
expect_match "$(cat "$PAIR_DIR/cli")" "$counted" "udpong: the kernel's server counts"
guest pkill -x udpong >/dev/null
peer_wait udps 30 >/dev/null
port=$((port + 1))
host udpong -b $net.1 -p $port $udpong_args >"$PAIR_DIR/srv" 2>&1 &
srv=$!
wait_listen $port udp || bad "udpong: uroce's server never bound its port"
out=$(guest $grh udpong -s $net.1 -p $port $udpong_args 2>&1)
expect_status 0 $? "udpong: the kernel's client of uroce's server: $out"
# Where a datagram that did not arrive went: uroce's port (no receive
# posted, dropped packets) and the kernel's UDP counters on that host.
echo "$out" | grep -Eq -- "$counted" || {
	ip netns exec $ns timeout $T "$UROCE" stat roce1 | sed 's/^/    | /'
	ip netns exec $ns nstat -asz 'Udp*' 2>&1 | grep -v ' 0 ' | sed 's/^/    | /'
	ip netns exec $ns ss -uanmp 2>&1 | sed 's/^/    | /'
}
expect_match "$out" "$counted" "udpong: uroce's server counts"
stop_job $srv
wait $srv 2>/dev/null
finish
