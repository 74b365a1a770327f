/*
 * observe_first.c - a program that observes its connection after writing
 * its request and before reading the answer, while the server closes the
 * kept connection a library handed out for it (docs/replay.md "What the
 * program observes").  Against tests/servers/idle_cue.py, whose idle close
 * comes on our cue.
 *
 * Usage: observe_first MODE METHOD PORT DIR
 *   MODE   soerror: getsockopt(SO_ERROR); peer: getpeername(); tcpinfo:
 *          getsockopt(TCP_INFO), its state; inq: ioctl(FIONREAD); outq:
 *          ioctl(SIOCOUTQ); poll, epoll, select: a wait for readable
 *          (and its error and hang-up bits, select's exception set), then
 *          SO_ERROR where an error bit is set (the usual idiom); pipe: a
 *          second request written after the first, unread; shutwr:
 *          shutdown(SHUT_WR) (netcat -N); shutpoll: shutdown(SHUT_WR),
 *          then the poll
 *   METHOD GET or POST (a 5-byte body)
 *   DIR    the server's directory (its fifos cue and done)
 * GET /warm on a connection of its own (read, closed: a library keeps
 * it), then connect() again; the server is cued to close every connection
 * idle after an answer; where it closed one (a library handed it to our
 * connect()), its FIN is awaited on our socket (/proc/net/tcp), the
 * request /a is written, and the server's reset awaited (the socket
 * leaves CLOSE_WAIT).  Then the observation, and the answers read.  Only
 * events are waited for; nothing printed depends on timing (the counts
 * of bytes waiting or unsent are not printed, only whether the call
 * succeeded).
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <linux/sockios.h>
#include "common.h"
#include "tcp_state.h"

static int port;

static int dial(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("connect");
	return s;
}

/* One answer read until its Content-Length body is whole: "STATUS |
 * BODY", or what ended the read. */
static void read_answer(int s, const char *what)
{
	static char buf[4096];
	static size_t n;
	for (;;) {
		char *end = strstr(buf, "\r\n\r\n"), *cl = strcasestr(buf, "Content-Length: ");
		if (end && cl) {
			size_t whole = (size_t)(end + 4 - buf) + strtoul(cl + 16, NULL, 10);
			if (n >= whole) {
				char line[256];
				snprintf(line, sizeof(line), "%.*s | %.*s", (int)strcspn(buf, "\r"), buf,
					 (int)strcspn(end + 4, "\n"), end + 4);
				printf("%s: %s\n", what, line);
				memmove(buf, buf + whole, n - whole); /* a pipelined second answer */
				n -= whole;
				buf[n] = 0;
				return;
			}
		}
		ssize_t k = read(s, buf + n, sizeof(buf) - 1 - n);
		if (k <= 0) {
			printf("%s: read %zd (%s) after %zu bytes\n", what, k, k ? strerror(errno) : "EOF",
			       n);
			return;
		}
		n += (size_t)k;
		buf[n] = 0;
	}
}

/* Wait (events: the socket's state in /proc) while fd's TCP state is st. */
static void while_state(int fd, int st, const char *what)
{
	for (int i = 0; i < 100000; i++) {
		if (tcp_state(inode(fd)) != st)
			return;
		usleep(200);
	}
	die("timed out waiting for %s", what);
}

static void request(int s, const char *method, const char *path)
{
	char q[256];
	int n = !strcmp(method, "GET")
			? snprintf(q, sizeof(q), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
			: snprintf(q, sizeof(q),
				   "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", method,
				   path);
	ssize_t w = write(s, q, (size_t)n);
	printf("write %s: %s\n", path, w == n ? "whole" : w < 0 ? strerror(errno) : "part");
}

static void so_error(int s)
{
	int err = -1;
	socklen_t l = sizeof(err);
	int r = getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &l);
	printf("SO_ERROR: %d %s\n", r, r ? strerror(errno) : err ? strerror(err) : "none");
}

static void observe(int s, const char *mode)
{
	if (!strcmp(mode, "soerror")) {
		so_error(s);
	} else if (!strcmp(mode, "peer")) {
		struct sockaddr_in a;
		socklen_t l = sizeof(a);
		int r = getpeername(s, (struct sockaddr *)&a, &l);
		printf("getpeername: %d %s\n", r, r ? strerror(errno) : "ok");
	} else if (!strcmp(mode, "tcpinfo")) {
		struct tcp_info ti;
		socklen_t l = sizeof(ti);
		int r = getsockopt(s, IPPROTO_TCP, TCP_INFO, &ti, &l);
		/* ESTABLISHED or, the answer in and the server closing, CLOSE_WAIT:
		 * never CLOSE (the server's reset) on a fresh connection */
		printf("TCP_INFO: %d %s\n", r,
		       r ? strerror(errno) : ti.tcpi_state == TCP_CLOSE ? "CLOSE" : "open");
	} else if (!strcmp(mode, "inq") || !strcmp(mode, "outq")) {
		int v = -1;
		int r = ioctl(s, !strcmp(mode, "inq") ? FIONREAD : SIOCOUTQ, &v);
		printf("%s: %d %s\n", mode, r, r ? strerror(errno) : "ok");
	} else if (!strcmp(mode, "poll")) {
		struct pollfd p = { .fd = s, .events = POLLIN };
		int r = poll(&p, 1, -1);
		printf("poll: %d%s%s%s\n", r, p.revents & POLLIN ? " IN" : "",
		       p.revents & POLLERR ? " ERR" : "", p.revents & POLLHUP ? " HUP" : "");
		if (p.revents & (POLLERR | POLLHUP))
			so_error(s);
	} else if (!strcmp(mode, "epoll")) {
		int ep = epoll_create1(0);
		struct epoll_event e = { .events = EPOLLIN | EPOLLRDHUP, .data.fd = s };
		epoll_ctl(ep, EPOLL_CTL_ADD, s, &e);
		int r = epoll_wait(ep, &e, 1, -1);
		printf("epoll: %d%s%s%s%s\n", r, e.events & EPOLLIN ? " IN" : "",
		       e.events & EPOLLERR ? " ERR" : "", e.events & EPOLLHUP ? " HUP" : "",
		       e.events & EPOLLRDHUP ? " RDHUP" : "");
		if (e.events & (EPOLLERR | EPOLLHUP))
			so_error(s);
		close(ep);
	} else if (!strcmp(mode, "select")) {
		fd_set rd, ex;
		FD_ZERO(&rd);
		FD_ZERO(&ex);
		FD_SET(s, &rd);
		FD_SET(s, &ex);
		int r = select(s + 1, &rd, NULL, &ex, NULL);
		printf("select: %d%s%s\n", r, FD_ISSET(s, &rd) ? " readable" : "",
		       FD_ISSET(s, &ex) ? " exception" : "");
	} else if (!strcmp(mode, "shutwr") || !strcmp(mode, "shutpoll")) {
		int r = shutdown(s, SHUT_WR);
		printf("shutdown: %d %s\n", r, r ? strerror(errno) : "ok");
		if (!strcmp(mode, "shutpoll")) {
			/* (no HUP printed: after our SHUT_WR it is the server's
			 * close after its answer too, by timing) */
			struct pollfd p = { .fd = s, .events = POLLIN };
			r = poll(&p, 1, -1);
			printf("poll: %d%s%s\n", r, p.revents & POLLIN ? " IN" : "",
			       p.revents & POLLERR ? " ERR" : "");
			if (p.revents & POLLERR)
				so_error(s);
		}
	} else if (strcmp(mode, "pipe")) {
		die("unknown mode %s", mode);
	}
}

int main(int argc, char **argv)
{
	if (argc != 5)
		die("usage: observe_first MODE METHOD PORT DIR");
	const char *mode = argv[1], *method = argv[2], *dir = argv[4];
	port = atoi(argv[3]);
	signal(SIGPIPE, SIG_IGN); /* an EPIPE is printed, as any errno */
	int s = dial();
	request(s, "GET", "/warm");
	read_answer(s, "/warm");
	close(s);
	s = dial();
	int closed = cue_close_count(dir);
	if (closed)
		while_state(s, 1, "the server's FIN"); /* ESTABLISHED until it is in */
	request(s, method, "/a");
	if (closed)
		while_state(s, 8, "the server's reset"); /* CLOSE_WAIT until it comes */
	if (!strcmp(mode, "pipe"))
		request(s, method, "/b");
	observe(s, mode);
	read_answer(s, "/a");
	if (!strcmp(mode, "pipe"))
		read_answer(s, "/b");
	close(s);
	return 0;
}
