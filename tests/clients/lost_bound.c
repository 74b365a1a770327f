/*
 * lost_bound.c - a request ("Connection: close") whose response no framer
 * can delimit (tests/servers/lost_cue.py), then, once the body is in, one
 * read bounded by the program itself while the server is quiet, then the
 * server is cued to close and the rest is read to EOF.  Prints what each
 * step returned.
 *
 *   lost_bound HOST PORT DIR dontwait|rcvtimeo|splice-nonblock
 *
 * dontwait: recv(MSG_DONTWAIT); rcvtimeo: recv() under SO_RCVTIMEO 50 ms;
 * splice-nonblock: splice(SPLICE_F_NONBLOCK) into a pipe (no bound on a
 * blocking socket: the flag is the pipe's; alone it blocks).  Alone the
 * server is quiet and open at that read: EAGAIN, at once or at the
 * timeout.  No step waits on a time of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static const char *said(ssize_t n)
{
	static char buf[64];
	if (n > 0)
		snprintf(buf, sizeof(buf), "%zd bytes", n);
	else if (n == 0)
		snprintf(buf, sizeof(buf), "EOF");
	else
		snprintf(buf, sizeof(buf), "%s", errno == EAGAIN ? "EAGAIN" : strerror(errno));
	return buf;
}

static ssize_t bounded_read(int s, const char *mode)
{
	char b[256];
	if (!strcmp(mode, "dontwait"))
		return recv(s, b, sizeof(b), MSG_DONTWAIT);
	if (!strcmp(mode, "rcvtimeo")) {
		struct timeval tv = { 0, 50000 };
		setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		ssize_t n = recv(s, b, sizeof(b), 0);
		int err = errno;
		struct timeval none = { 0, 0 };
		setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
		errno = err;
		return n;
	}
	int p[2];
	if (pipe(p) < 0)
		return -2;
	ssize_t n = splice(s, NULL, p[1], NULL, sizeof(b), SPLICE_F_NONBLOCK);
	int err = errno;
	close(p[0]);
	close(p[1]);
	errno = err;
	return n;
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV },
			*ai;
	if (argc != 5 || getaddrinfo(argv[1], argv[2], &hints, &ai) != 0) {
		fprintf(stderr, "usage: %s HOST PORT DIR dontwait|rcvtimeo|splice-nonblock\n", argv[0]);
		return 2;
	}
	const char *req = "GET /lost HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	int s = socket(ai->ai_family, SOCK_STREAM, 0);
	if (s < 0 || connect(s, ai->ai_addr, ai->ai_addrlen) < 0 ||
	    write(s, req, strlen(req)) != (ssize_t)strlen(req)) {
		perror("request");
		return 1;
	}
	char buf[4096];
	size_t total = 0;
	while (total < sizeof(buf) - 1 && !memmem(buf, total, "hello", 5)) {
		ssize_t n = read(s, buf + total, sizeof(buf) - 1 - total);
		if (n <= 0) {
			printf("before the body: %s\n", said(n));
			return 1;
		}
		total += (size_t)n;
	}
	printf("body read\n");
	printf("%s read, the server quiet: %s\n", argv[4], said(bounded_read(s, argv[4])));
	char path[4096];
	snprintf(path, sizeof(path), "%s/cue", argv[3]);
	int f = open(path, O_WRONLY);
	if (f < 0 || write(f, "go\n", 3) != 3) {
		perror(path);
		return 1;
	}
	close(f);
	ssize_t n;
	while ((n = read(s, buf, sizeof(buf))) > 0)
		;
	printf("then: %s\n", said(n));
	return close(s) == 0 ? 0 : 1;
}
