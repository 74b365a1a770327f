/*
 * alarm_big_get.c - alarm_get.c with a request too big for the socket's
 * room: GET /2 carries a 60000-byte header, so a server that does not
 * read it (and takes little: tests/servers/unread.py) makes the write wait (and a
 * replay's copy of it wait for room on its fresh connection).  GET /1 on
 * a connection, read to EOF, close; then alarm(2) and GET /2 on a new
 * connection, written in a loop until whole or the alarm ran.  SIGALRM's
 * handler has no SA_RESTART.  Prints "1 <status line>", then "2 <status
 * line>", "2 EINTR <write|read>", "2 short write" (the alarm cut a write
 * that had sent part), or "2 <ERRNO> <call>"; then "within 5 s" or
 * "after N s".  mixed: a SIGUSR1 handler with SA_RESTART too, sent every
 * 300 ms from the second request on, and last "alarms N".  again: after
 * the alarm's EINTR or short write the request goes on (the rest written,
 * the read made again), as a program that retries does, and the second
 * request's status line follows; "within 5 s" then means nothing.
 * body: /2 is a PUT with a 60000-byte body instead (a write that sent
 * part returns its count; the next, sending nothing, EINTR at the alarm).
 *
 * Usage: alarm_big_get HOST PORT [mixed] [again] [body]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "alarm_client.h"

#define PAD (60 * 1000)

static bool again; /* after the alarm's EINTR or short write, go on */
static bool body;  /* /2 is a PUT of a 60000-byte body, not a GET */

static int get(const struct sockaddr_in *a, const char *path, size_t pad)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(s, (const struct sockaddr *)a, sizeof(*a)) < 0) {
		printf("%s %s connect\n", path, strerrorname_np(errno));
		return -1;
	}
	static char req[PAD + 256];
	bool cut = false;
	int n = snprintf(req, sizeof(req), "%s /%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n",
			 pad && body ? "PUT" : "GET", path);
	if (pad && body) {
		n += snprintf(req + n, sizeof(req) - (size_t)n, "Content-Length: %d\r\n\r\n", PAD);
		memset(req + n, 'b', PAD);
		n += PAD;
	} else if (pad) {
		n += snprintf(req + n, sizeof(req) - (size_t)n, "X-Pad: ");
		memset(req + n, 'a', pad);
		n += (int)pad;
		n += snprintf(req + n, sizeof(req) - (size_t)n, "\r\n");
	}
	if (!(pad && body))
		n += snprintf(req + n, sizeof(req) - (size_t)n, "\r\n");
	for (int w = 0; w < n;) {
		ssize_t r = write(s, req + w, (size_t)(n - w));
		if (r < 0) {
			printf("%s %s write\n", path, strerrorname_np(errno));
			if (again && errno == EINTR)
				continue;
			close(s);
			return -1;
		}
		w += (int)r;
		if (w < n && alarms && !cut) {
			printf("%s short write\n", path);
			cut = true;
			if (again)
				continue;
			close(s);
			return -1;
		}
	}
	return print_status_line(s, path, again);
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
	inet_pton(AF_INET, argv[1], &a.sin_addr);
	count_alarms();
	get(&a, "1", 0);
	bool mixed = false;
	for (int i = 3; i < argc; i++) {
		again |= !strcmp(argv[i], "again");
		body |= !strcmp(argv[i], "body");
		mixed |= !strcmp(argv[i], "mixed");
	}
	if (mixed) {
		start_usr1_ticks();
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	alarm(2);
	get(&a, "2", PAD);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (t1.tv_sec - t0.tv_sec < 5)
		printf("within 5 s\n");
	else
		printf("after %ld s\n", (long)(t1.tv_sec - t0.tv_sec));
	if (argc > 3)
		printf("alarms %d\n", (int)alarms);
	fflush(stdout);
	return 0;
}
