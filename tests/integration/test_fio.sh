#!/usr/bin/env bash
# fio's rdma engine (Debian's fio), unmodified: a server and a client that
# connect through rdma_cm and move 64 MiB with --verb=write and with
# --verb=read, on shared memory and over RoCEv2 on lo; both exit 0 and the
# client moved all of it. --verb=send is left out: fio connects with
# rnr_retry 0 and its server posts each receive again only once its job
# has taken the completion, so the client ends in RNR_RETRY_EXC_ERR
# whenever the server is the slower of the two, as on any device
# (docs/architecture.md, "No receive posted").
. "$(dirname "$0")/lib.sh" 60

if ! command -v fio >/dev/null; then
	bad "fio is not installed (scripts/install-deps)"
	finish
	exit
fi
port=$((18600 + $$ % 1000))
for transport in shm roce; do
	if [ $transport = roce ]; then export UROCE_TRANSPORT=roce; else unset UROCE_TRANSPORT; fi
	for verb in write read; do
		port=$((port + 1))
		job="--ioengine=rdma --port=$port --bs=64k --size=64m --iodepth=8"
		run_pair "fio --verb=$verb ($transport)" $port "fio --name=srv $job --rw=read" \
			"fio --name=cli $job --rw=write --hostname=127.0.0.1 --verb=$verb" &&
			expect_match "$(cat "$PAIR_DIR/cli")" 'WRITE: bw=.* io=64\.0MiB' \
				"fio --verb=$verb ($transport) moved 64 MiB"
	done
done
finish
