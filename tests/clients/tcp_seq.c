/*
 * tcp_seq.c - what a client socket on loopback shows when the server ends
 * a kept-alive connection around a request (docs/replay.md, "Measured").
 * No library involved: the kernel's own sequences, which the replay rule
 * reads (TCP_INFO state, tcpi_bytes_acked, SO_ERROR, read returning 0).
 *
 * Usage: tcp_seq [SCENARIO [read|soerr]]   (all scenarios when none)
 * One line per scenario:
 *   NAME state=<tcpi_state> acked=<bytes acked since the request> first=<read or
 *   SO_ERROR first> then=<the other> settle_us=<FIN seen -> state CLOSE>
 * Each connection first makes 4 request/response exchanges so that the
 * server's TCP is in its delayed-ACK (ping-pong) rhythm, as a reused one is.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <linux/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *state_name(int s)
{
	static const char *n[] = { "?",	    "ESTABLISHED", "SYN_SENT",	 "SYN_RECV", "FIN_WAIT1",
				   "FIN_WAIT2", "TIME_WAIT",	 "CLOSE",	 "CLOSE_WAIT", "LAST_ACK",
				   "LISTEN",	 "CLOSING" };
	return s > 0 && s < 12 ? n[s] : "?";
}

static long long now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000LL + t.tv_nsec / 1000;
}

static void info(int fd, struct tcp_info *ti)
{
	socklen_t l = sizeof(*ti);
	memset(ti, 0, sizeof(*ti));
	getsockopt(fd, IPPROTO_TCP, TCP_INFO, ti, &l);
}

static void info(int fd, struct tcp_info *ti);

/* the client socket watched, and when its FIN (CLOSE_WAIT) and its reset
 * (CLOSE) were first seen, counted from the scenario's start */
static int watched = -1;
static long long t0, fin_us, close_us;

static long long now_us(void);

/* sleep ms, watching the client socket's state every 100 us */
static void msleep(int ms)
{
	long long end = now_us() + ms * 1000LL;
	do {
		if (watched >= 0) {
			struct tcp_info ti;
			info(watched, &ti);
			long long t = now_us() - t0;
			if (ti.tcpi_state == 8 && fin_us < 0)
				fin_us = t;
			if (ti.tcpi_state == 7 && close_us < 0)
				close_us = t;
		}
		usleep(100);
	} while (now_us() < end);
}

static void abort_close(int s)
{
	struct linger l = { 1, 0 };
	setsockopt(s, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(s);
}

static const char *read_result(int fd, char *buf, size_t n)
{
	ssize_t r = recv(fd, buf, 1, MSG_DONTWAIT);
	if (r == 0)
		return "read=0";
	if (r > 0)
		return "read=data";
	snprintf(buf, n, "read=%s", strerrorname_np(errno));
	return buf;
}

static const char *soerr_result(int fd, char *buf, size_t n)
{
	int e = 0;
	socklen_t l = sizeof(e);
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l);
	snprintf(buf, n, "SO_ERROR=%s", e ? strerrorname_np(e) : "0");
	return buf;
}

static const char REQ[] = "POST /pay HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi";

/* The server's part after the warm-up; c: the client socket, s: the
 * server's.  Returns the server socket still open (or -1). */
static int scenario(const char *name, int c, int s)
{
	char b[256];
	if (!strcmp(name, "fin-then-request")) { /* the idle-close race */
		close(s);
		msleep(5);
		send(c, REQ, sizeof(REQ) - 1, MSG_NOSIGNAL);
		return -1;
	}
	if (!strcmp(name, "request-then-fin-unread")) { /* close with it unread: RST */
		send(c, REQ, sizeof(REQ) - 1, MSG_NOSIGNAL);
		msleep(5);
		close(s);
		return -1;
	}
	if (!strcmp(name, "read-then-rst")) { /* finding 1: read, abort in the delayed-ACK time */
		send(c, REQ, sizeof(REQ) - 1, MSG_NOSIGNAL);
		msleep(2);
		recv(s, b, sizeof(b), 0);
		abort_close(s);
		return -1;
	}
	if (!strcmp(name, "read-then-fin")) {
		send(c, REQ, sizeof(REQ) - 1, MSG_NOSIGNAL);
		msleep(2);
		recv(s, b, sizeof(b), 0);
		close(s);
		return -1;
	}
	if (!strcmp(name, "halfclose-read-rst")) { /* shutdown(WR), then read, abort */
		shutdown(s, SHUT_WR);
		msleep(5);
		send(c, REQ, sizeof(REQ) - 1, MSG_NOSIGNAL);
		msleep(2);
		recv(s, b, sizeof(b), 0);
		abort_close(s);
		return -1;
	}
	if (!strcmp(name, "halfclose-read-fin")) {
		shutdown(s, SHUT_WR);
		msleep(5);
		send(c, REQ, sizeof(REQ) - 1, MSG_NOSIGNAL);
		msleep(2);
		recv(s, b, sizeof(b), 0);
		close(s);
		return -1;
	}
	if (!strcmp(name, "halfclose-unread")) { /* shutdown(WR), never reads */
		shutdown(s, SHUT_WR);
		msleep(5);
		send(c, REQ, sizeof(REQ) - 1, MSG_NOSIGNAL);
		return s;
	}
	if (!strcmp(name, "rst-idle")) { /* abort before the request */
		abort_close(s);
		msleep(5);
		send(c, REQ, sizeof(REQ) - 1, MSG_NOSIGNAL);
		return -1;
	}
	fprintf(stderr, "unknown scenario %s\n", name);
	exit(2);
}

static const char *ALL[] = { "fin-then-request", "request-then-fin-unread", "read-then-rst",
			     "read-then-fin", "halfclose-read-rst", "halfclose-read-fin",
			     "halfclose-unread", "rst-idle", NULL };

static void run(int lfd, struct sockaddr_in *a, const char *name, int read_first)
{
	int c = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(c, (struct sockaddr *)a, sizeof(*a)) < 0) {
		perror("connect");
		exit(1);
	}
	int s = accept(lfd, NULL, NULL);
	char b[4096];
	watched = -1;
	for (int i = 0; i < 4; i++) { /* request/response rhythm */
		send(c, REQ, sizeof(REQ) - 1, 0);
		recv(s, b, sizeof(b), 0);
		msleep(1);
		send(s, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 38, 0);
		recv(c, b, sizeof(b), 0);
	}
	struct tcp_info ti;
	info(c, &ti);
	unsigned long long acked0 = ti.tcpi_bytes_acked;
	t0 = now_us();
	fin_us = close_us = -1;
	watched = c;
	int left = scenario(name, c, s);
	msleep(50); /* watch the state for 50 ms more */
	watched = -1;
	info(c, &ti);
	int inq = 0;
	ioctl(c, FIONREAD, &inq);
	char r1[64], r2[64];
	const char *first, *then;
	if (read_first) {
		first = read_result(c, r1, sizeof(r1));
		then = soerr_result(c, r2, sizeof(r2));
	} else {
		first = soerr_result(c, r1, sizeof(r1));
		then = read_result(c, r2, sizeof(r2));
	}
	char r3[64];
	const char *third = read_result(c, r3, sizeof(r3));
	printf("%-24s state=%-11s acked=%llu inq=%d fin_us=%lld close_us=%lld srtt_us=%u %s %s %s\n",
	       name, state_name(ti.tcpi_state), ti.tcpi_bytes_acked - acked0, inq, fin_us, close_us,
	       ti.tcpi_rtt, first, then, third);
	close(c);
	if (left >= 0)
		close(left);
}

int main(int argc, char **argv)
{
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 8) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &al) < 0) {
		perror("listen");
		return 1;
	}
	int read_first = !(argc > 2 && !strcmp(argv[2], "soerr"));
	if (argc > 1) {
		run(lfd, &a, argv[1], read_first);
		return 0;
	}
	for (int i = 0; ALL[i]; i++)
		for (int rf = 1; rf >= 0; rf--)
			run(lfd, &a, ALL[i], rf);
	return 0;
}
