/*
 * tls_swap.c PORT CAFILE N - N GETs /x/i, one connection and SSL each
 * (renegotiation refused: TLS 1.2 may be handed out too), SSL_VERIFY_NONE
 * and, as OpenSSL's SSL_get_verify_result(3) tells such a program to, the
 * result checked right after SSL_connect: nothing is sent unless it is
 * X509_V_OK.  WATCH (environment): from request 2 on, an info callback
 * set after the check (a watcher: a hand-out then makes its own handshake
 * on a fresh connection).  BLIND (environment): SSL_VERIFY_PEER and no
 * look at the peer at all (the handshake's verification is the program's
 * only check).  BINDING (environment): RFC 5929's tls-unique read right
 * after SSL_connect (the handshake's first Finished, as CPython's
 * get_channel_binding takes it) and sent in the request line,
 * "GET /x/i?tls-unique=HEX".  Prints what it saw and what came back.  Against
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

/* tls-unique as hex into b (RFC 5929: the first Finished of the
 * handshake, the client's in a full one, the server's in a resumption) */
static void binding(SSL *ssl, char *b)
{
	unsigned char f[64];
	size_t n = SSL_session_reused(ssl) ? SSL_get_peer_finished(ssl, f, sizeof(f))
					   : SSL_get_finished(ssl, f, sizeof(f));
	for (size_t k = 0; k < n && k < sizeof(f); k++)
		sprintf(b + 2 * k, "%02x", f[k]);
	b[2 * (n < sizeof(f) ? n : sizeof(f))] = 0;
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
		char req[512], resp[8192], b[160] = "";
		if (getenv("BINDING")) {
			strcpy(b, "?tls-unique=");
			binding(ssl, b + strlen(b));
		}
		int rl = snprintf(req, sizeof(req), "GET /x/%d%s HTTP/1.1\r\nHost: localhost\r\n\r\n", i, b);
		SSL_write(ssl, req, rl);
		size_t got;
		char *body = read_response(ssl, resp, sizeof(resp), &got);
		printf("  got: %s", body ? body : "(none)\n");
		tls_close(ssl);
	}
	SSL_CTX_free(ctx);
	return 0;
}
