/*
 * waitall.c - recv(MSG_WAITALL) for a whole answer: a GET asking to close,
 * then one recv(fd, buf, 65536, MSG_WAITALL), which returns at the
 * server's close with what came; then one more recv (0 at EOF).  Prints
 * "waitall N <status line>" and "then N".
 *
 * Usage: waitall HOST PORT
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
	if (argc != 3)
		return 2;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
	inet_pton(AF_INET, argv[1], &a.sin_addr);
	static char buf[65537];
	for (int i = 1; i <= 2; i++) { /* the second one reuses the connection */
		int s = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
			return 1;
		const char req[] = "GET /w HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
		if (send(s, req, sizeof(req) - 1, 0) < 0)
			return 1;
		ssize_t r = recv(s, buf, 65536, MSG_WAITALL);
		if (r < 0) {
			printf("waitall %s\n", strerrorname_np(errno));
		} else {
			buf[r] = 0;
			char *eol = strstr(buf, "\r\n");
			if (eol)
				*eol = 0;
			printf("waitall %zd %s\n", r, buf);
		}
		printf("then %zd\n", recv(s, buf, 65536, 0));
		close(s);
	}
	return 0;
}
