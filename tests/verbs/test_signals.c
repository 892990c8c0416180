/* uroce's own threads take none of the signals a program directs at its
 * process (core/library_thread.c). A child starts all three (the progress
 * thread, by a QP on the wire; the atomic server, by a region open to
 * atomics; the CM's thread, by a listener), then blocks SIGUSR2 and takes
 * it from a signalfd, as tgtd does with the SIGUSR2 its I/O threads send
 * it: each one sent to the process must reach the signalfd. When a uroce
 * thread could take it, SIGUSR2's default action ended the child. */
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../check.h"
#include "pair.h"

#define SIGNALS 20

/* The signals taken: SIGNALS when every one reached the signalfd. */
static int take_signals(void)
{
	struct signalfd_siginfo si;
	sigset_t usr2;
	int fd, taken = 0;

	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);
	sigprocmask(SIG_BLOCK, &usr2, NULL);
	fd = signalfd(-1, &usr2, SFD_CLOEXEC);
	for (int i = 0; fd >= 0 && i < SIGNALS; i++) {
		struct pollfd p = {.fd = fd, .events = POLLIN};

		kill(getpid(), SIGUSR2);
		if (poll(&p, 1, 2000) != 1 || read(fd, &si, sizeof(si)) != sizeof(si))
			break;
		taken += si.ssi_signo == SIGUSR2;
	}
	return taken;
}

/* The threads of this process. */
static int threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

/* 0 when uroce's three threads ran and every signal was taken; 2 when they
 * did not all start (the test would prove nothing). */
static int child(void)
{
	struct ibv_qp_cap cap = {
	    .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1};
	struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	static struct side a, b;

	/* UROCE_TRANSPORT=roce: the QPs go on the wire at RTR, and the
	 * progress thread starts then; the regions allow atomics, and the
	 * atomic server starts with the first. */
	setenv("UROCE_TRANSPORT", "roce", 1);
	if (side_open(&a, IBV_QPT_RC, 8, cap) || side_open(&b, IBV_QPT_RC, 8, cap) ||
	    qp_connect(a.qp, b.qp->qp_num, 7, 1) || qp_connect(b.qp, a.qp->qp_num, 7, 1))
		return 2;
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(id, (struct sockaddr *)&any) || rdma_listen(id, 1) || threads() < 4)
		return 2;
	return take_signals() == SIGNALS ? 0 : 1;
}

static void test_signals_stay_the_programs(void)
{
	int status = 0;
	pid_t pid = fork();

	if (pid == 0)
		_exit(child());
	CHECK(pid > 0);
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fprintf(stderr, "the child died of signal %d\n", WTERMSIG(status));
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
}

int main(void)
{
	test_signals_stay_the_programs();
	return check_report();
}
