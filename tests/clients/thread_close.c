/*
 * thread_close - a read under way in one thread when another closes its
 * fd (docs/hold.md "A read under way when another thread closes").  Alone
 * the kernel keeps the socket for the read: the read goes on, on its own
 * connection, and the next connect() makes a new one.
 *
 * Usage: thread_close MODE PORT N      (tests/servers/held.py on 127.0.0.1)
 *
 * N rounds, i = 0..N-1, each waiting for events only (no timing: the
 * reader is known to be blocked in read() from /proc/self/task/TID/syscall):
 *
 *   park     thread A: GET /a?i (keep-alive) on fd, its answer read whole,
 *            then read() again (blocks: the server keeps it open).  main:
 *            close(fd) once A blocks, then GET /c?i on a new socket, its
 *            answer printed.  A prints only if its read returns (alone it
 *            never does).  With the socket parked and handed to main's
 *            connect, /c?i went on /a?i's connection (the server log says
 *            so) and A's read could take its answer.
 *   rewrite  thread B: GET /hold?i with "Connection: close" on fd, read()
 *            until 0 or -1, each read's bytes printed.  main: a socket for
 *            /release?i made, close(fd) once B blocks, then GET /release?i
 *            (the server answers /hold?i after it), its answer read, B
 *            joined.  Alone B reads the server's answer, "Connection:
 *            close" in it, then EBADF (fd is closed).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "await_syscall.h"

static int port;

static void die(const char *what)
{
	fprintf(stderr, "thread_close: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int sock(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0)
		die("socket");
	return s;
}

static void conn_to(int s)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("connect");
}

static void put(int s, const char *path, int i, int close)
{
	char q[256];
	int n = snprintf(q, sizeof(q), "GET %s?%d HTTP/1.1\r\nHost: t\r\n%s\r\n", path, i,
			 close ? "Connection: close\r\n" : "");
	if (write(s, q, (size_t)n) != n)
		die("write");
}

/* One whole answer (held.py's: a head, Content-Length, a short body) into
 * b; its length, or what the failing read said. */
static ssize_t answer(int s, char *b, size_t cap)
{
	size_t got = 0;
	for (;;) {
		ssize_t r = read(s, b + got, cap - 1 - got);
		if (r <= 0)
			return got ? (ssize_t)got : r;
		got += (size_t)r;
		b[got] = 0;
		char *end = strstr(b, "\r\n\r\n"), *cl = strcasestr(b, "content-length:");
		if (end && cl && got >= (size_t)(end + 4 - b) + (size_t)atoi(cl + 15))
			return (ssize_t)got;
	}
}

struct reader {
	int fd, i;
	volatile pid_t tid;
	char out[8192];
	size_t out_len;
};

static void say(struct reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct reader *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(r->out + r->out_len, sizeof(r->out) - r->out_len, fmt, ap);
	va_end(ap);
	if (n > 0)
		r->out_len += (size_t)n < sizeof(r->out) - r->out_len ? (size_t)n : 0;
}

static void *park_reader(void *arg)
{
	struct reader *r = arg;
	char b[4096];
	put(r->fd, "/a", r->i, 0);
	if (answer(r->fd, b, sizeof(b)) <= 0)
		die("answer to /a");
	r->tid = (pid_t)syscall(SYS_gettid);
	ssize_t n = read(r->fd, b, sizeof(b) - 1);
	/* alone never reached: the kernel's read stays on /a's connection */
	if (n < 0)
		printf("A %d: read -1 %s\n", r->i, strerror(errno));
	else
		printf("A %d: read %zd: %.*s\n", r->i, n, (int)n, b);
	fflush(stdout);
	return NULL;
}

static void *rewrite_reader(void *arg)
{
	struct reader *r = arg;
	char b[4096];
	put(r->fd, "/hold", r->i, 1);
	r->tid = (pid_t)syscall(SYS_gettid);
	for (;;) {
		ssize_t n = read(r->fd, b, sizeof(b));
		if (n < 0) {
			say(r, "B %d: read -1 %s\n", r->i, strerror(errno));
			break;
		}
		say(r, "B %d: read %zd:\n%.*s\n", r->i, n, (int)n, b);
		if (!n)
			break;
	}
	return NULL;
}

static pid_t tid_of(struct reader *r)
{
	while (!r->tid)
		sched_yield();
	return r->tid;
}

static void round_park(int i)
{
	static struct reader rs[1024];
	struct reader *r = &rs[i % 1024];
	char b[4096];
	r->i = i;
	r->fd = sock();
	conn_to(r->fd);
	pthread_t t;
	if (pthread_create(&t, NULL, park_reader, r))
		die("pthread_create");
	pthread_detach(t);
	await_syscall(tid_of(r), SYS_read, r->fd, "read");
	close(r->fd);
	int s = sock();
	/* (a bound for the old code only, whose A could take this answer) */
	struct timeval tv = { 5, 0 };
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	conn_to(s);
	put(s, "/c", i, 0);
	ssize_t n = answer(s, b, sizeof(b));
	char *body = n > 0 ? strstr(b, "\r\n\r\n") : NULL;
	if (body)
		printf("main %d: %s", i, body + 4);
	else
		printf("main %d: no answer (%zd %s)\n", i, n, n < 0 ? strerror(errno) : "EOF");
	fflush(stdout);
	close(s);
}

static void round_rewrite(int i)
{
	struct reader r = { .i = i };
	char b[4096];
	r.fd = sock();
	conn_to(r.fd);
	pthread_t t;
	if (pthread_create(&t, NULL, rewrite_reader, &r))
		die("pthread_create");
	int s = sock(); /* before the close: fd's number stays free */
	conn_to(s);
	await_syscall(tid_of(&r), SYS_read, r.fd, "read");
	close(r.fd);
	put(s, "/release", i, 0);
	if (answer(s, b, sizeof(b)) <= 0)
		die("answer to /release");
	close(s);
	pthread_join(t, NULL);
	fwrite(r.out, 1, r.out_len, stdout);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: thread_close park|rewrite PORT N\n");
		return 2;
	}
	port = atoi(argv[2]);
	int n = atoi(argv[3]);
	int rewrite = !strcmp(argv[1], "rewrite");
	for (int i = 0; i < n; i++)
		rewrite ? round_rewrite(i) : round_park(i);
	printf("end\n");
	fflush(stdout);
	_exit(0); /* (park: the readers are still blocked, as alone) */
}
