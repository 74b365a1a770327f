/*
 * unseen_read.c - a response read by preadv2() with flags no wrapper
 * routes (docs/replay.md "Reads we cannot follow"): RWF_NOAPPEND (0x20),
 * which the kernel here (6.18) accepts on a socket read (one that refuses
 * it: EOPNOTSUPP, printed as such).
 *
 * Usage: unseen_read HOST PORT PATH COUNT
 *   COUNT requests, each on its own connection asking to close, each
 *   answer read by preadv2(s, 4 KiB, -1, RWF_NOAPPEND) until 0 or an error.
 * Prints each answer's bytes, then "END n EOF" or "END n ERRNO-NAME".
 */
#include <sys/uio.h>

#include "common.h"

#ifndef RWF_NOAPPEND
#define RWF_NOAPPEND 0x00000020
#endif

int main(int argc, char **argv)
{
	struct job job;
	parse_args(&job, argc < 5 ? argc : 5, argv);
	for (long i = 0; i < job.count; i++) {
		int s = socket(job.ai->ai_family, SOCK_STREAM, 0);
		if (s < 0 || connect(s, job.ai->ai_addr, job.ai->ai_addrlen) != 0)
			die("connect");
		if (write(s, job.req, job.req_len) != (ssize_t)job.req_len)
			die("write");
		char buf[4096];
		struct iovec v = { buf, sizeof(buf) };
		ssize_t r;
		while ((r = preadv2(s, &v, 1, -1, RWF_NOAPPEND)) > 0)
			write_stdout(buf, (size_t)r);
		printf("\nEND %ld %s\n", i + 1, r == 0 ? "EOF" : strerrorname_np(errno));
		fflush(stdout);
		close(s);
	}
	return 0;
}
