#!/usr/bin/env bash
# rdma-core's own test suite (Debian's python3-pyverbs), unmodified, on
# uroce0: no test may fail or error, and the tests that pass today must keep
# passing. The skips are printed with their reasons: most are tests for mlx5
# or EFA hardware, which a Soft-RoCE device skips too; the others are
# features still to come.
. "$(dirname "$0")/lib.sh" 600
src=/usr/share/doc/rdma-core/tests
if [ ! -f "$src/run_tests.py" ]; then
	echo "FAIL: $src is missing: python3-pyverbs is not installed (scripts/install-deps)" >&2
	exit 1
fi
work=$(mktemp -d /tmp/uroce-pyverbs-XXXXXX)
trap 'rm -rf "$work" "$PAIR_DIR"; rm -f "$UROCE_CONFIG"' EXIT
cp -r "$src" "$work/tests"
gunzip -f "$work"/tests/*.gz
# Debian's interpreter, where python3-pyverbs is installed.
out=$(cd "$work" && timeout "$T" "$UROCE" run /usr/bin/python3 tests/run_tests.py --dev uroce0 -v 2>&1)
st=$?
expect_status 0 $st "run_tests.py"
# On failure, what failed and why comes first and alone: the verbose listing
# of 273 tests would bury it (CI shows only part of a failing test's output).
if ! printf '%s\n' "$out" | grep -q '^OK'; then
	bad "the suite's verdict is not OK"
	# The failures' tracebacks; or, if the run died before its report, its end.
	why=$(printf '%s\n' "$out" | sed -n '/^======/,$p')
	[ -n "$why" ] || why=$(printf '%s\n' "$out" | tail -60)
	printf '%s\n' "$why" | head -200 | sed 's/^/    | /' >&2
else
	ok
fi
ran=$(printf '%s\n' "$out" | sed -n 's/^Ran \([0-9]*\) tests.*/\1/p')
skipped=$(printf '%s\n' "$out" | sed -n 's/^OK (skipped=\([0-9]*\))/\1/p')
passed=$((${ran:-0} - ${skipped:-0}))
[ "$passed" -ge 123 ] && ok || bad "$passed tests passed, 123 did before"
printf '%s\n' "$out" | grep -E '^Ran |^OK|^FAILED'
printf '%s\n' "$out" | sed -n "s/.*skipped ['\"]\(.*\)['\"]$/\1/p" | sort | uniq -c | sort -rn | sed 's/^/    skipped: /'
finish
