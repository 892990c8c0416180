#!/usr/bin/env bash
# Every binary of Debian's ibverbs-utils, rdmacm-utils and perftest resolves
# every symbol against uroce's libibverbs (they are linked BIND_NOW: one
# missing symbol aborts them at load), and perftest, which links libmlx5 and
# libefa, starts.
. "$(dirname "$0")/lib.sh"

libdir=$(timeout $T "$UROCE" run sh -c 'echo "${LD_LIBRARY_PATH%%:*}"')
bins=$(dpkg -L ibverbs-utils rdmacm-utils perftest 2>/dev/null | grep '^/usr/bin/' | sort -u)
[ -n "$bins" ] && ok || bad "ibverbs-utils, rdmacm-utils and perftest are not installed"
for b in $bins; do
	[ "$(head -c 4 "$b" | od -An -c | tr -d ' ')" = "177ELF" ] || continue # scripts
	out=$(timeout $T "$UROCE" run ldd -r "$b" 2>&1)
	if printf '%s\n' "$out" | grep -Eq 'undefined symbol|not found'; then
		bad "$b: $(printf '%s\n' "$out" | grep -E 'undefined symbol|not found' | head -3)"
	else ok; fi
	expect_match "$out" "libibverbs.so.1 => .*/libibverbs.so.1" "$b binds a libibverbs"
	if printf '%s\n' "$out" | grep -q 'librdmacm.so.1 =>'; then
		expect_match "$out" "librdmacm.so.1 => $libdir/librdmacm.so.1" "$b binds uroce's librdmacm"
	fi
done
out=$(timeout $T "$UROCE" run ib_write_bw --help 2>&1); st=$?
expect_match "$out" 'Usage:' "perftest loads with libmlx5/libefa beside uroce"
finish
