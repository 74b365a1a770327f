/*
 * alarm_ticks.h - the signals of the alarm_* clients: SIGALRM without
 * SA_RESTART, counted in `alarms` (the call it cuts ends with EINTR), and
 * on demand a SIGUSR1 with SA_RESTART every 300 ms from a thread that takes
 * none, so that the main thread's calls meet both kinds of handler.
 */
#ifndef ALARM_TICKS_H
#define ALARM_TICKS_H
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "sig_thread.h"

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

static void on_usr1(int sig)
{
	(void)sig;
}

static void *usr1_ticks(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec ts = { 0, 300 * 1000000L };
		nanosleep(&ts, NULL);
		kill(getpid(), SIGUSR1); /* the main thread's: this one blocks all */
	}
	return NULL;
}

static inline void count_alarms(void)
{
	struct sigaction sa = { .sa_handler = on_alarm }; /* no SA_RESTART */
	sigaction(SIGALRM, &sa, NULL);
}

static inline void start_usr1_ticks(void)
{
	struct sigaction su = { .sa_handler = on_usr1, .sa_flags = SA_RESTART };
	sigaction(SIGUSR1, &su, NULL);
	start_unsignalled(usr1_ticks);
}
#endif
