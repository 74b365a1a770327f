/*
 * fork_during - a request on a reused connection (a warm-up exchange
 * first, closed), then fork() or system() while the server works on it:
 * is its answer already there when the call returns?  Without the library
 * not (the server takes 3 s over each answer: tests/servers/cases/slow3); a library
 * that waited for the server inside fork() would say yes.
 *
 *   fork_during HOST PORT fork|system
 */
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int dial(const char *host, int port)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, host, &a.sin_addr);
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("connect");
		exit(1);
	}
	return s;
}

static void get(int s, const char *path)
{
	char req[128];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
	if (write(s, req, (size_t)n) != n)
		exit(1);
}

static size_t read_all(int s)
{
	char buf[4096];
	size_t tot = 0;
	ssize_t n;
	while ((n = read(s, buf, sizeof(buf))) > 0)
		tot += (size_t)n;
	return tot;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	int port = atoi(argv[2]);
	int s = dial(argv[1], port);
	get(s, "/1");
	read_all(s);
	close(s);
	s = dial(argv[1], port);
	get(s, "/2");
	if (!strcmp(argv[3], "fork")) {
		pid_t p = fork();
		if (!p)
			_exit(0);
		waitpid(p, NULL, 0);
	} else if (system("true") != 0) {
		return 1;
	}
	struct pollfd pf = { s, POLLIN, 0 };
	printf("answer there when %s returned: %s\n", argv[3], poll(&pf, 1, 0) > 0 ? "yes" : "no");
	printf("answer read: %s\n", read_all(s) > 0 ? "yes" : "no");
	close(s);
	return 0;
}
