#!/usr/bin/env bash
# bench/run's harness, in its seconds-long --smoke mode: every program it
# drives (perftest under uroce, ucx_perftest, sockperf, iperf3, the copy and
# registration programs, the build without counters, a build of another
# commit beside this one (--beside, here HEAD), both sides of a veth
# between two network namespaces, an MPI job across them) must give a
# figure, and the report and its plots must be written. The figures
# themselves are not judged: speed is held by the benchmark's report, not by
# tests.
. "$(dirname "$0")/lib.sh"

bench=$(dirname "$0")/../../bench/run
dir=$BUILD_DIR/bench-smoke
UROCE_BUILD=$BUILD_DIR timeout 480 "$bench" --smoke --beside HEAD --out "$dir" >"$dir.log" 2>&1
expect_status 0 $? "bench/run --smoke"
report=$(cat "$dir/RESULTS.md" 2>/dev/null)
expect_match "$report" '^# uroce benchmark results' "the report is written"
for target in ib_write_lat ib_send_lat ib_write_bw ib_send_bw ibv_reg_mr; do
	expect_match "$report" "^\| \`$target\`.* \| (met|\*\*missed\*\*) \|$" "the $target target is judged"
done
for table in '`ib_write_lat` t_typical' '`ib_send_lat` t_typical' '`ib_read_lat` t_typical' \
	'`ib_write_bw`' '`ib_send_bw`' '`ib_read_bw`' '`ib_send_bw -s 8`' '`ib_write_bw -s 8`' \
	'`ibv_reg_mr` against `mlock`'; do
	rows=$(printf '%s\n' "$report" | awk -v t="$table" '/^### / && substr($0, length($0) - length(t) + 1) == t { f = 1; next } f && /^\| [0-9]/ { n++ } f && /^#/ { exit } END { print n + 0 }')
	if [ "$rows" -ge 1 ]; then ok; else bad "no rows under $table"; fi
done
expect_match "$report" '^\| uncounted \| [0-9.]+ \| [0-9.]+ \| [0-9.]+' "what the counters cost, beside a build without them"
expect_match "$report" '^\| HEAD \| [0-9.]+ \| [0-9.]+ \| [0-9.]+' "this build beside another commit's"
# The turns of two builds alternate their order (this build first, then
# the other's first), so that a drift of the machine favours neither.
order=$(awk '/^cmake -S .*beside-src/ { f = 1 }
	f && /^client: .*ib_write_lat -s 8 / { printf "%s", /beside-build/ ? "B" : "T"; if (++n == 4) exit }' \
	"$dir/raw/commands.txt" 2>/dev/null)
expect_match "$order" '^TBBT$' "the beside turns alternate their order ($order)"
expect_match "$report" '^\| traced \| [0-9.]+ \| [0-9.]+ \| [0-9.]+' "what tracing costs"
expect_match "$report" '^\| 2 B \| [0-9.]+ \| [0-9.e-]+ \(×[0-9.]+\) \| [0-9.e-]+ \(×' "uroce beside its baselines, with ratios"
# Two hosts over a veth (root: CI), every cell of both MTUs a figure, in
# both tables, and the three targets between hosts judged.
if [ "$(id -u)" -eq 0 ]; then
	for m in 1500 9000; do
		expect_match "$report" "^\| $m( \| [0-9.e+-]+ / [0-9.e+-]+){8} \|$" "the veth at MTU $m: uroce and TCP"
		expect_match "$report" "^\| $m( \| [0-9.e+-]+ / [0-9.e+-]+){6} \|$" \
			"the veth at MTU $m: 16 QPs, a deep send queue, 8 pairs, TCP and raw UDP"
	done
	expect_match "$report" '^\| `ib_write_bw` 64 KiB ≥ 1.0 × iperf3.*(met|\*\*missed\*\*) .*(met|\*\*missed\*\*)' "the veth bandwidth target is judged"
	# The MPI job across the namespaces, over uroce and over TCP.
	for m in 1500 9000; do
		for n in 2 4; do
			expect_match "$report" "^\| $m \| $n( \| [0-9.e+-]+){4} \|$" "MPI with $n ranks across the veth at MTU $m"
		done
	done
	if head -c 8 "$dir/plots/veth-bandwidth.png" 2>/dev/null | grep -q PNG; then ok; else bad "plot veth-bandwidth.png"; fi
fi
for p in latency-write latency-send latency-read bandwidth-write bandwidth-send bandwidth-read reg-mr; do
	if head -c 8 "$dir/plots/$p.png" 2>/dev/null | grep -q PNG; then ok; else bad "plot $p.png"; fi
done
"$bench" --bogus >/dev/null 2>&1
expect_status 2 $? "an unknown option"
finish
