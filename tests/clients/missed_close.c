/*
 * missed_close - closes its HTTP socket where no preload library can see
 * it, then reuses the fd number for a file and reads it with read().
 *
 * Usage: missed_close host port path count FILE [raw|syscall]
 * For each request: socket, connect, write, read to EOF (so the shim owes
 * this fd an EOF), close it, open FILE (the kernel hands out the same
 * number), read FILE with read() and print both.  The file must read as
 * the file, not as the dead socket's EOF.
 * The close: "raw" (the default) is the syscall instruction itself, as a
 * static binary or Go makes it, which no preload library can see;
 * "syscall" is glibc's syscall(SYS_close, fd), as libuv (Node) closes.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <sys/syscall.h>

#include "common.h"

static long raw_close(int fd)
{
#if defined(__x86_64__)
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"((long)SYS_close), "D"((long)fd)
			 : "rcx", "r11", "memory");
	return ret;
#else
	return syscall(SYS_close, fd); /* seen by the shim: the test then fails */
#endif
}

int main(int argc, char **argv)
{
	struct job job;
	char buf[16384];

	bool via_libc = argc == 7 && !strcmp(argv[6], "syscall");
	if (argc < 6 || argc > 7) {
		fprintf(stderr, "usage: %s host port path count FILE [raw|syscall]\n", argv[0]);
		return 2;
	}
	const char *file = argv[5];
	parse_args(&job, 5, argv);
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
		if (via_libc)
			syscall(SYS_close, fd);
		else
			raw_close(fd);
		int f = open(file, O_RDONLY);
		if (f != fd)
			die("open returned %d, not the socket's number %d", f, fd);
		while ((n = read(f, buf, sizeof(buf))) > 0)
			write_stdout(buf, (size_t)n);
		close(f);
	}
	return 0;
}
