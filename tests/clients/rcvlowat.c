/*
 * rcvlowat.c - requests that ask to close, read to EOF; from request
 * LOWAT_FROM on, SO_RCVLOWAT (1 MiB, more than any answer) is set on the
 * socket after connect() and before the request.  The kernel's read and
 * poll then wait for that much or for the server's close: alone the
 * server closes after its answer, and they return at once.  A request
 * rewritten to keep the connection would wait for the server's idle
 * timeout instead (docs/hold.md "Options we cannot carry").
 *
 * usage: rcvlowat port read|poll requests lowat_from
 */
#include <arpa/inet.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 5)
		return 2;
	int port = atoi(argv[1]), n = atoi(argv[3]), from = atoi(argv[4]);
	bool use_poll = !strcmp(argv[2], "poll");
	static const char req[] = "GET /f HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	for (int i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
		a.sin_addr.s_addr = htonl(0x7f000001);
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
			perror("connect");
			return 1;
		}
		int lowat = 1 << 20;
		if (i >= from && setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat)) != 0) {
			perror("setsockopt");
			return 1;
		}
		if (write(fd, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1) {
			perror("write");
			return 1;
		}
		char buf[4096];
		long total = 0;
		ssize_t r;
		for (;;) {
			struct pollfd p = { .fd = fd, .events = POLLIN };
			if (use_poll && poll(&p, 1, -1) != 1) {
				perror("poll");
				return 1;
			}
			if ((r = read(fd, buf, sizeof(buf))) <= 0)
				break;
			if (!total)
				printf("request %d: %.*s\n", i, (int)strcspn(buf, "\r"), buf);
			total += r;
		}
		/* (not the count: a Connection header may differ, hop-by-hop) */
		printf("request %d: %s, then read %zd%s\n", i, total ? "an answer" : "nothing", r,
		       i >= from ? " (SO_RCVLOWAT)" : "");
		close(fd);
	}
	return 0;
}
