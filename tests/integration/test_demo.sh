#!/usr/bin/env bash
# `uroce demo`, the README's first command's main job, on uroce0 over lo.
. "$(dirname "$0")/lib.sh"

out=$(timeout $T "$UROCE" demo 2>&1); st=$?
expect_status 0 $st "uroce demo"
expect_match "$out" '^device uroce0: port 1 active, link layer Ethernet' "demo opens uroce0"
expect_match "$out" 'GID\[0\] ::ffff:127\.0\.0\.1' "demo shows lo's GID"
expect_match "$out" 'RESET -> INIT -> RTR -> RTS$' "demo walks the QP to RTS"
out=$(timeout $T "$UROCE" demo -d nosuch 2>&1); st=$?
expect_status 1 $st "demo on a missing device"
expect_match "$out" 'no device nosuch' "demo names the missing device"
out=$(timeout $T "$UROCE" --help 2>&1); st=$?
expect_status 0 $st "uroce --help"
expect_match "$out" 'run CMD' "usage names run"
finish
