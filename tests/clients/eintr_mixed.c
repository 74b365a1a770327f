/*
 * eintr_mixed.c PORT PATH waitall|splice quiet|fire - a program with two
 * signal handlers: SIGALRM with SA_RESTART (an itimer every 250 ms) and
 * SIGUSR1 without.  One "GET PATH" with "Connection: close", then reads to
 * EOF or error: recv(4096, MSG_WAITALL) in a loop (waitall), or splice(2)
 * into a pipe (splice).  quiet: SIGUSR1 never comes (the kernel restarts
 * the read after every SIGALRM; it goes on); fire: a thread sends SIGUSR1
 * to the process 375 ms after the request, between two SIGALRMs (the
 * kernel's read ends with EINTR; a SIGUSR1 that comes with a SIGALRM may
 * run in the restart's window, and the read goes on).  Prints the bytes read, then "end r=R errno=E" of the last read
 * and how many SIGUSR1 handlers ran.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "sig_thread.h"

static volatile sig_atomic_t usr1_ran;

static void on_alarm(int sig)
{
	(void)sig;
}

static void on_usr1(int sig)
{
	(void)sig;
	usr1_ran++;
}

static void *fire(void *arg)
{
	(void)arg;
	struct timespec ts = { 0, 375 * 1000000L };
	nanosleep(&ts, NULL);
	kill(getpid(), SIGUSR1); /* the main thread's: this one blocks all */
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: eintr_mixed PORT PATH waitall|splice quiet|fire\n");
		return 2;
	}
	struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	sigaction(SIGALRM, &sa, NULL);
	struct sigaction sb = { .sa_handler = on_usr1, .sa_flags = 0 };
	sigaction(SIGUSR1, &sb, NULL);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("connect");
		return 1;
	}
	char req[256];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", argv[2]);
	if (write(fd, req, (size_t)n) != n) {
		perror("write");
		return 1;
	}
	if (!strcmp(argv[4], "fire")) {
		start_unsignalled(fire);
	}
	struct itimerval it = { { 0, 250000 }, { 0, 250000 } };
	setitimer(ITIMER_REAL, &it, NULL);
	int p[2];
	if (pipe(p) < 0)
		return 1;
	static char buf[65536];
	ssize_t r;
	for (;;) {
		if (!strcmp(argv[3], "splice")) {
			r = splice(fd, NULL, p[1], NULL, sizeof(buf), 0);
			if (r > 0 && read(p[0], buf, (size_t)r) != r)
				return 1;
		} else {
			r = recv(fd, buf, 4096, MSG_WAITALL);
		}
		if (r <= 0)
			break;
		fwrite(buf, 1, (size_t)r, stdout);
	}
	int err = errno;
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	printf("\nend r=%zd errno=%s usr1=%d\n", r, r < 0 ? strerrorname_np(err) : "-", (int)usr1_ran);
	return 0;
}
