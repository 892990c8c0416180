#!/usr/bin/env bash
# uroce under a real Yama (Documentation/admin-guide/LSM/Yama.rst), which
# this host's kernel may not have: Debian's kernel in the kernel peer's
# QEMU guest (tests/kernel_peer/) has it. Two unrelated processes of an
# ordinary user run ibv_rc_pingpong and rping at each ptrace_scope:
#  - 1 (Ubuntu's default): the processes grant attach to their peers
#    (PR_SET_PTRACER) and meet on shared memory;
#  - 1 with UROCE_PTRACER=0, 2 and 3: attach is refused, uroce says why
#    and the processes meet on RoCEv2 over lo.
# Needs root (CI runs as root) for the guest's tap; skipped otherwise.
. "$(dirname "$0")/lib.sh" 120
. "$(dirname "$0")/../kernel_peer/peer.sh"
need_netns
ns=uya$$ net=198.18.$((100 + $$ % 150))
trap 'peer_stop; ip netns del $ns 2>/dev/null; rm -f "$UROCE_CONFIG"' EXIT
peer_up $ns $net

pair="$(cd "$(dirname "$0")/../kernel_peer" && pwd)/yama_pair.sh"
# case SCOPE PROGRAM PATH_REGEX [VAR=VALUE...]: the pair at SCOPE passes,
# and link show -d names the path. In a network namespace of its own: the
# guest's rxe holds UDP port 4791 in the guest's first one.
n=0
refused='cross-memory attach is refused here'
case_() {
	local scope=$1 program=$2 path=$3 what="ptrace_scope $1 ${*:4} $2" rc out
	shift 3
	n=$((n + 1))
	peer_start y$n "unshare -n bash -c 'ip link set lo up && $pair $scope $UROCE \"${UROCE_PRELOAD:-}\" $program $*'"
	rc=$(peer_wait y$n $((2 * T + 30)))
	out=$(cat "$PEER_SHARE/out.y$n" 2>/dev/null)
	expect_status 0 "$rc" "$what: the guest's script"
	expect_match "$out" "same-host path: $path" "$what: link show -d"
	expect_match "$out" '^client 0$' "$what: the client"
	expect_match "$out" '^server 0$' "$what: the server"
	# Each program says once why it took the wire, and only then.
	local said=0
	printf '%s\n' "$out" | grep -q "$refused" && said=1
	case $path in
	shared*) expect_status 0 $said "$what: a refusal said" ;;
	*) expect_status 1 $said "$what: the refusal said" ;;
	esac
}
# Outside those namespaces rdma_rxe holds the port; root would see the
# socket has no process, nobody cannot tell, and doctor names both.
peer_start doctor "cd /tmp && setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/tmp LD_PRELOAD=${UROCE_PRELOAD:-} $UROCE doctor"
peer_wait doctor $T >/dev/null
expect_match "$(cat "$PEER_SHARE/out.doctor")" \
	"udp port 4791 .*held without SO_REUSEADDR by the kernel's Soft-RoCE \(rdma_rxe is loaded\) or a process of uid 0" \
	"doctor as nobody beside the guest's rxe"

# Scope 3 cannot be lowered again (Yama.rst): it comes last.
for scope in 1 1- 2 3; do
	for program in pingpong rping; do
		case $scope in
		1) case_ 1 $program 'shared memory \(cross-memory attach works here\)' ;;
		1-) case_ 1 $program "RoCEv2 over lo \(cross-memory attach refused: Yama's ptrace_scope is 1.*UROCE_PTRACER=0" \
			UROCE_PTRACER=0 ;;
		*) case_ $scope $program "RoCEv2 over lo \(cross-memory attach refused: Yama's ptrace_scope is $scope" ;;
		esac
	done
done
finish
