#!/usr/bin/env bash
# uroce builds cleanly in every CMake build type and with both gcc and
# clang: distributions build with their own flags and compilers, and
# optimisation levels enable warnings (-Wformat-truncation at -O3) that the
# test builds never see. Each variant builds with UROCE_WERROR=ON so that a
# new warning fails here rather than in a user's build, where warnings stay
# warnings.
T=${T:-600}
. "$(dirname "$0")/lib.sh"
src=${UROCE_SOURCE_DIR:?the source tree}
work=$(mktemp -d /tmp/uroce-variants-XXXXXX)
trap 'rm -rf "$work" "$PAIR_DIR"; rm -f "$UROCE_CONFIG"' EXIT # and lib.sh's own

variants=("Release gcc" "MinSizeRel gcc" "Debug gcc" "Release clang")
for v in "${variants[@]}"; do
	set -- $v
	if ! command -v "$2" >/dev/null; then
		bad "$2 is not installed (scripts/install-deps installs it)"
		continue
	fi
	dir=$work/$1-$2
	log=$dir.log
	if CC=$2 timeout $T cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE="$1" -DUROCE_WERROR=ON >"$log" 2>&1 &&
		timeout $T cmake --build "$dir" -j"$(nproc)" >>"$log" 2>&1; then
		ok
	else
		bad "build type $1 with $2 failed"
		grep -E 'error|warning' "$log" | head -20 | sed 's/^/    | /' >&2
	fi
	rm -rf "$dir"
done
finish
