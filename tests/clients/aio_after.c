/*
 * aio_after.c - POSIX AIO on a connection after the EOF its server owes
 * (docs/replay.md, "Nothing added"): a GET asking to close, read to EOF
 * with read(), then aio_write() of a POST (glibc's helper thread writes
 * it with libc's internal write, which no wrapper sees), waited for with
 * aio_suspend(); then one aio_read().  Prints "get STATUS-LINE",
 * "aio_write RESULT" (the byte count or the errno name) and "aio_read
 * RESULT".  SIGPIPE keeps its default action.
 *
 * Usage: aio_after HOST PORT
 */
#include <aio.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void wait_for(struct aiocb *cb, const char *what)
{
	const struct aiocb *list[1] = { cb };
	struct timespec ts = { 10, 0 };
	while (aio_error(cb) == EINPROGRESS)
		if (aio_suspend(list, 1, &ts) < 0 && errno == EAGAIN) {
			printf("%s hangs\n", what);
			fflush(stdout);
			exit(1);
		}
	int err = aio_error(cb);
	ssize_t r = aio_return(cb);
	if (err)
		printf("%s %s\n", what, strerrorname_np(err));
	else
		printf("%s %zd\n", what, r);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
	inet_pton(AF_INET, argv[1], &a.sin_addr);
	for (int i = 0; i < 2; i++) { /* the second one rides a reused connection */
		int s = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
			return 1;
		const char get[] = "GET /get HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
		if (write(s, get, sizeof(get) - 1) < 0)
			return 1;
		static char buf[65536];
		size_t got = 0;
		ssize_t r;
		while ((r = read(s, buf + got, sizeof(buf) - 1 - got)) > 0)
			got += (size_t)r;
		buf[got] = 0;
		char *eol = strstr(buf, "\r\n");
		if (eol)
			*eol = 0;
		printf("get %s\n", buf);
		fflush(stdout);
		usleep(50000); /* the server's close has arrived, without the library */
		static const char post[] = "POST /after HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi";
		struct aiocb w = { .aio_fildes = s, .aio_buf = (void *)post, .aio_nbytes = sizeof(post) - 1 };
		if (aio_write(&w) < 0)
			printf("aio_write call %s\n", strerrorname_np(errno));
		else
			wait_for(&w, "aio_write");
		struct aiocb rd = { .aio_fildes = s, .aio_buf = buf, .aio_nbytes = sizeof(buf) };
		if (aio_read(&rd) < 0)
			printf("aio_read call %s\n", strerrorname_np(errno));
		else
			wait_for(&rd, "aio_read");
		close(s);
	}
	return 0;
}
