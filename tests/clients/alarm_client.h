/*
 * alarm_client.h - what the alarm_* clients share.  Their signals: SIGALRM without
 * SA_RESTART, counted in `alarms` (the call it cuts ends with EINTR), and
 * on demand a SIGUSR1 with SA_RESTART every 300 ms from a thread that takes
 * none, so that the main thread's calls meet both kinds of handler.  And
 * the reading of a response's status line, each failure printed.
 */
#ifndef ALARM_CLIENT_H
#define ALARM_CLIENT_H
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
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
/* Read s up to its EOF (or a full buffer) and print "PATH <status line>"
 * or "PATH EOF"; a failed read prints "PATH ERRNO read" and, with again
 * and EINTR, goes on.  Closes s; 0, or -1 after a failed read. */
static inline int print_status_line(int s, const char *path, bool again)
{
	char buf[4096];
	size_t got = 0;
	for (;;) {
		ssize_t r = read(s, buf + got, sizeof(buf) - 1 - got);
		if (r < 0) {
			printf("%s %s read\n", path, strerrorname_np(errno));
			if (again && errno == EINTR)
				continue;
			close(s);
			return -1;
		}
		if (r == 0 || got + (size_t)r >= sizeof(buf) - 1)
			break;
		got += (size_t)r;
	}
	buf[got] = 0;
	char *eol = strstr(buf, "\r\n");
	if (eol)
		*eol = 0;
	printf("%s %s\n", path, got ? buf : "EOF");
	close(s);
	return 0;
}
#endif
