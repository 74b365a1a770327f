/*
 * tls_ticket.c PORT CAFILE N - N HTTPS requests, one connection and SSL
 * each (one context, the peer verified), each read to its end; after each
 * it prints whether its session's ticket (SSL_SESSION_get0_ticket) and
 * master key (SSL_SESSION_print_keylog) are the ones of the request before
 * ("same" / "new"), and whether its handshake resumed.  Alone every
 * handshake of a program that offers no session is full and makes both
 * new; a pooled connection handed out would show its first owner's.
 */
#include <unistd.h>

#include <openssl/bio.h>

#include "tls_common.h"

static unsigned long hash(const unsigned char *p, size_t n)
{
	unsigned long h = 1469598103934665603ul;
	while (n--)
		h = (h ^ *p++) * 1099511628211ul;
	return h;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: tls_ticket PORT CAFILE N\n");
		return 2;
	}
	int port = atoi(argv[1]), n = atoi(argv[3]);
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(ctx, argv[2], NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	unsigned long last_ticket = 0, last_key = 0;
	for (int i = 1; i <= n; i++) {
		SSL *ssl = tls_new(ctx, port);
		if (SSL_connect(ssl) != 1) {
			printf("%d: connect failed: %s\n", i, reason());
			return 1;
		}
		char resp[65536];
		size_t got;
		char *body = tls_get_f(ssl, resp, sizeof(resp), &got);
		SSL_SESSION *s = SSL_get_session(ssl);
		const unsigned char *tick = NULL;
		size_t tlen = 0;
		unsigned long t = 0, k = 0;
		if (s) {
			SSL_SESSION_get0_ticket(s, &tick, &tlen);
			t = tick ? hash(tick, tlen) : 0;
			BIO *m = BIO_new(BIO_s_mem());
			SSL_SESSION_print_keylog(m, s);
			char *p;
			long ml = BIO_get_mem_data(m, &p);
			k = ml > 0 ? hash((unsigned char *)p, (size_t)ml) : 0;
			BIO_free(m);
		}
		printf("%d: %s, reused %d, ticket %s, master key %s\n", i, body ? "answered" : "no answer",
		       SSL_session_reused(ssl), !t ? "none" : t == last_ticket ? "same" : "new",
		       !k ? "none" : k == last_key ? "same" : "new");
		last_ticket = t, last_key = k;
		SSL_shutdown(ssl);
		close(SSL_get_fd(ssl));
		SSL_free(ssl);
	}
	SSL_CTX_free(ctx);
	return 0;
}
