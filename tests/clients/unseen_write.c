/*
 * unseen_write.c - requests written where a preloaded library cannot see
 * them: pwritev2(fd, iov, 1, -1, 0) (a socket has no offset: -1 writes as
 * write() does), then the answer read with read() to EOF.  N GETs, each on
 * its own connection, the first written with write() (so that the next
 * connection can be a reused one).  Prints each answer's status line and
 * byte count, or the error.
 *
 * Usage: unseen_write HOST PORT N
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
	inet_pton(AF_INET, argv[1], &a.sin_addr);
	int n = atoi(argv[3]);
	static char buf[1 << 16];
	for (int i = 1; i <= n; i++) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
			printf("%d connect %s\n", i, strerrorname_np(errno));
			continue;
		}
		char req[128];
		int l = snprintf(req, sizeof(req), "GET /u/%d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", i);
		struct iovec iov = { req, (size_t)l };
		ssize_t w = i == 1 ? write(s, req, (size_t)l) : pwritev2(s, &iov, 1, -1, 0);
		if (w != l) {
			printf("%d write %s\n", i, strerrorname_np(errno));
			close(s);
			continue;
		}
		size_t got = 0;
		ssize_t r;
		while ((r = read(s, buf + got, 64)) > 0 && got + (size_t)r < sizeof(buf) - 64)
			got += (size_t)r;
		buf[got] = 0;
		char *eol = strstr(buf, "\r\n");
		if (eol)
			*eol = 0;
		if (r < 0)
			printf("%d read %s after %zu\n", i, strerrorname_np(errno), got);
		else
			printf("%d %s (%zu bytes)\n", i, buf, got);
		close(s);
	}
	return 0;
}
