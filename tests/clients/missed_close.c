/*
 * missed_close - closes its HTTP socket where no preload library can see
 * it, then reuses the fd number for a file and reads it with read().
 *
 * Usage: missed_close host port path count FILE
 * For each request: socket, connect, write, read to EOF (so the shim owes
 * this fd an EOF), close with syscall(SYS_close), open FILE (the kernel
 * hands out the same number), read FILE with read() and print both.
 * The file must read as the file, not as the dead socket's EOF.
 */
#include <fcntl.h>
#include <sys/syscall.h>

#include "common.h"

int main(int argc, char **argv)
{
	struct job job;
	char buf[16384];

	if (argc < 6) {
		fprintf(stderr, "usage: %s host port path count FILE\n", argv[0]);
		return 2;
	}
	parse_args(&job, argc - 1, argv);
	for (long i = 0; i < job.count; i++) {
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
		syscall(SYS_close, fd);
		int f = open(argv[argc - 1], O_RDONLY);
		if (f != fd)
			die("open returned %d, not the socket's number %d", f, fd);
		while ((n = read(f, buf, sizeof(buf))) > 0)
			write_stdout(buf, (size_t)n);
		close(f);
	}
	return 0;
}
