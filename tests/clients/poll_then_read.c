/*
 * poll_then_read.c PORT MODE - GET /a, then GET /b, each on its own
 * connection asking to close; before reading /b's answer the program
 * waits up to 2 s for it to become readable (MODE poll: poll(); select:
 * select(); epoll: epoll_wait() on a set of its own, level-triggered;
 * epoll-et: edge-triggered), then reads blocking, as wget -T does.  Prints "/a answered",
 * then "/b answered" or "/b: timeout" (docs/replay.md "Readable, and the
 * FIN").
 */
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "common.h"

static int get(int port, const char *path, int wait_ms, const char *mode)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("connect");
	char req[128], buf[1024];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", path);
	if (write(s, req, (size_t)n) != n)
		die("write");
	if (wait_ms) {
		int ready;
		if (!strcmp(mode, "select")) {
			fd_set rd;
			FD_ZERO(&rd);
			FD_SET(s, &rd);
			struct timeval tv = { wait_ms / 1000, 0 };
			ready = select(s + 1, &rd, NULL, NULL, &tv);
		} else if (!strncmp(mode, "epoll", 5)) {
			int ep = epoll_create1(EPOLL_CLOEXEC);
			struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 0x5eed }, got[4];
			if (!strcmp(mode, "epoll-et"))
				ev.events |= EPOLLET;
			if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) < 0)
				die("epoll");
			ready = epoll_wait(ep, got, 4, wait_ms);
			if (ready > 0 && got[0].data.u64 != 0x5eed)
				die("epoll data");
			close(ep);
		} else {
			struct pollfd p = { s, POLLIN, 0 };
			ready = poll(&p, 1, wait_ms);
		}
		if (ready == 0) {
			printf("%s: timeout\n", path);
			close(s);
			return 0;
		}
	}
	ssize_t r = read(s, buf, sizeof(buf) - 1);
	printf("%s %s\n", path, r > 0 && !strncmp(buf, "HTTP/1.1 200", 12) ? "answered" : "not answered");
	close(s);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: poll_then_read PORT poll|select|epoll|epoll-et\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	int port = atoi(argv[1]);
	get(port, "/a", 0, argv[2]);
	get(port, "/b", 2000, argv[2]);
	return 0;
}
