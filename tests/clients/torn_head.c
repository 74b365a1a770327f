/*
 * torn_head.c - a request head the socket takes only in part.
 * Usage: torn_head HOST PORT FIFO KIND MODE PAD COUNT
 *   KIND  close: HTTP/1.1 with "Connection: close" as the first header;
 *         close-last: the same, as the last header; http10: HTTP/1.0
 *         without a Connection header (a rewrite adds one at the end)
 *   MODE  nb: a non-blocking socket, write() until all went, meeting
 *         EAGAIN; dontwait: a blocking socket, send(MSG_DONTWAIT);
 *         block: a blocking socket whose first write is interrupted by a
 *         signal without SA_RESTART (setitimer); timeo: a blocking socket
 *         with SO_SNDTIMEO 200 ms (a send that times out).  MODE+split: the first
 *         10 bytes of the head are written alone first (a head begun by
 *         an earlier write: the library holds them).  MODE+change: after
 *         the first write, the rest of the X-Pad value is written in
 *         capitals (bytes it was told did not go out: it may send others).
 *         MODE+pieces: the first 10 bytes alone, then all but the last 4
 *         (an unfinished head larger than the socket takes: printed as
 *         "middle write"), then the rest.  MODE+sandbox: once the first
 *         write returned short (the FIFO written), a seccomp filter that
 *         fails every call but read, write, poll, close and exit with
 *         EPERM (docs/owner.md "A sandbox"): the rest of the head and the
 *         reads go past the library
 *   PAD   bytes of an X-Pad header (60000: the head is larger than what
 *         the socket and the server's small receive buffer take; 0: it
 *         fits); a list (0,60000): request i takes the i-th (the last for
 *         the rest), so that a torn head may go on a reused connection
 * With a PAD, SO_SNDBUF is made small after connect() (before it, an
 * option the library cannot carry to a pooled socket would keep the
 * connection from being ours; after, it is only kept from the pool).  Once
 * the first write returned short, EAGAIN or EINTR (or the whole request
 * went), the client writes a line on FIFO: the server
 * (tests/servers/torn.py) reads only then.  Prints what each request's
 * first write met (not the counts: a rewritten head is torn elsewhere) and
 * the response.
 */
#include "common.h"
#include "allow_filter.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>

static volatile sig_atomic_t rang;
static void on_alarm(int sig) { (void)sig; rang++; }

static void go(const char *fifo)
{
	int f = open(fifo, O_WRONLY);
	if (f < 0 || write(f, "go\n", 3) != 3)
		die("fifo");
	close(f);
}

static size_t make_req(char *req, const char *kind, const char *host, size_t pad)
{
	char *p = req;
	if (!strcmp(kind, "http10"))
		p += sprintf(p, "GET /torn HTTP/1.0\r\nHost: %s\r\n", host);
	else if (!strcmp(kind, "close"))
		p += sprintf(p, "GET /torn HTTP/1.1\r\nConnection: close\r\nHost: %s\r\n", host);
	else
		p += sprintf(p, "GET /torn HTTP/1.1\r\nHost: %s\r\n", host);
	if (pad) {
		p += sprintf(p, "X-Pad: ");
		for (size_t j = 0; j < pad; j++)
			*p++ = (char)('a' + j % 26);
		p += sprintf(p, "\r\n");
	}
	if (!strcmp(kind, "close-last"))
		p += sprintf(p, "Connection: close\r\n");
	p += sprintf(p, "\r\n");
	return (size_t)(p - req);
}

static void sandbox(void)
{
	static const int allow[] = { SYS_read, SYS_write, SYS_poll, SYS_close, SYS_exit, SYS_exit_group,
				     SYS_rt_sigreturn };
	struct sock_filter f[ALLOW_FILTER_LEN(sizeof(allow) / sizeof(allow[0]))];
	struct sock_fprog prog = allow_filter(f, allow, sizeof(allow) / sizeof(allow[0]),
					       SECCOMP_RET_ERRNO | EPERM);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
		die("seccomp");
}

int main(int argc, char **argv)
{
	if (argc != 8) {
		fprintf(stderr, "usage: torn_head HOST PORT FIFO KIND MODE PAD COUNT\n");
		return 2;
	}
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV}, *ai;
	if (getaddrinfo(argv[1], argv[2], &hints, &ai))
		die("getaddrinfo");
	const char *fifo = argv[3], *kind = argv[4], *mode = argv[5];
	long count = strtol(argv[7], NULL, 10);
	bool nb = !strncmp(mode, "nb", 2), dontwait = !strncmp(mode, "dontwait", 8),
	     block = !strncmp(mode, "block", 5), timeo = !strncmp(mode, "timeo", 5), split = strstr(mode, "split") != NULL,
	     change = strstr(mode, "change") != NULL, pieces = strstr(mode, "pieces") != NULL,
	     sandboxed = strstr(mode, "sandbox") != NULL;
	if (sandboxed) /* (no fstat or malloc of stdout's buffer under the filter) */
		setvbuf(stdout, NULL, _IONBF, 0);
	size_t pads[8], npads = 0;
	for (char *q = argv[6]; npads < 8 && *q;) {
		pads[npads++] = strtoul(q, &q, 10);
		if (*q != ',')
			break;
		q++;
	}
	if (!npads)
		die("PAD");

	struct sigaction sa = {.sa_handler = on_alarm}; /* no SA_RESTART */
	sigaction(SIGALRM, &sa, NULL);
	for (long i = 1; i <= count; i++) {
		size_t pad = pads[(size_t)i <= npads ? (size_t)i - 1 : npads - 1];
		char *req = malloc(pad + 512);
		if (!req)
			die("malloc");
		size_t len = make_req(req, kind, argv[1], pad);
		int fd = socket(ai->ai_family, SOCK_STREAM, 0);
		if (fd < 0)
			die("socket");
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0)
			die("connect");
		int small = 4096;
		if (pad && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)) < 0)
			die("setsockopt");
		if (nb && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
			die("fcntl");
		struct timeval tv = { 0, 200000 };
		if (timeo && setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
			die("SO_SNDTIMEO");
		size_t off = 0;
		bool told = false;
		char met[64] = "", mid[64] = "";
		if (pieces) {
			if (write(fd, req, 10) != 10)
				die("write (request %ld, its first 10 bytes)", i);
			ssize_t n = write(fd, req + 10, len - 14);
			if (n < 0 && errno != EAGAIN)
				die("write (request %ld, its middle)", i);
			snprintf(mid, sizeof(mid), "%s",
				 n < 0 ? strerror(errno) : (size_t)n < len - 14 ? "short" : "all");
			off = 10 + (n > 0 ? (size_t)n : 0);
		}
		if (split) {
			if (write(fd, req, 10) != 10)
				die("write (request %ld, its first 10 bytes)", i);
			off = 10;
		}
		while (off < len) {
			if (block && !told) {
				struct itimerval t = {.it_value = {0, 200000}};
				setitimer(ITIMER_REAL, &t, NULL);
			}
			ssize_t n = dontwait ? send(fd, req + off, len - off, MSG_DONTWAIT)
					     : write(fd, req + off, len - off);
			int err = errno;
			if (block && !told) {
				struct itimerval t = {{0, 0}, {0, 0}};
				setitimer(ITIMER_REAL, &t, NULL);
			}
			if (n < 0 && err != EAGAIN && err != EINTR) {
				errno = err;
				die("write (request %ld)", i);
			}
			if (!told) {
				snprintf(met, sizeof(met), "%s",
					 n < 0 ? strerror(err) : (size_t)n < len - off ? "short" : "all");
				told = true;
				char *v = change && pad ? strstr(req, "X-Pad: ") : NULL;
				for (size_t j = off + (n > 0 ? (size_t)n : 0); v && j < len; j++)
					if (req + j >= v + 7 && req + j < v + 7 + pad)
						req[j] = (char)(req[j] - 'a' + 'A');
				go(fifo);
				if (sandboxed && i == 1)
					sandbox();
			}
			if (n < 0) {
				struct pollfd pf = {.fd = fd, .events = POLLOUT};
				poll(&pf, 1, -1);
				continue;
			}
			off += (size_t)n;
		}
		if (pieces)
			printf("request %ld: middle write: %s\n", i, mid);
		printf("request %ld: first write: %s\n", i, met);
		char buf[4096];
		for (;;) {
			struct pollfd pf = {.fd = fd, .events = POLLIN};
			poll(&pf, 1, -1);
			ssize_t n = read(fd, buf, sizeof(buf));
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (n < 0)
				die("read");
			if (n == 0)
				break;
			fwrite(buf, 1, (size_t)n, stdout);
		}
		close(fd);
		free(req);
	}
	return 0;
}
