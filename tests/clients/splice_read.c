/*
 * splice_read.c - responses read with splice() from the socket into a pipe
 * (then read() from the pipe), as a proxy or a zero-copy downloader reads
 * them (docs/replay.md "splice() from a connection").
 *
 * Usage: splice_read HOST PORT PATH COUNT LEN [nonblock]
 *   COUNT requests, each on its own connection asking to close; each
 *   answer read by splice(s, NULL, pipe, NULL, LEN, flags) until 0 (EOF)
 *   or an error.  nonblock: the socket O_NONBLOCK, splice with
 *   SPLICE_F_NONBLOCK, poll() for POLLIN on EAGAIN.
 * Prints each answer's bytes as read from the pipe, then one line
 * "END n EOF" or "END n ERRNO-NAME" (after no byte: "END n nothing, ...").
 */
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>

#include "common.h"

static ssize_t splice_once(int s, int p, size_t len, bool nonblock)
{
	for (;;) {
		ssize_t r = splice(s, NULL, p, NULL, len, nonblock ? SPLICE_F_NONBLOCK : 0);
		if (r >= 0 || !nonblock || errno != EAGAIN)
			return r;
		struct pollfd pf = { .fd = s, .events = POLLIN };
		if (poll(&pf, 1, 20000) != 1)
			die("poll");
	}
}

int main(int argc, char **argv)
{
	struct job job;
	if (argc < 6) {
		fprintf(stderr, "usage: %s host port path count len [nonblock]\n", argv[0]);
		return 2;
	}
	size_t len = strtoul(argv[5], NULL, 10);
	bool nonblock = argc > 6 && !strcmp(argv[6], "nonblock");
	parse_args(&job, 5, argv);
	for (long i = 0; i < job.count; i++) {
		int s = socket(job.ai->ai_family, SOCK_STREAM, 0), p[2];
		if (s < 0 || connect(s, job.ai->ai_addr, job.ai->ai_addrlen) != 0)
			die("connect");
		if (write(s, job.req, job.req_len) != (ssize_t)job.req_len)
			die("write");
		if (nonblock && fcntl(s, F_SETFL, O_NONBLOCK) != 0)
			die("fcntl");
		if (pipe(p) != 0)
			die("pipe");
		size_t total = 0;
		ssize_t r;
		char buf[65536];
		while ((r = splice_once(s, p[1], len, nonblock)) > 0) {
			for (ssize_t got = 0; got < r;) {
				ssize_t n = read(p[0], buf, (size_t)(r - got) < sizeof(buf) ? (size_t)(r - got) : sizeof(buf));
				if (n <= 0)
					die("read from the pipe");
				write_stdout(buf, (size_t)n);
				got += n;
			}
			total += (size_t)r;
		}
		printf("\nEND %ld %s%s\n", i + 1, total ? "" : "nothing, ", r == 0 ? "EOF" : strerrorname_np(errno));
		fflush(stdout);
		close(p[0]);
		close(p[1]);
		close(s);
	}
	return 0;
}
