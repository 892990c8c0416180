#!/usr/bin/env bash
# Runs in the kernel peer's guest, as its root: two unrelated processes of
# an ordinary user (nobody), neither the other's ancestor, run PROGRAM's
# server and client under uroce with Yama's ptrace_scope at SCOPE. Prints
# what `uroce link show -d` says of the host's same-host path, both
# programs' output and their exit statuses ("server N", "client N").
#
#   yama_pair.sh SCOPE UROCE PRELOAD PROGRAM [VAR=VALUE...]
#
# PROGRAM is pingpong (ibv_rc_pingpong) or rping. PRELOAD is a sanitizer
# build's runtime, or empty. The VAR=VALUE pairs go to both programs'
# environment.
scope=$1 uroce=$2 preload=$3 program=$4
shift 4
vars=("$@")
echo "$scope" >/proc/sys/kernel/yama/ptrace_scope || exit 1
port=18515
case $program in
pingpong)
	server=(ibv_rc_pingpong -g 0 -p $port -n 20)
	client=("${server[@]}" 127.0.0.1)
	;;
rping)
	server=(rping -s -a 127.0.0.1 -p $port -C 10 -V -v)
	client=(rping -c -a 127.0.0.1 -p $port -C 10 -V -v)
	;;
*) exit 2 ;;
esac
# LeakSanitizer stops a process's threads with ptrace at exit, which
# scopes 2 and 3 refuse (it grants itself scope 1's exception).
leaks=
[ -n "$preload" ] && [ "$scope" -ge 2 ] && leaks="ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0"
# as_user UROCE_ARGS...: a process of nobody, started here, so that the
# two programs are siblings, not each other's descendants.
as_user() {
	setpriv --reuid=65534 --regid=65534 --clear-groups \
		env HOME=/tmp LD_PRELOAD="$preload" $leaks "${vars[@]}" timeout 60 "$uroce" "$@"
}
cd /tmp || exit 1
as_user link show -d
as_user run "${server[@]}" >/tmp/yama.srv 2>&1 &
srv=$!
for _ in $(seq 600); do # 60 s: the guest is slow
	ss -ltn | grep -q ":$port " && break
	sleep 0.1
done
as_user run "${client[@]}" 2>&1
echo "client $?"
wait $srv
echo "server $?"
sed 's/^/server: /' /tmp/yama.srv
