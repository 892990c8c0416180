#!/usr/bin/env bash
# `uroce demo`, the README's first command's main job: two processes on
# uroce0 over lo, and the table it prints (its numbers are not judged here:
# bench/ holds the speed).
. "$(dirname "$0")/lib.sh"

out=$(timeout 60 "$UROCE" demo 2>&1); st=$?
expect_status 0 $st "uroce demo"
expect_match "$out" '^uroce demo: two processes on uroce0, one RC QP' "demo runs on uroce0"
num='[0-9]+\.[0-9]{2}'
expect_match "$out" "^  RDMA WRITE +$num +$num$" "RDMA WRITE row"
expect_match "$out" "^  SEND / RECV +$num +$num$" "SEND row"
expect_match "$out" "^  process_vm_writev +- +$num$" "raw copy row"
# Under loss the demo still completes every operation
# and shows the retransmissions that made them good.
out=$(timeout 120 "$UROCE" demo --faults 'loss=2%,seed=5' 2>&1); st=$?
expect_status 0 $st "uroce demo --faults"
expect_match "$out" '^uroce demo: .*, faults loss=2%,seed=5$' "demo names its faults"
expect_match "$out" "^  RDMA WRITE +$num +$num$" "RDMA WRITE row under faults"
expect_match "$out" '^RoCEv2 packets: [1-9][0-9]* sent' "packets counted"
expect_match "$out" 'the faults dropped [1-9][0-9]* more before they left' "losses injected"
expect_match "$out" '^RC recovered: lost packets were retransmitted \([1-9][0-9]* retransmissions' "losses retransmitted"
expect_match "$out" '^nothing was lost to the application' "the summary says the application lost nothing"
out=$(timeout $T "$UROCE" demo --faults 'loss=nonsense' 2>&1); st=$?
expect_status 2 $st "demo with a bad fault spec"
expect_match "$out" '^uroce demo: --faults: ' "demo says what is wrong with the spec"
out=$(timeout $T "$UROCE" demo -d nosuch 2>&1); st=$?
expect_status 1 $st "demo on a missing device"
expect_match "$out" "no device named 'nosuch'; the devices are: uroce0" "demo names the missing device"
out=$(timeout $T "$UROCE" demo --help 2>&1); st=$?
expect_status 0 $st "demo --help"
out=$(timeout $T "$UROCE" --help 2>&1); st=$?
expect_status 0 $st "uroce --help"
expect_match "$out" 'run .*CMD' "usage names run"
finish
