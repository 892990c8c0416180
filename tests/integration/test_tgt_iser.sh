#!/usr/bin/env bash
# iSER: tgt's target (Debian's tgt) and libiscsi's initiator programs
# (libiscsi-bin), both in user space and unmodified, over uroce, on shared
# memory and over RoCEv2 on lo: INQUIRY, READ CAPACITY(16) and a second of
# reads (iscsi-perf) through an iSER connection. Two settings a user of
# uroce and tgt 1.0.85 needs, each checked:
#  - tgtd's iSCSI/TCP portal and its iSER portal may not share a port
#    number: uroce's CM carries RDMA port P on TCP port P on this host
#    (docs/architecture.md, Port space), so tgtd's default 3260 for both
#    leaves its iSER driver in error ("Target not found" for every iSER
#    login); here the TCP portal takes another port;
#  - tgt 1.0.85's iSER login (usr/iscsi/iser_text.c, iser_login_start)
#    wants both an address ACL and an initiator-name ACL to admit the
#    initiator, where its iSCSI/TCP login wants either: without the name
#    ACL the login ends in "Target not found" on any device.
# Needs root (tgtd); skipped otherwise.
. "$(dirname "$0")/lib.sh" 60

if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: tgtd needs root"
	exit 77
fi
for p in tgtd tgtadm iscsi-inq iscsi-readcapacity16 iscsi-perf; do
	command -v $p >/dev/null || bad "no $p (scripts/install-deps: tgt, libiscsi-bin)"
done
[ "$fails" -eq 0 ] || {
	finish
	exit
}
lun=$PAIR_DIR/lun.img
truncate -s 16M "$lun"
# A control socket, iSCSI/TCP and iSER ports of the test's own, so that a
# tgtd the host runs (Debian starts one) is left alone.
ctl=$((100 + $$ % 800)) tcp_port=$((23000 + $$ % 1000)) iser_port=$((24000 + $$ % 1000))
iqn=iqn.2026-11.org.uroce:it$$
initiator=iqn.2026-11.org.uroce:initiator
adm() { timeout $T tgtadm -C $ctl --lld iser "$@"; }
for transport in shm roce; do
	if [ $transport = roce ]; then export UROCE_TRANSPORT=roce; else unset UROCE_TRANSPORT; fi
	timeout $T "$UROCE" run tgtd -f -C $ctl --iscsi portal=127.0.0.1:$tcp_port \
		--iser port=$iser_port >"$PAIR_DIR/tgtd" 2>&1 &
	tgtd=$!
	wait_listen $iser_port || bad "tgtd ($transport) never listened for iSER"
	adm --op new --mode target --tid 1 -T $iqn &&
		adm --op new --mode logicalunit --tid 1 --lun 1 -b "$lun" &&
		adm --op bind --mode target --tid 1 -I ALL &&
		adm --op bind --mode target --tid 1 -Q $initiator ||
		bad "tgtadm could not set the target up ($transport)"
	url=iser://127.0.0.1:$iser_port/$iqn/1
	out=$(timeout $T "$UROCE" run iscsi-inq -i $initiator $url 2>&1)
	expect_status 0 $? "iscsi-inq over iSER ($transport): $out"
	expect_match "$out" '^Peripheral Device Type:DIRECT_ACCESS' "iscsi-inq over iSER ($transport)"
	out=$(timeout $T "$UROCE" run iscsi-readcapacity16 -i $initiator $url 2>&1)
	expect_match "$out" '^Total size:16777216$' "iscsi-readcapacity16 over iSER ($transport)"
	out=$(timeout 5 "$UROCE" run iscsi-perf -i $initiator -t 2 $url 2>&1)
	expect_match "$out" 'iops average [1-9]' "iscsi-perf over iSER ($transport)"
	grep -q 'driver iser is in state: error' "$PAIR_DIR/tgtd" && bad "tgtd's iSER driver failed ($transport)"
	# tgtd leaves on SIGTERM once it serves no target (tgtd.c).
	adm --op delete --mode target --tid 1 --force
	stop_job $tgtd
	stop_within 10 $tgtd
	wait $tgtd 2>/dev/null
done
finish
