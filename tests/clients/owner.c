/*
 * owner.c - programs that share, move or re-aim a socket, for
 * tests/owner.bats (docs/owner.md).  Every request is "GET /<tag>" with
 * Connection: close; tests/servers/echo_server.py answers with the tag.
 * Each step prints one line: the response body it read, or the errno
 * name of the call that failed.
 *
 *   owner scm-rights PORT       a request; the socket passed to a child
 *                               process over a Unix socket (SCM_RIGHTS),
 *                               the sender closes its copy and makes
 *                               requests of its own while the child makes
 *                               its requests on the passed socket
 *   owner af-unspec PORT_A PORT_B   a request to A; connect(AF_UNSPEC) on
 *                               the same socket, connect it to B, a
 *                               request there, close; then a request to A
 *   owner family PORT           connect() with the other family's address
 *                               (AF_INET6 socket, sockaddr_in; AF_INET
 *                               socket, sockaddr_in6): its errno, and the
 *                               socket's SO_DOMAIN after, then a request
 *   owner hidden PORT           a request, close (the socket is pooled),
 *                               then calls on every fd number the program
 *                               never opened (3..4095): how many answer
 *                               as open, how many writes succeed; then a
 *                               request
 *   owner closefrom-log PORT FILE   closefrom(3), open FILE (the program's
 *                               own), two requests, close FILE
 *   owner raw-fork PORT 1|2     a request; a child made by _Fork() (1) or
 *                               syscall(SYS_clone) (2), no atfork handlers:
 *                               child and parent each connect and request
 *                               at the same time
 *   owner raw-dup PORT 1|2|3    a copy of the socket made past libc's dup:
 *                               syscall(SYS_dup) (1), syscall(SYS_fcntl,
 *                               F_DUPFD) (2), pidfd_getfd() of ourselves
 *                               (3); a request, close, a new connection's
 *                               request: what does the copy read?
 *   owner raw-mmsg PORT         the socket passed with syscall(SYS_sendmmsg)
 *                               to a child, closed; a new connection's
 *                               request: what does the child read?
 *   owner netns PORT            a request, unshare(CLONE_NEWNET), a request
 *   owner thread-cred PORT      a thread drops to nobody with a raw
 *                               setresuid and makes a request; then the
 *                               main thread (root) does: whose sockets?
 *   owner clone-netns PORT      a request; a clone(CLONE_VM|CLONE_FILES|
 *                               CLONE_NEWNET) child connects (alone:
 *                               ENETUNREACH, its namespace has no route);
 *                               then the parent's request
 *   owner clone-uid PORT        a clone(CLONE_VM|CLONE_FILES) child drops
 *                               to nobody (setuid: its own task only);
 *                               the parent (root) makes a request, then
 *                               the child: whose socket?
 *   owner range-unshare PORT PORT_B   a thread takes a fd table of its own
 *                               (close_range(CLOSE_RANGE_UNSHARE)); then,
 *                               in turn: main to B, the thread to A, main
 *                               to A, the thread to B (each server's log
 *                               must hold its own requests only)
 *   owner initgroups PORT       a request, initgroups("daemon", 1), a
 *                               request (its own connection, as alone)
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "common.h"

static int port;

static const char *errname(int e)
{
	switch (e) {
	case EBADF: return "EBADF";
	case EINVAL: return "EINVAL";
	case EAFNOSUPPORT: return "EAFNOSUPPORT";
	case EISCONN: return "EISCONN";
	case ECONNRESET: return "ECONNRESET";
	case EPIPE: return "EPIPE";
	case ENOTCONN: return "ENOTCONN";
	case EAGAIN: return "EAGAIN";
	default: return strerrorname_np(e) ? strerrorname_np(e) : "?";
	}
}

static struct sockaddr_in addr4(int p)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)p) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	return a;
}

/* A request for /tag on s; prints "tag: <body>" (or the failure) and
 * leaves s open (the response read up to its end: EOF). */
static void request(int s, const char *who, const char *tag)
{
	char req[256], buf[4096];
	int n = snprintf(req, sizeof(req), "GET /%s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
			 tag);
	if (write(s, req, (size_t)n) != n) {
		printf("%s %s: write %s\n", who, tag, errname(errno));
		fflush(stdout);
		return;
	}
	size_t have = 0;
	for (;;) {
		struct pollfd p = { s, POLLIN, 0 };
		if (poll(&p, 1, 5000) <= 0) {
			printf("%s %s: timeout\n", who, tag);
			fflush(stdout);
			return;
		}
		ssize_t r = read(s, buf + have, sizeof(buf) - 1 - have);
		if (r < 0) {
			printf("%s %s: read %s\n", who, tag, errname(errno));
			fflush(stdout);
			return;
		}
		if (r == 0)
			break;
		have += (size_t)r;
		if (have == sizeof(buf) - 1)
			break;
	}
	buf[have] = '\0';
	char *body = strstr(buf, "\r\n\r\n");
	printf("%s %s: %s\n", who, tag, body ? body + 4 : "(no head)");
	fflush(stdout);
}

/* A keep-alive request for /tag on s: read up to the end of its
 * Content-Length body (the echo body is "/tag"), s stays usable. */
static void request_keep(int s, const char *who, const char *tag)
{
	char req[128], buf[1024];
	int n = snprintf(req, sizeof(req), "GET /%s HTTP/1.1\r\nHost: t\r\n\r\n", tag);
	if (write(s, req, (size_t)n) != n) {
		printf("%s %s: write %s\n", who, tag, errname(errno));
		return;
	}
	size_t have = 0, want = 0;
	for (;;) {
		char *end = have ? memmem(buf, have, "\r\n\r\n", 4) : NULL;
		if (end && !want)
			want = (size_t)(end + 4 - buf) + 1 + strlen(tag);
		if (want && have >= want)
			break;
		struct pollfd p = { s, POLLIN, 0 };
		ssize_t r = poll(&p, 1, 3000) > 0 ? read(s, buf + have, sizeof(buf) - 1 - have) : -2;
		if (r <= 0) {
			printf("%s %s: %s\n", who, tag, r == 0 ? "EOF" : r == -2 ? "timeout" : errname(errno));
			return;
		}
		have += (size_t)r;
	}
	buf[have] = '\0';
	printf("%s %s: %s\n", who, tag, strstr(buf, "\r\n\r\n") + 4);
}

/* One byte and fd in an SCM_RIGHTS message: m points into *b. */
struct rights {
	char byte;
	struct iovec iov;
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
};

static void rights_msg(struct rights *r, struct msghdr *m, int fd)
{
	memset(r, 0, sizeof(*r));
	r->byte = 'x';
	r->iov = (struct iovec){ &r->byte, 1 };
	*m = (struct msghdr){ .msg_iov = &r->iov, .msg_iovlen = 1, .msg_control = r->u.b,
			      .msg_controllen = sizeof(r->u.b) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(fd));
}

/* the fd an SCM_RIGHTS message on sock carries, or -1 */
static int recv_passed(int sock)
{
	struct rights r;
	struct msghdr m;
	rights_msg(&r, &m, -1);
	if (recvmsg(sock, &m, 0) != 1)
		return -1;
	int fd;
	memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(fd));
	return fd;
}

static int dial(int p)
{
	struct sockaddr_in a = addr4(p);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
		die("connect");
	return s;
}

static void one(const char *who, const char *tag)
{
	int s = dial(port);
	request(s, who, tag);
	close(s);
}

static void scm_rights(void)
{
	int pair[2], go[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) < 0 || pipe(go) < 0)
		die("socketpair");
	/* the receiver exists before the socket does: only SCM_RIGHTS
	 * gives it the socket */
	pid_t pid = fork();
	if (pid == 0) {
		close(pair[0]);
		char c;
		int got = recv_passed(pair[1]);
		if (got < 0)
			die("recvmsg");
		/* the receiver's requests, after each of the sender's */
		for (int i = 1; i <= 2; i++) {
			if (read(go[0], &c, 1) != 1)
				break;
			char tag[16];
			snprintf(tag, sizeof(tag), "r%d", i);
			request_keep(got, "receiver", tag);
		}
		_exit(0);
	}
	close(pair[1]);
	close(go[0]);
	int s = dial(port);
	request_keep(s, "sender", "s1");
	struct rights r;
	struct msghdr m;
	rights_msg(&r, &m, s);
	if (sendmsg(pair[0], &m, 0) != 1)
		die("sendmsg");
	close(s);
	for (int i = 2; i <= 3; i++) {
		char tag[16];
		snprintf(tag, sizeof(tag), "s%d", i);
		one("sender", tag);
		if (write(go[1], "g", 1) != 1)
			die("pipe");
		usleep(100000); /* the receiver's turn */
	}
	close(go[1]);
	waitpid(pid, NULL, 0);
}

static void af_unspec(int port_b)
{
	int s = dial(port);
	request(s, "A", "a1");
	struct sockaddr un = { .sa_family = AF_UNSPEC };
	int r = connect(s, &un, sizeof(un));
	printf("connect(AF_UNSPEC): %s\n", r == 0 ? "0" : errname(errno));
	struct sockaddr_in b = addr4(port_b);
	r = connect(s, (struct sockaddr *)&b, sizeof(b));
	printf("connect(B): %s\n", r == 0 ? "0" : errname(errno));
	if (r == 0)
		request(s, "B", "b1");
	close(s);
	one("A", "a2");
	one("A", "a3");
}

static void family(void)
{
	one("first", "f1"); /* a pooled AF_INET connection exists now */
	struct sockaddr_in a = addr4(port);
	int s6 = socket(AF_INET6, SOCK_STREAM, 0);
	int r = connect(s6, (struct sockaddr *)&a, sizeof(a));
	int dom;
	socklen_t l = sizeof(dom);
	getsockopt(s6, SOL_SOCKET, SO_DOMAIN, &dom, &l);
	printf("AF_INET6 socket, sockaddr_in: %s, SO_DOMAIN %s\n", r == 0 ? "0" : errname(errno),
	       dom == AF_INET6 ? "AF_INET6" : dom == AF_INET ? "AF_INET" : "?");
	close(s6);
	one("second", "f2");
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port) };
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &a6.sin6_addr);
	int s4 = socket(AF_INET, SOCK_STREAM, 0);
	r = connect(s4, (struct sockaddr *)&a6, sizeof(a6));
	l = sizeof(dom);
	getsockopt(s4, SOL_SOCKET, SO_DOMAIN, &dom, &l);
	printf("AF_INET socket, sockaddr_in6: %s, SO_DOMAIN %s\n", r == 0 ? "0" : errname(errno),
	       dom == AF_INET6 ? "AF_INET6" : dom == AF_INET ? "AF_INET" : "?");
	close(s4);
	one("third", "f3");
}

static void hidden(void)
{
	/* which numbers the program has open before: only those are its own */
	static char mine[4096];
	for (int fd = 0; fd < 4096; fd++)
		mine[fd] = fcntl(fd, F_GETFD) >= 0;
	one("first", "h1"); /* parked now, under the library */
	int open_ = 0, writes = 0, ebadf = 0;
	for (int fd = 3; fd < 4096; fd++) {
		if (mine[fd])
			continue;
		if (fcntl(fd, F_GETFD) >= 0)
			open_++;
		static const char junk[] = "GET /junk HTTP/1.1\r\nHost: t\r\n\r\n";
		if (write(fd, junk, sizeof(junk) - 1) > 0)
			writes++;
		else if (errno == EBADF)
			ebadf++;
	}
	printf("numbers never opened: %d answer F_GETFD, %d take a write, %d say EBADF\n", open_,
	       writes, ebadf);
	one("second", "h2");
}

static void closefrom_log(const char *file)
{
	closefrom(3);
	int f = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	if (f < 0)
		die("open");
	printf("the program's file is fd %d\n", f);
	one("first", "l1");
	one("second", "l2");
	if (write(f, "the program's line\n", 19) != 19)
		die("write");
	close(f);
}

/* Read on s for up to ms: what arrived ("EOF", "nothing", or the body). */
static void peek_what(int s, const char *who, int ms)
{
	char buf[1024];
	struct pollfd p = { s, POLLIN, 0 };
	if (poll(&p, 1, ms) <= 0) {
		printf("%s: nothing\n", who);
		return;
	}
	ssize_t r = read(s, buf, sizeof(buf) - 1);
	if (r <= 0) {
		printf("%s: %s\n", who, r == 0 ? "EOF" : errname(errno));
		return;
	}
	buf[r] = '\0';
	char *body = strstr(buf, "\r\n\r\n");
	printf("%s: %s\n", who, body ? body + 4 : buf);
}

static void raw_fork(int mode)
{
	int to_parent[2], to_child[2];
	if (pipe(to_parent) < 0 || pipe(to_child) < 0)
		die("pipe");
	one("first", "p0"); /* pooled now */
	pid_t pid = mode == 1 ? _Fork() : (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	if (pid < 0)
		die("fork");
	char c;
	if (pid == 0) {
		int s = dial(port);
		if (write(to_parent[1], "x", 1) != 1 || read(to_child[0], &c, 1) != 1)
			_exit(1);
		request(s, "child", "c1");
		_exit(0);
	}
	if (read(to_parent[0], &c, 1) != 1)
		die("pipe");
	int s = dial(port);
	/* both requests out before either reads */
	const char req[] = "GET /p1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
	if (write(s, req, sizeof(req) - 1) < 0 || write(to_child[1], "x", 1) != 1)
		die("write");
	usleep(200000);
	char buf[2048];
	size_t have = 0;
	ssize_t r;
	while ((r = read(s, buf + have, sizeof(buf) - 1 - have)) > 0)
		have += (size_t)r;
	buf[have] = '\0';
	char *body = strstr(buf, "\r\n\r\n");
	printf("parent p1: %s\n", body ? body + 4 : "(nothing)");
	close(s);
	waitpid(pid, NULL, 0);
}

static void raw_dup(int mode)
{
	int s = dial(port), d;
	if (mode == 1)
		d = (int)syscall(SYS_dup, s);
	else if (mode == 2)
		d = (int)syscall(SYS_fcntl, s, F_DUPFD, 0);
	else
		d = (int)syscall(SYS_pidfd_getfd, (int)syscall(SYS_pidfd_open, getpid(), 0), s, 0);
	if (d < 0)
		die("copy");
	request(s, "s", "s1");
	close(s);
	int s2 = dial(port);
	const char req[] = "GET /s2 HTTP/1.1\r\nHost: t\r\n\r\n";
	if (write(s2, req, sizeof(req) - 1) < 0)
		die("write");
	peek_what(d, "the copy reads", 500);
	peek_what(s2, "s2 reads", 2000);
}

static void raw_mmsg(void)
{
	int pair[2], go[2];
	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, pair) < 0 || pipe(go) < 0)
		die("socketpair");
	pid_t pid = fork(); /* before the socket: only the message passes it */
	if (pid == 0) {
		char c;
		int got = recv_passed(pair[1]);
		if (got < 0 || read(go[0], &c, 1) != 1)
			_exit(1);
		peek_what(got, "the child reads", 500);
		_exit(0);
	}
	int s = dial(port);
	request_keep(s, "parent", "p1");
	struct rights r;
	struct mmsghdr mm = { 0 };
	rights_msg(&r, &mm.msg_hdr, s);
	if (syscall(SYS_sendmmsg, pair[0], &mm, 1, 0) != 1)
		die("sendmmsg");
	close(s);
	int s2 = dial(port);
	const char req[] = "GET /p2 HTTP/1.1\r\nHost: t\r\n\r\n";
	if (write(s2, req, sizeof(req) - 1) < 0 || write(go[1], "g", 1) != 1)
		die("write");
	waitpid(pid, NULL, 0);
	peek_what(s2, "parent p2", 2000);
}

static void netns(void)
{
	one("before", "n1");
	if (unshare(CLONE_NEWNET) < 0) {
		printf("unshare: %s\n", errname(errno));
		return;
	}
	struct sockaddr_in a = addr4(port);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
		printf("after unshare: connect %s\n", errname(errno));
		return;
	}
	request(s, "after", "n2");
}

static uid_t socket_owner(int s)
{
	struct stat st;
	return fstat(s, &st) == 0 ? st.st_uid : (uid_t)-1;
}

static void *cred_thread(void *arg)
{
	(void)arg;
	if (syscall(SYS_setresuid, 65534, 65534, 65534) < 0) {
		printf("setresuid: %s\n", errname(errno));
		return NULL;
	}
	int s = dial(port);
	printf("thread: socket of uid %u\n", (unsigned)socket_owner(s));
	request(s, "thread", "t1");
	close(s);
	return NULL;
}

static void thread_cred(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, cred_thread, NULL) != 0)
		die("pthread_create");
	pthread_join(t, NULL);
	int s = dial(port);
	printf("main: socket of uid %u\n", (unsigned)socket_owner(s));
	request(s, "main", "m1");
	close(s);
}

static int clone_netns_child(void *arg)
{
	(void)arg;
	struct sockaddr_in a = addr4(port);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
		printf("child: connect %s\n", errname(errno));
	else
		request(s, "child", "c2");
	close(s);
	return 0;
}

static char clone_stack[1 << 16];

static void clone_netns(void)
{
	one("parent", "c1");
	int pid = clone(clone_netns_child, clone_stack + sizeof(clone_stack),
			CLONE_VM | CLONE_FILES | CLONE_NEWNET | SIGCHLD, NULL);
	if (pid < 0) {
		printf("clone: %s\n", errname(errno));
		return;
	}
	waitpid(pid, NULL, 0);
	one("parent", "c3");
}

static volatile int clone_step;

static int clone_uid_child(void *arg)
{
	(void)arg;
	if (setuid(65534) < 0)
		printf("child: setuid %s\n", errname(errno));
	clone_step = 1;
	while (clone_step != 2)
		usleep(1000);
	int s = dial(port);
	printf("child: socket of uid %u\n", (unsigned)socket_owner(s));
	request(s, "child", "u2");
	close(s);
	return 0;
}

static void clone_uid(void)
{
	int pid = clone(clone_uid_child, clone_stack + sizeof(clone_stack), CLONE_VM | CLONE_FILES | SIGCHLD,
			NULL);
	if (pid < 0) {
		printf("clone: %s\n", errname(errno));
		return;
	}
	while (clone_step != 1)
		usleep(1000);
	one("parent", "u1");
	clone_step = 2;
	waitpid(pid, NULL, 0);
}

static int port_b;
static volatile int unshare_step;

static void *unshare_thread(void *arg)
{
	(void)arg;
	if (close_range(900, 900, CLOSE_RANGE_UNSHARE) < 0)
		printf("close_range: %s\n", errname(errno));
	unshare_step = 1;
	while (unshare_step != 2)
		usleep(1000);
	int s = dial(port);
	request(s, "thread", "thread-to-A");
	close(s);
	unshare_step = 3;
	while (unshare_step != 4)
		usleep(1000);
	s = dial(port_b);
	request(s, "thread", "thread-to-B");
	close(s);
	return NULL;
}

static void range_unshare(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, unshare_thread, NULL) != 0)
		die("pthread_create");
	while (unshare_step != 1)
		usleep(1000);
	int s = dial(port_b);
	request(s, "main", "main-to-B");
	close(s);
	unshare_step = 2;
	while (unshare_step != 3)
		usleep(1000);
	s = dial(port);
	request(s, "main", "main-to-A");
	close(s);
	unshare_step = 4;
	pthread_join(t, NULL);
}

static void groups(void)
{
	one("before", "g1");
	if (initgroups("daemon", 1) < 0)
		printf("initgroups: %s\n", errname(errno));
	one("after", "g2");
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: see owner.c\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	port = atoi(argv[2]);
	if (!strcmp(argv[1], "scm-rights"))
		scm_rights();
	else if (!strcmp(argv[1], "af-unspec") && argc > 3)
		af_unspec(atoi(argv[3]));
	else if (!strcmp(argv[1], "family"))
		family();
	else if (!strcmp(argv[1], "hidden"))
		hidden();
	else if (!strcmp(argv[1], "closefrom-log") && argc > 3)
		closefrom_log(argv[3]);
	else if (!strcmp(argv[1], "raw-fork") && argc > 3)
		raw_fork(atoi(argv[3]));
	else if (!strcmp(argv[1], "raw-dup") && argc > 3)
		raw_dup(atoi(argv[3]));
	else if (!strcmp(argv[1], "raw-mmsg"))
		raw_mmsg();
	else if (!strcmp(argv[1], "netns"))
		netns();
	else if (!strcmp(argv[1], "thread-cred"))
		thread_cred();
	else if (!strcmp(argv[1], "clone-netns"))
		clone_netns();
	else if (!strcmp(argv[1], "clone-uid"))
		clone_uid();
	else if (!strcmp(argv[1], "range-unshare") && argc > 3 && (port_b = atoi(argv[3])))
		range_unshare();
	else if (!strcmp(argv[1], "initgroups"))
		groups();
	else
		return 2;
	return 0;
}
