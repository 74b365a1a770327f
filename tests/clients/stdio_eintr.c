/*
 * stdio_eintr.c - a POST written through stdio to a server that never
 * reads it, under a SIGALRM every 300 ms whose handler has no SA_RESTART:
 * fdopen(sock, "w"), the head (Content-Length: 1 GB) by fputs and fflush,
 * then fwrite of 64 KiB chunks until one comes short.  Alone the blocked
 * write(2) under fwrite fails with EINTR at the first alarm once the
 * socket is full, and fwrite stops with the stream's error flag set.
 * Prints "fwrite stopped: <ERRNO> ferror=<0|1>".
 *
 * Usage: stdio_eintr PORT
 */
#include <signal.h>
#include <sys/time.h>

#include "common.h"

static void on_alarm(int sig)
{
	(void)sig;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm; /* no SA_RESTART */
	sigaction(SIGALRM, &sa, NULL);
	FILE *f = fdopen(dial_loopback(atoi(argv[1])), "w");
	if (!f)
		return 1;
	fputs("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000\r\n\r\n", f);
	fflush(f);
	static char chunk[65536];
	memset(chunk, 'a', sizeof(chunk));
	struct itimerval it = { { 0, 300000 }, { 0, 300000 } };
	setitimer(ITIMER_REAL, &it, NULL);
	int err = 0;
	for (;;) {
		if (fwrite(chunk, 1, sizeof(chunk), f) < sizeof(chunk)) {
			err = errno;
			break;
		}
	}
	printf("fwrite stopped: %s ferror=%d\n", strerrorname_np(err), ferror(f) ? 1 : 0);
	return 0;
}
