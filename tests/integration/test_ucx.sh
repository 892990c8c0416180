#!/usr/bin/env bash
# UCX (Debian's ucx-utils), unmodified, on uroce0: ucx_info finds the
# device's verbs transports, and ucx_perftest passes over them, with no UCX
# variable but the choice of transports.
. "$(dirname "$0")/lib.sh"

command -v ucx_perftest >/dev/null || { bad "ucx-utils is not installed (scripts/install-deps)"; finish; exit; }

out=$(timeout $T "$UROCE" run ucx_info -d 2>&1); st=$?
expect_status 0 $st "ucx_info -d"
for tl in rc_verbs ud_verbs; do
	if printf '%s\n' "$out" | grep -A1 "Transport: $tl" | grep -q 'Device: uroce0:1'; then
		ok
	else
		bad "ucx_info -d lists no $tl on uroce0:1"
	fi
done

port=$((10700 + $$ % 100))
for tls in rc_verbs,ud_verbs ud_verbs; do
	for t in tag_lat tag_bw ucp_put_lat ucp_get; do
		# Sizes across UCX's short, bcopy and zero-copy protocols.
		for s in 8 8192 65536; do
			port=$((port + 1))
			UCX_TLS=$tls run_pair "ucx_perftest $t -s $s over $tls" $port \
				"ucx_perftest -p $port" \
				"ucx_perftest -p $port 127.0.0.1 -t $t -s $s -n 2000" &&
				expect_match "$(cat "$PAIR_DIR/cli")" '^Final: +2000 ' \
					"ucx_perftest $t -s $s over $tls reports its run"
		done
	done
done
finish
