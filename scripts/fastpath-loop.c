/*
 * fastpath-loop - call one wrapped function N times on fds the shim does
 * not track, for scripts/bench-fastpath (callgrind counts the
 * instructions; two values of N give the cost of one call).
 * Usage: fastpath-loop CALL N
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: fastpath-loop CALL N\n");
		return 2;
	}
	const char *call = argv[1];
	long n = atol(argv[2]);
	int p[2], sv[2];
	if (pipe(p) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return 1;
	/* written to, so that poll and select find something at once */
	if (write(p[1], "x", 1) != 1)
		return 1;
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = p[0] };
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) < 0)
		return 1;
	/* an fd number inside the table that nothing holds: close() of it is
	 * EBADF, which costs the kernel little and the shim what it always does */
	int unused = 200;
	struct epoll_event out[4];
	/* stdio on a FILE that is no socket: a full buffer's worth goes to
	 * /dev/null now and then (the kernel's share, the same both ways) */
	FILE *devnull = fopen("/dev/null", "w");
	if (!devnull)
		return 1;
	int futex_word = 0;
	char c;
	int v;
	for (long i = 0; i < n; i++) {
		if (!strcmp(call, "close")) {
			close(unused);
		} else if (!strcmp(call, "poll")) {
			struct pollfd pf = { .fd = p[0], .events = POLLIN };
			poll(&pf, 1, 0);
		} else if (!strcmp(call, "ppoll")) {
			struct pollfd pf = { .fd = p[0], .events = POLLIN };
			struct timespec ts = { 0, 0 };
			ppoll(&pf, 1, &ts, NULL);
		} else if (!strcmp(call, "select")) {
			fd_set rd;
			FD_ZERO(&rd);
			FD_SET(p[0], &rd);
			struct timeval tv = { 0, 0 };
			select(p[0] + 1, &rd, NULL, NULL, &tv);
		} else if (!strcmp(call, "epoll_wait")) {
			epoll_wait(ep, out, 4, 0);
		} else if (!strcmp(call, "fcntl")) {
			fcntl(p[0], F_GETFL);
		} else if (!strcmp(call, "dup")) {
			close(dup(p[0]));
		} else if (!strcmp(call, "dup2")) {
			dup2(p[0], unused);
		} else if (!strcmp(call, "ioctl")) {
			ioctl(p[0], FIONREAD, &v);
		} else if (!strcmp(call, "recv")) {
			recv(sv[0], &c, 1, MSG_DONTWAIT);
		} else if (!strcmp(call, "send")) {
			send(sv[0], "", 0, MSG_DONTWAIT);
		} else if (!strcmp(call, "recvmsg")) {
			struct iovec iov = { &c, 1 };
			struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
			recvmsg(sv[0], &m, MSG_DONTWAIT);
		} else if (!strcmp(call, "sendmsg")) {
			struct iovec iov = { "", 0 };
			struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
			sendmsg(sv[0], &m, MSG_DONTWAIT);
		} else if (!strcmp(call, "getsockopt")) {
			socklen_t len = sizeof(v);
			getsockopt(sv[0], SOL_SOCKET, SO_TYPE, &v, &len);
		} else if (!strcmp(call, "fputc")) {
			fputc('x', devnull);
		} else if (!strcmp(call, "fwrite")) {
			fwrite("xy", 1, 2, devnull);
		} else if (!strcmp(call, "fputs")) {
			fputs("xy", devnull);
		} else if (!strcmp(call, "fflush")) {
			fflush(devnull);
		} else if (!strcmp(call, "syscall")) {
			/* a futex wake nobody waits for: Rust's std calls it so */
			syscall(SYS_futex, &futex_word, 1 /* FUTEX_WAKE */, 1, NULL, NULL, 0);
		} else if (!strcmp(call, "close_range")) {
			close_range((unsigned)unused, (unsigned)unused, 0);
		} else if (!strcmp(call, "open")) {
			close(open("/dev/null", O_RDONLY));
		} else {
			fprintf(stderr, "fastpath-loop: unknown call %s\n", call);
			return 2;
		}
	}
	return 0;
}
