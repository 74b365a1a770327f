/*
 * bad_pointer.c - calls that fail with EFAULT alone: a pointer the kernel
 * refuses, on a socketpair the library never follows and on a connection
 * it does (a request that asked to close, rewritten, its answer waiting).
 * setsockopt's value is read by the library before the kernel on a
 * handed-out connection (an option its first owner set, or one a rewrite
 * would show).  Each case runs in a child of its own, which prints what
 * the call returned; a child killed by a signal is printed so
 * (docs/limits.md "A pointer the kernel refuses": the library must not
 * be that signal).
 *
 * The pointer is 8, or NULL with BAD_POINTER=null: the library's probe
 * asks the kernel about the 8-byte word a pointer falls in, and the word
 * at 0 is no word to the kernel (a NULL set: it answers 0, "readable").
 * connect()'s address and the lengths getsockopt and getpeername are
 * given are read by the library before the kernel, on any socket for
 * connect (a Unix one too).
 *
 * BAD_POINTER_SKIP=case leaves one case out (libasan's own getpeername
 * reads the length it is given: under ASan that cell dies in libasan,
 * with or without the library).
 *
 * usage: bad_pointer port [case]   (no case: all of them, in turn)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

/* (through a volatile: the compiler would see through a constant) */
static void *volatile bad_pointer = (void *)8;
#define BAD (bad_pointer)

static int dial(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
	a.sin_addr.s_addr = htonl(0x7f000001);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		perror("connect");
		exit(2);
	}
	return fd;
}

static const char REQ[] = "GET /f HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

/* the request out, and its answer there to read (an event, not a time) */
static void asked(int fd)
{
	if (write(fd, REQ, sizeof(REQ) - 1) != (ssize_t)sizeof(REQ) - 1)
		exit(3);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	if (poll(&p, 1, -1) != 1)
		exit(4);
}

static int conn_fd = -1;

/* After a refused write: the connection still carries the program's
 * request (the rest of it, for write-held) and its whole answer. */
static void then_asks(const char *name)
{
	const char *rest = strcmp(name, "write-held") ? REQ : REQ + 16;
	size_t n = strlen(rest);
	if (write(conn_fd, rest, n) != (ssize_t)n)
		exit(9);
	char buf[4096];
	size_t total = 0;
	ssize_t r;
	char line[64] = "";
	while ((r = read(conn_fd, buf, sizeof(buf))) > 0) {
		if (!total)
			snprintf(line, sizeof(line), "%.*s", (int)strcspn(buf, "\r"), buf);
		total += (size_t)r;
	}
	printf("  then: %s, EOF (read %zd)\n", line, r);
}

static long one(const char *name, int port)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0)
		exit(5);
	int fd = dial(port);
	conn_fd = fd;
	struct timeval tv0 = { 0, 0 };
	struct timespec ts0 = { 0, 0 };
	struct iovec badv[2] = { { BAD, 10 }, { BAD, 10 } };
	struct msghdr badiov = { .msg_iov = BAD, .msg_iovlen = 2 };
	struct msghdr badctl = { .msg_iov = badv, .msg_iovlen = 1, .msg_control = BAD, .msg_controllen = 64 };
	if (!strcmp(name, "connect"))
		return connect(socket(AF_INET, SOCK_STREAM, 0), BAD, sizeof(struct sockaddr_in));
	if (!strcmp(name, "connect-len0"))
		return connect(socket(AF_INET, SOCK_STREAM, 0), BAD, 0);
	if (!strcmp(name, "connect-unix"))
		return connect(sp[0], BAD, sizeof(struct sockaddr_in));
	if (!strcmp(name, "connect-again"))
		return connect(fd, BAD, sizeof(struct sockaddr_in));
	if (!strcmp(name, "getsockopt-len")) {
		int v;
		return getsockopt(fd, SOL_SOCKET, SO_ERROR, &v, BAD);
	}
	if (!strcmp(name, "getpeername-len")) {
		struct sockaddr_storage ss;
		return getpeername(fd, (struct sockaddr *)&ss, BAD);
	}
	if (!strcmp(name, "recvmsg-untracked"))
		return recvmsg(sp[0], BAD, MSG_DONTWAIT);
	if (!strcmp(name, "sendmsg-untracked"))
		return sendmsg(sp[0], BAD, 0);
	if (!strcmp(name, "sendmmsg-untracked"))
		return sendmmsg(sp[0], BAD, 1, 0);
	if (!strcmp(name, "sendmsg-control-untracked"))
		return sendmsg(sp[0], &badctl, 0);
	if (!strcmp(name, "poll"))
		return poll(BAD, 1, 0);
	if (!strcmp(name, "ppoll"))
		return ppoll(BAD, 1, &ts0, NULL);
	if (!strcmp(name, "select"))
		return select(fd + 1, BAD, NULL, NULL, &tv0);
	if (!strcmp(name, "pselect"))
		return pselect(fd + 1, BAD, NULL, NULL, &ts0, NULL);
	if (!strcmp(name, "writev"))
		return writev(fd, BAD, 2);
	if (!strcmp(name, "sendmsg"))
		return sendmsg(fd, BAD, 0);
	if (!strcmp(name, "sendmsg-iov"))
		return sendmsg(fd, &badiov, 0);
	if (!strcmp(name, "sendmmsg"))
		return sendmmsg(fd, BAD, 1, 0);
	if (!strcmp(name, "write"))
		return write(fd, BAD, 10);
	if (!strcmp(name, "write-held")) {
		/* a head begun: the library holds this piece */
		if (write(fd, REQ, 16) != 16)
			exit(8);
		return write(fd, BAD, 10);
	}
	if (!strcmp(name, "send"))
		return send(fd, BAD, 10, 0);
	if (!strcmp(name, "writev-base"))
		return writev(fd, badv, 2);
	if (!strncmp(name, "setsockopt-", 11)) {
		/* on a handed-out connection (its first owner set SO_KEEPALIVE,
		 * which the library carries), before its first request */
		int on = 1;
		setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
		asked(fd);
		char buf[4096];
		while (read(fd, buf, sizeof(buf)) > 0)
			;
		close(fd);
		conn_fd = fd = dial(port);
		int opt = !strcmp(name, "setsockopt-keepalive") ? SO_KEEPALIVE : SO_RCVLOWAT;
		return setsockopt(fd, SOL_SOCKET, opt, BAD, sizeof(int));
	}
	asked(fd);
	if (!strcmp(name, "readv"))
		return readv(fd, BAD, 1);
	if (!strcmp(name, "recvmsg"))
		return recvmsg(fd, BAD, 0);
	if (!strcmp(name, "recvmsg-iov"))
		return recvmsg(fd, &badiov, 0);
	if (!strcmp(name, "recvmmsg"))
		return recvmmsg(fd, BAD, 1, 0, NULL);
	if (!strcmp(name, "read"))
		return read(fd, BAD, 10);
	if (!strcmp(name, "recv-waitall"))
		return recv(fd, BAD, 10, MSG_WAITALL);
	fprintf(stderr, "no case %s\n", name);
	exit(6);
}

static const char *const CASES[] = {
	"connect", "connect-len0", "connect-unix", "connect-again", "getsockopt-len", "getpeername-len",
	"recvmsg-untracked", "sendmsg-untracked", "sendmmsg-untracked", "sendmsg-control-untracked",
	"poll", "ppoll", "select", "pselect",
	"writev", "sendmsg", "sendmsg-iov", "sendmmsg", "write", "write-held", "send", "writev-base",
	"setsockopt-keepalive", "setsockopt-rcvlowat",
	"readv", "recvmsg", "recvmsg-iov", "recvmmsg", "read", "recv-waitall",
};

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int port = atoi(argv[1]);
	const char *which = getenv("BAD_POINTER"), *skip = getenv("BAD_POINTER_SKIP");
	if (which && !strcmp(which, "null"))
		bad_pointer = NULL;
	for (size_t i = 0; i < sizeof(CASES) / sizeof(*CASES); i++) {
		if ((argc > 2 && strcmp(argv[2], CASES[i])) || (skip && !strcmp(skip, CASES[i])))
			continue;
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			long r = one(CASES[i], port);
			printf("%s -> %ld %s\n", CASES[i], r, r < 0 ? strerror(errno) : "");
			if (!strncmp(CASES[i], "write", 5) || !strcmp(CASES[i], "send") ||
			    !strncmp(CASES[i], "setsockopt-", 11))
				then_asks(CASES[i]);
			fflush(stdout);
			_exit(0);
		}
		int st;
		if (waitpid(pid, &st, 0) != pid)
			return 7;
		if (WIFSIGNALED(st))
			printf("%s -> killed by signal %d\n", CASES[i], WTERMSIG(st));
		else if (WEXITSTATUS(st))
			printf("%s -> exit %d\n", CASES[i], WEXITSTATUS(st));
	}
	return 0;
}
