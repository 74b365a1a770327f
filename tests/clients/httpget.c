/*
 * httpget.c - the simplest HTTP/1.1 client: for each request a new socket,
 * a blocking connect(), the whole request in one write() ("Connection:
 * close"), read() until it returns 0, print everything read, close().
 * This is the program libkeepalive exists for: it only stops reading at EOF.
 * Prints "rate=<requests/s>" on stderr at the end (scripts/bench reads it).
 * Usage: see common.h.
 */
#include <time.h>
#include "common.h"

int main(int argc, char **argv)
{
	struct job job;

	parse_args(&job, argc, argv);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < job.count; i++) {
		get_one(&job, i);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	fprintf(stderr, "rate=%.0f\n", dt > 0 ? (double)job.count / dt : 0.0);
	freeaddrinfo(job.ai);
	return fflush(stdout) == 0 ? 0 : 1;
}
