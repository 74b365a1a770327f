/*
 * tls_first_read.c - an HTTPS connection read or polled before its first
 * request, while the server closes the kept connection a library handed
 * out to its SSL (docs/replay.md "Before the first request", TLS).
 * Against tests/servers/tls_idle_cue.py, whose idle close comes on our cue.
 *
 * Usage: tls_first_read MODE PORT CA DIR ROUNDS
 *   MODE   nbread | nbreadex | nbpeek: a non-blocking SSL_read, SSL_read_ex
 *          or SSL_peek before the request (alone: WANT_READ);
 *          poll | select | epoll: readable? with no wait (alone: no,
 *          nothing to read; readable then a read that says WANT_READ is
 *          printed as the same); pollthread: poll in another thread
 *          than the SSL's (the library leaves the report, the read
 *          after it meets the end in the SSL's thread);
 *          rcvtimeo: a blocking SSL_read bounded by SO_RCVTIMEO (alone:
 *          WANT_READ once the bound is spent, nothing came);
 *          write: nothing before the request (the write meets the close)
 *   CA     the test CA (ca.pem); the server is "localhost"
 *   DIR    the server's directory (its fifos cue and done)
 * Each round: GET /warm on a connection of its own (read, SSL_shutdown,
 * closed: a library keeps it), then SSL_connect on a new one; the server
 * is cued to close every connection idle after an answer, and its "done"
 * read; where it closed ours (a library handed /warm's to our SSL), its
 * FIN (or reset) is awaited on that socket (/proc/net/tcp); then MODE,
 * its result printed (return, SSL_get_error, SSL_get_shutdown), then the
 * request /rN and its answer; at the end the context's handshake counts.
 * Only events are waited for.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
#include "tls_common.h"
#include "tcp_state.h"

static void die(const char *what)
{
	fprintf(stderr, "tls_first_read: %s: %s (%s)\n", what, strerror(errno), reason());
	exit(1);
}

/* The server closes its idle kept connections; back once it did: whether
 * the connection of fd (a kept one a library handed out) was one. */
static bool cue_close(const char *dir, int fd)
{
	char line[1024];
	cue_close_line(dir, line, sizeof(line));
	struct sockaddr_in me;
	socklen_t ml = sizeof(me);
	if (getsockname(fd, (struct sockaddr *)&me, &ml) < 0)
		die("getsockname");
	char *at = line, *end;
	for (long n = strtol(at, &end, 10); n-- > 0 && end != at;)
		if (strtol(at = end, &end, 10) == ntohs(me.sin_port))
			return true;
	return false;
}

/* An SSL call's outcome as the program sees it */
static void said(int round, const char *what, SSL *ssl, int r)
{
	int err = SSL_get_error(ssl, r);
	printf("%d %s: r=%d err=%d shutdown=%d\n", round, what, r, err, SSL_get_shutdown(ssl));
	ERR_clear_error();
}

/* Read the answer (a non-blocking socket waits in poll): "STATUS | BODY"
 * or what ended it */
static void answer(int round, SSL *ssl, int fd)
{
	char resp[4096];
	size_t got = 0;
	long want = -1;
	char *body = NULL;
	while (!body || (long)(got - (size_t)(body - resp)) < want) {
		int r = SSL_read(ssl, resp + got, (int)(sizeof(resp) - 1 - got));
		if (r <= 0) {
			int err = SSL_get_error(ssl, r);
			if (err == SSL_ERROR_WANT_READ) {
				struct pollfd p = { .fd = fd, .events = POLLIN };
				poll(&p, 1, -1);
				continue;
			}
			said(round, "answer read", ssl, r);
			return;
		}
		got += (size_t)r;
		resp[got] = 0;
		if (!body && (body = strstr(resp, "\r\n\r\n"))) {
			body += 4;
			const char *cl = strcasestr(resp, "content-length:");
			want = cl ? atol(cl + 15) : 0;
		}
	}
	char *eol = strstr(resp, "\r\n");
	if (eol)
		*eol = 0;
	printf("%d answer: %s | %s", round, resp, body);
}

static void *poll_thread(void *arg)
{
	struct pollfd *p = arg;
	return (void *)(long)poll(p, 1, 0);
}

/* Whether fd is readable now (no wait), by poll, select or epoll (or poll
 * in another thread): the count, p->revents as poll's */
static int ready(const char *how, struct pollfd *p)
{
	if (!strcmp(how, "pollthread")) {
		pthread_t t;
		void *k;
		if (pthread_create(&t, NULL, poll_thread, p) || pthread_join(t, &k))
			die("thread");
		return (int)(long)k;
	}
	if (!strcmp(how, "poll"))
		return poll(p, 1, 0);
	if (!strcmp(how, "select")) {
		fd_set rd, ex;
		FD_ZERO(&rd);
		FD_ZERO(&ex);
		FD_SET(p->fd, &rd);
		FD_SET(p->fd, &ex);
		struct timeval tv = { 0 };
		int k = select(p->fd + 1, &rd, NULL, &ex, &tv);
		p->revents = (short)((FD_ISSET(p->fd, &rd) ? POLLIN : 0) | (FD_ISSET(p->fd, &ex) ? POLLPRI : 0));
		return k;
	}
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.fd = p->fd }, got;
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, p->fd, &ev) < 0)
		die("epoll");
	int k = epoll_wait(ep, &got, 1, 0);
	p->revents = k > 0 ? (short)got.events : 0;
	close(ep);
	return k;
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: tls_first_read MODE PORT CA DIR ROUNDS\n");
		return 2;
	}
	const char *mode = argv[1], *dir = argv[4];
	int port = atoi(argv[2]);
	signal(SIGPIPE, SIG_IGN);
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx || !SSL_CTX_load_verify_locations(ctx, argv[3], NULL))
		die("CA");
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	/* (a TLS 1.2 connection is handed out only to a program that refuses
	 * renegotiation: docs/tls.md "Renegotiation") */
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	for (int r = 1; r <= atoi(argv[5]); r++) {
		char resp[4096];
		size_t got;
		SSL *warm = tls_new(ctx, port);
		if (SSL_connect(warm) != 1)
			die("warm connect");
		static const char wreq[] = "GET /warm HTTP/1.1\r\nHost: localhost\r\n\r\n";
		SSL_write(warm, wreq, (int)sizeof(wreq) - 1);
		char *body = read_response(warm, resp, sizeof(resp), &got);
		printf("%d warm: %s", r, body ? body : "(no answer)\n");
		tls_close(warm);

		SSL *ssl = tls_new(ctx, port);
		int fd = SSL_get_fd(ssl);
		if (SSL_connect(ssl) != 1)
			die("connect");
		ino_t first = inode(fd);
		fflush(stdout);
		if (cue_close(dir, fd)) /* the server's FIN or reset, in */
			for (int i = 0; tcp_state(first) == 1; i++) {
				if (i > 100000)
					die("never saw the server's close");
				usleep(200);
			}
		bool nb = strcmp(mode, "rcvtimeo") != 0;
		if (nb)
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		char buf[100];
		size_t n = 0;
		if (!strcmp(mode, "nbread")) {
			said(r, "SSL_read", ssl, SSL_read(ssl, buf, sizeof(buf)));
		} else if (!strcmp(mode, "nbreadex")) {
			int x = SSL_read_ex(ssl, buf, sizeof(buf), &n);
			said(r, "SSL_read_ex", ssl, x);
			printf("%d read_ex got %zu, pending %d\n", r, n, SSL_pending(ssl));
		} else if (!strcmp(mode, "nbpeek")) {
			said(r, "SSL_peek", ssl, SSL_peek(ssl, buf, sizeof(buf)));
		} else if (!strcmp(mode, "rcvtimeo")) {
			/* a blocking read bounded by SO_RCVTIMEO: alone it
			 * waits out the bound, nothing comes */
			struct timeval tv = { .tv_usec = 300000 };
			if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
				die("SO_RCVTIMEO");
			said(r, "SSL_read", ssl, SSL_read(ssl, buf, sizeof(buf)));
			tv.tv_usec = 0;
			setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		} else if (!strcmp(mode, "poll") || !strcmp(mode, "select") || !strcmp(mode, "epoll") ||
			   !strcmp(mode, "pollthread")) {
			struct pollfd p = { .fd = fd, .events = POLLIN };
			int k = ready(mode, &p);
			/* readable with nothing to read (a wake-up every poll
			 * may give, and a fresh handshake's reply under way
			 * gives) is what alone's 0 is: the read after it says */
			int x = k > 0 ? SSL_read(ssl, buf, sizeof(buf)) : -1;
			if (k == 0 || (x < 0 && SSL_get_error(ssl, x) == SSL_ERROR_WANT_READ)) {
				printf("%d poll: nothing to read\n", r);
				ERR_clear_error();
			} else {
				printf("%d poll: %d revents %#x\n", r, k, (unsigned)p.revents);
				said(r, "SSL_read after poll", ssl, x);
			}
		}
		static const char fmt[] = "GET /r%d HTTP/1.1\r\nHost: localhost\r\n\r\n";
		char req[128];
		int len = snprintf(req, sizeof(req), fmt, r);
		int w = SSL_write(ssl, req, len);
		/* (WANT_READ: a handshake under way, its reply awaited) */
		while (w <= 0 && (SSL_get_error(ssl, w) == SSL_ERROR_WANT_WRITE ||
				  SSL_get_error(ssl, w) == SSL_ERROR_WANT_READ)) {
			short ev = SSL_get_error(ssl, w) == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
			struct pollfd p = { .fd = fd, .events = ev };
			poll(&p, 1, -1);
			w = SSL_write(ssl, req, len);
		}
		if (w <= 0)
			said(r, "write", ssl, w);
		else
			answer(r, ssl, fd);
		tls_close(ssl);
		fflush(stdout);
	}
	/* the context's counts: one handshake a connection, as alone */
	printf("handshakes %ld good %ld hits %ld misses %ld\n", SSL_CTX_sess_connect(ctx),
	       SSL_CTX_sess_connect_good(ctx), SSL_CTX_sess_hits(ctx), SSL_CTX_sess_misses(ctx));
	SSL_CTX_free(ctx);
	return 0;
}
