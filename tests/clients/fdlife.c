/*
 * fdlife - odd but legal things programs do with their HTTP sockets and fd
 * numbers.  Each scenario prints what it saw; the output must be the same
 * with and without the shim (the Date/Connection headers aside).
 *
 * Usage: fdlife SCENARIO PORT [FILE]     (server on 127.0.0.1:PORT)
 *   pipeline-split  two pipelined GETs, the second head split across writes
 *   sendto-split    a head begun with sendto(..., address) and ended by write()
 *   dup2-fails      dup2()/dup3() onto our socket that fail: the socket lives on
 *   fclose          a socket closed by fclose(fdopen()), then socket() and
 *                   open(FILE) on the same number must work as themselves
 *   select-eof      non-blocking, select() then read() until EOF
 *   closefrom       closefrom(3) after a response, files on the freed numbers,
 *                   more requests: the files must stay the files
 *   trickle         3 requests, each head written one byte per write()
 *   sendfile        3 POSTs of FILE: head by write(), body by sendfile(),
 *                   keep-alive, each answer read by its length
 *   sendmmsg-split  a head begun with write() and ended with sendmmsg()
 *   stdio           the response read with fdopen(s, "r") and fgets()
 *   splice-read     the response read with splice() into a pipe
 *   dup2-over       after a response, /dev/null is dup2()ed over the socket
 *                   (the kernel closes it: the shim parks it first); then
 *                   a dup()ed socket closed in two steps; 3 requests in all
 *   sockopts        3 requests: options set before connect, none at all, one
 *                   set after connect; each prints what getsockopt() says
 *                   (a pooled socket must carry this owner's, not the last's)
 *   epoll-eof       non-blocking, waits with epoll (as ApacheBench does) and
 *                   reads until EOF, 3 requests; then one registered with
 *                   epoll only after the request went out
 *   dup2-stdout     inetd style, 3 times: the socket dup2()ed onto stdout, the
 *                   request written to fd 1 and the response read from it,
 *                   then the real stdout (kept aside) dup2()ed back over it
 *   close-range     close_range(3, ~0U, 0) with a finished connection open and
 *                   one pooled, files on the freed numbers, more requests
 *   epoll-first     one epoll set for the whole run; 3 times: a socket
 *                   registered (data = the request number) before connect(),
 *                   request, epoll_wait + read until EOF, close; then 600 ms
 *                   more of epoll_wait, which must stay silent (a server
 *                   closing the idle connections must not reach the program
 *                   through the sockets it closed)
 *   dup-post        a GET; then a socket (a pooled one under the shim) dup()ed
 *                   before its first write, a POST on it, read to EOF
 *   zero-read       3 requests, each followed by a read() of 0 bytes (returns
 *                   0 and is no EOF), then read until EOF
 *   stale-flags     a blocking socket dup2()ed onto the number of a closed
 *                   non-blocking one, then connected (from the pool): it
 *                   must stay blocking
 *   fork-held       a socket (a pooled one under the shim) used, then held
 *                   open across fork(): the child lists the sockets it
 *                   holds (its copy of that one only), the parent closes
 *                   it after the child exits; one more request
 *   done-ops        a GET asking to close, read to EOF, then what a socket
 *                   the server has closed answers: write() and send() of 0
 *                   bytes, shutdown(SHUT_RDWR), read(); the same after a
 *                   fork whose child exits at once; then after a fork a
 *                   send() of 1 byte; one more request
 *   close-range-above  a socket (a pooled one under the shim) in use while
 *                   close_range(s + 1, ~0U, 0) closes everything above it;
 *                   then its request, its close, two more requests
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>

#include "common.h"

static int port;
static const char get_f[] = "GET /f HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
static const char get_big[] = "GET /big HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
static const char *get_close = get_f;

static struct sockaddr_in addr(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	return a;
}

static int dial(void)
{
	struct sockaddr_in a = addr();
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("connect");
	return s;
}

static void put(int s, const char *text)
{
	size_t len = strlen(text);
	if (write(s, text, len) != (ssize_t)len)
		die("write");
}

/* read to EOF; print it all (print=1) or only its first line (the
 * status line: the headers may legitimately differ in Connection) */
static void drain(int s, int print)
{
	char buf[16384];
	ssize_t n, total = 0;
	int first_line = 1;
	while ((n = read(s, buf, sizeof(buf))) > 0) {
		if (print) {
			write_stdout(buf, (size_t)n);
		} else if (first_line) {
			char *nl = memchr(buf, '\n', (size_t)n);
			write_stdout(buf, nl ? (size_t)(nl - buf + 1) : (size_t)n);
			first_line = !nl;
		}
		total += n;
	}
	if (n < 0)
		die("read");
	if (!print)
		printf("%s, then EOF\n", total ? "read a response" : "read nothing");
}

/* read one keep-alive answer by its Content-Length; print its status
 * line */
static void read_by_length(int s)
{
	char buf[65536], *end = NULL;
	size_t got = 0;
	ssize_t n;
	while (!end) {
		if (got + 1 >= sizeof(buf) || (n = read(s, buf + got, sizeof(buf) - 1 - got)) <= 0)
			die("read");
		got += (size_t)n;
		buf[got] = 0;
		end = strstr(buf, "\r\n\r\n");
	}
	const char *cl = strcasestr(buf, "content-length:");
	size_t want = (size_t)(end + 4 - buf) + (cl ? strtoul(cl + 15, NULL, 10) : 0);
	char *nl = strchr(buf, '\n');
	write_stdout(buf, (size_t)(nl - buf + 1));
	char rest[16384];
	while (got < want) {
		if ((n = read(s, rest, want - got < sizeof(rest) ? want - got : sizeof(rest))) <= 0)
			die("read");
		got += (size_t)n;
	}
	printf("read a response by its length\n");
}

static void one_request(void)
{
	int s = dial();
	put(s, get_close);
	drain(s, 0);
	close(s);
}

static int is_devnull(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode);
}

/* After a mass close: files on the freed numbers, two more requests; the
 * files must still be the files. */
static void files_then_requests(void)
{
	int files[64], n = 0, f;
	while (n < 64 && (f = open("/dev/null", O_RDONLY)) >= 0 && f < 40)
		files[n++] = f;
	one_request();
	one_request();
	int bad = 0;
	for (int i = 0; i < n; i++)
		bad += !is_devnull(files[i]);
	/* not how many files: the pool's hidden fd may take one number */
	printf("%d of the files no longer /dev/null\n", bad);
}

/* the fd numbers of this process that are sockets, in one line */
static void list_sockets(const char *who)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		die("opendir");
	int fds[64], n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < 64) {
		char path[300], link[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t l = readlink(path, link, sizeof(link) - 1);
		if (l > 0 && (link[l] = 0, !strncmp(link, "socket:", 7)))
			fds[n++] = atoi(e->d_name);
	}
	closedir(d);
	for (int i = 1; i < n; i++) /* insertion sort */
		for (int j = i; j > 0 && fds[j - 1] > fds[j]; j--) {
			int t = fds[j];
			fds[j] = fds[j - 1];
			fds[j - 1] = t;
		}
	printf("%s holds sockets:", who);
	for (int i = 0; i < n; i++)
		printf(" %d", fds[i]);
	printf("\n");
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s SCENARIO PORT [FILE]\n", argv[0]);
		return 2;
	}
	const char *what = argv[1];
	port = atoi(argv[2]);
	setvbuf(stdout, NULL, _IONBF, 0);

	/* scenarios that read a big response ask for /big instead of /f */
	if (argc > 3 && !strcmp(argv[3], "big"))
		get_close = get_big;
	if (!strcmp(what, "pipeline-split")) {
		int s = dial();
		put(s, "GET /f HTTP/1.1\r\nHost: t\r\n\r\nGET /f HTTP/1.1\r\nHo");
		put(s, "st: t\r\nConnection: close\r\n\r\n");
		drain(s, 1);
		close(s);
	} else if (!strcmp(what, "sendto-split")) {
		int s = dial();
		struct sockaddr_in a = addr();
		const char *head = "GET /f HTTP/1.1\r\nHo";
		if (sendto(s, head, strlen(head), 0, (struct sockaddr *)&a, sizeof(a)) < 0)
			printf("sendto: %s\n", strerror(errno)); /* EISCONN is fine too */
		else
			put(s, "st: t\r\nConnection: close\r\n\r\n");
		drain(s, 1);
		close(s);
	} else if (!strcmp(what, "dup2-fails")) {
		one_request(); /* so that the next socket comes from the pool */
		int s = dial();
		printf("dup2(999, s) = %d (%s)\n", dup2(999, s), strerror(errno));
		printf("dup3(0, s, bad flags) = %d (%s)\n", dup3(0, s, 12345), strerror(errno));
		printf("fcntl(s, F_GETFD) >= 0: %d\n", fcntl(s, F_GETFD) >= 0);
		put(s, get_close);
		drain(s, 0);
		printf("close(s) = %d\n", close(s));
	} else if (!strcmp(what, "fclose")) {
		int s = dial();
		put(s, get_close);
		drain(s, 0);
		fclose(fdopen(s, "r")); /* closes s inside libc */
		int t = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = addr();
		printf("socket() on the same number: %d\n", t == s);
		printf("connect = %d\n", connect(t, (struct sockaddr *)&a, sizeof(a)));
		put(t, get_close);
		drain(t, 0);
		fclose(fdopen(t, "r"));
		int f = open(argc > 3 ? argv[3] : "/dev/null", O_RDONLY);
		printf("open() on the same number: %d\n", f == s);
		drain(f, 1);
		close(f);
	} else if (!strcmp(what, "select-eof")) {
		int s = dial();
		put(s, get_close);
		fcntl(s, F_SETFL, O_NONBLOCK);
		char buf[4096];
		ssize_t n, total = 0;
		for (;;) {
			fd_set rd;
			FD_ZERO(&rd);
			FD_SET(s, &rd);
			if (select(s + 1, &rd, NULL, NULL, NULL) < 0)
				die("select");
			n = read(s, buf, sizeof(buf));
			if (n == 0)
				break;
			if (n > 0)
				write_stdout(buf, (size_t)n), total += n;
			else if (errno != EAGAIN)
				die("read");
		}
		printf("%s, then EOF\n", total ? "read a response" : "read nothing");
		close(s);
	} else if (!strcmp(what, "closefrom")) {
		one_request();
		int s = dial();
		put(s, get_close);
		drain(s, 0);
		closefrom(3);
		files_then_requests();
	} else if (!strcmp(what, "trickle")) {
		for (int i = 0; i < 3; i++) {
			int s = dial();
			for (const char *p = get_close; *p; p++)
				if (write(s, p, 1) != 1)
					die("write");
			drain(s, 0);
			close(s);
		}
	} else if (!strcmp(what, "sendfile")) {
		for (int i = 0; i < 3; i++) {
			int f = open(argv[3], O_RDONLY);
			struct stat st;
			if (f < 0 || fstat(f, &st) < 0)
				die("open %s", argv[3]);
			char head[256];
			/* keep-alive, read by its length: a POST with a body
			 * that asks to close is never rewritten (docs/replay.md
			 * "A close request with a body"), never parked */
			snprintf(head, sizeof(head),
				 "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: %lld\r\n\r\n",
				 (long long)st.st_size);
			int s = dial();
			put(s, head);
			off_t off = 0;
			while (off < st.st_size)
				if (sendfile(s, f, &off, (size_t)(st.st_size - off)) <= 0)
					die("sendfile");
			read_by_length(s);
			close(s);
			close(f);
		}
	} else if (!strcmp(what, "sendmmsg-split")) {
		one_request();
		int s = dial();
		put(s, "GET /f HTTP/1.1\r\n");
		char rest[] = "Host: t\r\nConnection: close\r\n\r\n";
		struct iovec iov = { rest, strlen(rest) };
		struct mmsghdr m = { .msg_hdr = { .msg_iov = &iov, .msg_iovlen = 1 } };
		if (sendmmsg(s, &m, 1, 0) != 1)
			die("sendmmsg");
		drain(s, 0);
		close(s);
	} else if (!strcmp(what, "stdio")) {
		for (int i = 0; i < 2; i++) {
			int s = dial();
			put(s, get_close);
			FILE *f = fdopen(s, "r");
			char line[4096];
			while (fgets(line, sizeof(line), f))
				if (strncmp(line, "Date:", 5) && strncmp(line, "Connection:", 11))
					fputs(line, stdout);
			fclose(f);
		}
	} else if (!strcmp(what, "splice-read")) {
		one_request();
		int s = dial(), p[2];
		put(s, get_close);
		if (pipe(p) < 0)
			die("pipe");
		char buf[65536];
		ssize_t n;
		size_t total = 0;
		while ((n = splice(s, NULL, p[1], NULL, sizeof(buf), 0)) > 0) {
			ssize_t m = read(p[0], buf, (size_t)n);
			if (m != n)
				die("pipe read");
			total += (size_t)n;
		}
		if (n < 0)
			die("splice");
		printf("spliced a response of more than 100000 bytes: %d, then EOF\n", total > 100000);
		close(s);
	} else if (!strcmp(what, "dup2-over")) {
		int s = dial();
		put(s, get_close);
		drain(s, 0);
		int null = open("/dev/null", O_RDONLY);
		if (dup2(null, s) != s)
			die("dup2");
		close(null);
		printf("after dup2 the number is /dev/null: %d\n", is_devnull(s));
		close(s);
		s = dial();
		int d = dup(s);
		put(d, get_close);
		close(d); /* the connection lives on in s */
		drain(s, 0);
		close(s);
		one_request();
	} else if (!strcmp(what, "dup2-stdout")) {
		int out = dup(1);
		if (out < 0)
			die("dup");
		for (int i = 0; i < 3; i++) {
			int s = dial();
			if (dup2(s, 1) != 1)
				die("dup2 onto stdout");
			close(s);
			size_t len = strlen(get_close);
			if (write(1, get_close, len) != (ssize_t)len)
				die("write to stdout");
			char buf[16384];
			ssize_t n, total = 0;
			size_t first = 0;
			while ((n = read(1, buf, sizeof(buf))) > 0) {
				if (!total) {
					char *nl = memchr(buf, '\n', (size_t)n);
					first = nl ? (size_t)(nl - buf) : (size_t)n;
					dprintf(out, "response %d via stdout: %.*s\n", i + 1, (int)first, buf);
				}
				total += n;
			}
			if (n < 0)
				die("read from stdout");
			dprintf(out, "then EOF after %s bytes\n", total > 100 ? "more than 100" : "few");
			if (dup2(out, 1) != 1) /* the socket's last fd goes away here */
				die("dup2 back");
		}
		close(out);
	} else if (!strcmp(what, "close-range")) {
		one_request();
		int s = dial();
		put(s, get_close);
		drain(s, 0);
		int f = open("/dev/null", O_RDONLY);
		if (close_range(3, ~0U, 0) < 0)
			die("close_range");
		printf("after close_range: socket %s, file %s\n", fcntl(s, F_GETFD) < 0 ? "closed" : "open",
		       fcntl(f, F_GETFD) < 0 ? "closed" : "open");
		files_then_requests();
	} else if (!strcmp(what, "fork-held")) {
		one_request(); /* so that the next socket comes from the pool */
		int s = dial();
		put(s, get_close);
		drain(s, 0);
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			list_sockets("the child");
			_exit(0);
		}
		int status;
		if (waitpid(pid, &status, 0) != pid)
			die("waitpid");
		printf("close(s) = %d\n", close(s));
		one_request();
	} else if (!strcmp(what, "done-ops")) {
		one_request(); /* so that the next socket comes from the pool */
		for (int forked = 0; forked < 3; forked++) {
			int s = dial();
			put(s, get_close);
			drain(s, 0);
			if (forked) {
				fflush(stdout);
				pid_t pid = fork();
				if (pid < 0)
					die("fork");
				if (pid == 0)
					_exit(0);
				int status;
				if (waitpid(pid, &status, 0) != pid)
					die("waitpid");
			}
			char b[1];
			ssize_t r;
			if (forked == 2) {
				/* accepted, as by any socket whose server closed
				 * (its reset fails only the next write) */
				errno = 0;
				r = send(s, "x", 1, MSG_NOSIGNAL);
				printf("forked %d: send 1 byte = %zd (%s)\n", forked, r, strerror(errno));
				printf("forked %d: close = %d\n", forked, close(s));
				continue;
			}
			errno = 0;
			r = write(s, "", 0);
			printf("forked %d: write 0 bytes = %zd (%s)\n", forked, r, strerror(errno));
			errno = 0;
			r = send(s, "", 0, MSG_NOSIGNAL);
			printf("forked %d: send 0 bytes = %zd (%s)\n", forked, r, strerror(errno));
			errno = 0;
			r = shutdown(s, SHUT_RDWR);
			printf("forked %d: shutdown = %zd (%s)\n", forked, r, strerror(errno));
			errno = 0;
			r = read(s, b, 1);
			printf("forked %d: read = %zd (%s)\n", forked, r, strerror(errno));
			printf("forked %d: close = %d\n", forked, close(s));
		}
		one_request();
	} else if (!strcmp(what, "close-range-above")) {
		one_request(); /* so that the next socket comes from the pool */
		int s = dial();
		if (close_range((unsigned)s + 1, ~0U, 0) < 0)
			die("close_range");
		put(s, get_close);
		drain(s, 0);
		printf("close(s) = %d\n", close(s));
		one_request();
		one_request();
	} else if (!strcmp(what, "sockopts")) {
		for (int i = 0; i < 3; i++) {
			int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
			struct timeval tv = { 5, 0 };
			if (i == 0) {
				setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				setsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
				setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
			}
			struct sockaddr_in a = addr();
			if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
				die("connect");
			if (i == 2)
				setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			int nodelay = -1, keepalive = -1;
			struct timeval rcv = { -1, -1 };
			socklen_t l1 = sizeof(nodelay), l2 = sizeof(keepalive), l3 = sizeof(rcv);
			getsockopt(s, IPPROTO_TCP, TCP_NODELAY, &nodelay, &l1);
			getsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &keepalive, &l2);
			getsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &rcv, &l3);
			printf("socket %d: TCP_NODELAY=%d SO_KEEPALIVE=%d SO_RCVTIMEO=%lds\n", i, nodelay,
			       keepalive, (long)rcv.tv_sec);
			put(s, get_close);
			drain(s, 0);
			close(s);
		}
	} else if (!strcmp(what, "epoll-eof")) {
		for (int i = 0; i < 4; i++) {
			int s = dial(), ep = epoll_create1(0);
			struct epoll_event ev = { .events = EPOLLIN };
			if (i < 3 && epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) < 0)
				die("epoll_ctl");
			put(s, get_close);
			if (i == 3 && epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) < 0)
				die("epoll_ctl");
			fcntl(s, F_SETFL, O_NONBLOCK);
			char buf[4096];
			ssize_t n;
			int got = 0;
			for (;;) {
				struct epoll_event out;
				if (epoll_wait(ep, &out, 1, -1) < 0)
					die("epoll_wait");
				n = read(s, buf, sizeof(buf));
				if (n == 0)
					break;
				if (n < 0 && errno != EAGAIN)
					die("read");
				got |= n > 0;
			}
			printf("request %d: %s, then EOF\n", i, got ? "read a response" : "read nothing");
			close(ep);
			close(s);
		}
	} else if (!strcmp(what, "epoll-first")) {
		int ep = epoll_create1(0);
		for (int i = 0; i < 3; i++) {
			int s = socket(AF_INET, SOCK_STREAM, 0);
			struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 100 + (uint64_t)i };
			if (s < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) < 0)
				die("epoll_ctl");
			struct sockaddr_in a = addr();
			if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
				die("connect");
			put(s, get_close);
			fcntl(s, F_SETFL, O_NONBLOCK);
			char buf[4096];
			ssize_t n;
			int got = 0, woke = 0;
			for (;;) {
				struct epoll_event out;
				int k = epoll_wait(ep, &out, 1, 5000);
				if (k < 0)
					die("epoll_wait");
				if (k == 0) {
					printf("request %d: epoll_wait timed out\n", i);
					break;
				}
				woke += out.data.u64 == 100 + (uint64_t)i;
				n = read(s, buf, sizeof(buf));
				if (n == 0)
					break;
				if (n < 0 && errno != EAGAIN)
					die("read");
				got |= n > 0;
			}
			printf("request %d: %s, woken with its own data: %d, then EOF\n", i,
			       got ? "read a response" : "read nothing", woke > 0);
			close(s);
		}
		struct epoll_event out;
		int k = epoll_wait(ep, &out, 1, 600);
		printf("after the closes: %d events\n", k);
		close(ep);
	} else if (!strcmp(what, "dup-post")) {
		one_request();
		int s = dial(), d = dup(s);
		put(s, "POST /f HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
		drain(d, 0);
		close(d);
		close(s);
	} else if (!strcmp(what, "zero-read")) {
		for (int i = 0; i < 3; i++) {
			int s = dial();
			char b[1];
			put(s, get_close);
			printf("read(s, b, 0) = %zd\n", read(s, b, 0));
			drain(s, 0);
			close(s);
		}
	} else if (!strcmp(what, "stale-flags")) {
		one_request();
		int nb = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		int b = socket(AF_INET, SOCK_STREAM, 0);
		close(nb);
		if (dup2(b, nb) != nb)
			die("dup2");
		close(b);
		struct sockaddr_in a = addr();
		if (connect(nb, (struct sockaddr *)&a, sizeof(a)) < 0)
			die("connect");
		printf("O_NONBLOCK after connect: %d\n", !!(fcntl(nb, F_GETFL) & O_NONBLOCK));
		put(nb, get_close);
		drain(nb, 0);
		close(nb);
	} else {
		fprintf(stderr, "unknown scenario %s\n", what);
		return 2;
	}
	return 0;
}
