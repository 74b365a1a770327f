/*
 * stdio_partial.c - a POST whose 8 MiB body goes in one fwrite through a
 * stream on the socket, to a server that reads only later, under a
 * SIGALRM every 300 ms whose handler has no SA_RESTART.  Alone the write(2)
 * under fwrite takes part of the body, the next one fails with EINTR, and
 * fwrite answers the count that went; a careful program writes the rest
 * from that count, so the server gets every byte once.  Then our end of
 * writing (shutdown), and the answer's status line.  Prints whether the
 * first fwrite came short, what the program counted as written, and the
 * status line.
 *
 * Usage: stdio_partial PORT
 */
#include <signal.h>
#include <sys/time.h>

#include "common.h"

#define BODY (8u << 20)

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
	int s = dial_loopback(atoi(argv[1]));
	FILE *f = fdopen(s, "w");
	char *body = malloc(BODY);
	if (!f || !body)
		return 1;
	memset(body, 'a', BODY);
	fprintf(f, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: %u\r\n\r\n", BODY);
	fflush(f);
	struct itimerval it = { { 0, 300000 }, { 0, 300000 } };
	setitimer(ITIMER_REAL, &it, NULL);
	size_t first = fwrite(body, 1, BODY, f);
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	printf("first fwrite short: %s ferror=%d\n", first < BODY ? "yes" : "no", ferror(f) ? 1 : 0);
	clearerr(f);
	size_t rest = fwrite(body + first, 1, BODY - first, f);
	fflush(f);
	printf("counted as written: %zu of %u\n", first + rest, BODY);
	shutdown(s, SHUT_WR);
	char line[64] = "";
	ssize_t n = read(s, line, sizeof(line) - 1);
	line[n > 0 ? n : 0] = 0;
	char *eol = strstr(line, "\r\n");
	if (eol)
		*eol = 0;
	printf("answer: %s\n", line);
	return 0;
}
