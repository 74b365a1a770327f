/*
 * aio_after.c - writes and reads the library cannot see, on a connection
 * after the EOF its server owes (docs/replay.md, "Nothing added"): a GET
 * asking to close, read to EOF with read(), then a POST written by the
 * WRITE path, then one read by the READ path.  Prints "get STATUS-LINE",
 * "WRITE_write RESULT" (the byte count or the errno name) and "READ_read
 * RESULT".  SIGPIPE keeps its default action.
 *
 * WRITE: aio    aio_write() (glibc's helper thread writes with libc's
 *               internal write), waited for with aio_suspend()
 *        kaio   kernel AIO, io_submit(IOCB_CMD_PWRITE) by syscall() (as
 *               libaio makes it), io_getevents()
 *        wide   fputws() on a FILE fdopen()ed (write-only) over a dup of
 *               the socket, then fflush() (glibc writes it internally)
 *        nowait pwritev2(RWF_NOWAIT)
 * READ:  aio, kaio (IOCB_CMD_PREAD), nowait (preadv2(RWF_NOWAIT)), trunc
 *        (recv(NULL, 64 KiB, MSG_TRUNC)), read
 *
 * Usage: aio_after HOST PORT [WRITE READ]   (default: aio aio)
 */
#include <aio.h>
#include <arpa/inet.h>
#include <errno.h>
#include <linux/aio_abi.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <wchar.h>
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

static void say(const char *mode, const char *what, ssize_t r, int err)
{
	if (r < 0)
		printf("%s_%s %s\n", mode, what, strerrorname_np(err));
	else
		printf("%s_%s %zd\n", mode, what, r);
	fflush(stdout);
}

static void kaio(int s, int op, void *buf, size_t n, const char *mode, const char *what)
{
	static aio_context_t ctx;
	if (!ctx && syscall(SYS_io_setup, 4, &ctx) < 0) {
		say(mode, what, -1, errno);
		return;
	}
	struct iocb cb = { .aio_fildes = (unsigned)s, .aio_lio_opcode = (__u16)op,
			   .aio_buf = (unsigned long)buf, .aio_nbytes = n };
	struct iocb *list[1] = { &cb };
	if (syscall(SYS_io_submit, ctx, 1, list) != 1) {
		say(mode, what, -1, errno);
		return;
	}
	struct io_event ev;
	struct timespec ts = { 10, 0 };
	if (syscall(SYS_io_getevents, ctx, 1, 1, &ev, &ts) != 1) {
		printf("%s_%s hangs\n", mode, what);
		exit(1);
	}
	if (cb.aio_fildes != (unsigned)s)
		printf("%s_%s iocb changed\n", mode, what);
	say(mode, what, ev.res < 0 ? -1 : (ssize_t)ev.res, ev.res < 0 ? (int)-ev.res : 0);
}

static void write_by(const char *mode, int s, const char *post, size_t n)
{
	if (!strcmp(mode, "aio")) {
		struct aiocb w = { .aio_fildes = s, .aio_buf = (void *)post, .aio_nbytes = n };
		if (aio_write(&w) < 0)
			printf("aio_write call %s\n", strerrorname_np(errno));
		else
			wait_for(&w, "aio_write");
	} else if (!strcmp(mode, "kaio")) {
		kaio(s, IOCB_CMD_PWRITE, (void *)post, n, mode, "write");
	} else if (!strcmp(mode, "wide")) {
		FILE *f = fdopen(dup(s), "w");
		wchar_t w[256];
		mbstowcs(w, post, 255);
		w[255] = 0;
		int r = fputws(w, f);
		int err = errno;
		if (r >= 0) {
			r = fflush(f);
			err = errno;
		}
		say(mode, "write", r < 0 ? -1 : (ssize_t)n, err);
		fclose(f);
	} else if (!strcmp(mode, "nowait")) {
		struct iovec v = { (void *)post, n };
		ssize_t r = pwritev2(s, &v, 1, -1, RWF_NOWAIT);
		say(mode, "write", r, errno);
	}
}

static void read_by(const char *mode, int s, char *buf, size_t n)
{
	if (!strcmp(mode, "aio")) {
		struct aiocb rd = { .aio_fildes = s, .aio_buf = buf, .aio_nbytes = n };
		if (aio_read(&rd) < 0)
			printf("aio_read call %s\n", strerrorname_np(errno));
		else
			wait_for(&rd, "aio_read");
	} else if (!strcmp(mode, "kaio")) {
		kaio(s, IOCB_CMD_PREAD, buf, n, mode, "read");
	} else if (!strcmp(mode, "nowait")) {
		struct iovec v = { buf, n };
		ssize_t r;
		while ((r = preadv2(s, &v, 1, -1, RWF_NOWAIT)) < 0 && errno == EAGAIN)
			usleep(10000);
		say(mode, "read", r, errno);
	} else if (!strcmp(mode, "trunc")) {
		ssize_t r = recv(s, NULL, n, MSG_TRUNC);
		say(mode, "read", r, errno);
	} else {
		ssize_t r = read(s, buf, n);
		say(mode, "read", r, errno);
	}
}

int main(int argc, char **argv)
{
	if (argc != 3 && argc != 5)
		return 2;
	const char *wmode = argc == 5 ? argv[3] : "aio", *rmode = argc == 5 ? argv[4] : "aio";
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
		write_by(wmode, s, post, sizeof(post) - 1);
		read_by(rmode, s, buf, sizeof(buf));
		close(s);
	}
	return 0;
}
