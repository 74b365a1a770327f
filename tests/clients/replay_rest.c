/*
 * replay_rest.c - a large first request on a kept connection its server
 * closed, then more of the program's bytes in a second write, while the
 * server is slow to read a new connection (docs/replay.md "The copy's
 * rest").  Against tests/servers/hold_cue.py: its idle close and its
 * reading of new connections come on our cue.
 *
 * Usage: replay_rest MODE KIND PORT DIR [VIA]
 *   MODE  alarm: a blocking socket, and a SIGALRM (no SA_RESTART) sent to
 *         the main thread once it waits in a write or a poll; nonblock:
 *         O_NONBLOCK, EAGAIN answered by poll()
 *   KIND  get: GET /1 with a 60000-byte Cookie header in one write, GET /2
 *         in a second; post: POST /1 with that header and a 5-byte body,
 *         the body in the second write
 *   DIR   the server's directory (its fifos cue and done)
 *   VIA   how the second write goes: write (the default), sendfile (from
 *         a file of its bytes), splice (from a pipe holding them) or
 *         sendmmsg (one message)
 * GET /warm on a connection of its own (read, closed: a library keeps
 * it), then connect() again; the server is cued to close every connection
 * idle after an answer; where it closed one (a library handed it to our
 * connect()), its FIN is awaited, the first write made, and the server's
 * reset awaited.  A helper thread waits (/proc/self/task/TID/syscall)
 * until the main thread sleeps in a write or a poll: in alarm mode it
 * signals it then; in nonblock mode a sleep inside a write() is printed
 * ("a non-blocking write waited"), a sleep in the program's own poll is
 * not; then it cues the server to read its held connections.  The writes
 * go on after EINTR, a partial count and EAGAIN (not printed: where the
 * signal lands differs with a library, which kept the connection); the
 * answers, and a read's EINTR, are printed.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include "common.h"
#include "tcp_state.h"

static const char *dir;
static bool nonblock;
static pid_t main_tid;
static volatile int in_write, in_poll;

/* "word" into DIR/cue, and DIR/done's answer awaited */
static void cue(const char *word)
{
	char path[4096], line[64];
	snprintf(path, sizeof(path), "%s/cue", dir);
	FILE *f = fopen(path, "w");
	if (!f || fprintf(f, "%s\n", word) < 0 || fclose(f))
		die("%s", path);
	snprintf(path, sizeof(path), "%s/done", dir);
	f = fopen(path, "r");
	if (!f || !fgets(line, sizeof(line), f))
		die("%s", path);
	fclose(f);
}

/* Does the main thread sleep in a write or a wait (any of the calls a
 * send or a poll makes)? */
static bool main_sleeps(void)
{
	static const long calls[] = { SYS_write,  SYS_sendto,	SYS_sendmsg,	 SYS_sendfile,	 SYS_splice,
				      SYS_sendmmsg, SYS_poll, SYS_ppoll, SYS_select, SYS_pselect6,
				      SYS_epoll_wait, SYS_epoll_pwait };
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)main_tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	char *ok = fgets(line, sizeof(line), f);
	fclose(f);
	if (!ok || line[0] < '0' || line[0] > '9')
		return false; /* "running" */
	long nr = strtol(line, NULL, 10);
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		if (nr == calls[i])
			return true;
	return false;
}

static void *helper(void *arg)
{
	(void)arg;
	for (long tries = 0;; tries++) {
		if (tries > 300000)
			die("the main thread never waited");
		if (main_sleeps() && (!nonblock || in_write || in_poll))
			break;
		usleep(100);
	}
	if (!nonblock)
		syscall(SYS_tgkill, getpid(), main_tid, SIGALRM);
	else if (in_write)
		printf("a non-blocking write waited\n");
	cue("release");
	return NULL;
}

static void on_alarm(int sig) { (void)sig; }

static void wait_for(int s, short ev)
{
	struct pollfd p = { .fd = s, .events = ev };
	in_poll = 1;
	poll(&p, 1, -1);
	in_poll = 0;
}

/* One call of via's sending what is left of buf from *off: the count
 * (*off moved by it), or -1 */
static ssize_t send_once(int s, const char *via, const char *buf, size_t n, off_t *off, int src, int pipe_in)
{
	ssize_t w;
	if (!strcmp(via, "sendfile"))
		return sendfile(s, src, off, n - (size_t)*off);
	if (!strcmp(via, "splice")) {
		w = splice(pipe_in, NULL, s, NULL, n - (size_t)*off, 0);
	} else if (!strcmp(via, "sendmmsg")) {
		struct iovec v = { (char *)buf + *off, n - (size_t)*off };
		struct mmsghdr m = { .msg_hdr = { .msg_iov = &v, .msg_iovlen = 1 } };
		w = sendmmsg(s, &m, 1, 0) == 1 ? (ssize_t)m.msg_len : -1;
	} else {
		w = write(s, buf + *off, n - (size_t)*off);
	}
	*off += w > 0 ? w : 0;
	return w;
}

/* All of buf sent by via (write, sendfile from a file of its bytes,
 * splice from a pipe holding them, sendmmsg): a partial count, EINTR and
 * EAGAIN go on */
static void send_all_via(int s, const char *via, const char *buf, size_t n)
{
	int src = -1, pfd[2] = { -1, -1 };
	if (!strcmp(via, "sendfile")) {
		char path[] = "/tmp/replay_rest.XXXXXX";
		src = mkstemp(path);
		if (src < 0 || write(src, buf, n) != (ssize_t)n)
			die("mkstemp");
		unlink(path);
	} else if (!strcmp(via, "splice")) {
		if (pipe(pfd) || write(pfd[1], buf, n) != (ssize_t)n)
			die("pipe");
	} else if (strcmp(via, "sendmmsg") && strcmp(via, "write")) {
		die("VIA: write, sendfile, splice or sendmmsg");
	}
	off_t off = 0;
	while ((size_t)off < n) {
		in_write = 1;
		ssize_t w = send_once(s, via, buf, n, &off, src, pfd[0]);
		in_write = 0;
		if (w < 0 && errno == EAGAIN) {
			wait_for(s, POLLOUT);
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			printf("%s: %s\n", via, strerror(errno));
			exit(0);
		}
	}
	if (src >= 0)
		close(src);
	if (pfd[0] >= 0) {
		close(pfd[0]);
		close(pfd[1]);
	}
}

static void write_all(int s, const char *buf, size_t n) { send_all_via(s, "write", buf, n); }

/* One answer read until its Content-Length body is whole: "STATUS |
 * BODY", or what ended the read; a read's EINTR printed */
static void read_answer(int s, const char *what)
{
	static char buf[4096];
	static size_t n;
	for (;;) {
		char *end = strstr(buf, "\r\n\r\n"), *cl = strcasestr(buf, "Content-Length: ");
		if (end && cl) {
			size_t whole = (size_t)(end + 4 - buf) + strtoul(cl + 16, NULL, 10);
			if (n >= whole) {
				printf("%s: %.*s | %.*s\n", what, (int)strcspn(buf, "\r"), buf,
				       (int)strcspn(end + 4, "\n"), end + 4);
				memmove(buf, buf + whole, n - whole);
				n -= whole;
				buf[n] = 0;
				return;
			}
		}
		ssize_t k = read(s, buf + n, sizeof(buf) - 1 - n);
		if (k < 0 && errno == EAGAIN) {
			wait_for(s, POLLIN);
			continue;
		}
		if (k < 0 && errno == EINTR) {
			printf("%s: read EINTR\n", what);
			continue;
		}
		if (k <= 0) {
			printf("%s: read %zd (%s) after %zu bytes\n", what, k, k ? strerror(errno) : "EOF",
			       n);
			return;
		}
		n += (size_t)k;
		buf[n] = 0;
	}
}

/* Wait (events: the socket's state in /proc) while fd's TCP state is st. */
static void while_state(int fd, int st, const char *what)
{
	for (int i = 0; i < 100000; i++) {
		if (tcp_state(inode(fd)) != st)
			return;
		usleep(200);
	}
	die("timed out waiting for %s", what);
}

int main(int argc, char **argv)
{
	if (argc != 5 && argc != 6)
		die("usage: replay_rest MODE KIND PORT DIR [VIA]");
	const char *via = argc == 6 ? argv[5] : "write";
	nonblock = !strcmp(argv[1], "nonblock");
	bool post = !strcmp(argv[2], "post");
	int port = atoi(argv[3]);
	dir = argv[4];
	setvbuf(stdout, NULL, _IOLBF, 0);
	main_tid = (pid_t)syscall(SYS_gettid);
	struct sigaction sa = { .sa_handler = on_alarm }; /* no SA_RESTART */
	sigaction(SIGALRM, &sa, NULL);
	int s = dial_loopback(port);
	write_all(s, "GET /warm HTTP/1.1\r\nHost: x\r\n\r\n", 31);
	read_answer(s, "/warm");
	close(s);
	s = dial_loopback(port);
	if (nonblock)
		fcntl(s, F_SETFL, O_NONBLOCK);
	char line[16];
	cue_close_line(dir, line, sizeof(line));
	int closed = atoi(line);
	if (closed)
		while_state(s, 1, "the server's FIN");
	size_t hb = 60000;
	char *r1 = malloc(hb + 200);
	int n = sprintf(r1, "%s /1 HTTP/1.1\r\nHost: x\r\nCookie: ", post ? "POST" : "GET");
	memset(r1 + n, 'c', hb);
	n += (int)hb;
	n += sprintf(r1 + n, post ? "\r\nContent-Length: 5\r\n\r\n" : "\r\n\r\n");
	pthread_t t;
	if (pthread_create(&t, NULL, helper, NULL))
		die("pthread_create");
	write_all(s, r1, (size_t)n);
	if (closed)
		while_state(s, 8, "the server's reset");
	const char *second = post ? "bbbbb" : "GET /2 HTTP/1.1\r\nHost: x\r\n\r\n";
	send_all_via(s, via, second, strlen(second));
	read_answer(s, "/1");
	if (!post)
		read_answer(s, "/2");
	pthread_join(t, NULL);
	close(s);
	return 0;
}
