/*
 * threads - many threads, each doing one-connection-per-request HTTP/1.1 GETs
 * at the same time: the shim's pool and fd table under concurrency.
 *
 * Usage: threads PORT NTHREADS NREQ        (server on 127.0.0.1:PORT)
 *
 * Thread t (0..NTHREADS-1) makes NREQ requests, i = 0..NREQ-1, each on its
 * own socket: socket(), connect(), one write() of
 * "GET /echo/<t>-<i> HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
 * read() until EOF, close().  The body must be exactly "/echo/<t>-<i>\n"
 * (nginx: location /echo/ { return 200 "$request_uri\n"; }), so a response
 * delivered to the wrong thread or request is a mismatch.
 *
 * Prints
 *   requests=<total> mismatches=<m> errors=<e>
 *   fds_start=<a> fds_end=<b> high_fds=<h>
 * fds_* count /proc/self/fd before the threads start and after they all
 * ended; high_fds is how many of the fds at the end are >= HIDDEN_FD_BASE,
 * where the shim parks its pooled sockets (so fds_end - high_fds is what
 * the program itself still has open).  The first errors and mismatches are
 * described on stderr.  Exit status 1 on any mismatch or error.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>

#include "common.h"

/* shim/fdtable.c: pooled sockets are moved to fd numbers from
 * min(1024, soft RLIMIT_NOFILE / 2) up; 1024 whenever the soft limit is at
 * least 2048 (with a lower limit, high_fds undercounts them). */
#define HIDDEN_FD_BASE 1024

/* describe at most this many failures on stderr */
#define MAX_REPORTS 10

static int port;
static long nreq;
static int reports;

struct worker {
	pthread_t tid;
	int id;
	long mismatches;
	long errors;
};

static void report(const char *fmt, ...)
{
	va_list ap;

	if (__atomic_fetch_add(&reports, 1, __ATOMIC_RELAXED) >= MAX_REPORTS)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

/* open fds of this process: all of them, and those >= HIDDEN_FD_BASE */
static int count_fds(int *high)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		die("opendir /proc/self/fd");
	*high = 0;
	while ((e = readdir(d)) != NULL) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);

		if (e->d_name[0] == '.' || *end || fd == dirfd(d))
			continue;
		n++;
		if (fd >= HIDDEN_FD_BASE)
			(*high)++;
	}
	closedir(d);
	return n;
}

/* the first bytes of buf on one line: \r, \n and other controls escaped */
static void escape(char *out, size_t cap, const char *buf, size_t len)
{
	size_t o = 0;

	for (size_t k = 0; k < len && o + 5 < cap; k++) {
		unsigned char ch = buf[k];

		if (ch == '\r' || ch == '\n' || ch == '\\')
			o += sprintf(out + o, "\\%c", ch == '\r' ? 'r' : ch == '\n' ? 'n' : '\\');
		else if (ch < 0x20 || ch >= 0x7f)
			o += sprintf(out + o, "\\x%02x", ch);
		else
			out[o++] = ch;
	}
	out[o] = '\0';
}

/* one request; 0: right body, 1: mismatch, -1: error */
static int one(int t, long i)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	char req[256], want[128], buf[16384];
	size_t got = 0, sent = 0;
	int req_len, want_len, s, rc = 0;
	const char *body;
	bool overflow = false;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	req_len = snprintf(req, sizeof(req), "GET /echo/%d-%ld HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", t, i);
	want_len = snprintf(want, sizeof(want), "/echo/%d-%ld\n", t, i);

	s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0) {
		report("thread %d request %ld: socket: %s\n", t, i, strerror(errno));
		return -1;
	}
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
		report("thread %d request %ld: connect: %s\n", t, i, strerror(errno));
		close(s);
		return -1;
	}
	while (sent < (size_t)req_len) {
		ssize_t n = write(s, req + sent, req_len - sent);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			report("thread %d request %ld: write: %s\n", t, i, n < 0 ? strerror(errno) : "0 bytes");
			close(s);
			return -1;
		}
		sent += n;
	}
	for (;;) {
		ssize_t n;

		if (got == sizeof(buf)) { /* far too long: keep reading to EOF */
			overflow = true;
			got = 0;
		}
		n = read(s, buf + got, sizeof(buf) - got);
		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			report("thread %d request %ld: read: %s\n", t, i, strerror(errno));
			close(s);
			return -1;
		}
		got += n;
	}
	if (close(s) < 0) {
		report("thread %d request %ld: close: %s\n", t, i, strerror(errno));
		rc = -1;
	}
	body = memmem(buf, got, "\r\n\r\n", 4);
	if (overflow || !body || (size_t)(buf + got - (body + 4)) != (size_t)want_len ||
	    memcmp(body + 4, want, want_len) != 0) {
		char shown[256];

		escape(shown, sizeof(shown), buf, got);
		report("thread %d request %ld: mismatch: %zu bytes read: %s\n", t, i, got, shown);
		return 1;
	}
	return rc;
}

static void *run(void *arg)
{
	struct worker *w = arg;

	for (long i = 0; i < nreq; i++) {
		int r = one(w->id, i);

		if (r > 0)
			w->mismatches++;
		else if (r < 0)
			w->errors++;
	}
	return NULL;
}

static long number(const char *s, const char *what, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max) {
		errno = 0;
		die("bad %s: %s", what, s);
	}
	return v;
}

int main(int argc, char **argv)
{
	struct worker *w;
	int nthreads, fds_start, fds_end, high_start, high_end;
	long mismatches = 0, errors = 0;

	if (argc != 4) {
		fprintf(stderr, "usage: %s PORT NTHREADS NREQ\n", argv[0]);
		return 2;
	}
	port = (int)number(argv[1], "PORT", 1, 65535);
	nthreads = (int)number(argv[2], "NTHREADS", 1, 1000);
	nreq = number(argv[3], "NREQ", 0, 100000000);
	w = calloc(nthreads, sizeof(*w));
	if (!w)
		die("calloc");

	fds_start = count_fds(&high_start);
	for (int t = 0; t < nthreads; t++) {
		int err;

		w[t].id = t;
		err = pthread_create(&w[t].tid, NULL, run, &w[t]);
		if (err) {
			errno = err;
			die("pthread_create");
		}
	}
	for (int t = 0; t < nthreads; t++) {
		pthread_join(w[t].tid, NULL);
		mismatches += w[t].mismatches;
		errors += w[t].errors;
	}
	fds_end = count_fds(&high_end);

	printf("requests=%ld mismatches=%ld errors=%ld\n", (long)nthreads * nreq, mismatches, errors);
	printf("fds_start=%d fds_end=%d high_fds=%d\n", fds_start, fds_end, high_end);
	free(w);
	if (fflush(stdout) != 0)
		return 1;
	return mismatches || errors ? 1 : 0;
}
