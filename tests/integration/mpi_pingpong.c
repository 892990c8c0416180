/* A 2-rank MPI ping-pong that checks every byte: rank 0 sends a pattern that
 * changes each round, rank 1 checks it and returns it inverted, and rank 0
 * checks the return. Run by test_mpi.sh under uroce run; exits non-zero on
 * the first wrong byte. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define ROUNDS 1000
#define BYTES  (64 * 1024)

static unsigned char pattern(int round, int i, int inverted)
{
	unsigned char b = (unsigned char)(round * 31 + i * 7);

	return inverted ? (unsigned char)~b : b;
}

static int check(const unsigned char *buf, int round, int inverted)
{
	for (int i = 0; i < BYTES; i++)
		if (buf[i] != pattern(round, i, inverted)) {
			fprintf(stderr, "round %d: byte %d is %u, expected %u\n", round, i, buf[i],
				pattern(round, i, inverted));
			return 1;
		}
	return 0;
}

int main(int argc, char **argv)
{
	static unsigned char buf[BYTES];
	int rank, size, bad = 0;
	double t0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2) {
		if (rank == 0)
			fprintf(stderr, "needs 2 ranks, has %d\n", size);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	t0 = MPI_Wtime();
	for (int r = 0; r < ROUNDS && !bad; r++) {
		if (rank == 0) {
			for (int i = 0; i < BYTES; i++)
				buf[i] = pattern(r, i, 0);
			MPI_Send(buf, BYTES, MPI_UNSIGNED_CHAR, 1, r, MPI_COMM_WORLD);
			MPI_Recv(buf, BYTES, MPI_UNSIGNED_CHAR, 1, r, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			bad = check(buf, r, 1);
		} else {
			MPI_Recv(buf, BYTES, MPI_UNSIGNED_CHAR, 0, r, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			bad = check(buf, r, 0);
			for (int i = 0; i < BYTES; i++)
				buf[i] = (unsigned char)~buf[i];
			MPI_Send(buf, BYTES, MPI_UNSIGNED_CHAR, 0, r, MPI_COMM_WORLD);
		}
	}
	if (rank == 0 && !bad)
		printf("%d round trips of %d bytes checked: %.1f us per round trip\n", ROUNDS,
		       BYTES, (MPI_Wtime() - t0) / ROUNDS * 1e6);
	MPI_Finalize();
	return bad;
}
