/*
 * pair.c - the program of the server-timing matrix (tests/servers/matrix.py):
 * a warm-up GET, then one request of the method under test, each on its
 * own connection and asking to close, as a program that knows nothing of
 * keep-alive makes them.
 *
 * Usage: pair HOST PORT WHICH METHOD BODY PATH
 *   METHOD a method, or METHOD+key: with an Idempotency-Key header
 *   WHICH  both | warm | test   (warm/test: one process each, so that the
 *          connection passes through the broker between them)
 *   BODY   -1: no Content-Length; N >= 0: Content-Length N, the body
 *          written in two halves by two write()s, 2 ms and 4 ms after
 *          the head's
 * One line per request on stdout: "PATH OUTCOME", OUTCOME one of
 *   status CODE body N CLOSING   the answer, read to EOF: N bytes after
 *                         its head; CLOSING: "closing" when the head has
 *                         a Connection close token (what the program
 *                         reads as a closing answer), else "open" (the
 *                         head's other bytes may differ)
 *   connect ERRNO | write ERRNO | read ERRNO (after N bytes: "read ERRNO N",
 *                         after a whole head and N body bytes: "read ERRNO
 *                         body N")
 *   eof N                 EOF after N bytes, no complete status line
 * SIGPIPE keeps its default action (a write into a closed connection may
 * kill the program, as it would without the library); reads time out
 * after 3 s (SO_RCVTIMEO: "read EAGAIN").
 *
 * PAIR_READ (environment) is the read path of the answer under test (the
 * warm-up's is read()), the matrix's
 * read-path axis (docs/replay.md, "Reads we cannot follow"):
 *   read    read() (the default)
 *   nowait  poll(), then preadv2(RWF_NOWAIT) (offset -1)
 *   splice  splice() into a pipe, then read() from the pipe
 *   trunc   the head by 1-byte read()s, the body by recv(NULL, MSG_TRUNC)
 *   kaio    kernel AIO: io_submit(IOCB_CMD_PREAD) by syscall(), io_getevents
 *
 * PAIR_TAKE=zero (environment): the program takes the socket's pending
 * error where the library does not read it, by a receive of nothing
 * (recv(s, NULL, 0, MSG_DONTWAIT): the kernel's tcp_recvmsg returns and
 * clears the error of a reset): after the head (in place of the 2 ms
 * before the body) and before reading the answer, each after waiting for
 * the connection's error or hang-up (poll() with no events: POLLERR and
 * POLLHUP only) for at most PAIR_TAKE_MS (default 2) and
 * PAIR_TAKE_END_MS (default 100).  The matrix's error-taker axis
 * (docs/replay.md "An error taken by a read of nothing"); it gives a
 * server that resets at once (when=quick) 200 ms before the body, and one
 * that resets 60 ms after its read (when=delayed) 400 ms before the
 * answer's read, which the reset ends: with 2 and 100 ms, whether the
 * reset came in time was the load's to say, alone and with the library
 * alike.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/aio_abi.h>
#include <poll.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static const char *host, *port, *read_path, *take;
static int take_ms = 2, take_end_ms = 100;

static void say(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void say(const char *path, const char *fmt, ...)
{
	va_list ap;
	printf("%s ", path);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static void msleep(int ms)
{
	struct timespec t = { 0, ms * 1000000L };
	nanosleep(&t, NULL);
}

static int write_all(int s, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(s, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* A Connection header of the head hd[0..n) with a close token */
static int closing(char *hd, size_t n)
{
	hd[n] = 0;
	for (char *l = strstr(hd, "\r\n"); l; l = strstr(l + 2, "\r\n")) {
		if (strncasecmp(l + 2, "connection:", 11))
			continue;
		char *end = strstr(l + 2, "\r\n"), *v = l + 13;
		size_t len = end ? (size_t)(end - v) : strlen(v);
		char val[256];
		snprintf(val, sizeof(val), "%.*s", (int)len, v);
		for (char *t = strtok(val, ", \t"); t; t = strtok(NULL, ", \t"))
			if (!strcasecmp(t, "close"))
				return 1;
	}
	return 0;
}

/* One read of the answer by the PAIR_READ path; in_body: past the head */
static ssize_t rd(int s, char *buf, size_t n, int in_body)
{
	const char *how = read_path;
	if (!how || !strcmp(how, "read"))
		return read(s, buf, n);
	if (!strcmp(how, "nowait")) {
		struct iovec v = { buf, n };
		for (;;) {
			ssize_t r = preadv2(s, &v, 1, -1, RWF_NOWAIT);
			if (r >= 0 || errno != EAGAIN)
				return r;
			struct pollfd p = { s, POLLIN, 0 };
			if (poll(&p, 1, 3000) == 0) {
				errno = EAGAIN;
				return -1;
			}
		}
	}
	if (!strcmp(how, "splice")) {
		int pp[2];
		if (pipe(pp) < 0)
			return -1;
		ssize_t r = splice(s, NULL, pp[1], NULL, n, 0);
		int err = errno;
		if (r > 0)
			r = read(pp[0], buf, (size_t)r);
		close(pp[0]);
		close(pp[1]);
		errno = err;
		return r;
	}
	if (!strcmp(how, "trunc")) {
		if (!in_body)
			return read(s, buf, 1);
		ssize_t r = recv(s, NULL, n, MSG_TRUNC);
		if (r > 0)
			memset(buf, 'x', (size_t)r);
		return r;
	}
	if (!strcmp(how, "kaio")) {
		static aio_context_t ctx;
		if (!ctx && syscall(SYS_io_setup, 4, &ctx) < 0)
			return -1;
		struct iocb cb = { .aio_fildes = (unsigned)s, .aio_lio_opcode = IOCB_CMD_PREAD,
				   .aio_buf = (unsigned long)buf, .aio_nbytes = n };
		struct iocb *list[1] = { &cb };
		if (syscall(SYS_io_submit, ctx, 1, list) != 1)
			return -1;
		struct io_event ev;
		if (syscall(SYS_io_getevents, ctx, 1, 1, &ev, NULL) != 1)
			return -1;
		if (ev.res < 0) {
			errno = (int)-ev.res;
			return -1;
		}
		return (ssize_t)ev.res;
	}
	errno = EINVAL;
	return -1;
}

/* PAIR_TAKE=zero: wait up to ms for s's error or hang-up, then a receive
 * of nothing (it takes a pending error, and reports nothing here: what
 * the program's later calls meet shows it). */
static void take_error(int s, int ms)
{
	if (!take || strcmp(take, "zero"))
		return;
	struct pollfd p = { .fd = s, .events = 0 };
	poll(&p, 1, ms);
	int saved = errno;
	(void)!recv(s, NULL, 0, MSG_DONTWAIT);
	errno = saved;
}

static void request(const char *method, long body, const char *path)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port)) };
	inet_pton(AF_INET, host, &a.sin_addr);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
		say(path, "connect %s", strerrorname_np(errno));
		close(s);
		return;
	}
	struct timeval tv = { 3, 0 };
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	char head[512];
	/* METHOD+key: METHOD with an Idempotency-Key header */
	size_t ml = strcspn(method, "+");
	int hl = snprintf(head, sizeof(head), "%.*s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n%s",
			  (int)ml, method, path, host,
			  method[ml] == '+' ? "Idempotency-Key: 8e03\r\n" : "");
	if (body >= 0)
		hl += snprintf(head + hl, sizeof(head) - (size_t)hl, "Content-Length: %ld\r\n", body);
	hl += snprintf(head + hl, sizeof(head) - (size_t)hl, "\r\n");
	msleep(5); /* a program's think time between connect() and its request */
	if (write_all(s, head, (size_t)hl) < 0) {
		say(path, "write %s", strerrorname_np(errno));
		close(s);
		return;
	}
	if (body > 0) {
		char *b = malloc((size_t)body);
		memset(b, 'x', (size_t)body);
		/* two writes, 2 ms apart: a server that closed after the head
		 * meets the first, and the second meets its reset (EPIPE, and
		 * SIGPIPE) */
		size_t half = (size_t)body / 2;
		if (take && !strcmp(take, "zero"))
			take_error(s, take_ms);
		else
			msleep(2);
		int r = write_all(s, b, half);
		if (r == 0) {
			msleep(2);
			r = write_all(s, b + half, (size_t)body - half);
		}
		int err = errno;
		free(b);
		if (r < 0) {
			say(path, "write %s", strerrorname_np(err));
			close(s);
			return;
		}
	}
	take_error(s, take_end_ms);
	char buf[65536], first[65] = "", hd[2048];
	size_t got = 0, body_got = 0, hd_len = 0;
	int crlf = 0; /* of "\r\n\r\n" matched so far; 4: in the body */
	int code = 0;
	for (;;) {
		ssize_t r = rd(s, buf, sizeof(buf), crlf == 4);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			if (crlf == 4)
				say(path, "read %s body %zu", strerrorname_np(errno), body_got);
			else
				say(path, "read %s %zu", strerrorname_np(errno), got);
			close(s);
			return;
		}
		if (r == 0)
			break;
		for (ssize_t i = 0; i < r; i++) {
			if (crlf == 4)
				body_got++;
			else if (hd_len < sizeof(hd) - 1)
				hd[hd_len++] = buf[i];
			if (crlf == 4)
				;
			else if (buf[i] == "\r\n\r\n"[crlf])
				crlf++;
			else
				crlf = buf[i] == '\r';
		}
		if (got < 64) {
			size_t k = 64 - got < (size_t)r ? 64 - got : (size_t)r;
			memcpy(first + got, buf, k);
			first[got + k] = 0;
		}
		got += (size_t)r;
	}
	if (got >= 12 && !strncmp(first, "HTTP/1.1 ", 9))
		code = atoi(first + 9);
	if (code)
		say(path, "status %d body %zu %s", code, body_got, closing(hd, hd_len) ? "closing" : "open");
	else
		say(path, "eof %zu", got);
	close(s);
}

int main(int argc, char **argv)
{
	if (argc != 7) {
		fprintf(stderr, "usage: pair HOST PORT both|warm|test METHOD BODY PATH\n");
		return 2;
	}
	host = argv[1];
	port = argv[2];
	const char *which = argv[3];
	if (strcmp(which, "test"))
		request("GET", -1, "/warm");
	read_path = getenv("PAIR_READ");
	take = getenv("PAIR_TAKE");
	if (getenv("PAIR_TAKE_MS"))
		take_ms = atoi(getenv("PAIR_TAKE_MS"));
	if (getenv("PAIR_TAKE_END_MS"))
		take_end_ms = atoi(getenv("PAIR_TAKE_END_MS"));
	if (strcmp(which, "warm"))
		request(argv[4], strtol(argv[5], NULL, 10), argv[6]);
	return 0;
}
