/*
 * nonblock.c - like httpget, but the socket is made O_NONBLOCK before
 * connect(): EINPROGRESS is awaited with poll(POLLOUT) and SO_ERROR, writes
 * and reads wait with poll().  A pooled connection may make connect()
 * succeed at once (POSIX allows it); both paths must work.
 * Usage: see common.h.  NB_AGAIN=1: print what connect() answered, then
 * call it again once the connection is up and print that answer too (the
 * kernel: EINPROGRESS, then 0; a second connect after that, EISCONN).
 */
#include "common.h"

#include <fcntl.h>
#include <stdbool.h>
#include <poll.h>

static void wait_for(int fd, short events, long req)
{
	struct pollfd p = {.fd = fd, .events = events};

	/* no timeout: the tests run every client under timeout(1) */
	while (poll(&p, 1, -1) < 0)
		if (errno != EINTR)
			die("poll (request %ld)", req);
}

int main(int argc, char **argv)
{
	struct job job;
	char buf[16384];

	parse_args(&job, argc, argv);
	for (long i = 0; i < job.count; i++) {
		long req = i + 1;
		int fd = socket(job.ai->ai_family, SOCK_STREAM, 0);
		size_t off = 0;
		ssize_t n;

		if (fd < 0)
			die("socket");
		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
			die("fcntl");
		int cr = connect(fd, job.ai->ai_addr, job.ai->ai_addrlen), cerr = errno;
		bool again = getenv("NB_AGAIN") != NULL;
		errno = cerr;
		if (cr < 0) {
			int err = 0;
			socklen_t len = sizeof(err);

			if (errno != EINPROGRESS)
				die("connect (request %ld)", req);
			wait_for(fd, POLLOUT, req);
			if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
				die("getsockopt");
			if (err) {
				errno = err;
				die("connect completion (request %ld)", req);
			}
		}
		if (again) {
			int r2 = connect(fd, job.ai->ai_addr, job.ai->ai_addrlen), e2 = errno;
			int r3 = connect(fd, job.ai->ai_addr, job.ai->ai_addrlen), e3 = errno;
			printf("connect: %s, again: %s, third: %s\n", cr ? strerror(cerr) : "0",
			       r2 ? strerror(e2) : "0", r3 ? strerror(e3) : "0");
			fflush(stdout);
		}
		while (off < job.req_len) {
			n = write(fd, job.req + off, job.req_len - off);
			if (n < 0) {
				if (errno != EAGAIN && errno != EINTR)
					die("write (request %ld)", req);
				wait_for(fd, POLLOUT, req);
				continue;
			}
			off += n;
		}
		for (;;) {
			wait_for(fd, POLLIN, req);
			n = read(fd, buf, sizeof(buf));
			if (n == 0)
				break;
			if (n < 0) {
				if (errno == EAGAIN || errno == EINTR)
					continue;
				die("read (request %ld)", req);
			}
			write_stdout(buf, n);
		}
		if (close(fd) < 0)
			die("close (request %ld)", req);
	}
	freeaddrinfo(job.ai);
	return fflush(stdout) == 0 ? 0 : 1;
}
