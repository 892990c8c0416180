#!/usr/bin/env bash
# Open MPI (Debian's openmpi-bin), unmodified, on uroce0: mpi_job.c with 2
# ranks (a ping-pong, a bandwidth loop and MPI_Allreduce, every byte
# checked), with pml ucx over UCX's verbs transports, UCX's own log showing
# rc_verbs on uroce0 in use.
. "$(dirname "$0")/lib.sh" 120

if ! command -v mpicc >/dev/null || ! command -v mpirun >/dev/null; then
	bad "openmpi-bin and libopenmpi-dev are not installed (scripts/install-deps)"
	finish
	exit
fi
work=$(mktemp -d /tmp/uroce-mpi-XXXXXX)
trap 'rm -rf "$work" "$PAIR_DIR"; rm -f "$UROCE_CONFIG"' EXIT
# Built without the sanitizer build's flags: it is a test client, like
# Debian's programs, and finds the sanitizer runtime through LD_PRELOAD.
LD_PRELOAD= mpicc -O2 -o "$work/mpi_job" "$(dirname "$0")/mpi_job.c"
expect_status 0 $? "mpicc"

root=()
[ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
mpi() {
	timeout $T "$UROCE" run mpirun "${root[@]}" --oversubscribe -np 2 --mca pml ucx \
		--mca btl ^openib,uct -x UCX_TLS="$1" -x UCX_LOG_LEVEL=info "$work/mpi_job" 2>&1
}
out=$(mpi rc_verbs,ud_verbs); st=$?
expect_status 0 $st "mpirun -np 2 --mca pml ucx over rc_verbs"
expect_match "$out" '^2 ranks: 200 round trips of 65536 bytes checked' "every byte of the ping-pong"
expect_match "$out" 'ep_cfg\[[0-9]+\]: tag\(rc_verbs/uroce0:1' "UCX uses rc_verbs on uroce0"
out=$(mpi ud_verbs); st=$?
expect_status 0 $st "mpirun -np 2 --mca pml ucx over ud_verbs"
expect_match "$out" '^2 ranks: 200 round trips of 65536 bytes checked' "every byte of the ping-pong over UD"
expect_match "$out" 'ep_cfg\[[0-9]+\]: tag\(ud_verbs/uroce0:1' "UCX uses ud_verbs on uroce0"
finish
