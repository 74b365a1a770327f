/*
 * fd_fopen.c - a C program near its fd limit: GETs to N loopback
 * destinations (127.0.0.1 .. 127.0.0.N, one request each, "Connection:
 * close", read to EOF), then fopen() of /dev/null until it fails.  Prints
 * "responses=N" and "files=K error=..." (stdio opens its fd inside libc).
 *
 * Usage: fd_fopen port N
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s port N\n", argv[0]);
		return 2;
	}
	int port = atoi(argv[1]), n = atoi(argv[2]);
	for (int i = 1; i <= n; i++) {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
		char host[32], req[256], buf[4096];
		snprintf(host, sizeof(host), "127.0.0.%d", i);
		inet_pton(AF_INET, host, &sa.sin_addr);
		int len = snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host);
		int s = socket(AF_INET, SOCK_STREAM, 0);
		if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || write(s, req, (size_t)len) != len) {
			printf("request %d: %s\n", i, strerror(errno));
			return 1;
		}
		while (read(s, buf, sizeof(buf)) > 0)
			;
		close(s);
	}
	printf("responses=%d\n", n);
	int files = 0;
	while (fopen("/dev/null", "r"))
		files++;
	printf("files=%d error=%s\n", files, strerror(errno));
	return 0;
}
