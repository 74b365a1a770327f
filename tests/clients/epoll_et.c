/*
 * epoll_et.c - an edge-triggered epoll reader (docs/replay.md, "Edges"): N
 * GETs asking to close, each on its own non-blocking connection watched
 * with EPOLLIN|EPOLLRDHUP|EPOLLET; at each edge it prints the events, then
 * reads until EAGAIN (MODE all) or reads once (MODE once: a program that
 * counts on one edge per arrival), until EOF.  Prints "I edge K: IN RDHUP"
 * per edge and "I eof after K edges B bytes", or "I timeout ..." when no
 * edge comes for 3 s.
 *
 * Usage: epoll_et HOST PORT N all|once
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
	inet_pton(AF_INET, argv[1], &a.sin_addr);
	int once = argc > 4 && !strcmp(argv[4], "once");
	for (int i = 0; i < atoi(argv[3]); i++) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		connect(s, (struct sockaddr *)&a, sizeof(a));
		const char get[] = "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
		write(s, get, sizeof(get) - 1);
		fcntl(s, F_SETFL, O_NONBLOCK);
		int ep = epoll_create1(0);
		struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.fd = s };
		epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);
		int edges = 0, eof = 0; size_t got = 0;
		while (!eof) {
			struct epoll_event out;
			int n = epoll_wait(ep, &out, 1, 3000);
			if (n == 0) { printf("%d timeout after %d edges %zu bytes\n", i, edges, got); break; }
			edges++;
			printf("%d edge %d:%s%s\n", i, edges, out.events & EPOLLIN ? " IN" : "", out.events & EPOLLRDHUP ? " RDHUP" : "");
			for (;;) {
				char b[4096];
				ssize_t r = read(s, b, sizeof b);
				if (r > 0) { got += r; if (once) break; continue; }
				if (r == 0) { eof = 1; printf("%d eof after %d edges %zu bytes\n", i, edges, got); }
				break;
			}
		}
		close(ep); close(s);
	}
	return 0;
}
