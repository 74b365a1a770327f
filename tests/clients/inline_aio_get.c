/*
 * inline_aio_get - GET /<path> asking to close (Connection: close), written
 * with write(), the response read to its end with kernel AIO reads
 * (IOCB_CMD_PREAD) submitted through libinline_aio.so, whose io_submit
 * makes the system call inline: reads the library cannot see, so it must
 * not owe this program an EOF it cannot deliver there (docs/replay.md,
 * "Kernel AIO").  Prints the response and "end <n>" (the last read's
 * result).  Usage: inline_aio_get HOST PORT N (N requests, a connection each)
 */
#include <arpa/inet.h>
#include <linux/aio_abi.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int io_setup(unsigned nr, aio_context_t *ctx);
int io_submit(aio_context_t ctx, long n, struct iocb **iocbs);
int io_getevents(aio_context_t ctx, long min, long max, struct io_event *ev, struct timespec *t);

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	aio_context_t ctx = 0;
	if (io_setup(4, &ctx) < 0)
		return 2;
	for (int i = 1; i <= atoi(argv[3]); i++) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[2])) };
		inet_pton(AF_INET, argv[1], &a.sin_addr);
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
			return 2;
		char rq[128];
		int len = snprintf(rq, sizeof rq, "GET /a/%d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", i);
		if (write(fd, rq, (size_t)len) != len)
			return 2;
		char buf[4096];
		long r;
		do {
			struct iocb cb;
			memset(&cb, 0, sizeof(cb));
			cb.aio_fildes = (uint32_t)fd;
			cb.aio_lio_opcode = IOCB_CMD_PREAD;
			cb.aio_buf = (uint64_t)(uintptr_t)buf;
			cb.aio_nbytes = sizeof(buf);
			struct iocb *cbs[1] = { &cb };
			struct io_event ev;
			if (io_submit(ctx, 1, cbs) != 1 || io_getevents(ctx, 1, 1, &ev, NULL) != 1)
				return 3;
			r = (long)ev.res;
			if (r > 0)
				fwrite(buf, 1, (size_t)r, stdout);
		} while (r > 0);
		printf("\nend %ld\n", r);
		fflush(stdout);
		close(fd);
	}
	return 0;
}
