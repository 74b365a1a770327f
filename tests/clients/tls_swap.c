/*
 * tls_swap.c PORT CAFILE N - N GETs /x/i, one connection and SSL each
 * (renegotiation refused: TLS 1.2 may be handed out too), SSL_VERIFY_NONE
 * and, as OpenSSL's SSL_get_verify_result(3) tells such a program to, the
 * result checked right after SSL_connect: nothing is sent unless it is
 * X509_V_OK.  WATCH (environment): from request 2 on, an info callback
 * set after the check (a watcher: a hand-out then makes its own handshake
 * on a fresh connection).  BLIND (environment): SSL_VERIFY_PEER and no
 * look at the peer at all (the handshake's verification is the program's
 * only check).  Prints what it saw and what came back.  Against
 * tests/servers/tls_swap.py (docs/tls.md "A fresh handshake in place of a
 * handed-out one").
 */
#include <stdbool.h>
#include <unistd.h>

#include "tls_common.h"

static const char *issuer(SSL *ssl)
{
	static char b[256];
	X509 *x = SSL_get1_peer_certificate(ssl);
	if (!x)
		return "-";
	X509_NAME_oneline(X509_get_issuer_name(x), b, sizeof(b));
	X509_free(x);
	return b;
}

static void info_cb(const SSL *s, int where, int ret)
{
	(void)s;
	(void)where;
	(void)ret;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: tls_swap PORT CAFILE N\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	int port = atoi(argv[1]), n = atoi(argv[3]);
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_load_verify_locations(ctx, argv[2], NULL);
	bool blind = getenv("BLIND");
	SSL_CTX_set_verify(ctx, blind ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
	for (int i = 1; i <= n; i++) {
		SSL *ssl = tls_new(ctx, port);
		int r = SSL_connect(ssl);
		if (blind) {
			printf("req %d: connect %d\n", i, r);
			if (r != 1) {
				int fd = SSL_get_fd(ssl);
				SSL_free(ssl);
				close(fd);
				continue;
			}
		}
		if (blind)
			goto send;
		long vr = SSL_get_verify_result(ssl);
		printf("req %d: connect %d, verify result %ld, issuer %s", i, r, vr, issuer(ssl));
		if (r != 1 || vr != X509_V_OK) {
			printf(": rejected, nothing sent\n");
			int fd = SSL_get_fd(ssl);
			SSL_free(ssl);
			close(fd);
			continue;
		}
		printf(": sending\n");
	send:;
		if (getenv("WATCH") && i > 1)
			SSL_set_info_callback(ssl, info_cb);
		char req[128], resp[8192];
		int rl = snprintf(req, sizeof(req), "GET /x/%d HTTP/1.1\r\nHost: localhost\r\n\r\n", i);
		SSL_write(ssl, req, rl);
		size_t got;
		char *body = read_response(ssl, resp, sizeof(resp), &got);
		printf("  got: %s", body ? body : "(none)\n");
		tls_close(ssl);
	}
	SSL_CTX_free(ctx);
	return 0;
}
