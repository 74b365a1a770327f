/*
 * tls_end - how the end of a TLS connection reads: N connections, each one
 * GET /<i> that asks to close (Connection: close), the body read by its
 * Content-Length, then either the end read first and SSL_shutdown called
 * twice ("eof"), or SSL_shutdown twice first and then the end read
 * ("shut"), or "pend": as "eof", with SSL_pending and SSL_has_pending
 * called between the end's read and its SSL_get_error (neither is I/O:
 * the error stays the read's), or "zero": as "eof", with a zero-length
 * SSL_write and an SSL_read_ex (its count set to 77 first) after the end's
 * read, each with its SSL_get_error.  Prints per connection the status line, the end's SSL_read
 * return, SSL_get_error, the queued error's reason, SSL_get_shutdown, and
 * each SSL_shutdown's return with SSL_get_shutdown after it.
 * tests/https_close.bats and tests/matrix.bats compare it without and with
 * the library (docs/tls.md "Ragged closes").
 * Usage: tls_end PORT CA N strict|lax eof|shut|pend [USER-AGENT]
 *   lax: SSL_OP_IGNORE_UNEXPECTED_EOF set on the context
 *   USER-AGENT: sent as the requests' User-Agent (none without it); A+B:
 *   A for the first half of the N, B for the rest
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "tls_common.h"

static int pend; /* "pend": SSL_pending and SSL_has_pending between the end's read and its SSL_get_error */
static int zero; /* "zero": calls after the end's read */

static void end_read(SSL *ssl)
{
	char b[64];
	ERR_clear_error();
	int r = SSL_read(ssl, b, sizeof b);
	if (pend)
		printf(" pending=%d has_pending=%d", SSL_pending(ssl), SSL_has_pending(ssl));
	printf(" read=%d err=%d reason=\"%s\" shutdown=%d", r, r > 0 ? 0 : SSL_get_error(ssl, r), reason(),
	       SSL_get_shutdown(ssl));
	if (!zero)
		return;
	ERR_clear_error();
	r = SSL_write(ssl, b, 0);
	printf(" write0=%d err=%d", r, SSL_get_error(ssl, r));
	size_t rb = 77;
	ERR_clear_error();
	r = SSL_read_ex(ssl, b, sizeof b, &rb);
	printf(" read_ex=%d count=%zu err=%d", r, rb, SSL_get_error(ssl, r));
}

static void shut(SSL *ssl)
{
	for (int k = 0; k < 2; k++) {
		ERR_clear_error();
		int r = SSL_shutdown(ssl);
		printf(" shut%d=%d", k + 1, r);
		if (r < 0)
			printf("/err=%d", SSL_get_error(ssl, r));
		printf("/shutdown=%d", SSL_get_shutdown(ssl));
	}
}

int main(int argc, char **argv)
{
	if (argc < 6)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	int port = atoi(argv[1]), n = atoi(argv[3]);
	int lax = !strcmp(argv[4], "lax"), shut_first = !strcmp(argv[5], "shut");
	pend = !strcmp(argv[5], "pend");
	zero = !strcmp(argv[5], "zero");
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(ctx, argv[2], NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	if (lax)
		SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	for (int i = 1; i <= n; i++) {
		int fd = dial(port);
		SSL *ssl = SSL_new(ctx);
		SSL_set_fd(ssl, fd);
		SSL_set_tlsext_host_name(ssl, "localhost");
		if (SSL_connect(ssl) != 1) {
			printf("%d handshake failed: %s\n", i, reason());
			return 1;
		}
		char rq[256];
		const char *ua = argc > 6 ? argv[6] : NULL, *plus = ua ? strchr(ua, '+') : NULL;
		int ual = ua ? (int)strlen(ua) : 0;
		if (plus && i <= n / 2)
			ual = (int)(plus - ua);
		else if (plus)
			ua = plus + 1, ual = (int)strlen(ua);
		int len = ua ? snprintf(rq, sizeof rq,
					"GET /%d HTTP/1.1\r\nHost: localhost\r\nUser-Agent: %.*s\r\n"
					"Connection: close\r\n\r\n",
					i, ual, ua)
				   : snprintf(rq, sizeof rq,
					      "GET /%d HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", i);
		if (SSL_write(ssl, rq, len) != len) {
			printf("%d write failed\n", i);
			return 1;
		}
		char resp[8192];
		size_t got;
		char *body = read_response(ssl, resp, sizeof resp, &got);
		char *eol = strstr(resp, "\r\n");
		printf("%d %.*s body=%ld", i, eol ? (int)(eol - resp) : 0, resp,
		       body ? (long)(got - (size_t)(body - resp)) : -1L);
		if (shut_first) {
			shut(ssl);
			end_read(ssl);
		} else {
			end_read(ssl);
			shut(ssl);
		}
		printf("\n");
		fflush(stdout);
		SSL_free(ssl);
		close(fd);
	}
	SSL_CTX_free(ctx);
	return 0;
}
