#!/usr/bin/env bash
# The guest's side of the kernel peer (init runs it in the host's root as
# the guest's root, so the programs are the host's and the kernel is the
# guest's): an rxe device on eth0, then each command the host leaves in
# the share SHARE as cmd.TAG, run in the background with its output in
# out.TAG and its exit status in rc.TAG; a cmd.exit powers the guest off.
#
#   agent.sh SHARE
share=$1
rdma link add rxe0 type rxe netdev eth0
{
	rdma link show
	ibv_devices
} >"$share/ready.tmp" 2>&1
mv "$share/ready.tmp" "$share/ready"

# serve PORT CMD...: CMD, a server; "listening.$KP_TAG" once it listens
# on PORT, as rdma_cm (a listening cm_id) or on TCP.
serve() {
	local port=$1
	shift
	"$@" &
	local pid=$!
	for _ in $(seq 300); do
		if rdma res show cm_id 2>/dev/null | grep -Eq "state LISTEN .*src-addr [^ ]*:$port( |$)" ||
			ss -ltn | grep -q ":$port "; then
			touch "$share/listening.$KP_TAG"
			break
		fi
		kill -0 $pid 2>/dev/null || break
		sleep 0.1
	done
	wait $pid
}
export -f serve
export share

run() { # TAG
	KP_TAG=$1 bash -c "$(cat "$share/cmd.$1")" >"$share/out.$1" 2>&1
	echo $? >"$share/rc.$1.tmp"
	mv "$share/rc.$1.tmp" "$share/rc.$1"
}

# The host ends the guest with cmd.exit, or kills it at its own timeout:
# the loop is bounded all the same (an hour of 50 ms polls).
for _ in $(seq 72000); do
	[ -e "$share/cmd.exit" ] && break
	for f in "$share"/cmd.*; do
		tag=${f##*/cmd.}
		[ -e "$f" ] && [ ! -e "$share/started.$tag" ] || continue
		touch "$share/started.$tag"
		run "$tag" &
	done
	sleep 0.05
done
