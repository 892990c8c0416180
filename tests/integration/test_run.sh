#!/usr/bin/env bash
# `uroce run`: uroce's library first on the path, the program's own exit
# status and signals passed through, from the build tree and an installed
# prefix.
. "$(dirname "$0")/lib.sh"

# The harness first: the budget a test gives lib.sh is its T. Tests that
# set their own after sourcing it got 20 s instead (rdma-core's suite, 600,
# was killed at 20 s on a slower machine).
budget=$(unset T; . "$(dirname "$0")/lib.sh" 600; echo "$T")
[ "$budget" = 600 ] && ok || bad "'. lib.sh 600' gives T=$budget"

out=$(timeout $T "$UROCE" run sh -c 'echo "$LD_LIBRARY_PATH"'); st=$?
expect_status 0 $st "run sh"
libdir=${out%%:*}
[ -e "$libdir/libibverbs.so.1" ] && ok || bad "first LD_LIBRARY_PATH entry '$libdir' has no libibverbs.so.1"
out=$(LD_LIBRARY_PATH=/keep/me timeout $T "$UROCE" run sh -c 'echo "$LD_LIBRARY_PATH"')
expect_match "$out" ':/keep/me$' "an existing LD_LIBRARY_PATH is kept after uroce's"
timeout $T "$UROCE" run sh -c 'exit 42'; expect_status 42 $? "exit status passes through"
timeout $T "$UROCE" run sh -c 'kill -TERM $$'; expect_status 143 $? "signal passes through"
timeout $T "$UROCE" run /no/such/program 2>/dev/null; expect_status 127 $? "missing program"
out=$(timeout $T "$UROCE" run ldd "$(command -v ibv_devinfo)")
expect_match "$out" "libibverbs.so.1 => $libdir/libibverbs.so.1" "ibv_devinfo binds uroce's libibverbs"

# Installed under a prefix: the command finds its private library directory
# and nothing of the system's rdma-core is touched.
if [ -n "${BUILD_DIR:-}" ]; then
	prefix=$(mktemp -d /tmp/uroce-prefix-XXXXXX)
	timeout 120 cmake --install "$BUILD_DIR" --prefix "$prefix" >/dev/null; expect_status 0 $? "cmake --install"
	out=$(timeout $T "$prefix/bin/uroce" run sh -c 'echo "$LD_LIBRARY_PATH"')
	case "$out" in "$prefix"/*) ok ;; *) bad "installed uroce uses '$out'" ;; esac
	out=$(timeout $T "$prefix/bin/uroce" run ibv_devices 2>&1)
	expect_match "$out" 'uroce0' "installed uroce runs ibv_devices"
	if find "$prefix" -name 'libibverbs.so*' | grep -qv "/uroce/"; then
		bad "libibverbs installed outside uroce's private directory"
	else ok; fi
	rm -rf "$prefix"
fi
finish
