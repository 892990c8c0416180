#!/usr/bin/env bash
# `uroce doctor`: each check in a good and a bad state, and the library
# saying the same as doctor where it meets the refusal. The bad states
# are made for this test's processes only: a seccomp filter (the
# seccomp_refuse helper) for cross-memory attach and user namespaces, a
# network namespace of the test's own for port 4791 and the netdevs, a
# configuration file of its own for the links. Yama's scopes and a small
# net.core.rmem_max are host-wide: unit_host_probe covers their diagnoses.
. "$(dirname "$0")/lib.sh"
REFUSE=${SECCOMP_REFUSE:?path to the seccomp_refuse helper}
# A second user (setpriv), a namespace of the test's own and huge pages
# need root, as CI runs.
need_netns
port=$((20000 + $$ % 10000))

# doctor [WRAPPER...]: uroce doctor, run through the wrapper's words.
doctor() { "$@" timeout $T "$UROCE" doctor 2>&1; }

# The host as it is: nothing a default setup needs is missing.
out=$(doctor); st=$?
expect_status 0 $st "doctor on this host"
expect_match "$out" '^ok +cross-memory attach +works between two sibling processes$' "attach tried and works"
# Yama and seccomp as this host has them (a container may filter, a
# distribution's kernel may have Yama).
if [ "$(awk '/^Seccomp:/ {print $2}' /proc/self/status)" = 0 ]; then
	expect_match "$out" '^ok +seccomp +no filter in force$' "no seccomp filter, said so"
else
	expect_match "$out" '^warn +seccomp +a filter in force' "this host's seccomp filter, said so"
fi
if [ -r /proc/sys/kernel/yama/ptrace_scope ]; then
	expect_match "$out" "^(ok|warn) +ptrace_scope +Yama's kernel.yama.ptrace_scope is $(cat /proc/sys/kernel/yama/ptrace_scope)" "Yama's scope, said"
else
	expect_match "$out" '^ok +ptrace_scope +no Yama in this kernel \(/proc/sys/kernel/yama absent\)' "no Yama here, said so"
fi
expect_match "$out" '^ok +user namespaces +uroce run.s device view: a mount namespace of its own' "root needs no user namespace"
expect_match "$out" '^ok +udp port 4791 ' "port 4791 bindable"
expect_match "$out" '^ok +socket buffers +a RoCEv2 socket gets [0-9]+ KiB of receive buffer, [1-9][0-9]* windows? of 160 KiB' "socket buffers hold a window"
expect_match "$out" '^ok +link uroce0 +type roce, netdev lo up, mtu [0-9]+ \(active MTU 4096\)' "the default link"
json=$(timeout $T "$UROCE" doctor --json)
printf '%s' "$json" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["status"]==0 and any(c["name"]=="cross-memory attach" and c["level"]=="ok" for c in d["checks"])' \
	&& ok || bad "--json: $json"

# Cross-memory attach refused by a container's seccomp filter: doctor
# says so and why, and warns (programs meet on the wire instead); the
# seccomp line says a filter is in force.
out=$(doctor "$REFUSE" --attach); st=$?
expect_status 0 $st "doctor with cross-memory attach refused (a warning: the wire serves)"
expect_match "$out" '^warn +cross-memory attach +refused \(EPERM\): a seccomp filter refuses process_vm_readv/writev' "attach refusal diagnosed"
expect_match "$out" "^ +consequence: connections between this host's programs take RoCEv2 over the link's netdev instead of shared memory" "attach refusal's consequence: the wire"
expect_match "$out" '^ +remedy: in a container: --cap-add SYS_PTRACE' "attach refusal's remedy"
expect_match "$out" '^warn +seccomp +a filter in force \(1 filter\)$' "seccomp filter reported in force"
# The library, meeting the same refusal, says the same thing, and takes
# the wire: the pair passes (it_attach_refused runs more programs so).
timeout $T "$REFUSE" --attach "$UROCE" run ibv_rc_pingpong -g 0 -p $port -n 5 >"$PAIR_DIR/srv" 2>&1 &
srv=$!
wait_listen $port || bad "the pingpong server under the filter never listened"
timeout $T "$REFUSE" --attach "$UROCE" run ibv_rc_pingpong -g 0 -p $port -n 5 127.0.0.1 >"$PAIR_DIR/cli" 2>&1
expect_status 0 $? "rc_pingpong client under the filter, over the wire"
wait $srv
expect_status 0 $? "rc_pingpong server under the filter, over the wire"
expect_match "$(cat "$PAIR_DIR/srv" "$PAIR_DIR/cli")" \
	'^uroce: cross-memory attach is refused here \(a seccomp filter refuses process_vm_readv/writev' \
	"rc_pingpong says why it takes the wire, as doctor does"
# A type ib link has no wire: there the connection fails, and says why.
port=$((port + 1))
timeout $T "$UROCE" link add ib0 netdev lo type ib >/dev/null && timeout $T "$UROCE" link delete uroce0 >/dev/null
timeout $T "$REFUSE" --attach "$UROCE" run ibv_rc_pingpong -d ib0 -p $port -n 5 >"$PAIR_DIR/srv" 2>&1 &
srv=$!
wait_listen $port || bad "the pingpong server on ib0 under the filter never listened"
timeout $T "$REFUSE" --attach "$UROCE" run ibv_rc_pingpong -d ib0 -p $port -n 5 127.0.0.1 >"$PAIR_DIR/cli" 2>&1
wait $srv
expect_match "$(cat "$PAIR_DIR/srv" "$PAIR_DIR/cli")" \
	'^uroce: the kernel refuses cross-memory attach to pid [0-9]+: a seccomp filter refuses process_vm_readv/writev' \
	"rc_pingpong on a type ib link says why its connection fails, as doctor does"
rm -f "$UROCE_CONFIG"

# A second user: its own uid, configuration path and view of the host.
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups env -u UROCE_CONFIG HOME=/nonexistent "$@"; }
out=$(doctor as_nobody); st=$?
expect_status 0 $st "doctor as nobody"
expect_match "$out" '^ok +user +uid 65534 \(nobody\), config /nonexistent/.config/uroce/links.conf \(absent: the default, uroce0 on lo\)' "nobody's own configuration"
expect_match "$out" '^ok +cross-memory attach ' "nobody's processes reach each other"
if as_nobody unshare --user true 2>/dev/null; then
	expect_match "$out" '^ok +user namespaces +uroce run.s device view: an unprivileged user namespace' "nobody can make a user namespace"
else
	expect_match "$out" '^warn +user namespaces ' "the host refuses nobody a user namespace"
fi
# Refused by a filter: a warning (verbs still work), with why.
out=$(doctor as_nobody "$REFUSE" --userns); st=$?
expect_status 0 $st "doctor as nobody without user namespaces (a warning only)"
expect_match "$out" '^warn +user namespaces +uroce run.s device view: a seccomp filter refuses it \(unshare\(CLONE_NEWUSER\): Operation not permitted\)' "user namespace refusal diagnosed"
expect_match "$out" 'consequence: uroce run runs programs without /sys/class/infiniband and /dev/infiniband: verbs and rdma_cm programs work; UCX' "what still works without them"
# uroce run says the same.
out=$(as_nobody "$REFUSE" --userns timeout $T "$UROCE" run true 2>&1)
expect_match "$out" 'no unprivileged user namespaces here: a seccomp filter refuses it' "uroce run tells why, as doctor does"
rm -f /dev/shm/uroce-registry-65534 /dev/shm/uroce-userns-65534

# Port 4791 and the links' netdevs, in a network namespace of the test's
# own: veth pairs (one up, one down) with an address of 198.18.0.0/15.
ns=uroce-doctor-$$
holder_job=
saved_huge=
cleanup() {
	[ -n "$holder_job" ] && kill $holder_job 2>/dev/null
	[ -n "$saved_huge" ] && echo "$saved_huge" >/proc/sys/vm/nr_hugepages
	ip netns del $ns 2>/dev/null
	rm -rf "$PAIR_DIR"
	rm -f "$UROCE_CONFIG" "$UROCE_CONFIG".tmp.*
}
trap cleanup EXIT
ip netns add $ns && ip -n $ns link set lo up &&
	ip -n $ns link add v0 type veth peer name v1 && ip -n $ns addr add 198.18.0.1/24 dev v0 &&
	ip -n $ns link set v0 up && ip -n $ns link set v1 up &&
	ip -n $ns link add v2 type veth peer name v3 || { bad "network namespace setup"; finish; exit; }
in_ns() { ip netns exec $ns "$@"; }
# hold_port [reuse]: a program that is not uroce on 0.0.0.0:4791; $holder
# is its pid once it has bound, $holder_job what to stop.
hold_port() {
	# Outlives the checks that need it (release_port ends it), however
	# slow a sanitizer build makes them.
	ip netns exec $ns timeout $((10 * T)) python3 -c 'import os,socket,sys,time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
if len(sys.argv) > 1: s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 4791)); print(os.getpid(), flush=True); time.sleep(3600)' "$@" >"$PAIR_DIR/holder" &
	holder_job=$!
	holder=
	for _ in $(seq 100); do
		holder=$(cat "$PAIR_DIR/holder")
		[ -n "$holder" ] && return
		sleep 0.05
	done
}
release_port() { kill $holder_job; wait $holder_job 2>/dev/null; holder_job=; }

# The default link on lo: a held port is a warning, with who holds it.
out=$(doctor in_ns); st=$?
expect_status 0 $st "doctor in the namespace, port free"
expect_match "$out" '^ok +udp port 4791 +free$' "port 4791 free in the namespace"
hold_port
out=$(doctor in_ns); st=$?
expect_status 0 $st "a held port with only lo's link is a warning"
expect_match "$out" "^warn +udp port 4791 +UDP port 4791 is held without SO_REUSEADDR by pid $holder \(python3, uid 0\) on 0.0.0.0:4791\$" "who holds port 4791"
out=$(doctor in_ns setpriv --reuid=nobody --regid=nogroup --clear-groups)
expect_match "$out" "^warn +udp port 4791 +.* by a process of uid 0 that /proc does not show to this user, on 0.0.0.0:4791" "another user's holder, as far as /proc tells"
# The library's bind failure names the holder the same way.
in_ns env UROCE_TRANSPORT=roce timeout $T "$UROCE" run ibv_rc_pingpong -g 0 -p $port -n 5 >"$PAIR_DIR/srv" 2>&1 &
srv=$!
server_ss() { in_ns ss "$@"; }
wait_listen $port || bad "the pingpong server in the namespace never listened"
in_ns env UROCE_TRANSPORT=roce timeout $T "$UROCE" run ibv_rc_pingpong -g 0 -p $port -n 5 127.0.0.1 >"$PAIR_DIR/cli" 2>&1
wait $srv
expect_match "$(cat "$PAIR_DIR/srv" "$PAIR_DIR/cli")" \
	"^uroce: device uroce0: cannot receive RoCEv2 on UDP port 4791: UDP port 4791 is held without SO_REUSEADDR by pid $holder \\(python3" \
	"the library's bind failure names the holder"
release_port

# Links off lo need the port: held without SO_REUSEADDR is a failure,
# held with it a warning. A netdev that is down, or missing, fails.
cat >"$UROCE_CONFIG" <<EOF
link w0 netdev v0
EOF
out=$(doctor in_ns); st=$?
expect_status 0 $st "a link on an up veth"
expect_match "$out" '^ok +link w0 +type roce, netdev v0 up, mtu 1500 \(active MTU 1024\)' "link w0 up"
expect_match "$out" '^ok +udp port 4791 +free$' "port 4791 free on v0's address"
hold_port
out=$(doctor in_ns); st=$?
expect_status 1 $st "port 4791 held, a link off lo"
expect_match "$out" "^FAIL +udp port 4791 +UDP port 4791 is held without SO_REUSEADDR by pid $holder " "held port fails off lo"
release_port
hold_port reuse
out=$(doctor in_ns); st=$?
expect_status 0 $st "port 4791 shared by a foreign program is a warning"
expect_match "$out" "^warn +udp port 4791 +bindable, but also held by pid $holder \\(python3, uid 0\\) on 0.0.0.0:4791" "a foreign program sharing the port"
release_port
cat >"$UROCE_CONFIG" <<EOF
link w0 netdev v0
link w1 netdev v2
link x netdev nosuchif
EOF
out=$(doctor in_ns); st=$?
expect_status 1 $st "links with a down and a missing netdev"
expect_match "$out" '^FAIL +link w1 +type roce, netdev v2 down' "a down netdev fails"
expect_match "$out" '^ +remedy: ip link set v2 up$' "down netdev's remedy"
expect_match "$out" '^FAIL +link x +netdev nosuchif does not exist$' "a missing netdev fails"
expect_match "$out" '^ok +link w0 ' "the good link stays ok"
out=$(UROCE_CONFIG=/nonexistent/links.conf doctor in_ns); st=$?
expect_status 0 $st "back to the default: nothing missing"

# Huge pages: none reserved is a warning; two reserved (and given back)
# make it ok. No other test uses them.
out=$(doctor)
if printf '%s\n' "$out" | grep -Eq '^warn +huge pages +0 of 0 free'; then
	ok
	saved_huge=$(cat /proc/sys/vm/nr_hugepages)
	if echo 2 >/proc/sys/vm/nr_hugepages 2>/dev/null && [ "$(cat /proc/sys/vm/nr_hugepages)" = 2 ]; then
		out=$(doctor)
		expect_match "$out" '^ok +huge pages +2 of 2 free' "reserved huge pages are ok"
	else
		echo "note: the kernel reserved no huge pages (memory too fragmented?): their ok state is not checked" >&2
	fi
	echo "$saved_huge" >/proc/sys/vm/nr_hugepages
	saved_huge=
else
	expect_match "$out" '^(ok|warn) +huge pages +[0-9]+ of [0-9]+ free' "huge pages reported"
fi
finish
