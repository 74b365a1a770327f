/*
 * exit_open - one request per process, and the socket is never closed:
 * it exits with the connection still open (as many one-shot scripts do).
 *
 * Usage: exit_open host port path
 * socket, connect, write a "Connection: close" request, read to EOF (the
 * shim owes that EOF), print the response, exit(0) without close().
 */
#include "common.h"

int main(int argc, char **argv)
{
	struct job job;
	char buf[16384];
	char *args[] = { argv[0], argc > 1 ? argv[1] : "", argc > 2 ? argv[2] : "",
			 argc > 3 ? argv[3] : "", "1" };

	if (argc != 4) {
		fprintf(stderr, "usage: %s host port path\n", argv[0]);
		return 2;
	}
	parse_args(&job, 5, args);
	int fd = socket(job.ai->ai_family, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, job.ai->ai_addr, job.ai->ai_addrlen) < 0)
		die("connect");
	if (write(fd, job.req, job.req_len) != (ssize_t)job.req_len)
		die("write");
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		write_stdout(buf, (size_t)n);
	if (n < 0)
		die("read");
	return 0; /* no close(fd) */
}
