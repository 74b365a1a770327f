/*
 * tls_torn.c - an HTTPS request whose TLS record the socket takes only in
 * part (docs/hold.md "HTTPS"), over OpenSSL as a careful program uses it:
 * after SSL_ERROR_WANT_WRITE it waits for the socket and calls SSL_write
 * again with the same buffer and length.
 * Usage: tls_torn PORT CA FIFO KIND MODE PAD COUNT VERSION
 *   KIND    close: "Connection: close" as the first header; close-last: as
 *           the last; http10: HTTP/1.0 without a Connection header; keep:
 *           HTTP/1.1 without one (its response read by its length, the
 *           connection closed after it: the library pools it); a list
 *           (keep,close): request i is of the i-th (the last for the rest)
 *   MODE    nb: a non-blocking socket (after the handshake); block: a
 *           blocking socket whose first SSL_write a repeating signal
 *           without SA_RESTART interrupts (OpenSSL goes on after a short
 *           write and reports WANT_WRITE at the EINTR of a write that took
 *           nothing); timeo: a blocking socket with SO_SNDTIMEO 200 ms
 *           (WANT_WRITE, errno EAGAIN, when a write timed out having
 *           taken nothing).  MODE+partial: SSL_MODE_ENABLE_PARTIAL_WRITE (each
 *           SSL_write may return a record's count)
 *   PAD     bytes of an X-Pad header (60000: larger than the small send
 *           buffer and the server's small receive buffer: the first record
 *           is torn; 0: it fits); a list (0,0,60000): request i takes the
 *           i-th (the last for the rest)
 *   VERSION 13 or 12: the highest TLS version offered (renegotiation off)
 * With a PAD, SO_SNDBUF is made small after connect().  Once the first
 * SSL_write returned (WANT_WRITE, a count, or all), the client writes a
 * line on FIFO: the server (tests/servers/tls_torn.py) reads only then.
 * Prints per request what the first SSL_write met (with SSL_get_error and
 * errno), whether every later call answered as OpenSSL promises (WANT_WRITE
 * or the rest; with partial writes a count that fits), SSL_pending after
 * the request went, and the response read to its end.
 */
#include "common.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/time.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

static volatile sig_atomic_t rang;
static void on_alarm(int sig) { (void)sig; rang++; }

static void go(const char *fifo)
{
	int f = open(fifo, O_WRONLY);
	if (f < 0 || write(f, "go\n", 3) != 3)
		die("fifo");
	close(f);
}

static size_t make_req(char *req, const char *kind, size_t pad)
{
	char *p = req;
	if (!strcmp(kind, "http10"))
		p += sprintf(p, "GET /torn HTTP/1.0\r\nHost: localhost\r\n");
	else if (!strcmp(kind, "close"))
		p += sprintf(p, "GET /torn HTTP/1.1\r\nConnection: close\r\nHost: localhost\r\n");
	else
		p += sprintf(p, "GET /torn HTTP/1.1\r\nHost: localhost\r\n");
	if (pad) {
		p += sprintf(p, "X-Pad: ");
		for (size_t j = 0; j < pad; j++)
			*p++ = (char)('a' + j % 26);
		p += sprintf(p, "\r\n");
	}
	if (!strcmp(kind, "close-last"))
		p += sprintf(p, "Connection: close\r\n");
	p += sprintf(p, "\r\n");
	return (size_t)(p - req);
}

static const char *err_name(int e)
{
	switch (e) {
	case SSL_ERROR_WANT_WRITE: return "WANT_WRITE";
	case SSL_ERROR_WANT_READ: return "WANT_READ";
	case SSL_ERROR_SYSCALL: return "SYSCALL";
	case SSL_ERROR_SSL: return "SSL";
	case SSL_ERROR_ZERO_RETURN: return "ZERO_RETURN";
	default: return "other";
	}
}

static void timer(bool on)
{
	struct itimerval t = { { 0, on ? 100000 : 0 }, { 0, on ? 100000 : 0 } };
	setitimer(ITIMER_REAL, &t, NULL);
}

int main(int argc, char **argv)
{
	if (argc != 9) {
		fprintf(stderr, "usage: tls_torn PORT CA FIFO KIND MODE PAD COUNT VERSION\n");
		return 2;
	}
	int port = atoi(argv[1]);
	const char *fifo = argv[3], *mode = argv[5];
	char *kinds[8];
	size_t nkinds = 0;
	for (char *q = strtok(argv[4], ","); q && nkinds < 8; q = strtok(NULL, ","))
		kinds[nkinds++] = q;
	if (!nkinds)
		die("KIND");
	long count = strtol(argv[7], NULL, 10);
	bool nb = !strncmp(mode, "nb", 2), block = !strncmp(mode, "block", 5),
	     timeo = !strncmp(mode, "timeo", 5),
	     partial = strstr(mode, "partial") != NULL;
	size_t pads[8], npads = 0;
	for (char *q = argv[6]; npads < 8 && *q;) {
		pads[npads++] = strtoul(q, &q, 10);
		if (*q != ',')
			break;
		q++;
	}
	if (!npads || (!nb && !block && !timeo))
		die("PAD or MODE");
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = { .sa_handler = on_alarm }; /* no SA_RESTART */
	sigaction(SIGALRM, &sa, NULL);

	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx || SSL_CTX_load_verify_locations(ctx, argv[2], NULL) != 1)
		die("context");
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_max_proto_version(ctx, !strcmp(argv[8], "12") ? TLS1_2_VERSION : TLS1_3_VERSION);
	/* (a TLS 1.2 program that may renegotiate is never handed a pooled
	 * connection: docs/tls.md) */
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	if (partial)
		SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE);

	for (long i = 1; i <= count; i++) {
		size_t pad = pads[(size_t)i <= npads ? (size_t)i - 1 : npads - 1];
		const char *kind = kinds[(size_t)i <= nkinds ? (size_t)i - 1 : nkinds - 1];
		bool keep = !strcmp(kind, "keep");
		char *req = malloc(pad + 512);
		if (!req)
			die("malloc");
		size_t len = make_req(req, kind, pad);
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
		inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
			die("connect");
		int small = 4096;
		if (pad && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)) < 0)
			die("setsockopt");
		SSL *ssl = SSL_new(ctx);
		SSL_set_fd(ssl, fd);
		SSL_set_tlsext_host_name(ssl, "localhost");
		SSL_set1_host(ssl, "localhost");
		if (SSL_connect(ssl) != 1) {
			ERR_print_errors_fp(stderr);
			die("SSL_connect (request %ld)", i);
		}
		if (nb && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
			die("fcntl");
		struct timeval tv = { 0, 200000 };
		if (timeo && setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
			die("SO_SNDTIMEO");
		size_t off = 0;
		bool told = false, odd = false;
		char met[96] = "";
		while (off < len) {
			if (block && !told)
				timer(true);
			errno = 0;
			int n = SSL_write(ssl, req + off, (int)(len - off));
			int err = errno, e = n > 0 ? 0 : SSL_get_error(ssl, n);
			if (block && !told)
				timer(false);
			if (n <= 0 && e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ) {
				ERR_print_errors_fp(stderr);
				die("SSL_write (request %ld): %s", i, err_name(e));
			}
			if (!told) {
				if (n > 0)
					snprintf(met, sizeof(met), "%s", (size_t)n < len - off ? "a count" : "all");
				else
					snprintf(met, sizeof(met), "-1 %s errno %s", err_name(e),
						 err == EINTR ? "EINTR" : err == EAGAIN ? "EAGAIN" : "other");
				told = true;
				go(fifo);
			} else if (n > 0 && !partial && (size_t)n != len - off) {
				odd = true; /* OpenSSL without partial writes: all or nothing */
			}
			if (n > 0 && (size_t)n > len - off)
				odd = true;
			if (n <= 0) {
				struct pollfd pf = { .fd = fd, .events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT };
				poll(&pf, 1, -1);
				continue; /* the same buffer and length again */
			}
			off += (size_t)n;
		}
		printf("request %ld: first SSL_write: %s; later calls %s; pending %d\n", i, met,
		       odd ? "ODD" : "as promised", SSL_pending(ssl));
		char buf[4096], got[8192];
		size_t got_len = 0;
		for (;;) {
			int n = SSL_read(ssl, buf, sizeof(buf));
			if (n > 0) {
				fwrite(buf, 1, (size_t)n, stdout);
				if (keep && got_len + (size_t)n < sizeof(got)) {
					memcpy(got + got_len, buf, (size_t)n);
					got_len += (size_t)n;
					if (got_len >= 7 && !memcmp(got + got_len - 7, "\r\n\r\nok\n", 7)) {
						printf("end: by length\n");
						break;
					}
				}
				continue;
			}
			int e = SSL_get_error(ssl, n);
			if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
				struct pollfd pf = { .fd = fd, .events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT };
				poll(&pf, 1, -1);
				continue;
			}
			printf("end: %s\n", err_name(e));
			break;
		}
		ERR_clear_error();
		SSL_free(ssl);
		close(fd);
		free(req);
	}
	SSL_CTX_free(ctx);
	return 0;
}
