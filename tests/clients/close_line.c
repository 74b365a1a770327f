/*
 * close_line.c - what a program that asked to close reads, read in pieces
 * of every shape (docs/replay.md, "A closing answer"): for each of COUNT
 * requests a new socket, "Connection: close", then everything read until
 * EOF with MODE, printed as read, after a line "== i".
 *
 * MODE: read1 (read 1 byte), recv1 (recv 1 byte), read7 (read 7 bytes),
 * big (read 65536), peek (recv MSG_PEEK 5 bytes, then read as many; a peek
 * that differs from the read prints "PEEK MISMATCH"), readv (iovecs of
 * 3, 1 and 4 bytes), recvmsg (iovecs of 2 and 5), waitall (one
 * recvmsg(MSG_WAITALL) of 65536, then recv until 0), poll1 and epoll1
 * (non-blocking: wait for POLLIN, or EPOLLIN, up to 5 s, then recv 1 byte;
 * a wait that times out prints "WAIT TIMEOUT": the bytes a close line
 * pushed past a read must make the socket readable).
 *
 * Usage: close_line HOST PORT MODE COUNT [POST]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/epoll.h>
#include <poll.h>
#include <fcntl.h>
#include <unistd.h>

static ssize_t one_read(int s, const char *mode, char *buf)
{
	if (!strcmp(mode, "read1"))
		return read(s, buf, 1);
	if (!strcmp(mode, "recv1"))
		return recv(s, buf, 1, 0);
	if (!strcmp(mode, "read7"))
		return read(s, buf, 7);
	if (!strcmp(mode, "big"))
		return read(s, buf, 65536);
	if (!strcmp(mode, "peek")) {
		char p[5];
		ssize_t n = recv(s, p, sizeof(p), MSG_PEEK);
		if (n <= 0)
			return n;
		ssize_t r = read(s, buf, (size_t)n);
		if (r != n || memcmp(p, buf, (size_t)n))
			printf("PEEK MISMATCH\n");
		return r;
	}
	if (!strcmp(mode, "readv")) {
		struct iovec iov[3] = { { buf, 3 }, { buf + 3, 1 }, { buf + 4, 4 } };
		return readv(s, iov, 3);
	}
	if (!strcmp(mode, "recvmsg")) {
		struct iovec iov[2] = { { buf, 2 }, { buf + 2, 5 } };
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };
		return recvmsg(s, &m, 0);
	}
	if (!strcmp(mode, "poll1") || !strcmp(mode, "epoll1")) {
		static int ep = -1;
		fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK);
		for (;;) {
			int n;
			if (mode[0] == 'p') {
				struct pollfd p = { .fd = s, .events = POLLIN | POLLRDHUP };
				n = poll(&p, 1, 5000);
			} else {
				if (ep < 0)
					ep = epoll_create1(0);
				struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.fd = s }, out;
				epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev); /* EEXIST after the first */
				n = epoll_wait(ep, &out, 1, 5000);
			}
			if (n == 0) {
				printf("WAIT TIMEOUT\n");
				return -1;
			}
			ssize_t r = recv(s, buf, 1, 0);
			if (r < 0 && errno == EAGAIN)
				continue;
			if (r == 0 && ep >= 0)
				epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL);
			return r;
		}
	}
	if (!strcmp(mode, "waitall")) {
		static int first = 1;
		if (first) {
			first = 0;
			struct iovec iov[2] = { { buf, 100 }, { buf + 100, 65436 } };
			struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };
			return recvmsg(s, &m, MSG_WAITALL);
		}
		ssize_t r = recv(s, buf, 65536, 0);
		if (r == 0)
			first = 1;
		return r;
	}
	fprintf(stderr, "unknown mode %s\n", mode);
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc < 5)
		return 2;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2])) };
	inet_pton(AF_INET, argv[1], &a.sin_addr);
	const char *mode = argv[3];
	int count = atoi(argv[4]);
	int post = argc > 5 && !strcmp(argv[5], "POST");
	static char buf[65536];
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	for (int i = 1; i <= count; i++) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
			return 1;
		char req[256];
		int n = post ? snprintf(req, sizeof(req),
					"POST /p%d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
					"Content-Length: 5\r\n\r\nhello",
					i)
			     : snprintf(req, sizeof(req),
					"GET /g%d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", i);
		if (write(s, req, (size_t)n) != n)
			return 1;
		printf("== %d\n", i);
		ssize_t r;
		while ((r = one_read(s, mode, buf)) > 0)
			fwrite(buf, 1, (size_t)r, stdout);
		if (r < 0)
			printf("\nERROR %s\n", strerrorname_np(errno));
		printf("\n");
		close(s);
	}
	return fflush(stdout) == 0 ? 0 : 1;
}
