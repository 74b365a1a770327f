/*
 * tls_owed - what becomes of the close_notify a program's SSL_shutdown is
 * told it sent, which the library holds while the connection may be
 * parked (docs/tls.md "The close_notify owed"), against a strict server
 * that logs how each connection ended (tests/servers/tls_close.py,
 * TLS_CLOSE_STRICT=1).  N rounds of a keep-alive GET /f, then by MODE:
 *   noclose    SSL_shutdown, SSL_free, the socket left open to the exit
 *   nofree     SSL_shutdown, neither SSL_free nor close before the exit
 *   shutwr     SSL_shutdown, shutdown(SHUT_WR), SSL_free, close
 *   rdwr       SSL_shutdown, shutdown(SHUT_RDWR), SSL_free, close
 *   setshut    SSL_set_shutdown(SENT) (nothing sent), a 2 s receive
 *              timeout, SSL_shutdown (alone: it waits for the server's)
 *   setshut_read  the same with SSL_read
 * and the waits of a lingering close, each bounded by 3 s (alone the
 * server answers the close_notify at once):
 *   drain      SSL_shutdown, SSL_free, then poll and read the raw socket
 *              until its EOF
 *   drain_read the same with blocking reads (SO_RCVTIMEO)
 *   drain_select, drain_epoll  the same waiting in select, epoll_wait
 *   drain_noshut  as drain without SSL_shutdown
 *   again      SSL_shutdown, a poll for the server's answer, SSL_shutdown
 *              again (the SSL kept)
 *   exec       SSL_shutdown, SSL_free, close; the last round's socket
 *              left open, then exec /bin/true (the socket inherited)
 *   exec_closed  each round closed, then exec /bin/true
 *   exec_fail  SSL_shutdown, SSL_free, an exec that fails, close
 *   fork, system  SSL_shutdown, a fork (the child exits) or system("true"),
 *              SSL_free, close
 *   clear, close_clear  SSL_shutdown, SSL_clear (before or after the
 *              close), SSL_free, close
 *   free       SSL_free and close, no SSL_shutdown (CPython's end)
 * With TLS_OWED_TEACH=1 an extra first round ends plainly (SSL_shutdown,
 * SSL_free, close): the next round may be handed its connection.  With
 * TLS_OWED_CLOSE=1 each request asks to close (Connection: close).
 * Prints what each call returned.
 * Usage: tls_owed PORT CAFILE N MODE
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tls_common.h"

/* Wait up to 3 s for fd to read, as mode says; 1 readable, 0 not. */
static int wait_in(int fd, const char *mode)
{
	if (!strcmp(mode, "drain_select")) {
		fd_set rs;
		FD_ZERO(&rs);
		FD_SET(fd, &rs);
		struct timeval tv = { 3, 0 };
		return select(fd + 1, &rs, NULL, NULL, &tv) > 0;
	}
	if (!strcmp(mode, "drain_epoll")) {
		int ep = epoll_create1(0);
		struct epoll_event ev = { .events = EPOLLIN }, out;
		epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
		int r = epoll_wait(ep, &out, 1, 3000);
		close(ep);
		return r > 0;
	}
	struct pollfd p = { fd, POLLIN, 0 };
	return poll(&p, 1, 3000) > 0;
}

/* The raw socket read to its EOF after the SSL is gone: what came, how it
 * ended. */
static void drain(int r, int fd, const char *mode, int c, size_t got, int s)
{
	long bytes = 0;
	ssize_t n = -1;
	int err = 0;
	if (!strcmp(mode, "drain_read")) {
		struct timeval tv = { 3, 0 };
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	}
	for (;;) {
		char b[512];
		if (strcmp(mode, "drain_read") && !wait_in(fd, mode)) {
			n = -9; /* (not readable in 3 s) */
			break;
		}
		if ((n = read(fd, b, sizeof b)) <= 0)
			break;
		bytes += n;
	}
	if (n < 0)
		err = errno;
	printf("%d connect=%d got=%zu shutdown=%d drained=%ld end=%zd errno=%d\n", r, c, got, s, bytes, n,
	       err);
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: tls_owed PORT CAFILE N MODE\n");
		return 2;
	}
	int port = atoi(argv[1]), n = atoi(argv[3]);
	const char *mode = argv[4];
	setvbuf(stdout, NULL, _IOLBF, 0);
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(ctx, argv[2], NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	bool asks_close = getenv("TLS_OWED_CLOSE") && !strcmp(getenv("TLS_OWED_CLOSE"), "1");
	bool teach = getenv("TLS_OWED_TEACH") && !strcmp(getenv("TLS_OWED_TEACH"), "1");
	for (int r = teach ? 0 : 1; r <= n; r++) {
		SSL *ssl = tls_new(ctx, port);
		int c = SSL_connect(ssl);
		char resp[8192];
		size_t got = 0;
		if (c == 1 && asks_close) {
			static const char req[] = "GET /f HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
			SSL_write(ssl, req, (int)sizeof(req) - 1);
			read_response(ssl, resp, sizeof resp, &got);
		} else if (c == 1) {
			tls_get_f(ssl, resp, sizeof resp, &got);
		}
		int fd = SSL_get_fd(ssl);
		if (r == 0) { /* (the teaching round) */
			printf("0 connect=%d got=%zu shutdown=%d\n", c, got, SSL_shutdown(ssl));
			SSL_free(ssl);
			close(fd);
			continue;
		}
		if (!strncmp(mode, "setshut", 7)) {
			struct timeval tv = { 2, 0 };
			setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
			SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN);
			ERR_clear_error();
			char rb[64];
			int s = strcmp(mode, "setshut_read") ? SSL_shutdown(ssl) : SSL_read(ssl, rb, sizeof rb);
			printf("%d connect=%d got=%zu call=%d err=%d reason=%s bits=%d\n", r, c, got, s,
			       SSL_get_error(ssl, s), reason(), SSL_get_shutdown(ssl));
			ERR_clear_error();
			SSL_free(ssl);
			close(fd);
			continue;
		}
		if (!strncmp(mode, "drain", 5)) {
			int s = strcmp(mode, "drain_noshut") ? SSL_shutdown(ssl) : 99;
			SSL_free(ssl);
			drain(r, fd, mode, c, got, s);
			close(fd);
			continue;
		}
		if (!strcmp(mode, "again")) {
			int s = SSL_shutdown(ssl);
			int w = wait_in(fd, "poll");
			int s2 = SSL_shutdown(ssl);
			printf("%d connect=%d got=%zu shutdown=%d readable=%d again=%d bits=%d\n", r, c, got, s, w,
			       s2, SSL_get_shutdown(ssl));
			SSL_free(ssl);
			close(fd);
			continue;
		}
		if (!strcmp(mode, "free")) { /* (CPython's end: no SSL_shutdown) */
			printf("%d connect=%d got=%zu\n", r, c, got);
			SSL_free(ssl);
			close(fd);
			continue;
		}
		int s = SSL_shutdown(ssl), sw = 99;
		if (!strcmp(mode, "fork") || !strcmp(mode, "system")) {
			/* another owner for a moment, before the close */
			if (!strcmp(mode, "system")) {
				sw = system("true");
			} else {
				pid_t p = fork();
				if (p == 0)
					_exit(0);
				waitpid(p, &sw, 0);
			}
		} else if (!strcmp(mode, "clear") || !strcmp(mode, "close_clear")) {
			/* the SSL cleared for reuse (before or after the close) */
			if (!strcmp(mode, "close_clear")) {
				close(fd);
				fd = -1;
			}
			sw = SSL_clear(ssl);
		}
		if (!strcmp(mode, "shutwr"))
			sw = shutdown(fd, SHUT_WR);
		else if (!strcmp(mode, "rdwr"))
			sw = shutdown(fd, SHUT_RDWR);
		printf("%d connect=%d got=%zu shutdown=%d shutdown(2)=%d\n", r, c, got, s, sw);
		if (strcmp(mode, "nofree"))
			SSL_free(ssl);
		if (!strcmp(mode, "exec_fail")) { /* (an exec that fails, the socket open) */
			int x = execl("/nonexistent/x", "x", (char *)NULL), e = errno;
			printf("%d exec=%d errno=%d\n", r, x, e);
		}
		bool held = !strcmp(mode, "exec") && r == n; /* (the socket kept across the exec) */
		if (strcmp(mode, "nofree") && strcmp(mode, "noclose") && !held && fd >= 0)
			close(fd);
	}
	if (!strcmp(mode, "exec") || !strcmp(mode, "exec_closed")) {
		execl("/bin/true", "true", (char *)NULL);
		perror("execl");
		return 1;
	}
	return 0;
}
