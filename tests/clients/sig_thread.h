/*
 * sig_thread.h - a thread that takes none of the process's signals: made
 * with every signal blocked (a new thread inherits its maker's mask), so
 * a signal sent to the process is the main thread's to take, as a test
 * of what one call does under it needs.
 */
#ifndef SIG_THREAD_H
#define SIG_THREAD_H
#include <pthread.h>
#include <signal.h>

static inline void start_unsignalled(void *(*fn)(void *))
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_t t;
	pthread_create(&t, NULL, fn, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}
#endif
