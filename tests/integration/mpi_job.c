/* An MPI job across hosts: an even number of ranks, the first half on one
 * host and the second on the other (mpirun's --host order), each rank of
 * the first half paired with its peer on the other host. Every pair runs a
 * ping-pong that checks every byte, then a bandwidth loop (a window of
 * non-blocking sends) whose every message is checked, then every rank takes
 * part in an MPI_Allreduce whose sums each rank checks in full. Rank 0
 * prints the pair's latency and bandwidth; run by test_mpi.sh (one host),
 * test_mpi_hosts.sh and bench/run. Exits non-zero on the first wrong byte. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS	   200
#define BYTES	   (64 * 1024)
#define LAT_ROUNDS 2000
#define BW_BYTES   (1 << 20)
#define BW_WINDOW  16
#define BW_LOOPS   20
#define SUM_LEN	   (1 << 18)

static unsigned char pattern(int round, int i, int inverted)
{
	unsigned char b = (unsigned char)(round * 31 + i * 7);

	return inverted ? (unsigned char)~b : b;
}

static int check(const unsigned char *buf, int len, int round, int inverted, int rank)
{
	for (int i = 0; i < len; i++)
		if (buf[i] != pattern(round, i, inverted)) {
			fprintf(stderr, "rank %d, round %d: byte %d is %u, expected %u\n", rank,
				round, i, buf[i], pattern(round, i, inverted));
			return 1;
		}
	return 0;
}

static void fill(unsigned char *buf, int len, int round, int inverted)
{
	for (int i = 0; i < len; i++)
		buf[i] = pattern(round, i, inverted);
}

/* The first of a pair sends, the other answers with the bytes inverted. */
static int pingpong(unsigned char *buf, int len, int rounds, int peer, int first, int rank)
{
	for (int r = 0; r < rounds; r++) {
		if (first) {
			fill(buf, len, r, 0);
			MPI_Send(buf, len, MPI_BYTE, peer, r, MPI_COMM_WORLD);
			MPI_Recv(buf, len, MPI_BYTE, peer, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			if (check(buf, len, r, 1, rank))
				return 1;
		} else {
			MPI_Recv(buf, len, MPI_BYTE, peer, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			if (check(buf, len, r, 0, rank))
				return 1;
			fill(buf, len, r, 1);
			MPI_Send(buf, len, MPI_BYTE, peer, r, MPI_COMM_WORLD);
		}
	}
	return 0;
}

/* BW_LOOPS windows of BW_WINDOW messages of BW_BYTES from the first of a
 * pair, each window answered by one byte; every message is checked.
 * Returns GB/s at the sender. */
static double bandwidth(unsigned char *buf, int peer, int first, int rank, int *bad)
{
	MPI_Request req[BW_WINDOW];
	double t0 = MPI_Wtime();
	char ack = 0;

	for (int l = 0; l < BW_LOOPS; l++) {
		for (int w = 0; w < BW_WINDOW; w++) {
			unsigned char *b = buf + (size_t)w * BW_BYTES;

			if (first) {
				fill(b, BW_BYTES, l * BW_WINDOW + w, 0);
				MPI_Isend(b, BW_BYTES, MPI_BYTE, peer, w, MPI_COMM_WORLD, &req[w]);
			} else {
				MPI_Irecv(b, BW_BYTES, MPI_BYTE, peer, w, MPI_COMM_WORLD, &req[w]);
			}
		}
		MPI_Waitall(BW_WINDOW, req, MPI_STATUSES_IGNORE);
		if (!first)
			for (int w = 0; w < BW_WINDOW && !*bad; w++)
				*bad = check(buf + (size_t)w * BW_BYTES, BW_BYTES,
					     l * BW_WINDOW + w, 0, rank);
		if (first)
			MPI_Recv(&ack, 1, MPI_BYTE, peer, BW_WINDOW, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
		else
			MPI_Send(&ack, 1, MPI_BYTE, peer, BW_WINDOW, MPI_COMM_WORLD);
	}
	return (double)BW_LOOPS * BW_WINDOW * BW_BYTES / (MPI_Wtime() - t0) / 1e9;
}

/* Every rank adds rank * SUM_LEN + i at i; each checks every sum. */
static int allreduce(int rank, int size)
{
	int64_t *in = malloc(SUM_LEN * sizeof(*in)), *out = malloc(SUM_LEN * sizeof(*out));
	int64_t ranks = (int64_t)size * (size - 1) / 2;
	int bad = !in || !out;

	for (int i = 0; !bad && i < SUM_LEN; i++)
		in[i] = (int64_t)rank * SUM_LEN + i;
	if (!bad)
		MPI_Allreduce(in, out, SUM_LEN, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
	for (int i = 0; !bad && i < SUM_LEN; i++)
		if (out[i] != ranks * SUM_LEN + (int64_t)size * i) {
			fprintf(stderr, "rank %d: sum %d is %lld\n", rank, i, (long long)out[i]);
			bad = 1;
		}
	free(in);
	free(out);
	return bad;
}

int main(int argc, char **argv)
{
	int rank, size, bad = 0, all_bad = 0;
	unsigned char *buf;
	double t0, lat, bw;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size % 2) {
		if (rank == 0)
			fprintf(stderr, "an even number of ranks, please\n");
		MPI_Finalize();
		return 2;
	}
	int half = size / 2, first = rank < half, peer = first ? rank + half : rank - half;

	buf = malloc((size_t)BW_WINDOW * BW_BYTES);
	if (!buf)
		MPI_Abort(MPI_COMM_WORLD, 3);
	bad = pingpong(buf, BYTES, ROUNDS, peer, first, rank);
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	bad |= pingpong(buf, 8, LAT_ROUNDS, peer, first, rank);
	lat = (MPI_Wtime() - t0) / LAT_ROUNDS / 2 * 1e6;
	MPI_Barrier(MPI_COMM_WORLD);
	bw = bandwidth(buf, peer, first, rank, &bad);
	bad |= allreduce(rank, size);
	MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
	if (rank == 0 && !all_bad) {
		printf("%d ranks: %d round trips of %d bytes checked\n", size, ROUNDS, BYTES);
		printf("latency %.2f us (8 bytes, half a round trip)\n", lat);
		printf("bandwidth %.3f GB/s (%d windows of %d x %d bytes)\n", bw, BW_LOOPS,
		       BW_WINDOW, BW_BYTES);
		printf("allreduce of %d int64 sums checked\n", SUM_LEN);
	}
	free(buf);
	MPI_Finalize();
	return all_bad;
}
