/*
 * common.h - shared by the C test clients (header-only: the Makefile builds
 * each tests/clients/NAME.c on its own).
 *
 * Usage of every client:  CLIENT host port path count [METHOD [HEADER...]]
 *   host    numeric: 127.0.0.1 or ::1
 *   METHOD  default GET; HEADER is a whole line such as
 *           "If-Modified-Since: Wed, 01 Jan 2020 00:00:00 GMT"
 * Each request is sent in one write() as HTTP/1.1 with "Connection: close",
 * on a new socket, and everything read until EOF is copied to stdout.
 */
#ifndef TEST_CLIENTS_COMMON_H
#define TEST_CLIENTS_COMMON_H

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void die(const char *fmt, ...)
{
	va_list ap;
	int err = errno;

	fprintf(stderr, "%s: ", program_invocation_short_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (err)
		fprintf(stderr, ": %s", strerror(err));
	fputc('\n', stderr);
	exit(1);
}

struct job {
	struct addrinfo *ai;
	char req[8192];
	size_t req_len;
	long count;
};

static __attribute__((unused)) void parse_args(struct job *job, int argc, char **argv)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
	const char *host, *port, *method = "GET";
	int n, rc;

	if (argc < 5) {
		fprintf(stderr, "usage: %s host port path count [METHOD [HEADER...]]\n", argv[0]);
		exit(2);
	}
	host = argv[1];
	port = argv[2];
	job->count = strtol(argv[4], NULL, 10);
	if (argc > 5)
		method = argv[5];
	rc = getaddrinfo(host, port, &hints, &job->ai);
	if (rc != 0) {
		fprintf(stderr, "getaddrinfo %s %s: %s\n", host, port, gai_strerror(rc));
		exit(1);
	}
	n = snprintf(job->req, sizeof(job->req), "%s %s HTTP/1.1\r\nHost: %s%s%s:%s\r\n", method, argv[3],
		     strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", port);
	for (int i = 6; i < argc; i++)
		n += snprintf(job->req + n, sizeof(job->req) - n, "%s\r\n", argv[i]);
	n += snprintf(job->req + n, sizeof(job->req) - n, "Connection: close\r\n\r\n");
	if ((size_t)n >= sizeof(job->req))
		die("request too long");
	job->req_len = n;
}

static __attribute__((unused)) void write_stdout(const char *buf, size_t len)
{
	if (len && fwrite(buf, 1, len, stdout) != len)
		die("stdout");
}

/* A blocking TCP connection to 127.0.0.1:port. */
static __attribute__((unused)) int dial_loopback(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("connect");
	return s;
}

/* A GET of path asking to close, written whole on a fresh blocking
 * connection to 127.0.0.1:port; the socket, for the caller to read. */
static __attribute__((unused)) int send_get_close(int port, const char *path)
{
	int s = dial_loopback(port);
	char req[512];
	int len = snprintf(req, sizeof(req),
			   "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
	if (write(s, req, (size_t)len) != len)
		die("write");
	return s;
}

/* Copy what s says to stdout, up to EOF. */
static __attribute__((unused)) void copy_response(int s)
{
	char buf[4096];
	ssize_t n;
	while ((n = read(s, buf, sizeof(buf))) > 0)
		write_stdout(buf, (size_t)n);
	if (n < 0)
		die("read");
}

/* Request number i (from 0) on a socket of its own: connect, write the
 * request, copy the response to stdout up to EOF, close. */
static __attribute__((unused)) void get_one(const struct job *job, long i)
{
	char buf[16384];
	int fd = socket(job->ai->ai_family, SOCK_STREAM, 0);
	ssize_t n;

	if (fd < 0)
		die("socket");
	if (connect(fd, job->ai->ai_addr, job->ai->ai_addrlen) < 0)
		die("connect (request %ld)", i + 1);
	n = write(fd, job->req, job->req_len);
	if (n != (ssize_t)job->req_len)
		die("write (request %ld) returned %zd", i + 1, n);
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("read (request %ld)", i + 1);
		}
		write_stdout(buf, n);
	}
	if (close(fd) < 0)
		die("close (request %ld)", i + 1);
}

#endif
