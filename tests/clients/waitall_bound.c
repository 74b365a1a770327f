/*
 * waitall_bound.c PORT timeo|signal ka|close recv|recvmsg|recvfrom - one GET
 * /trickle (the server sends the head, then its 30-byte body a byte every
 * 100 ms: tests/servers/trickle.py), then ONE read of 4096 bytes with
 * MSG_WAITALL, bounded by SO_RCVTIMEO 300 ms (timeo) or ended by a
 * SIGALRM after 500 ms whose handler has SA_RESTART (signal).  The kernel
 * ends such a read with what it has at the bound; prints "partial" when
 * the read ended before the whole answer, "whole" when not (it ran the 3 s
 * of the trickle), and the errno of a failed read.
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
#include <unistd.h>

#define WHOLE 30 /* the body; the head comes first */

static void on_alarm(int sig)
{
	(void)sig;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: waitall_bound PORT timeo|signal ka|close recv|recvmsg|recvfrom\n");
		return 2;
	}
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (!strcmp(argv[2], "timeo")) {
		struct timeval tv = { 0, 300000 };
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	} else {
		struct sigaction sa = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
		sigaction(SIGALRM, &sa, NULL);
	}
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("connect");
		return 2;
	}
	char req[128];
	int n = snprintf(req, sizeof(req), "GET /trickle HTTP/1.1\r\nHost: x\r\n%s\r\n",
			 strcmp(argv[3], "ka") ? "Connection: close\r\n" : "");
	if (write(fd, req, (size_t)n) != n) {
		perror("write");
		return 2;
	}
	char b[4096];
	ssize_t r;
	if (!strcmp(argv[2], "signal")) {
		struct itimerval it = { .it_value = { 0, 500000 } };
		setitimer(ITIMER_REAL, &it, NULL);
	}
	if (!strcmp(argv[4], "recvmsg")) {
		struct iovec io = { b, sizeof(b) };
		struct msghdr mh = { .msg_iov = &io, .msg_iovlen = 1 };
		r = recvmsg(fd, &mh, MSG_WAITALL);
	} else if (!strcmp(argv[4], "recvfrom")) {
		r = recvfrom(fd, b, sizeof(b), MSG_WAITALL, NULL, NULL);
	} else {
		r = recv(fd, b, sizeof(b), MSG_WAITALL);
	}
	if (r < 0) {
		printf("read failed: %s\n", strerror(errno));
		return 0;
	}
	const char *body = memmem(b, (size_t)r, "\r\n\r\n", 4);
	size_t got = body ? (size_t)(b + r - (body + 4)) : 0;
	printf("%s\n", got < WHOLE ? "partial" : "whole");
	return 0;
}
