/*
 * connect_eintr.c - a blocking connect() to 127.0.0.1:PORT cut by the
 * program's alarm (a SIGALRM handler without SA_RESTART, a timer of MS
 * milliseconds), and the program's POSIX recovery: after EINTR the
 * connection goes on in the kernel.
 *
 *   recover: on EINTR, wait for POLLOUT and read SO_ERROR (as CPython's
 *            socket.connect does), then send GET /f and print the status
 *            line; prints the same whether the connect said 0 or EINTR
 *            (stderr says which); CUE: a file made once the connect
 *            returned (tests/servers/late_accept.py then accepts);
 *   retry:   on EINTR, connect again, non-blocking: prints both answers
 *            (alone, against a listener whose accept queue is full:
 *            "connect: EINTR", "again: EALREADY").
 *
 * Usage: connect_eintr recover|retry PORT MS [CUE]
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "alarm_client.h"

static int recover(int s, int r, int err)
{
	fprintf(stderr, "connect: %s\n", r == 0 ? "0" : strerrorname_np(err));
	if (r < 0 && err != EINTR) {
		printf("connect: %s\n", strerrorname_np(err));
		return 1;
	}
	if (r < 0) {
		struct pollfd p = { s, POLLOUT, 0 };
		while (poll(&p, 1, 10000) < 0 && errno == EINTR)
			;
		int e = 0;
		socklen_t l = sizeof(e);
		getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &l);
		if (e) {
			printf("connect went on: %s\n", strerrorname_np(e));
			return 1;
		}
	}
	printf("connected\n");
	static const char req[] = "GET /f HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
	ssize_t w;
	while ((w = send(s, req, sizeof(req) - 1, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	if (w != (ssize_t)sizeof(req) - 1) {
		printf("send: %s\n", w < 0 ? strerrorname_np(errno) : "short");
		return 1;
	}
	return print_status_line(s, "/f", true) < 0;
}

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 5)
		return 2;
	count_alarms();
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	int ms = atoi(argv[3]);
	struct itimerval it = { { 0, 0 }, { ms / 1000, (ms % 1000) * 1000 } };
	setitimer(ITIMER_REAL, &it, NULL);
	int r = connect(s, (struct sockaddr *)&a, sizeof(a));
	int err = errno;
	/* the alarm's part is over: alone a late one would cut the read */
	sigset_t alrm;
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	sigprocmask(SIG_BLOCK, &alrm, NULL);
	if (argc == 5)
		close(open(argv[4], O_CREAT | O_WRONLY, 0600));
	if (!strcmp(argv[1], "recover"))
		return recover(s, r, err);
	printf("connect: %s\n", r == 0 ? "0" : strerrorname_np(err));
	if (r < 0 && err == EINTR) {
		fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK);
		r = connect(s, (struct sockaddr *)&a, sizeof(a));
		printf("again: %s\n", r == 0 ? "0" : strerrorname_np(errno));
	}
	return 0;
}
