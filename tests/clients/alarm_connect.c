/*
 * alarm_connect.c - a blocking connect() to 127.0.0.1:PORT bounded by the
 * program's own alarm: a SIGALRM handler without SA_RESTART, an interval
 * timer of MS milliseconds.  Against a server whose accept queue is full
 * (the SYN dropped) the kernel's connect waits, and the alarm ends it with
 * EINTR.  Prints "connect: 0" or "connect: <ERRNO>" and the number of
 * alarms that ran.
 *
 * Usage: alarm_connect PORT MS
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm; /* no SA_RESTART */
	sigaction(SIGALRM, &sa, NULL);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	int ms = atoi(argv[2]);
	struct itimerval it = { { 0, 0 }, { ms / 1000, (ms % 1000) * 1000 } };
	setitimer(ITIMER_REAL, &it, NULL);
	int r = connect(s, (struct sockaddr *)&a, sizeof(a));
	int err = errno;
	if (r == 0)
		printf("connect: 0\n");
	else
		printf("connect: %s\n", strerrorname_np(err));
	printf("alarms: %d\n", (int)alarms);
	return 0;
}
