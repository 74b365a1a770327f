/*
 * send_after - a request asking to close, then a POST sent past the write
 * path (sendfile, splice, sendmmsg, sendto with an address, pwritev2 with
 * a flag a socket ignores, syscall(SYS_sendfile), glibc's names past the
 * wrappers of write: dprintf, vdprintf, __dprintf_chk, __write, __send):
 * either after
 * the response was read to EOF ("after"), or right behind the request,
 * before its response ("behind"), or right behind it and the program's
 * own shutdown(SHUT_WR) ("shutwr": alone the send fails with EPIPE and
 * SIGPIPE, counted by a handler and printed).  Without the library the
 * server has closed, or closes without reading it: the POST is never
 * executed.
 *
 *   send_after HOST PORT after|behind|shutwr MODE
 *   MODE: sendfile|splice|sendmmsg|sendto|pwritev2_dsync|syscall_sendfile|
 *         dprintf|vdprintf|dprintf_chk|__write|__send|pwritev64v2|
 *         __dup2|__fcntl (a copy at fd 10 by that name, then write())|
 *         recv_oob (a recv(MSG_OOB), which sends nothing: EINVAL alone)|
 *         sendmmsg2 (the POST as two messages, its halves)|
 *         shutrd, connect_other, dup0, fdopen_r, fdopen_rplus (a call
 *         that takes the connection out of the library's following, then
 *         the POST by write(), or fputs and fflush on the "r+" FILE)
 *
 * Prints what each call returned and the response's first line.
 * SEND_AFTER_READ=__read|__poll: the answer read by that name (glibc's
 * second names of read and poll).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static int dial(const char *host, int port)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, host, &a.sin_addr);
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("connect");
		exit(1);
	}
	return s;
}

/* glibc's exported names, undeclared by its headers without fortification */
extern int __dprintf_chk(int, int, const char *, ...);
extern ssize_t __write(int, const void *, size_t);
extern ssize_t __send(int, const void *, size_t, int);
extern ssize_t __read(int, void *, size_t);
extern int __poll(struct pollfd *, nfds_t, int);
extern int __dup2(int, int);
extern int __fcntl(int, int, ...);

/* one read, by the name SEND_AFTER_READ says: read (unset), __read, or
 * __poll for POLLIN then read (glibc's second names, which a program may
 * bind: shim/alias.h) */
static ssize_t read_one(int s, char *buf, size_t n)
{
	const char *how = getenv("SEND_AFTER_READ");
	if (how && !strcmp(how, "__read"))
		return __read(s, buf, n);
	if (how && !strcmp(how, "__poll")) {
		struct pollfd p = { .fd = s, .events = POLLIN };
		if (__poll(&p, 1, -1) < 0)
			return -1;
	}
	return read(s, buf, n);
}

static void read_all(int s, const char *what)
{
	char buf[4096], first[128] = "";
	size_t tot = 0;
	ssize_t n;
	while ((n = read_one(s, buf, sizeof(buf) - 1)) > 0) {
		if (!tot) {
			buf[n] = 0;
			sscanf(buf, "%127[^\r\n]", first);
		}
		tot += (size_t)n;
	}
	printf("%s: %s, then read %zd\n", what, first, n);
}

static int via_vdprintf(int s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vdprintf(s, fmt, ap);
	va_end(ap);
	return r;
}

static ssize_t send_past(int s, const char *mode, const char *req)
{
	size_t len = strlen(req);
	if (!strcmp(mode, "sendfile")) {
		FILE *t = tmpfile();
		fputs(req, t);
		fflush(t);
		off_t o = 0;
		ssize_t n = sendfile(s, fileno(t), &o, len);
		printf("offset after %lld\n", (long long)o);
		return n;
	}
	if (!strcmp(mode, "splice")) {
		int p[2];
		if (pipe(p) < 0 || write(p[1], req, len) != (ssize_t)len)
			return -2;
		ssize_t n = splice(p[0], NULL, s, NULL, len, 0);
		char rest[256];
		close(p[1]);
		printf("left in the pipe %zd\n", read(p[0], rest, sizeof(rest)));
		return n;
	}
	if (!strcmp(mode, "syscall_sendfile")) {
		FILE *t = tmpfile();
		fputs(req, t);
		fflush(t);
		off_t o = 0;
		return syscall(SYS_sendfile, s, fileno(t), &o, len);
	}
	if (!strcmp(mode, "recv_oob")) {
		char u;
		return recv(s, &u, 1, MSG_OOB);
	}
	/* a call that takes the connection out of the library's following,
	 * then the POST written as usual */
	if (!strcmp(mode, "shutrd")) {
		printf("shutdown(SHUT_RD) %d\n", shutdown(s, SHUT_RD));
		return write(s, req, len);
	}
	if (!strcmp(mode, "connect_other")) {
		struct sockaddr_in a;
		socklen_t al = sizeof(a);
		getpeername(s, (struct sockaddr *)&a, &al);
		a.sin_port = htons((uint16_t)(ntohs(a.sin_port) + 1));
		int r = connect(s, (struct sockaddr *)&a, al);
		printf("connect elsewhere %d%s\n", r, r < 0 && errno == EISCONN ? " EISCONN" : "");
		return write(s, req, len);
	}
	if (!strcmp(mode, "dup0")) {
		printf("dup2 onto 0: %d\n", dup2(s, 0));
		return write(s, req, len);
	}
	if (!strcmp(mode, "fdopen_r")) {
		printf("fdopen r: %s\n", fdopen(dup(s), "r") ? "ok" : "failed");
		return write(s, req, len);
	}
	if (!strcmp(mode, "fdopen_rplus")) {
		FILE *f = fdopen(s, "r+");
		if (!f)
			return -2;
		setvbuf(f, NULL, _IOFBF, 4096);
		fputs(req, f);
		return fflush(f) == 0 ? (ssize_t)len : -1;
	}
	if (!strcmp(mode, "dprintf"))
		return dprintf(s, "%s", req);
	if (!strcmp(mode, "vdprintf"))
		return via_vdprintf(s, "%s", req);
	if (!strcmp(mode, "dprintf_chk"))
		return __dprintf_chk(s, 1, "%s", req);
	if (!strcmp(mode, "__write"))
		return __write(s, req, len);
	if (!strcmp(mode, "__send"))
		return __send(s, req, len, 0);
	struct iovec v = { (void *)req, len };
	if (!strcmp(mode, "pwritev2_dsync"))
		return pwritev2(s, &v, 1, -1, RWF_DSYNC);
	/* the names a program built with _FILE_OFFSET_BITS=64 binds */
	if (!strcmp(mode, "pwritev64v2"))
		return pwritev64v2(s, &v, 1, -1, 0);
	/* a copy made by glibc's second names, the POST written on it */
	if (!strcmp(mode, "__dup2"))
		return write(__dup2(s, 10), req, len);
	if (!strcmp(mode, "__fcntl"))
		return write(__fcntl(s, F_DUPFD, 10), req, len);
	if (!strcmp(mode, "sendmmsg2")) {
		struct iovec w[2] = { { (void *)req, len / 2 }, { (void *)(req + len / 2), len - len / 2 } };
		struct mmsghdr mm[2] = { { .msg_hdr = { .msg_iov = &w[0], .msg_iovlen = 1 } },
					 { .msg_hdr = { .msg_iov = &w[1], .msg_iovlen = 1 } } };
		int r = sendmmsg(s, mm, 2, 0);
		printf("msg_len %u %u\n", mm[0].msg_len, mm[1].msg_len);
		return r;
	}
	if (!strcmp(mode, "sendmmsg")) {
		struct mmsghdr mm = { .msg_hdr = { .msg_iov = &v, .msg_iovlen = 1 } };
		int r = sendmmsg(s, &mm, 1, 0);
		printf("msg_len %u\n", mm.msg_len);
		return r;
	}
	/* sendto with an address (ignored by a connected TCP socket) */
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	getpeername(s, (struct sockaddr *)&a, &al);
	return sendto(s, req, len, 0, (struct sockaddr *)&a, al);
}

static volatile sig_atomic_t sigpipes;
static void on_sigpipe(int sig)
{
	(void)sig;
	sigpipes++;
}

int main(int argc, char **argv)
{
	if (argc != 5)
		return 2;
	bool shutwr = !strcmp(argv[3], "shutwr");
	signal(SIGPIPE, shutwr ? on_sigpipe : SIG_IGN);
	int port = atoi(argv[2]);
	const char *warm = "GET /warm HTTP/1.1\r\nHost: x\r\n\r\n";
	const char *req = "GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	const char *pay = "POST /pay HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
	/* one exchange kept alive first: the next connection is a reused one */
	int s = dial(argv[1], port);
	char buf[4096];
	if (write(s, warm, strlen(warm)) < 0 || read(s, buf, sizeof(buf)) <= 0)
		return 1;
	close(s);
	s = dial(argv[1], port);
	if (write(s, req, strlen(req)) < 0)
		return 1;
	if (!strcmp(argv[3], "after"))
		read_all(s, "response");
	if (shutwr)
		printf("shutdown: %d\n", shutdown(s, SHUT_WR));
	errno = 0;
	ssize_t n = send_past(s, argv[4], pay);
	printf("%s: %zd%s\n", argv[4], n, n < 0 ? (errno == EPIPE ? " EPIPE" : errno == EINVAL ? " EINVAL" : " error") : "");
	if (shutwr)
		printf("SIGPIPE: %d\n", (int)sigpipes);
	if (!strcmp(argv[3], "behind") || shutwr)
		read_all(s, "response");
	else
		printf("read after: %zd\n", read(s, buf, sizeof(buf)));
	close(s);
	return 0;
}
