/*
 * sandboxed - a program that sandboxes itself with seccomp half-way
 * through its HTTP work (docs/owner.md "A sandbox").
 *
 * Usage: sandboxed MODE port
 *   MODE  errno   an allow-list filter of the calls this program makes
 *                 alone, anything else fails with EPERM (prctl)
 *         kill    the same list, anything else kills the process (SIGSYS)
 *                 (syscall(SYS_seccomp))
 *         strict  SECCOMP_MODE_STRICT: read, write, _exit, sigreturn only
 *                 (prctl)
 *         strict_raw  the same, by syscall(SYS_prctl)
 *         vfork   a vfork child enters strict mode and _exits: the
 *                 parent (whose memory the child ran on) is not sandboxed
 *         inherit  first a filter that refuses ptrace only (as docker's
 *                 default profile refuses a few calls), then exec itself
 *                 in mode none: the steps run under an inherited filter
 *         none    no sandbox (the same steps, for comparison)
 *
 * Before the sandbox, against 127.0.0.1:port, path /f, each request one
 * write() of an HTTP/1.1 "Connection: close" request:
 *   A  connect, request, read to EOF, close   (the library parks it)
 *   B  connect, no request yet                (the library reuses A's)
 *   C  connect, request, read the response's bytes (Content-Length) but
 *      not its EOF                            (the library owes that EOF)
 *   E  connect, the request's first line and Host only (the library holds
 *      an unfinished head)
 *   F  connect, request, nothing read     (its answer is still to come)
 * Then the sandbox, then:
 *   C  read: the EOF
 *   B  request, read to EOF
 *   E  the rest of the head ("Connection: close"), read to EOF
 *   F  read to EOF
 *   D  (errno, kill, none) a new connection: request, read to EOF
 * Each step prints one line: what it read.  The process ends with exit(),
 * in strict mode with _exit (it allows no exit_group).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "allow_filter.h"
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char req[] = "GET /f HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
static struct sockaddr_in dst;

/* one line to stdout with write() (allowed in every mode) */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (write(1, line, (size_t)n) != n)
		syscall(SYS_exit, 3);
}

static void quit(int code)
{
	syscall(SYS_exit, code);
	for (;;)
		;
}

static int dial(const char *name)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&dst, sizeof(dst)) < 0) {
		say("%s: connect: %s\n", name, strerror(errno));
		quit(1);
	}
	return fd;
}

static void send_req(int fd, const char *name)
{
	ssize_t w = write(fd, req, sizeof(req) - 1);
	if (w != (ssize_t)sizeof(req) - 1) {
		say("%s: write %zd: %s\n", name, w, strerror(errno));
		quit(1);
	}
}

/* Read to EOF; prints the status line and how many body bytes came. */
static void read_all(int fd, const char *name)
{
	static char buf[65536];
	size_t got = 0;
	ssize_t r;
	while (got < sizeof(buf) && (r = read(fd, buf + got, sizeof(buf) - got)) > 0)
		got += (size_t)r;
	if (r < 0) {
		say("%s: read: %s\n", name, strerror(errno));
		quit(1);
	}
	char *end = memmem(buf, got, "\r\n\r\n", 4);
	char *eol = memchr(buf, '\r', got);
	say("%s: %.*s, %zu body bytes, then EOF\n", name, eol ? (int)(eol - buf) : 0, buf,
	    end ? got - (size_t)(end + 4 - buf) : 0);
}

/* Read exactly one response (its Content-Length), not the EOF after it. */
static void read_response(int fd, const char *name)
{
	static char buf[65536];
	size_t got = 0;
	for (;;) {
		char *end = memmem(buf, got, "\r\n\r\n", 4);
		if (end) {
			char *cl = memmem(buf, (size_t)(end - buf), "Content-Length: ", 16);
			size_t want = (size_t)(end + 4 - buf) + (cl ? strtoul(cl + 16, NULL, 10) : 0);
			if (got >= want) {
				say("%s: a response, %zu body bytes\n", name, got - (size_t)(end + 4 - buf));
				return;
			}
		}
		ssize_t r = read(fd, buf + got, sizeof(buf) - got);
		if (r <= 0) {
			say("%s: read %zd: %s\n", name, r, strerror(errno));
			quit(1);
		}
		got += (size_t)r;
	}
}

static void sandbox(const char *mode)
{
	if (!strcmp(mode, "none"))
		return;
	if (!strcmp(mode, "vfork")) {
		if (vfork() == 0) {
			prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT);
			syscall(SYS_exit, 0);
		}
		return;
	}
	if (!strncmp(mode, "strict", 6)) {
		if ((mode[6] ? syscall(SYS_prctl, PR_SET_SECCOMP, SECCOMP_MODE_STRICT)
			     : prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT)) != 0) {
			say("prctl: %s\n", strerror(errno));
			quit(9);
		}
		return;
	}
	/* what this program calls alone from here on */
	static const int allow[] = { SYS_read, SYS_write, SYS_close, SYS_socket, SYS_connect, SYS_exit,
				     SYS_exit_group, SYS_rt_sigreturn };
	struct sock_filter f[ALLOW_FILTER_LEN(sizeof(allow) / sizeof(allow[0]))];
	struct sock_fprog prog = allow_filter(f, allow, sizeof(allow) / sizeof(allow[0]),
					       !strcmp(mode, "kill") ? SECCOMP_RET_KILL_PROCESS : SECCOMP_RET_ERRNO | EPERM);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    (!strcmp(mode, "kill") ? syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)
				   : prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) != 0) {
		say("seccomp: %s\n", strerror(errno));
		quit(9);
	}
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s errno|kill|strict|strict_raw|vfork|inherit|none port\n", argv[0]);
		return 2;
	}
	if (!strcmp(argv[1], "inherit")) {
		struct sock_filter f[] = {
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ptrace, 0, 1),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		};
		struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
			perror("seccomp");
			return 9;
		}
		execl("/proc/self/exe", argv[0], "none", argv[2], (char *)NULL);
		perror("exec");
		return 9;
	}
	dst.sin_family = AF_INET;
	dst.sin_port = htons((unsigned short)atoi(argv[2]));
	dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

	int a = dial("A");
	send_req(a, "A");
	read_all(a, "A");
	close(a);
	int b = dial("B");
	int c = dial("C");
	send_req(c, "C");
	read_response(c, "C");
	int e = dial("E");
	static const char head_start[] = "GET /f HTTP/1.1\r\nHost: 127.0.0.1\r\n";
	static const char head_end[] = "Connection: close\r\n\r\n";
	if (write(e, head_start, sizeof(head_start) - 1) != (ssize_t)sizeof(head_start) - 1) {
		say("E: write: %s\n", strerror(errno));
		quit(1);
	}

	int f = dial("F");
	send_req(f, "F");

	sandbox(argv[1]);
	say("sandboxed (%s)\n", argv[1]);

	char one;
	ssize_t r = read(c, &one, 1);
	say("C: read %zd%s%s\n", r, r < 0 ? ": " : "", r < 0 ? strerror(errno) : "");
	send_req(b, "B");
	read_all(b, "B");
	if (write(e, head_end, sizeof(head_end) - 1) != (ssize_t)sizeof(head_end) - 1) {
		say("E: write: %s\n", strerror(errno));
		quit(1);
	}
	read_all(e, "E");
	read_all(f, "F");
	bool strict = !strncmp(argv[1], "strict", 6);
	if (!strict) {
		close(b);
		close(c);
		int d = dial("D");
		send_req(d, "D");
		read_all(d, "D");
		close(d);
	}
	say("done\n");
	if (!strict)
		exit(0); /* exit_group, and the destructors (ours) */
	quit(0);
}
