/*
 * tls_busy.c - another call on a connection while a request is being sent
 * (docs/hold.md "Never wait on a busy connection").  Thread A writes one
 * request, head and a 4 MiB body in one write() (or SSL_write), to a
 * server that does not read yet: A's send blocks.  Then thread B (or a
 * signal handler on A) makes one call on the socket; alone each returns at
 * once, and so must it with the library.
 * Usage: tls_busy PORT CA TRANSPORT MODE SERVER CALL FIFO [BODY_MB]
 *   TRANSPORT plain or tls (TLS 1.3, CA verifies the server)
 *   MODE      block, or nb (O_NONBLOCK: A waits in poll between writes)
 *   SERVER    reads: the server reads once the client writes a line on
 *             FIFO (after B's call); never: it never reads
 *   CALL      shutdown (SHUT_WR), close, recv (MSG_PEEK | MSG_DONTWAIT: a TLS
 *             session ticket may wait), setsockopt
 *             (TCP_NODELAY), dup (then close of the copy), fork (the
 *             child exits at once), or sig-dup, sig-close, sig-recv: the
 *             same made by a SIGUSR1 handler that interrupts A's write;
 *             sig-storm: the server reads at once (SERVER must be reads),
 *             and a handler's dup interrupts A's write every 200 us
 *   BODY_MB   the body's size (default 4)
 * Prints B's call and its answer, then (the server reading, or after a
 * shutdown, which ends A's write) how A's write ended and the response's
 * status line; with a server that never reads, A stays in its write, as
 * alone, and the process exits.
 */
#include "common.h"

#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

static unsigned body_len = 4u << 20;

static int fd;
static SSL *ssl;
static bool nb;
static volatile int started;
static char *req;
static size_t req_len;
static char a_out[512];

static volatile sig_atomic_t sig_done;
static volatile int sig_ret, sig_err;
static const char *sig_call;

static void on_usr1(int sig)
{
	(void)sig;
	int saved = errno;
	char b;
	if (!strcmp(sig_call, "sig-dup") || !strcmp(sig_call, "sig-storm")) {
		sig_ret = dup(fd);
		sig_err = errno;
		if (sig_ret >= 0) {
			close(sig_ret);
			sig_ret = 0;
		}
	} else if (!strcmp(sig_call, "sig-close")) {
		sig_ret = close(fd);
		sig_err = errno;
	} else {
		sig_ret = (int)recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
		sig_err = errno;
	}
	sig_done = 1;
	errno = saved;
}

static void wait_io(short ev)
{
	struct pollfd p = { .fd = fd, .events = ev };
	poll(&p, 1, -1);
}

/* A: the request in one call (its rest in later ones), then the response */
static volatile int a_done;

static void *writer(void *arg)
{
	(void)arg;
	void *writer_body(void);
	writer_body();
	a_done = 1;
	return NULL;
}

void *writer_body(void)
{
	size_t off = 0;
	started = 1;
	while (off < req_len) {
		if (ssl) {
			size_t w;
			int r = SSL_write_ex(ssl, req + off, req_len - off, &w);
			if (r == 1) {
				off += w;
				continue;
			}
			int e = SSL_get_error(ssl, r);
			if (nb && (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ)) {
				wait_io(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT);
				continue;
			}
			if (e == SSL_ERROR_SYSCALL && errno == EINTR)
				continue;
			snprintf(a_out, sizeof(a_out), "A: SSL_write error %d (%s)\n", e,
				 e == SSL_ERROR_SYSCALL ? strerror(errno) : "ssl");
			return NULL;
		}
		ssize_t r = write(fd, req + off, req_len - off);
		if (r > 0) {
			off += (size_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && nb && errno == EAGAIN) {
			wait_io(POLLOUT);
			continue;
		}
		snprintf(a_out, sizeof(a_out), "A: write error %s\n", strerror(errno));
		return NULL;
	}
	char resp[256];
	size_t got = 0;
	while (got < sizeof(resp) - 1) {
		ssize_t r;
		if (ssl) {
			size_t n;
			int x = SSL_read_ex(ssl, resp + got, sizeof(resp) - 1 - got, &n);
			if (x != 1) {
				int e = SSL_get_error(ssl, x);
				if (nb && (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)) {
					wait_io(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT);
					continue;
				}
				break;
			}
			r = (ssize_t)n;
		} else {
			r = read(fd, resp + got, sizeof(resp) - 1 - got);
			if (r < 0 && nb && errno == EAGAIN) {
				wait_io(POLLIN);
				continue;
			}
			if (r <= 0)
				break;
		}
		got += (size_t)r;
	}
	resp[got] = 0;
	char *eol = strstr(resp, "\r\n");
	if (eol)
		*eol = 0;
	snprintf(a_out, sizeof(a_out), "A: all written; response: %s\n", got ? resp : "(none)");
	return NULL;
}

/* A's write is under way and the socket's queue no longer grows: A waits
 * for the server (a sync, not a timing: the outcome does not depend on it) */
static void until_blocked(void)
{
	while (!started)
		usleep(1000);
	int last = -1, same = 0;
	while (same < 5) {
		usleep(20000);
		int q = 0;
		ioctl(fd, SIOCOUTQ, &q);
		same = q > 0 && q == last ? same + 1 : 0;
		last = q;
	}
}

static void b_call(const char *call, pthread_t a)
{
	int r, err;
	char b;
	if (!strncmp(call, "sig-", 4)) {
		sig_call = call;
		pthread_kill(a, SIGUSR1);
		while (!sig_done)
			usleep(1000);
		r = sig_ret;
		err = sig_err;
	} else if (!strcmp(call, "shutdown")) {
		r = shutdown(fd, SHUT_WR);
		err = errno;
	} else if (!strcmp(call, "close")) {
		r = close(fd);
		err = errno;
	} else if (!strcmp(call, "recv")) {
		r = (int)recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
		err = errno;
	} else if (!strcmp(call, "setsockopt")) {
		int one = 1;
		r = setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		err = errno;
	} else if (!strcmp(call, "dup")) {
		r = dup(fd);
		err = errno;
		if (r >= 0)
			r = close(r);
	} else if (!strcmp(call, "fork")) {
		pid_t p = fork();
		if (p == 0)
			_exit(7);
		int st = 0;
		r = p < 0 ? -1 : waitpid(p, &st, 0) == p && WIFEXITED(st) ? WEXITSTATUS(st) : -2;
		err = errno;
	} else {
		die("CALL %s", call);
	}
	printf("B: %s -> %d%s%s\n", call, r, r < 0 ? " " : "", r < 0 ? strerror(err) : "");
	fflush(stdout);
}

static void go(const char *fifo)
{
	int f = open(fifo, O_WRONLY);
	if (f < 0 || write(f, "go\n", 3) != 3)
		die("fifo");
	close(f);
}

int main(int argc, char **argv)
{
	if (argc != 8 && argc != 9) {
		fprintf(stderr, "usage: tls_busy PORT CA TRANSPORT MODE SERVER CALL FIFO [BODY_MB]\n");
		return 2;
	}
	bool tls = !strcmp(argv[3], "tls"), reads = !strcmp(argv[5], "reads");
	const char *call = argv[6];
	nb = !strcmp(argv[4], "nb");
	if (argc == 9)
		body_len = (unsigned)atoi(argv[8]) << 20;
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = { .sa_handler = on_usr1, .sa_flags = SA_RESTART };
	sigaction(SIGUSR1, &sa, NULL);

	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		die("connect");
	if (tls) {
		SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
		if (!ctx || SSL_CTX_load_verify_locations(ctx, argv[2], NULL) != 1)
			die("context");
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
		SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
		ssl = SSL_new(ctx);
		SSL_set_fd(ssl, fd);
		SSL_set_tlsext_host_name(ssl, "localhost");
		if (SSL_connect(ssl) != 1)
			die("handshake");
	}
	if (nb)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);

	req = malloc(body_len + 256);
	if (!req)
		die("malloc");
	req_len = (size_t)sprintf(req,
				  "POST /busy HTTP/1.1\r\nHost: localhost\r\nContent-Length: %u\r\n"
				  "Connection: close\r\n\r\n",
				  body_len);
	memset(req + req_len, 'b', body_len);
	req_len += body_len;

	pthread_t a;
	pthread_create(&a, NULL, writer, NULL);
	if (!strcmp(call, "sig-storm")) {
		/* the server reads at once; a handler's dup every 200 us lands
		 * anywhere in A's SSL_write, in libssl too */
		sig_call = call;
		go(argv[7]);
		int bad = 0;
		while (!a_done) {
			pthread_kill(a, SIGUSR1);
			usleep(200);
			bad |= sig_done && sig_ret < 0;
		}
		pthread_join(a, NULL);
		printf("B: sig-storm -> %d\n%s", bad ? -1 : 0, a_out);
		fflush(stdout);
		_exit(0);
	}
	until_blocked();
	b_call(call, a);
	if (reads)
		go(argv[7]);
	if (reads || !strcmp(call, "shutdown")) {
		pthread_join(a, NULL);
		fputs(a_out, stdout);
	} else {
		puts("A: still writing (the server does not read)");
	}
	fflush(stdout);
	_exit(0);
}
