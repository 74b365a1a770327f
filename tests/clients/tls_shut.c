/*
 * tls_shut - what a program does with its SSL after its own SSL_shutdown
 * on a keep-alive connection: N connections, one after the other, each one
 * request that does not ask to close (GET /<i>, or POST /post/<i> with a
 * 5-byte body: a 2xx answer, whose connection may be parked), its answer read by Content-Length, then SSL_shutdown and:
 *   once   nothing more (Ruby's sysclose, curl's close: the SSL is freed)
 *   twice  SSL_shutdown again (waits for the server's close_notify)
 *   bidi   SSL_read until it ends (the bidirectional shutdown)
 *   write  SSL_write of a POST /after, then SSL_write_ex of one, then
 *          SSL_shutdown again (libssl refuses them: nothing sent)
 * Prints per connection every return, SSL_get_error, the queued error's
 * reason and SSL_get_shutdown.  tests/https_shut.bats compares it without
 * and with the library (docs/tls.md "The program's SSL_shutdown").
 * Usage: tls_shut PORT CA N once|twice|bidi|write get|post
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

static void said(SSL *ssl, const char *what, int r)
{
	printf(" %s=%d", what, r);
	if (r <= 0)
		printf("/err=%d/\"%s\"", SSL_get_error(ssl, r), reason());
	printf("/shutdown=%d", SSL_get_shutdown(ssl));
}

static void shut(SSL *ssl, const char *what)
{
	ERR_clear_error();
	said(ssl, what, SSL_shutdown(ssl));
}

static void after(SSL *ssl, const char *pattern)
{
	shut(ssl, "shut1");
	if (!strcmp(pattern, "twice")) {
		shut(ssl, "shut2");
	} else if (!strcmp(pattern, "bidi")) {
		char b[256];
		int r;
		ERR_clear_error();
		while ((r = SSL_read(ssl, b, sizeof b)) > 0)
			printf(" got=%d", r);
		said(ssl, "read", r);
	} else if (!strcmp(pattern, "write")) {
		static const char rq[] = "POST /after HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nafter";
		ERR_clear_error();
		said(ssl, "write", SSL_write(ssl, rq, (int)strlen(rq)));
		size_t put = 0;
		ERR_clear_error();
		int r = SSL_write_ex(ssl, rq, strlen(rq), &put);
		said(ssl, "write_ex", r);
		printf("/put=%zu", put);
		shut(ssl, "shut2");
	}
}

int main(int argc, char **argv)
{
	if (argc < 6)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	int port = atoi(argv[1]), n = atoi(argv[3]);
	const char *pattern = argv[4];
	int post = !strcmp(argv[5], "post");
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(ctx, argv[2], NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
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
		int len = post ? snprintf(rq, sizeof rq,
					  "POST /post/%d HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello", i)
			       : snprintf(rq, sizeof rq, "GET /%d HTTP/1.1\r\nHost: localhost\r\n\r\n", i);
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
		after(ssl, pattern);
		printf("\n");
		fflush(stdout);
		SSL_free(ssl);
		close(fd);
	}
	SSL_CTX_free(ctx);
	return 0;
}
