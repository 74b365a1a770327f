/*
 * before_first.c - a connection used before its first request, while the
 * server closes the kept connection a library handed out for it
 * (docs/replay.md "Before the first request").  Against
 * tests/servers/idle_cue.py, whose idle close comes on our cue.
 *
 * Usage: before_first MODE METHOD PORT DIR ROUNDS
 *   MODE   read | poll | epoll: a thread reads the connection (blocking
 *          read; poll then read; epoll_wait then read) before the main
 *          thread writes the request;
 *          fork | exec | system: the process forks (the child exits),
 *          forks and execs /bin/true, or runs system("true") right after
 *          connect(), before the request;
 *          forkread: a forked child reads the answer the parent's request
 *          gets on their shared connection
 *   METHOD GET or POST (a 5-byte body)
 *   DIR    the server's directory (its fifos cue and done)
 * Each round: GET /warm on a connection of its own (read, closed: a
 * library keeps it), then connect() again; with the reader waiting (seen
 * in /proc/self/task/TID/syscall) or after the hand-off, the server is
 * cued to close every connection idle after an answer, and its "done"
 * read; where it closed one (a library kept /warm's connection and handed
 * it to our connect()), the FIN is awaited on that socket
 * (/proc/net/tcp), and a reader thread until it has either ended or
 * waits again on another socket under the fd (a library that put a fresh
 * connection there); then the request /rN and what was read of its
 * answer.  Only events are waited for.  Prints one line per request.
 */
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "common.h"
#include "tcp_state.h"

static int port, sock;
static const char *mode;
static char got[4096];
static volatile int reader_done;

static int dial(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("connect");
	return s;
}

/* An answer read until its Content-Length body is whole: "STATUS | BODY",
 * or what ended the read. */
static void read_answer(int s, bool wait_first, char *out, size_t cap)
{
	char buf[1024];
	size_t n = 0;
	for (;;) {
		if (wait_first && !strcmp(mode, "poll")) {
			struct pollfd p = { .fd = s, .events = POLLIN };
			poll(&p, 1, -1);
		} else if (wait_first && !strcmp(mode, "epoll")) {
			int ep = epoll_create1(0);
			struct epoll_event e = { .events = EPOLLIN, .data.fd = s };
			epoll_ctl(ep, EPOLL_CTL_ADD, s, &e);
			epoll_wait(ep, &e, 1, -1);
			close(ep);
		}
		ssize_t k = read(s, buf + n, sizeof(buf) - 1 - n);
		if (k <= 0) {
			snprintf(out, cap, "read %zd (%s) after %zu bytes", k, k ? strerror(errno) : "EOF", n);
			return;
		}
		n += (size_t)k;
		buf[n] = 0;
		char *end = strstr(buf, "\r\n\r\n"), *cl = strcasestr(buf, "Content-Length: ");
		if (end && cl && n >= (size_t)(end + 4 - buf) + strtoul(cl + 16, NULL, 10)) {
			*strstr(buf, "\r\n") = 0;
			snprintf(out, cap, "%s | %s", buf, end + 4);
			return;
		}
	}
}

static void *reader(void *arg)
{
	(void)arg;
	read_answer(sock, true, got, sizeof(got));
	reader_done = 1;
	return NULL;
}

/* The syscall thread tid sleeps in now, -1 while it runs. */
static long sleeping_in(pid_t tid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	char *ok = fgets(line, sizeof(line), f);
	fclose(f);
	return ok && line[0] >= '0' && line[0] <= '9' ? strtol(line, NULL, 10) : -1;
}

static bool waiting(pid_t tid)
{
	long nr = sleeping_in(tid);
	return nr == SYS_read || nr == SYS_poll || nr == SYS_ppoll || nr == SYS_epoll_wait ||
	       nr == SYS_epoll_pwait || nr == SYS_recvfrom;
}

static pid_t reader_tid;
static void *reader_start(void *arg)
{
	reader_tid = (pid_t)syscall(SYS_gettid);
	return reader(arg);
}

static void until(bool (*cond)(void), const char *what)
{
	for (int i = 0; i < 100000; i++) {
		if (cond())
			return;
		usleep(200);
	}
	fprintf(stderr, "before_first: never %s\n", what);
	exit(1);
}

static ino_t first_inode;
/* the server's FIN is in on the socket connect() gave us (alone it never
 * comes: the server closes only the connections a library kept) */
static bool fin_in(void)
{
	return tcp_state(first_inode) != 1;
}
static bool reader_waits(void)
{
	return reader_tid && waiting(reader_tid);
}
static bool reader_settled(void)
{
	return reader_done || (inode(sock) != first_inode && waiting(reader_tid));
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: before_first MODE METHOD PORT DIR ROUNDS\n");
		return 2;
	}
	mode = argv[1];
	const char *method = argv[2], *dir = argv[4];
	port = atoi(argv[3]);
	bool thread = !strcmp(mode, "read") || !strcmp(mode, "poll") || !strcmp(mode, "epoll");
	signal(SIGPIPE, SIG_IGN);
	for (int r = 1; r <= atoi(argv[5]); r++) {
		char req[256], ans[4096];
		int s = dial();
		const char *warm = "GET /warm HTTP/1.1\r\nHost: x\r\n\r\n";
		if (write(s, warm, strlen(warm)) < 0)
			die("write");
		read_answer(s, false, ans, sizeof(ans));
		printf("%d warm: %s\n", r, ans);
		close(s);

		sock = dial();
		first_inode = inode(sock);
		pthread_t t;
		reader_done = 0;
		reader_tid = 0;
		fflush(stdout);
		if (thread) {
			pthread_create(&t, NULL, reader_start, NULL);
			until(reader_waits, "saw the reader wait");
		} else if (!strcmp(mode, "forkread")) {
			pid_t p = fork();
			if (p == 0) {
				read_answer(sock, false, ans, sizeof(ans));
				printf("%d child read: %s\n", r, ans);
				fflush(stdout);
				_exit(0);
			}
			if (p < 0)
				die("fork");
		} else if (!strcmp(mode, "fork") || !strcmp(mode, "exec")) {
			pid_t p = fork();
			if (p == 0) {
				if (!strcmp(mode, "exec"))
					execl("/bin/true", "true", (char *)NULL);
				_exit(0);
			}
			if (p < 0 || waitpid(p, NULL, 0) < 0)
				die("fork");
		} else if (!strcmp(mode, "system")) {
			if (system("true") != 0)
				die("system");
		}
		if (cue_close_count(dir) > 0) {
			until(fin_in, "saw the server's FIN");
			if (thread)
				until(reader_settled, "saw the reader end or wait again");
		}
		int n = !strcmp(method, "POST")
				? snprintf(req, sizeof(req),
					   "POST /r%d HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", r)
				: snprintf(req, sizeof(req), "GET /r%d HTTP/1.1\r\nHost: x\r\n\r\n", r);
		ssize_t w = write(sock, req, (size_t)n);
		if (w < 0)
			printf("%d write: %s\n", r, strerror(errno));
		if (thread) {
			pthread_join(t, NULL);
			printf("%d reader: %s\n", r, got);
		} else if (!strcmp(mode, "forkread")) {
			int st;
			wait(&st);
		} else if (w >= 0) {
			read_answer(sock, false, ans, sizeof(ans));
			printf("%d read: %s\n", r, ans);
		}
		fflush(stdout);
		close(sock);
	}
	return 0;
}
