/*
 * sigio_get.c - signal-driven I/O (and the other state an open file
 * description carries) on HTTP connections, for tests/sigio.bats
 * (docs/hold.md "What the description carries").
 *
 * Usage: sigio_get MODE HTTP_PORT CONTROL_PORT   (tests/servers/drop_server.py)
 *   close-fcntl close-ioctl close-rtsig close-pgrp close-tid
 *       one GET with signals asked for after connect() (F_SETOWN + O_ASYNC;
 *       SIOCSPGRP + FIOASYNC; F_SETSIG SIGRTMIN+1; the process group;
 *       F_SETOWN_EX to the thread), close, the signal back to its default
 *       action (death), the server told to close its idle connections,
 *       then a plain GET: alone nothing signals the closed socket
 *   close-append  O_APPEND set after connect(), close, then a plain GET
 *       that prints its socket's status flags
 *   exit-pgrp  one GET; once its answer is read, signals asked for to the
 *       process group (F_SETOWN_EX), close, exit: alone nothing signals
 *       the group any more
 *   drop     only tells the server to close its idle connections
 *   before   a plain GET, then a socket with F_SETOWN + O_ASYNC|O_NONBLOCK
 *       set before connect(), which waits for SIGIO (sigtimedwait) for the
 *       connect and for the answer
 *   before-append  a plain GET, then a socket with O_APPEND set before
 *       connect(): its status flags printed after the connect
 *   after    (the server with rst2) a plain GET, then a socket given
 *       F_SETOWN + O_ASYNC|O_NONBLOCK after connect(), whose request is
 *       answered on the connection it ends up on: SIGIO waited for
 *   unsent   a plain GET, then a socket given signals after connect(); the
 *       server told to close its idle connections before the request;
 *       SIGIO waited for
 * Prints what each step read; a wait for SIGIO longer than 10 s prints
 * "no SIGIO" and exits 5 (a hang, not a measure).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static struct sockaddr_in http, control;
static const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
static volatile sig_atomic_t got;

static void on_signal(int s)
{
	(void)s;
	got++;
}

static void fail(const char *what, int rc)
{
	printf("%s: %s\n", what, strerror(errno));
	exit(rc);
}

static int connected(const struct sockaddr_in *a)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (const struct sockaddr *)a, sizeof(*a)) < 0)
		fail("connect", 2);
	return fd;
}

/* read a whole answer (it ends with "hello world\n") on a blocking socket */
static int answer(int fd)
{
	char buf[4096];
	int n = 0, r;
	buf[0] = 0;
	while (!strstr(buf, "hello world\n") && (r = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0) {
		n += r;
		buf[n] = 0;
	}
	return n;
}

static void plain_get(const char *label)
{
	int fd = connected(&http);
	if (write(fd, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1)
		fail("write", 2);
	printf("%s: %d bytes\n", label, answer(fd));
	close(fd);
}

/* the server closes its idle connections; its answer comes after the FINs */
static void drop_idle(void)
{
	int fd = connected(&control);
	char buf[64];
	int n = read(fd, buf, sizeof(buf));
	printf("control: %.*s", n > 0 ? n : 0, buf);
	close(fd);
}

static void wait_sigio(const sigset_t *set, const char *what)
{
	struct timespec ts = { 10, 0 };
	if (sigtimedwait(set, NULL, &ts) < 0) {
		printf("no SIGIO for %s\n", what);
		exit(5);
	}
}

/* a request on a non-blocking signal-driven socket, its answer read as
 * SIGIO says it came */
static void signalled_get(int fd, const sigset_t *set)
{
	if (write(fd, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1)
		fail("write", 2);
	char buf[4096];
	int n = 0;
	buf[0] = 0;
	while (!strstr(buf, "hello world\n")) {
		int r = read(fd, buf + n, sizeof(buf) - 1 - n);
		if (r > 0) {
			n += r;
			buf[n] = 0;
			continue;
		}
		if (r == 0)
			break;
		if (errno != EAGAIN)
			fail("read", 4);
		wait_sigio(set, "the answer");
	}
	printf("second: %d bytes\n", n);
	close(fd);
}

static void signals_after_connect(const char *how)
{
	int sig = SIGIO;
	/* (the group is the client alone: a signal that comes alone too, for
	 * an answer in before read() blocks, would kill a wrapper in it) */
	if (!strcmp(how, "pgrp") && setpgid(0, 0) < 0)
		fail("setpgid", 2);
	signal(SIGIO, on_signal);
	int fd = connected(&http);
	if (!strcmp(how, "ioctl")) {
		int pid = getpid(), on = 1;
		if (ioctl(fd, SIOCSPGRP, &pid) < 0 || ioctl(fd, FIOASYNC, &on) < 0)
			fail("ioctl", 2);
	} else {
		struct f_owner_ex own = { F_OWNER_PID, getpid() };
		if (!strcmp(how, "pgrp"))
			own = (struct f_owner_ex){ F_OWNER_PGRP, getpgrp() };
		if (!strcmp(how, "tid"))
			own = (struct f_owner_ex){ F_OWNER_TID, (pid_t)syscall(SYS_gettid) };
		if (!strcmp(how, "rtsig")) {
			sig = SIGRTMIN + 1;
			signal(sig, on_signal);
			if (fcntl(fd, F_SETSIG, sig) < 0)
				fail("F_SETSIG", 2);
		}
		if (fcntl(fd, F_SETOWN_EX, &own) < 0 || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC) < 0)
			fail("fcntl", 2);
	}
	if (write(fd, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1)
		fail("write", 2);
	printf("first: %d bytes\n", answer(fd));
	close(fd);
	signal(sig, SIG_DFL); /* a signal for the closed socket now kills */
	drop_idle();
	plain_get("second");
}

static void print_flags(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	printf("flags %#o\n", fl);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: sigio_get MODE HTTP_PORT CONTROL_PORT\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	const char *mode = argv[1];
	http.sin_family = control.sin_family = AF_INET;
	http.sin_port = htons((uint16_t)atoi(argv[2]));
	control.sin_port = htons((uint16_t)atoi(argv[3]));
	inet_pton(AF_INET, "127.0.0.1", &http.sin_addr);
	control.sin_addr = http.sin_addr;

	if (!strncmp(mode, "close-", 6) && strcmp(mode, "close-append")) {
		signals_after_connect(mode + 6);
		printf("ok\n");
		return 0;
	}
	if (!strcmp(mode, "drop")) {
		drop_idle();
		return 0;
	}
	if (!strcmp(mode, "exit-pgrp")) {
		int fd = connected(&http);
		if (write(fd, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1)
			fail("write", 2);
		printf("first: %d bytes\n", answer(fd));
		struct f_owner_ex own = { F_OWNER_PGRP, getpgrp() };
		if (fcntl(fd, F_SETOWN_EX, &own) < 0 || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC) < 0)
			fail("fcntl", 2);
		close(fd);
		return 0;
	}
	if (!strcmp(mode, "close-append")) {
		int fd = connected(&http);
		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_APPEND) < 0)
			fail("fcntl", 2);
		if (write(fd, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1)
			fail("write", 2);
		printf("first: %d bytes\n", answer(fd));
		close(fd);
		fd = connected(&http);
		print_flags(fd);
		close(fd);
		return 0;
	}
	plain_get("first");
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGIO);
	sigprocmask(SIG_BLOCK, &set, NULL);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		fail("socket", 2);
	if (!strcmp(mode, "before-append")) {
		if (fcntl(fd, F_SETFL, O_APPEND) < 0 || connect(fd, (struct sockaddr *)&http, sizeof(http)) < 0)
			fail("connect", 2);
		print_flags(fd);
		return 0;
	}
	if (!strcmp(mode, "before")) {
		if (fcntl(fd, F_SETOWN, getpid()) < 0 || fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) < 0)
			fail("fcntl", 2);
		int r = connect(fd, (struct sockaddr *)&http, sizeof(http));
		printf("connect %s\n", r < 0 ? strerror(errno) : "0");
		if (r < 0 && errno != EINPROGRESS)
			return 2;
		if (r < 0)
			wait_sigio(&set, "the connect");
		signalled_get(fd, &set);
		return 0;
	}
	/* after, unsent: signals asked for after connect() */
	if (connect(fd, (struct sockaddr *)&http, sizeof(http)) < 0)
		fail("connect", 2);
	if (fcntl(fd, F_SETOWN, getpid()) < 0 || fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) < 0)
		fail("fcntl", 2);
	if (!strcmp(mode, "unsent"))
		drop_idle();
	signalled_get(fd, &set);
	return 0;
}
