#!/usr/bin/env bash
# DAPL (Debian's dapl2-utils and libdapl2), unmodified: dtest's server and
# client over the two providers that address a RoCE port, scm (a TCP
# socket exchanges QP numbers and GIDs) and cma (rdma_cm on the link's
# netdev), on shared memory and over RoCEv2 on lo; both print "DAPL Test
# Complete. PASSED". The ucm provider is left out: it addresses peers by
# LID, and dtest's client refuses a server whose LID is 0 ("No valid data
# was received from the server", Debian 12's dtest), which every RoCE
# port's is: a Linux 6.1 rxe0 answers dtest's ucm pair in one host the
# same way.
. "$(dirname "$0")/lib.sh" 60

if ! command -v dtest >/dev/null; then
	bad "dtest is not installed (scripts/install-deps: dapl2-utils)"
	finish
	exit
fi
# The providers, on uroce0 (its link is lo); DAT_OVERRIDE replaces
# /etc/dat.conf.
export DAT_OVERRIDE=$PAIR_DIR/dat.conf
cat >"$DAT_OVERRIDE" <<CONF
uroce-scm u2.0 nonthreadsafe default libdaploscm.so.2 dapl.2.0 "uroce0 1" ""
uroce-cma u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "lo 0" ""
CONF
# dtest's server hands its address to the client on TCP port 15828, its
# own, once it is ready.
for transport in shm roce; do
	if [ $transport = roce ]; then export UROCE_TRANSPORT=roce; else unset UROCE_TRANSPORT; fi
	for provider in scm cma; do
		run_pair "dtest over $provider ($transport)" 15828 "dtest -P uroce-$provider -s" \
			"dtest -P uroce-$provider -h 127.0.0.1" &&
			expect_match "$(cat "$PAIR_DIR/cli")" 'DAPL Test Complete\. PASSED' \
				"dtest over $provider ($transport): the client" &&
			expect_match "$(cat "$PAIR_DIR/srv")" 'DAPL Test Complete\. PASSED' \
				"dtest over $provider ($transport): the server"
	done
done
finish
