/*
 * epoll_dup.c - a socket registered in an epoll set through a dup of the
 * set's fd, that dup closed (docs/hold.md "epoll through a closed number").
 *
 * Usage: epoll_dup PORT PATH [raw]
 *
 * raw: the socket added to ep itself with syscall(SYS_epoll_ctl), no dup
 * (libuv-like code makes its calls by number): the library must see that
 * registration as it sees epoll_ctl's (docs/binding.md "What syscall()
 * dispatches").
 *
 * ep = epoll_create1; ep2 = dup(ep); the first request's socket is added
 * through ep2, ep2 closed (the set lives on through ep); the request
 * ("Connection: close") read to EOF, the socket closed.  Then a second
 * request on a new socket, and one epoll_wait(ep, 2 s) while its answer
 * comes: alone the set holds nothing open (the first socket's close
 * removed it), 0 events.  The library once kept the first socket open
 * (parked) with its registration, and handed it to the second request:
 * its answer woke the set with the first socket's data.
 */
#include "common.h"

#include <sys/epoll.h>
#include <sys/syscall.h>

static void request(int s, const char *path)
{
	char req[512];
	int len = snprintf(req, sizeof(req),
			   "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
	if (write(s, req, (size_t)len) != len)
		die("write");
}

int main(int argc, char **argv)
{
	if (argc != 3 && argc != 4)
		die("usage: epoll_dup PORT PATH [raw]");
	int raw = argc == 4 && !strcmp(argv[3], "raw");
	int port = atoi(argv[1]);
	int ep = epoll_create1(EPOLL_CLOEXEC), ep2 = dup(ep);
	int s = dial_loopback(port);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.u64 = 0xabcd };
	if (raw ? syscall(SYS_epoll_ctl, ep, EPOLL_CTL_ADD, s, &ev) : epoll_ctl(ep2, EPOLL_CTL_ADD, s, &ev))
		die("epoll_ctl");
	close(ep2);
	request(s, argv[2]);
	copy_response(s);
	close(s);
	s = dial_loopback(port);
	request(s, argv[2]);
	struct epoll_event out[4];
	int n = epoll_wait(ep, out, 4, 2000);
	printf("events in the set after its socket's close: %d\n", n);
	copy_response(s);
	close(s);
	return fflush(stdout) == 0 ? 0 : 1;
}
