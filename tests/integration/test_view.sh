#!/usr/bin/env bash
# uroce run's device view: a program sees uroce's links in
# /sys/class/infiniband, /sys/class/infiniband_verbs and /dev/infiniband as
# a Soft-RoCE device's, the host sees nothing change, and programs inside
# and outside the view still reach each other.
. "$(dirname "$0")/lib.sh"

inside() { timeout $T "$UROCE" run sh -c "$1" 2>&1; }

timeout $T "$UROCE" link add roce1 netdev lo >/dev/null; expect_status 0 $? "link add roce1"
host_mounts=$(wc -l </proc/self/mountinfo)
host_dev=$(ls /dev)

out=$(inside 'for n in /dev/infiniband/uverbs0 /dev/infiniband/uverbs1 /dev/infiniband/rdma_cm; do
	[ -c $n ] && [ -r $n ] && [ -w $n ] && echo "chr $n"; done')
for n in uverbs0 uverbs1 rdma_cm; do
	expect_match "$out" "^chr /dev/infiniband/$n$" "$n is a readable, writable character device"
done

d=/sys/class/infiniband
out=$(inside "cd $d/uroce0 && for f in node_type node_guid sys_image_guid fw_ver ports/1/state \
	ports/1/phys_state ports/1/lid ports/1/link_layer ports/1/rate ports/1/gids/0 ports/1/gids/15 \
	ports/1/gid_attrs/types/0 ports/1/gid_attrs/ndevs/0 ports/1/pkeys/0; do echo \$f=\$(cat \$f); done;
	ls device/net; cat ../../infiniband_verbs/uverbs0/ibdev ../../infiniband_verbs/uverbs1/ibdev")
expect_match "$out" '^node_type=1: CA$' "node_type"
expect_match "$out" '^ports/1/state=4: ACTIVE$' "port state"
expect_match "$out" '^ports/1/phys_state=5: LinkUp$' "phys_state"
expect_match "$out" '^ports/1/lid=0x0$' "a RoCE port has no LID"
expect_match "$out" '^ports/1/link_layer=Ethernet$' "link_layer"
expect_match "$out" '^ports/1/rate=100 Gb/sec \(4X EDR\)$' "rate, as ibv_devinfo's 4X EDR"
expect_match "$out" '^ports/1/gids/0=0000:0000:0000:0000:0000:ffff:7f00:0001$' "GID 0 is 127.0.0.1"
expect_match "$out" '^ports/1/gids/15=(0000:){7}0000$' "an unused GID is zero"
expect_match "$out" '^ports/1/gid_attrs/types/0=RoCE v2$' "GID type"
expect_match "$out" '^ports/1/gid_attrs/ndevs/0=lo$' "GID netdev"
expect_match "$out" '^ports/1/pkeys/0=0xffff$' "default P_Key"
expect_match "$out" '^lo$' "device/net names the netdev"
expect_match "$out" '^uroce0$' "uverbs0 is uroce0"
expect_match "$out" '^roce1$' "uverbs1 is roce1"
# The same GUID as the verbs report.
guid=$(timeout $T "$UROCE" run ibv_devinfo -d roce1 | sed -n 's/^[[:space:]]*node_guid:[[:space:]]*//p')
out=$(inside "cat $d/roce1/node_guid")
expect_match "$out" "^$guid\$" "sysfs node_guid is ibv_devinfo's ($guid)"

# The host is as it was; /dev/shm inside is the host's.
mark=/dev/shm/uroce-view-test-$$
inside "touch $mark" >/dev/null
[ -e $mark ] && ok || bad "a file made in /dev/shm inside the view is not on the host"
rm -f $mark
[ "$(wc -l </proc/self/mountinfo)" = "$host_mounts" ] && ok || bad "the host's mounts changed"
[ "$(ls /dev)" = "$host_dev" ] && ok || bad "the host's /dev changed"
out=$(UROCE_VIEW=0 inside 'ls /dev/infiniband/uverbs0 2>&1')
[ -e /dev/infiniband/uverbs0 ] || expect_match "$out" 'No such file' "UROCE_VIEW=0 runs without the view"

# Cross-memory attach between programs inside and outside the view.
port=$((10600 + $$ % 100))
for srv_view in 1 0; do
	cli_view=$((1 - srv_view))
	run_pair "rc_pingpong, server view $srv_view, client view $cli_view" $port \
		"env UROCE_VIEW=$srv_view ibv_rc_pingpong -g 0 -p $port -n 100" \
		"env UROCE_VIEW=$cli_view ibv_rc_pingpong -g 0 -p $port -n 100 127.0.0.1"
	port=$((port + 1))
done

# An unprivileged user (root plays one with setpriv, as CI runs as root):
# the view lives in a user namespace that all of the user's uroce runs
# share, so they reach each other; it keeps the user's ids, and its holder
# leaves with the last of them.
if [ "$(id -u)" != 0 ]; then
	echo "not root: the unprivileged user's checks need a second user, skipped"
	finish
	exit
fi
user=$((40000 + $$ % 1000))
as_user() { setpriv --reuid=$user --regid=$user --clear-groups env UROCE_CONFIG=/nonexistent/links.conf "$@"; }
if ! as_user unshare --user true 2>/dev/null; then
	out=$(as_user timeout $T "$UROCE" run true 2>&1)
	expect_match "$out" '^uroce: running without /sys/class/infiniband and /dev/infiniband: ' \
		"without user namespaces the view is missing, and the user is told why"
	finish
	exit
fi
out=$(as_user timeout $T "$UROCE" run sh -c 'id -u; id -g; id -G; ls /dev/infiniband; cat /sys/class/infiniband/uroce0/ports/1/gid_attrs/ndevs/0' 2>&1)
expect_match "$out" "^$user\$" "the user's uid and gid are its own inside the view"
[ "$(printf '%s\n' "$out" | grep -c "^$user\$")" = 3 ] && ok || bad "ids in the view: $out"
expect_match "$out" '^uverbs0$' "the user's view has /dev/infiniband/uverbs0"
expect_match "$out" '^lo$' "the user's view has the sysfs files"
as_user timeout $T "$UROCE" run ibv_rc_pingpong -g 0 -p $port -n 100 >"$PAIR_DIR/srv" 2>&1 &
srv=$!
wait_listen $port
as_user timeout $T "$UROCE" run ibv_rc_pingpong -g 0 -p $port -n 100 127.0.0.1 >"$PAIR_DIR/cli" 2>&1
expect_status 0 $? "an unprivileged user's rc_pingpong client in the view"
wait $srv; expect_status 0 $? "an unprivileged user's rc_pingpong server in the view"
port=$((port + 1))
# From inside the user namespace, the kernel refuses to reach a process
# outside it, and the one outside could reach in: both take the wire
# instead, and say why at RTR, as documented.
as_user timeout $T "$UROCE" run ibv_rc_pingpong -g 0 -p $port -n 100 >"$PAIR_DIR/srv" 2>&1 &
srv=$!
wait_listen $port
as_user env UROCE_VIEW=0 timeout $T "$UROCE" run ibv_rc_pingpong -g 0 -p $port -n 100 127.0.0.1 >"$PAIR_DIR/cli" 2>&1
expect_status 0 $? "a client outside the view meets a server inside it on the wire"
wait $srv
expect_status 0 $? "a server inside the view meets a client outside it on the wire"
for side in srv cli; do
	expect_match "$(cat "$PAIR_DIR/$side")" 'is in a user namespace this one is not in, which cross-memory attach cannot reach: connections to such processes take RoCEv2 over lo$' \
		"$side: reaching across the view's user namespace takes the wire, with the reason"
done
# (pgrep hangs with a sanitizer's runtime preloaded: not for it.)
holder() { LD_PRELOAD= timeout $T pgrep -u $user -x uroce-userns >/dev/null; }
for _ in $(seq 50); do
	holder || break
	sleep 0.2
done
holder && bad "the user namespace's holder outlived its members" || ok
# The made-up user's own files, left as a real user's are: not for the next.
rm -f /dev/shm/uroce-registry-$user /dev/shm/uroce-userns-$user
finish
