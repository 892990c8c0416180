#!/usr/bin/env bash
# A host that gives an unprivileged user no user namespace (Ubuntu 24.04's
# AppArmor restriction, kernel.unprivileged_userns_clone=0, a container's
# seccomp profile): uroce run then runs programs without its device view.
# What docs/architecture.md ("Hosts without unprivileged user namespaces")
# says still works is run here, and what it says does not is shown not to.
# The seccomp_refuse helper refuses unshare(CLONE_NEWUSER) for this test's
# processes only; an unprivileged user is played with setpriv (root could
# mount without a user namespace).
. "$(dirname "$0")/lib.sh"

REFUSE=${SECCOMP_REFUSE:?path to the seccomp_refuse helper}
if [ "$(id -u)" != 0 ]; then
	echo "not root: an unprivileged second user is needed, skipped"
	exit 77
fi
user=$((41000 + $$ % 1000))
as_user() {
	setpriv --reuid=$user --regid=$user --clear-groups env UROCE_CONFIG=/nonexistent/links.conf \
		"$REFUSE" --userns "$@"
}
pair_server() { as_user timeout $T "$UROCE" run "$@"; }
pair_client() { as_user timeout $T "$UROCE" run "$@"; }
port=$((10900 + $$ % 50))

# uroce run says why the view is missing, once, and runs the program.
out=$(as_user timeout $T "$UROCE" run sh -c 'ls /dev/infiniband/uverbs0' 2>&1); st=$?
expect_match "$out" '^uroce: running without /sys/class/infiniband and /dev/infiniband: .*a seccomp filter refuses it' \
	"uroce run tells why the view is missing"
[ -e /dev/infiniband/uverbs0 ] || expect_match "$out" 'No such file' "the program runs, without the view"

# Verbs: the devices come from ibv_get_device_list, not from the files.
out=$(as_user timeout $T "$UROCE" run ibv_devinfo -d uroce0 2>&1); st=$?
expect_status 0 $st "ibv_devinfo without the view"
expect_match "$out" 'state:[[:space:]]+PORT_ACTIVE' "ibv_devinfo sees uroce0's port"
port=$((port + 1))
run_pair "rc_pingpong without the view" $port \
	"ibv_rc_pingpong -g 0 -p $port -n 100" "ibv_rc_pingpong -g 0 -p $port -n 100 127.0.0.1"
port=$((port + 1))
run_pair "ib_write_bw without the view" $port \
	"ib_write_bw -d uroce0 -x 0 -F -p $port -n 200" "ib_write_bw -d uroce0 -x 0 -F -p $port -n 200 127.0.0.1"

# rdma_cm: resolved by address, carried on TCP; no /dev/infiniband/rdma_cm.
port=$((port + 1))
PAIR_STATUS=rping_status run_pair "rping without the view" $port \
	"rping -s -a 127.0.0.1 -p $port -V -C 50" "rping -c -a 127.0.0.1 -p $port -V -C 50"

# UCX takes a device only where /dev/infiniband/<dev_name> is a character
# device it can open: without the view it lists no uroce transport.
if command -v ucx_info >/dev/null; then
	out=$(as_user timeout $T "$UROCE" run ucx_info -d 2>&1)
	if printf '%s\n' "$out" | grep -q 'Device: uroce0'; then
		bad "ucx_info -d found uroce0 without the view: the documented limit is wrong"
	else
		ok
	fi
fi
# The made-up user's files, left as a real user's are: not for the next.
rm -f /dev/shm/uroce-registry-$user /dev/shm/uroce-userns-$user
finish
