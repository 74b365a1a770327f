/*
 * bad_timeout.c PORT - GET /f asking to close, its answer read to the end
 * of its body (not to EOF: an EOF the library owes, having kept the
 * connection), then each wait on that socket with a timeout the kernel
 * refuses: ppoll (tv_nsec 10^9; tv_sec -1), pselect (tv_nsec -1), select
 * (tv_usec -1), epoll_pwait2 (tv_nsec 2*10^9), and the same ppoll by
 * syscall().  Alone each fails with EINVAL before it looks at any fd; the
 * library once reported the owed EOF (ready) instead.  Then ppoll and
 * epoll_pwait2 with a valid timeout of 2*10^6 s: ready at once.  Prints one line a
 * call ("<call>: <result> <errno name>"), then "read <n>".
 */
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>

#include "common.h"

static void show(const char *what, long r)
{
	printf("%s: %ld %s\n", what, r, r < 0 ? strerrorname_np(errno) : "-");
}

int main(int argc, char **argv)
{
	if (argc != 2)
		die("usage: bad_timeout PORT");
	setvbuf(stdout, NULL, _IOLBF, 0);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("connect");
	static const char req[] = "GET /f HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
	if (write(s, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1)
		die("write");
	char buf[4096];
	int n = 0, r;
	for (;;) {
		char *end = memmem(buf, (size_t)n, "\r\n\r\n", 4), *cl;
		if (end && (cl = strcasestr(buf, "content-length:")) && n >= end + 4 - buf + atoi(cl + 15))
			break;
		if ((r = (int)read(s, buf + n, sizeof(buf) - 1 - (size_t)n)) <= 0)
			die("read");
		buf[n += r] = 0;
	}
	printf("%.*s\n", (int)strcspn(buf, "\r"), buf);
	struct pollfd p = { .fd = s, .events = POLLIN };
	struct timespec ns_big = { 0, 1000000000 }, sec_neg = { -1, 0 }, ns_neg = { 0, -1 }, ns_2e9 = { 0, 2000000000 };
	errno = 0;
	show("ppoll tv_nsec 10^9", ppoll(&p, 1, &ns_big, NULL));
	errno = 0;
	show("ppoll tv_sec -1", ppoll(&p, 1, &sec_neg, NULL));
	fd_set rd;
	FD_ZERO(&rd);
	FD_SET(s, &rd);
	errno = 0;
	show("pselect tv_nsec -1", pselect(s + 1, &rd, NULL, NULL, &ns_neg, NULL));
	FD_ZERO(&rd);
	FD_SET(s, &rd);
	struct timeval tv = { 0, -1 };
	errno = 0;
	show("select tv_usec -1", select(s + 1, &rd, NULL, NULL, &tv));
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN }, out[1];
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) < 0)
		die("epoll");
	errno = 0;
	show("epoll_pwait2 tv_nsec 2*10^9", epoll_pwait2(ep, out, 1, &ns_2e9, NULL));
	errno = 0;
	show("syscall ppoll tv_nsec 10^9", syscall(SYS_ppoll, &p, 1, &ns_big, NULL, 8));
	/* (valid, past the library's millisecond cap: waited in pieces; the
	 * EOF is there, so it answers at once, alone and with the library) */
	struct timespec long_ts = { 2000000, 0 };
	errno = 0;
	show("ppoll 2*10^6 s", ppoll(&p, 1, &long_ts, NULL));
	errno = 0;
	show("epoll_pwait2 2*10^6 s", epoll_pwait2(ep, out, 1, &long_ts, NULL));
	close(ep);
	printf("read %zd\n", read(s, buf, sizeof(buf)));
	close(s);
	return 0;
}
