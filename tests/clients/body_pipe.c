/*
 * body_pipe.c - a request pipelined in the write of the body before it
 * (docs/replay.md "A request pipelined in a body's write").  GET /warm on
 * one connection (kept alive by the server, closed by the program: the
 * library parks it), then a second connection: THINK_MS of nothing (the
 * server, tests/servers/cases/idle_after_response100, closes a reused
 * connection meanwhile), the head of POST /a with MSG_MORE, then one
 * write() of its 2-byte body followed by a whole POST /b.  Reads until
 * both answers (Content-Length: 8) are in, or the end, and prints what
 * it read of each.
 *
 *   body_pipe PORT THINK_MS
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int dial(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("connect");
		exit(1);
	}
	return fd;
}

/* reads until n answers (head + 8 bytes each) are in; prints their
 * status lines, or how the read ended */
static void answers(int fd, int n)
{
	char buf[4096];
	size_t have = 0;
	for (;;) {
		int whole = 0;
		const char *p = buf, *end = buf + have;
		while (whole < n) {
			const char *h = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
			if (!h || end - (h + 4) < 8)
				break;
			whole++;
			p = h + 4 + 8;
		}
		if (whole == n)
			break;
		ssize_t r = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (r <= 0) {
			printf("read: %s after %zu bytes\n", r ? strerror(errno) : "the end", have);
			break;
		}
		have += (size_t)r;
	}
	buf[have] = 0;
	for (char *l = buf; (l = strstr(l, "HTTP/1.1 ")); l++)
		printf("answer: %.12s\n", l);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: body_pipe PORT THINK_MS\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	int port = atoi(argv[1]);
	int fd = dial(port);
	const char *warm = "GET /warm HTTP/1.1\r\nHost: x\r\n\r\n";
	if (write(fd, warm, strlen(warm)) < 0)
		perror("write");
	answers(fd, 1);
	close(fd);
	fd = dial(port);
	usleep((useconds_t)atoi(argv[2]) * 1000);
	const char *head = "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n";
	const char *rest = "hiPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi";
	ssize_t r = send(fd, head, strlen(head), MSG_MORE);
	printf("head: %zd\n", r);
	r = write(fd, rest, strlen(rest));
	printf("body and POST /b: %zd\n", r);
	answers(fd, 2);
	close(fd);
	return 0;
}
