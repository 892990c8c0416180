/* A thread uroce starts in a program (the progress thread, the atomic
 * server, the CM's thread) takes none of the signals the program directs at
 * its process. The kernel gives a process-directed signal to any one thread
 * that does not block it (signal(7)), so a program that blocks a signal in
 * its own threads to take it from a signalfd or sigwait would lose it to
 * ours, whose default action for most signals ends the process: tgtd's
 * iSER target died so of the SIGUSR2 its I/O threads send it (tgt's bs.c).
 * A NIC's library starts no thread for it to lose them to. The faults that
 * are the thread's own (SIGSEGV and SIGBUS, which the user-memory guard
 * takes, SIGFPE, SIGILL, SIGTRAP, SIGSYS) stay unblocked: blocked, the
 * kernel would still deliver them, with their default action. */
#include "library_thread.h"

#include <signal.h>

int uro_thread_start(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	static const int own[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS};
	sigset_t all, caller;
	int err;

	sigfillset(&all);
	for (unsigned i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		sigdelset(&all, own[i]);
	/* The new thread inherits the mask it is created under. */
	pthread_sigmask(SIG_SETMASK, &all, &caller);
	err = pthread_create(t, attr, fn, arg);
	pthread_sigmask(SIG_SETMASK, &caller, NULL);
	return err;
}
