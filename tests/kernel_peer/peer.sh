# A Linux kernel as the other host: Debian's own kernel in a QEMU guest
# (no KVM needed) with Soft-RoCE (rdma_rxe) and the kernel's rdma_cm, on a
# tap in the test's network namespace. The guest's root is the host's,
# read-only, so it runs the host's rdma-core programs, on its own kernel's
# RDMA stack. Sourced by a test after lib.sh.
#
#   peer_up NS NET         the programs the guest needs, namespace NS, and
#                          the guest booted in it, or the test fails and ends
#   peer_boot NS NET       boots the guest at NET.2, the tap at NET.1 in NS
#   peer_start TAG CMD     runs CMD (a shell command) in the guest
#   peer_wait TAG SECS     its exit status (124 past SECS), its output in
#                          $PEER_SHARE/out.TAG
#   peer_stop              powers the guest off (the EXIT trap does too)
PEER_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PEER_CACHE=${UROCE_PEER_CACHE:-/var/cache/uroce/kernel-peer}

# What install-deps installs for the guest must be there: a missing
# program fails the test, never skips it. The caller's EXIT trap runs
# peer_stop and removes NS.
peer_up() {
	local p
	for p in qemu-system-x86_64 busybox cpio depmod; do
		command -v $p >/dev/null || bad "no $p (scripts/install-deps installs it)"
	done
	[ "$fails" -eq 0 ] || {
		finish
		exit
	}
	ip netns add $1 && ip -n $1 link set lo up || {
		echo "FAIL: cannot make namespace $1"
		exit 1
	}
	peer_boot $1 $2 || {
		bad "the kernel peer did not boot"
		finish
		exit
	}
}

peer_boot() {
	local ns=$1 net=$2
	# A sanitizer build's runtime (lib.sh's LD_PRELOAD) is for uroce's
	# programs, not for apt or QEMU.
	LD_PRELOAD= "$PEER_DIR/prepare" "$PEER_CACHE" || return 1
	PEER_SHARE=$(mktemp -d /tmp/uroce-peer-XXXXXX)
	ip -n "$ns" tuntap add dev kp0 mode tap &&
		ip -n "$ns" addr add "$net.1/24" dev kp0 &&
		ip -n "$ns" link set kp0 up || return 1
	# TCG: the kernels of these machines offer no KVM a stock guest
	# kernel can use; Debian's boots in about 7 s all the same.
	LD_PRELOAD= ip netns exec "$ns" timeout 1800 qemu-system-x86_64 -M pc -accel tcg,thread=multi -cpu max \
		-smp 2 -m 1024 -display none -monitor none -no-reboot \
		-serial "file:$PEER_SHARE/console" \
		-kernel "$PEER_CACHE/vmlinuz" -initrd "$PEER_CACHE/initrd" \
		-append "console=ttyS0 quiet panic=-1 kp_ip=$net.2/24 kp_agent=$PEER_DIR/agent.sh" \
		-netdev tap,id=n0,ifname=kp0,script=no,downscript=no -device virtio-net-pci,netdev=n0 \
		-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
		-virtfs "local,path=$PEER_SHARE,mount_tag=share,security_model=none" \
		>"$PEER_SHARE/qemu.log" 2>&1 &
	PEER_QEMU=$!
	for _ in $(seq 1200); do # 120 s
		[ -e "$PEER_SHARE/ready" ] && return 0
		kill -0 $PEER_QEMU 2>/dev/null || break
		sleep 0.1
	done
	echo "peer_boot: the guest did not come up; its console:" >&2
	tail -20 "$PEER_SHARE/console" "$PEER_SHARE/qemu.log" >&2
	return 1
}

peer_start() {
	printf '%s\n' "$2" >"$PEER_SHARE/tmp.$1"
	mv "$PEER_SHARE/tmp.$1" "$PEER_SHARE/cmd.$1"
}

peer_wait() {
	for _ in $(seq $(($2 * 10))); do
		if [ -e "$PEER_SHARE/rc.$1" ]; then
			cat "$PEER_SHARE/rc.$1"
			return
		fi
		sleep 0.1
	done
	echo 124
}

peer_stop() {
	[ -n "${PEER_QEMU:-}" ] || return 0
	touch "$PEER_SHARE/cmd.exit"
	for _ in $(seq 100); do
		kill -0 $PEER_QEMU 2>/dev/null || break
		sleep 0.1
	done
	kill $PEER_QEMU 2>/dev/null
	wait $PEER_QEMU 2>/dev/null
	PEER_QEMU=
	rm -rf "$PEER_SHARE"
}
