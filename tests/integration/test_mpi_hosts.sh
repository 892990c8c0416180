#!/usr/bin/env bash
# An MPI job across two hosts: Open MPI (Debian's, unmodified) with pml ucx
# runs 4 ranks, 2 in each of two network namespaces joined by a veth, over
# UCX's verbs transports on each namespace's uroce link (RoCEv2 between
# them): a ping-pong of every pair across the hosts, a bandwidth loop and
# an MPI_Allreduce, every byte checked (mpi_job.c). mpirun runs in the
# first namespace; scripts/netns-agent, which enters the second, stands in
# for ssh (plm_rsh_agent). UCX's shared-memory transports are left out:
# both namespaces share this machine's hostname, boot id and IPC
# namespace, so UCX would take them for one host and carry the pairs
# across them itself. Needs root (CI runs as root); skipped otherwise.
. "$(dirname "$0")/lib.sh" 180
need_netns
if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
	bad "openmpi-bin and libopenmpi-dev are not installed (scripts/install-deps)"
	finish
	exit
fi

a=um$$a b=um$$b net=198.18.$((($$ + 13) % 250)) dir=$(mktemp -d /tmp/uroce-mpi-hosts-XXXXXX)
cleanup() {
	ip netns del $a 2>/dev/null
	ip netns del $b 2>/dev/null
	rm -rf "$dir" "$PAIR_DIR"
	rm -f "$UROCE_CONFIG"
}
trap cleanup EXIT
linked_hosts $a $b $net "$dir"
LD_PRELOAD= mpicc -O2 -o "$dir/mpi_job" "$(dirname "$0")/mpi_job.c"
expect_status 0 $? "mpicc"

# The agent that stands in for ssh finds each host's namespace here.
export UROCE_AGENT_HOSTS="$net.1=$a:$dir/$a.conf $net.2=$b:$dir/$b.conf" T UROCE
agent=$(cd "$(dirname "$0")/../.." && pwd)/scripts/netns-agent

udp_in() { # udp_in NS: the UDP datagrams NS has received
	ip netns exec $1 awk '$1 == "Udp:" && $2 ~ /^[0-9]+$/ { print $2 }' /proc/net/snmp
}

# Every rank free to go to either core: each host's mpirun or orted would
# bind its first rank to core 0, and both hosts are this machine.
job() { # job UCX_TLS
	ip netns exec $a env UROCE_CONFIG="$dir/$a.conf" timeout $T "$UROCE" run \
		mpirun --allow-run-as-root --bind-to none -np 4 --host $net.1:2,$net.2:2 \
		--mca plm_rsh_agent "$agent" --mca oob_tcp_if_include $net.0/24 \
		--mca pml ucx --mca btl ^openib,uct -x UCX_TLS="$1" -x UCX_NET_DEVICES=roce1:1 \
		-x UCX_LOG_LEVEL=info "$dir/mpi_job" 2>&1
}

for tls in rc_verbs,ud_verbs,self ud_verbs,self; do
	tl=${tls%%,*}
	before=$(udp_in $b)
	out=$(job $tls)
	st=$?
	after=$(udp_in $b)
	expect_status 0 $st "4 ranks on two hosts over $tl"
	expect_match "$out" '^4 ranks: 200 round trips of 65536 bytes checked' "every byte of the ping-pongs ($tl)"
	expect_match "$out" '^bandwidth [0-9.]+ GB/s' "the bandwidth loop ($tl)"
	expect_match "$out" '^allreduce of [0-9]+ int64 sums checked' "MPI_Allreduce's sums ($tl)"
	expect_match "$out" "ep_cfg\[[0-9]+\]: tag\($tl/roce1:1" "UCX uses $tl on roce1 ($tl)"
	# The pairs' bytes (over 300 MiB) crossed the veth as RoCEv2.
	if [ $((after - before)) -ge 10000 ]; then
		ok
		echo "the second host received $((after - before)) UDP datagrams ($tl)"
	else
		bad "the second host received $((after - before)) UDP datagrams ($tl)"
	fi
	printf '%s\n' "$out" | grep -E '^(latency|bandwidth)'
done
finish
