/*
 * test_conn.c - the connection core in process (docs/structure.md): every
 * library object below the wrappers (not hooks_*.o: no libc name is
 * interposed here) linked into this test under ASan+UBSan, kp_real bound
 * to libc as in the library, and kp_connect / kp_send_intercept /
 * kp_recv_intercept / kp_recv_done / kp_close driven against a loopback
 * server in a thread of this process, as the wrappers drive them.
 *
 * Checks: three requests asking to close are rewritten and served on one
 * server connection; each response reads whole, then the EOF we owe; the
 * close parks (0); and a connect() or close() made while this thread is
 * inside our code (kp_lock.h: a signal handler that interrupted us) gets
 * the kernel's call, never ours.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "conn.h"
#include "fdtable.h"
#include "real.h"

/* says keep-alive: the program that asked to close reads it masked as
 * close, the same length (a response that says nothing gets a close line) */
static const char RESP[] = "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 5\r\n\r\nhello";
static int lfd;
static int accepted; /* server connections (the server thread's count) */
static pthread_mutex_t acc_lock = PTHREAD_MUTEX_INITIALIZER;

/* one server connection: answer every request head with RESP */
static void *serve_conn(void *p)
{
	int s = (int)(long)p;
	char buf[4096];
	size_t got = 0;
	for (;;) {
		ssize_t r = read(s, buf + got, sizeof(buf) - got);
		if (r <= 0)
			break;
		got += (size_t)r;
		char *end;
		while ((end = memmem(buf, got, "\r\n\r\n", 4))) {
			size_t n = (size_t)(end + 4 - buf);
			if (write(s, RESP, sizeof(RESP) - 1) < 0)
				break;
			memmove(buf, buf + n, got - n);
			got -= n;
		}
		if (got == sizeof(buf))
			break;
	}
	close(s);
	return NULL;
}

static void *server(void *arg)
{
	(void)arg;
	for (;;) {
		int s = accept(lfd, NULL, NULL);
		if (s < 0)
			return NULL;
		pthread_mutex_lock(&acc_lock);
		accepted++;
		pthread_mutex_unlock(&acc_lock);
		pthread_t t;
		pthread_create(&t, NULL, serve_conn, (void *)(long)s);
		pthread_detach(t);
	}
}

static int accepted_now(void)
{
	pthread_mutex_lock(&acc_lock);
	int n = accepted;
	pthread_mutex_unlock(&acc_lock);
	return n;
}

/* what the socket() wrapper teaches the table (hooks_conn.c fresh_fd) */
static int tcp_socket(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	kp_fl_set(fd, KP_FD_TCP);
	kp_fd_note_high(fd);
	return fd;
}

/* the write() wrapper's slow half (hooks_io.c) */
static ssize_t w_write(int fd, const void *buf, size_t n)
{
	struct kp_conn *c = kp_fd_conn(fd);
	struct iovec iov = { (void *)buf, n };
	ssize_t r;
	if (c && kp_send_intercept(c, fd, &iov, 1, 0, &r))
		return r;
	r = write(fd, buf, n);
	if (c)
		kp_send_done(c, fd, &iov, 1, r, 0);
	return r;
}

/* the read() wrapper's slow half */
static ssize_t w_read(int fd, void *buf, size_t n)
{
	struct kp_conn *c = kp_fd_conn(fd);
	ssize_t r;
	if (!c)
		return read(fd, buf, n);
	struct iovec iov = { buf, n };
	if (kp_recv_intercept(c, fd, &iov, 1, 0, &r))
		return r;
	do
		r = read(fd, buf, n);
	while (kp_recv_done(c, fd, &iov, 1, &r, 0));
	return r;
}

static int w_close(int fd)
{
	struct kp_conn *c = kp_fd_conn(fd);
	return c ? kp_close(fd, c) : close(fd);
}

/* one GET asking to close, read to EOF: the bytes read, or -1 */
static ssize_t get(const struct sockaddr_in *sa, char *out, size_t cap, int *fdp)
{
	int fd = tcp_socket();
	*fdp = fd;
	if (kp_connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) != 0)
		return -1;
	static const char req[] = "GET /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
	if (w_write(fd, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1)
		return -1;
	size_t got = 0;
	for (;;) {
		ssize_t r = w_read(fd, out + got, cap - got);
		if (r < 0)
			return -1;
		if (r == 0)
			return (ssize_t)got;
		got += (size_t)r;
	}
}

int main(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	socklen_t sl = sizeof(sa);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 16) ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl)) {
		perror("listen");
		return 1;
	}
	char port[16];
	snprintf(port, sizeof(port), "%d", ntohs(sa.sin_port));
	setenv("KEEPALIVE_PORTS", port, 1);
	kp_real_bind_signal_safe();
	kp_config_load();
	kp_conn_init();
	struct rlimit rl;
	CHECK(kp_fdtab_init(&rl) == 0);
	kp_conn_fd_limits_from(&rl);
	pthread_t t;
	pthread_create(&t, NULL, server, NULL);

	/* three requests, one server connection, each to EOF, each close parks */
	char buf[256];
	for (int i = 0; i < 3; i++) {
		int fd;
		ssize_t n = get(&sa, buf, sizeof(buf), &fd);
		CHECK(n == (ssize_t)sizeof(RESP) - 1);
		CHECK(n > 0 && !memcmp(buf + n - 5, "hello", 5));
		CHECK(kp_fd_conn(fd) != NULL);
		CHECK(w_close(fd) == 0);
		CHECK(kp_fd_conn(fd) == NULL);
	}
	CHECK(accepted_now() == 1);
	CHECK(kp_hidden_count() == 1);

	/* inside our code (a signal handler that interrupted a locked path):
	 * the kernel's connect, never a pooled connection, never tracked */
	int fd = tcp_socket();
	kp_enter();
	CHECK(kp_connect(fd, (const struct sockaddr *)&sa, sizeof(sa)) == 0);
	CHECK(kp_fd_conn(fd) == NULL);
	CHECK(kp_fl(fd) & KP_FD_SHARED);
	kp_leave();
	CHECK(kp_hidden_count() == 1); /* the pooled one is still there */
	for (int i = 0; i < 100 && accepted_now() < 2; i++)
		usleep(10000);
	CHECK(accepted_now() == 2);
	/* and a close of a tracked fd made inside: the kernel's close */
	int fd2;
	CHECK(get(&sa, buf, sizeof(buf), &fd2) == (ssize_t)sizeof(RESP) - 1);
	CHECK(kp_fd_conn(fd2) != NULL);
	kp_enter();
	CHECK(kp_close(fd2, kp_fd_conn(fd2)) == 0);
	kp_leave();
	CHECK(fcntl(fd2, F_GETFD) < 0 && errno == EBADF); /* really closed */
	close(fd);

	printf("test_conn: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
