#!/usr/bin/env bash
# libfabric (Debian's libfabric-bin), unmodified, on a uroce link: fi_info
# lists the link's MSG, DGRAM and RDM domains, and fi_pingpong passes over
# the verbs MSG endpoint (RC through rdma_cm) and over verbs;ofi_rxm.
# libfabric's verbs provider takes no device on a loopback interface, so the
# link is bound to a veth in a network namespace this test creates and
# removes (198.18.0.0/15, the benchmarking range).
. "$(dirname "$0")/lib.sh"

if ! command -v fi_pingpong >/dev/null; then
	bad "libfabric-bin is not installed (scripts/install-deps)"
	finish
	exit
fi
if [ "$(id -u)" != 0 ]; then
	echo "not root: cannot make a network namespace; skipped (CI runs as root)"
	finish
	exit
fi
ns=uroce-fi-$$
ns_with_link $ns vfi0 vfi1 198.18.0 fab0
in_ns() { timeout $T ip netns exec $ns "$UROCE" run "$@"; }

out=$(in_ns fi_info -p verbs 2>&1); st=$?
expect_status 0 $st "fi_info -p verbs"
for t in MSG DGRAM RDM; do
	if printf '%s\n' "$out" | grep -B2 "type: FI_EP_$t" | grep -Eq "domain: fab0(-dgram)?$"; then
		ok
	else
		bad "fi_info lists no FI_EP_$t domain on fab0"
	fi
done

# fi_pingpong EP_TYPE: a server and a client, every size fi_pingpong runs,
# data checked.
pingpong() {
	in_ns fi_pingpong -p verbs -e "$1" -I 200 -c >"$PAIR_DIR/srv" 2>&1 &
	local srv=$!
	for _ in $(seq 100); do
		ip netns exec $ns ss -ltn | grep -q ':47592 ' && break
		sleep 0.05
	done
	in_ns fi_pingpong -p verbs -e "$1" -I 200 -c 198.18.0.1 >"$PAIR_DIR/cli" 2>&1
	expect_status 0 $? "fi_pingpong -e $1 client"
	wait $srv
	expect_status 0 $? "fi_pingpong -e $1 server"
	expect_match "$(cat "$PAIR_DIR/cli")" '^1m +200 +=200 ' "fi_pingpong -e $1 reaches 1 MiB messages"
}

# ofi_rxm over the link's RC QPs, then the MSG endpoint. Both servers
# are given no address: libfabric 1.17's verbs provider binds "localhost"
# (fi_verbs.c, vrb_get_rdmacm_rai), which the kernel's CM, and uroce's,
# count as any address, and then offers the link's own.
pingpong rdm
pingpong msg
finish
