/*
 * tls_der.c PORT CAFILE N [hold=K] - N HTTPS requests, one connection and
 * SSL each (one context, the peer verified, renegotiation refused), each
 * read to its end; after each it serializes its session
 * (i2d_SSL_SESSION, the only session function it imports) and reads the
 * master key out of the bytes itself (the fifth field of the session's
 * DER SEQUENCE in OpenSSL's encoding: version, protocol, cipher, id,
 * master key), printing whether it is the one of the request
 * before.  Alone every full handshake makes a new one; a pooled
 * connection handed out, or a session of ours resumed below TLS 1.3,
 * would carry the first one's (docs/tls.md "What a session shows").
 * hold=K: request K's SSL and socket stay open until the end (the next
 * request finds no pooled connection: a session of ours is the fallback).
 */
#include <stdbool.h>
#include <unistd.h>

#include "tls_common.h"

/* the content of DER element at *p (tag and length skipped), *p moved
 * past it; NULL when it does not fit in end */
static const unsigned char *der_next(const unsigned char **p, const unsigned char *end, size_t *len)
{
	if (end - *p < 2)
		return NULL;
	const unsigned char *q = *p + 1;
	size_t n = *q++;
	if (n & 0x80) {
		int k = n & 0x7f;
		if (k < 1 || k > 3 || end - q < k)
			return NULL;
		for (n = 0; k--;)
			n = n << 8 | *q++;
	}
	if ((size_t)(end - q) < n)
		return NULL;
	*p = q + n;
	*len = n;
	return q;
}

static unsigned long hash(const unsigned char *p, size_t n)
{
	unsigned long h = 1469598103934665603ul;
	while (n--)
		h = (h ^ *p++) * 1099511628211ul;
	return h;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: tls_der PORT CAFILE N [hold=K]\n");
		return 2;
	}
	int port = atoi(argv[1]), n = atoi(argv[3]);
	int hold = argc > 4 && !strncmp(argv[4], "hold=", 5) ? atoi(argv[4] + 5) : 0;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(ctx, argv[2], NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	unsigned long last = 0;
	SSL *held = NULL;
	for (int i = 1; i <= n; i++) {
		SSL *ssl = tls_new(ctx, port);
		if (SSL_connect(ssl) != 1) {
			printf("%d: connect failed: %s\n", i, reason());
			return 1;
		}
		char resp[65536];
		size_t got;
		char *body = tls_get_f(ssl, resp, sizeof(resp), &got);
		unsigned char *der = NULL;
		int dl = SSL_get_session(ssl) ? i2d_SSL_SESSION(SSL_get_session(ssl), &der) : 0;
		unsigned long k = 0;
		const unsigned char *p = der, *end = der + (dl > 0 ? dl : 0), *field = NULL;
		size_t len = 0;
		const unsigned char *seq = dl > 0 ? der_next(&p, end, &len) : NULL;
		if (seq) {
			const unsigned char *seq_end = seq + len;
			p = seq;
			for (int f = 0; f < 5 && (field = der_next(&p, seq_end, &len)); f++)
				;
		}
		if (field)
			k = hash(field, len);
		printf("%d: %s, reused %d, master key in the DER %s\n", i, body ? "answered" : "no answer",
		       SSL_session_reused(ssl), !k ? "none" : k == last ? "same" : "new");
		last = k;
		OPENSSL_free(der);
		if (hold == i) {
			held = ssl;
			continue;
		}
		tls_close(ssl);
	}
	if (held)
		tls_close(held);
	SSL_CTX_free(ctx);
	return 0;
}
