/*
 * alarm_get.c - a blocking program with alarm(2): GET /1 on a connection,
 * read to EOF, close; then alarm(2) and GET /2 on a new connection.  A
 * SIGALRM handler without SA_RESTART: the call in progress when it fires
 * fails with EINTR.  Prints "1 <status line>", then for the second request
 * "2 <status line>" or "2 EINTR <connect|write|read>" or "2 <ERRNO>", and
 * "within 5 s" or "after N s".  mixed: a SIGUSR1 handler with SA_RESTART
 * too, a thread sending SIGUSR1 every 300 ms from the second request on
 * (the kernel restarts the call after each; the SIGALRM, 100 ms from the
 * nearest, still ends it),
 * and last "alarms N", the SIGALRM handlers that ran.
 *
 * Usage: alarm_get HOST PORT [mixed]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "alarm_client.h"

static int get(const struct sockaddr_in *a, const char *path)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(s, (const struct sockaddr *)a, sizeof(*a)) < 0) {
		printf("%s %s connect\n", path, strerrorname_np(errno));
		return -1;
	}
	char req[128];
	int n = snprintf(req, sizeof(req), "GET /%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
	if (write(s, req, (size_t)n) != n) {
		printf("%s %s write\n", path, strerrorname_np(errno));
		return -1;
	}
	return print_status_line(s, path, false);
}

int main(int argc, char **argv)
{
	if (argc != 3 && argc != 4)
		return 2;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
	inet_pton(AF_INET, argv[1], &a.sin_addr);
	count_alarms();
	get(&a, "1");
	if (argc == 4) {
		start_usr1_ticks();
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	alarm(2);
	get(&a, "2");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (t1.tv_sec - t0.tv_sec < 5)
		printf("within 5 s\n");
	else
		printf("after %ld s\n", (long)(t1.tv_sec - t0.tv_sec));
	if (argc == 4)
		printf("alarms %d\n", (int)alarms);
	fflush(stdout);
	return 0;
}
