/*
 * early_io.c - I/O before libkeepalive's constructor has run.
 *
 * A function in the program's .preinit_array runs before every library
 * constructor (the dynamic linker's rule), ours included, as a library
 * loaded ahead of the preload (a DT_NEEDED one, whose constructor runs
 * first) would.  There it goes through the wrapped calls: a pipe written
 * and read back, fcntl, dup, poll, and one HTTP request (socket, connect,
 * write, read to EOF, close), printing what it read.  Then main() makes
 * COUNT requests the usual way (common.h), which the shim pools.
 * Usage: early_io host port path count
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include "common.h"

static char early_out[65536];
static size_t early_len;
static int early_failed;

static void early_put(const char *s, size_t n)
{
	if (n > sizeof(early_out) - early_len)
		n = sizeof(early_out) - early_len;
	memcpy(early_out + early_len, s, n);
	early_len += n;
}

static void early_say(const char *s)
{
	early_put(s, strlen(s));
}

/* No stdio, no getaddrinfo: only the calls we wrap, and plain memory. */
static void early(int argc, char **argv, char **envp)
{
	(void)envp;
	if (argc < 4) {
		early_failed = 1;
		return;
	}
	int p[2];
	char buf[4096];
	if (pipe(p) < 0 || write(p[1], "pipe ok\n", 8) != 8 || read(p[0], buf, 8) != 8) {
		early_failed = 2;
		return;
	}
	early_put(buf, 8);
	int d = dup(p[0]);
	if (d < 0 || fcntl(d, F_GETFD) < 0 || close(d) < 0 || close(p[0]) < 0 || close(p[1]) < 0) {
		early_failed = 3;
		return;
	}
	early_say("dup ok\n");

	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
	if (inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) {
		early_failed = 4;
		return;
	}
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		early_failed = 5;
		return;
	}
	char req[512];
	size_t n = 0;
	const char *parts[] = { "GET ", argv[3], " HTTP/1.1\r\nHost: ", argv[1],
				"\r\nConnection: close\r\n\r\n" };
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		size_t l = strlen(parts[i]);
		if (n + l > sizeof(req)) {
			early_failed = 6;
			return;
		}
		memcpy(req + n, parts[i], l);
		n += l;
	}
	if (write(fd, req, n) != (ssize_t)n) {
		early_failed = 7;
		return;
	}
	for (;;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		if (poll(&pf, 1, 10000) != 1) {
			early_failed = 8;
			return;
		}
		ssize_t r = read(fd, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			early_failed = 9;
			return;
		}
		if (r == 0)
			break;
		early_put(buf, (size_t)r);
	}
	if (close(fd) < 0) {
		early_failed = 10;
		return;
	}
	early_say("early request done\n");
}

__attribute__((section(".preinit_array"), used)) static void (*early_hook)(int, char **, char **) = early;

int main(int argc, char **argv)
{
	struct job job;

	if (early_failed) {
		fprintf(stderr, "early_io: early step %d failed\n", early_failed);
		return 1;
	}
	write_stdout(early_out, early_len);
	parse_args(&job, argc, argv);
	for (long i = 0; i < job.count; i++) {
		get_one(&job, i);
	}
	freeaddrinfo(job.ai);
	return fflush(stdout) == 0 ? 0 : 1;
}
