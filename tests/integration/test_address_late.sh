#!/usr/bin/env bash
# A program started the moment its network appears, as containers and CI
# start them: its netdev's IPv6 address is still tentative (duplicate
# address detection, RFC 4862 5.4) and cannot be bound. uroce binds it
# once the kernel announces it usable, and IPv6 traffic then flows: a UD
# echo server reaches RTS while its link-local address is tentative, and a
# client on another namespace gets every echo over IPv6 (GID 1) once the
# address is usable. Needs root (CI runs as root); skipped otherwise.
. "$(dirname "$0")/lib.sh" 60
UD_ECHO=${UD_ECHO:?path to the ud_echo helper}
need_netns

a=ul$$a b=ul$$b net=198.18.$((($$ + 7) % 250)) dir=$(mktemp -d /tmp/uroce-late-XXXXXX)
srv=
cleanup() {
	[ -n "$srv" ] && stop_job "$srv"
	ip netns del $a 2>/dev/null
	ip netns del $b 2>/dev/null
	rm -rf "$dir" "$PAIR_DIR"
	rm -f "$UROCE_CONFIG"
}
trap cleanup EXIT
# a's address stays tentative for about 3 s (three probes a second apart);
# b has none to wait for.
two_hosts $a $b $net &&
	ip netns exec $a sysctl -qw net.ipv6.conf.${a}v.dad_transmits=3 &&
	ip netns exec $b sysctl -qw net.ipv6.conf.${b}v.accept_dad=0 || {
	echo "FAIL: cannot build the namespaces"
	exit 1
}
link_in_each "$dir" $a $b
in_ns() {
	local s=$1
	shift
	ip netns exec $s env UROCE_CONFIG="$dir/$s.conf" timeout $T "$UROCE" run "$@"
}

port=$((20000 + ($$ % 4000)))
ip -n $a link set ${a}v up && ip -n $b link set ${b}v up
in_ns $a "$UD_ECHO" server roce1 1 $port >"$dir/srv" 2>&1 &
srv=$!
for _ in $(seq 250); do
	grep -q '^ready' "$dir/srv" && break
	sleep 0.02
done
grep -q '^ready' "$dir/srv" || bad "the echo server never reached RTS: $(cat "$dir/srv")"
# The server must have met the tentative address, or this tests nothing.
if [ -n "$(ip -n $a -6 addr show dev ${a}v tentative)" ]; then ok; else
	bad "a's IPv6 address was no longer tentative when the server reached RTS"
fi
expect_match "$(cat "$dir/srv")" 'cannot receive RoCEv2 over IPv6 yet' \
	"the server says IPv6 waits for its address"

out=$(in_ns $b "$UD_ECHO" client roce1 1 $port $net.1 2>&1)
expect_status 0 $? "the client's echoes over IPv6"
expect_match "$out" '^20 echoes$' "every echo came back"
wait $srv
expect_status 0 $? "the echo server"
srv=
expect_match "$(cat "$dir/srv")" 'now receiving RoCEv2 over IPv6' \
	"the server says IPv6 is heard once the address is usable"
[ "$fails" -eq 0 ] || sed 's/^/    srv| /' "$dir/srv" >&2
finish
