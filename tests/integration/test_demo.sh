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
out=$(timeout $T "$UROCE" demo -d nosuch 2>&1); st=$?
expect_status 1 $st "demo on a missing device"
expect_match "$out" 'no device nosuch' "demo names the missing device"
out=$(timeout $T "$UROCE" demo --help 2>&1); st=$?
expect_status 0 $st "demo --help"
out=$(timeout $T "$UROCE" --help 2>&1); st=$?
expect_status 0 $st "uroce --help"
expect_match "$out" 'run CMD' "usage names run"
finish
