/*
 * jump_read.c - a read bounded by a timer whose handler siglongjmps out
 * (the classic per-read timeout): the first read of the answer is cut by
 * the jump after 300 ms, and the program then reads on, without a timer,
 * to EOF.  Prints what it read and how it ended: the same with and without
 * the library (tests/signals.bats).  A jump out of our read wrapper once
 * left the thread marked as inside the library for good, and the EOF owed
 * to a request asking to close never came: the read waited for the
 * server's idle timeout (docs/binding.md "A jump out of a handler").
 *
 * usage: jump_read PORT PATH
 */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static sigjmp_buf jump;

static void on_alarm(int sig)
{
	(void)sig;
	siglongjmp(jump, 1);
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return fprintf(stderr, "usage: jump_read PORT PATH\n"), 2;
	struct sigaction sa = { .sa_handler = on_alarm };
	sigaction(SIGALRM, &sa, NULL);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		return perror("connect"), 1;
	char req[512];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
			 argv[2]);
	if (write(fd, req, (size_t)n) != n)
		return perror("write"), 1;
	char buf[4096];
	volatile int jumps = 0;
	if (sigsetjmp(jump, 1))
		jumps++;
	struct itimerval t = { .it_value = { 0, jumps ? 0 : 300000 } };
	setitimer(ITIMER_REAL, &t, NULL);
	for (;;) {
		ssize_t r = read(fd, buf, sizeof(buf));
		if (r > 0) {
			fwrite(buf, 1, (size_t)r, stdout);
			continue;
		}
		printf("\nend %s jumps=%d\n", r == 0 ? "EOF" : strerror(errno), jumps);
		break;
	}
	close(fd);
	return 0;
}
