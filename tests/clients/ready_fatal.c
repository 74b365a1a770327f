/*
 * ready_fatal.c - a non-blocking client that trusts readiness: an error or
 * hang-up reported by poll() or epoll is fatal, as in programs that give
 * up on POLLHUP without reading (ab counts an exception).
 *
 * Usage: ready_fatal poll|epoll-et|select host port path count
 *   count requests, each on a new non-blocking socket: connect, wait
 *   writable, write "GET path HTTP/1.1" with "Connection: close", wait
 *   readable and read to EOF; poll: POLLIN|POLLRDHUP; epoll-et: one epoll
 *   set for the whole run, EPOLLIN|EPOLLRDHUP|EPOLLET, read until EAGAIN
 *   after each event.  The responses go to stdout; POLLERR/POLLHUP (or
 *   EPOLLERR/EPOLLHUP) prints "fatal: ..." and exits 1.  select: select()
 *   for readable, then read until EAGAIN (select has no error bits: a
 *   read error is fatal; a readable fd that reads EAGAIN is waited for
 *   again, as select(2) tells programs to).
 */
#include <sys/select.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static void fatal(const char *what, int i)
{
	printf("fatal: %s on request %d\n", what, i);
	exit(1);
}

/* read what is there; 1 at EOF, 0 at EAGAIN */
static int drain(int s, int i)
{
	char buf[4096];
	for (;;) {
		ssize_t r = read(s, buf, sizeof(buf));
		if (r > 0) {
			fwrite(buf, 1, (size_t)r, stdout);
			continue;
		}
		if (r == 0)
			return 1;
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		fatal(strerror(errno), i);
	}
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV },
			*ai;
	char req[1024];
	if (argc != 6) {
		fprintf(stderr, "usage: %s poll|epoll-et|select host port path count\n", argv[0]);
		return 2;
	}
	bool use_epoll = !strcmp(argv[1], "epoll-et"), use_select = !strcmp(argv[1], "select");
	int n = atoi(argv[5]);
	if (getaddrinfo(argv[2], argv[3], &hints, &ai) != 0)
		return 2;
	int len = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
			   argv[4], argv[2]);
	int ep = use_epoll ? epoll_create1(EPOLL_CLOEXEC) : -1;
	for (int i = 1; i <= n; i++) {
		int s = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (s < 0)
			fatal("socket", i);
		if (connect(s, ai->ai_addr, ai->ai_addrlen) < 0) {
			if (errno != EINPROGRESS)
				fatal("connect", i);
			struct pollfd p = { .fd = s, .events = POLLOUT };
			if (poll(&p, 1, 10000) != 1 || (p.revents & (POLLERR | POLLHUP)))
				fatal("connect: POLLERR/POLLHUP", i);
		}
		if (write(s, req, (size_t)len) != len)
			fatal("write", i);
		if (use_epoll) {
			struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.u64 = 1000u + (unsigned)i };
			if (epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) < 0)
				fatal("epoll_ctl", i);
			for (;;) {
				struct epoll_event got;
				int r = epoll_wait(ep, &got, 1, 10000);
				if (r == 0)
					fatal("timeout", i);
				if (r < 0)
					continue;
				if (got.data.u64 != 1000u + (unsigned)i)
					fatal("an event for another request", i);
				if (got.events & (EPOLLERR | EPOLLHUP))
					fatal("EPOLLERR/EPOLLHUP", i);
				if (drain(s, i))
					break;
			}
		} else if (use_select) {
			for (;;) {
				fd_set rd;
				FD_ZERO(&rd);
				FD_SET(s, &rd);
				struct timeval tv = { 10, 0 };
				int r = select(s + 1, &rd, NULL, NULL, &tv);
				if (r == 0)
					fatal("timeout", i);
				if (r < 0)
					continue;
				if (drain(s, i))
					break;
			}
		} else {
			for (;;) {
				struct pollfd p = { .fd = s, .events = POLLIN | POLLRDHUP };
				int r = poll(&p, 1, 10000);
				if (r == 0)
					fatal("timeout", i);
				if (r < 0)
					continue;
				if (p.revents & (POLLERR | POLLHUP | POLLNVAL))
					fatal("POLLERR/POLLHUP", i);
				if (drain(s, i))
					break;
			}
		}
		close(s);
	}
	fflush(stdout);
	return 0;
}
