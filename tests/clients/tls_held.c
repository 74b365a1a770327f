/*
 * tls_held.c PORT CAFILE N - N GETs /x/i, one connection and SSL each,
 * SSL_VERIFY_PEER against CAFILE, ALPN http/1.1 offered.  Right after
 * SSL_connect it takes what libssl's getters return and keeps the
 * pointers (the verified chain, the name its check matched, the server
 * name, the ALPN protocol, the peer certificate); after
 * the request's answer it reads them again through those pointers.  libssl
 * keeps each valid until SSL_free, so alone the second look prints the
 * same as a first would.  It also tags the session and the peer
 * certificate it read (ex_data) and reads the tags back through the
 * getters after the answer: alone one connection, so the same objects (a
 * TLS 1.3 ticket's session copy carries the tag).  Against
 * tests/servers/tls_swap.py, whose first
 * connection ends under the second request (the library moves a
 * handed-out SSL to a fresh connection then: docs/tls.md "A fresh
 * handshake in place of a handed-out one").
 */
#include <unistd.h>

#include "tls_common.h"

static void subjects(const char *what, STACK_OF(X509) *sk)
{
	int n = sk ? sk_X509_num(sk) : -1;
	printf("  %s: %d", what, n);
	for (int j = 0; j < n && j < 8; j++) {
		char b[256];
		X509_NAME_oneline(X509_get_subject_name(sk_X509_value(sk, j)), b, sizeof(b));
		printf(" [%s]", b);
	}
	printf("\n");
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: tls_held PORT CAFILE N\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	int port = atoi(argv[1]), n = atoi(argv[3]);
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(ctx, argv[2], NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	int sess_idx = SSL_SESSION_get_ex_new_index(0, NULL, NULL, NULL, NULL);
	int cert_idx = X509_get_ex_new_index(0, NULL, NULL, NULL, NULL);
	for (int i = 1; i <= n; i++) {
		SSL *ssl = tls_new(ctx, port);
		SSL_set_alpn_protos(ssl, (const unsigned char *)"\x08http/1.1", 9);
		int r = SSL_connect(ssl);
		printf("req %d: connect %d\n", i, r);
		if (r != 1) {
			tls_close(ssl);
			continue;
		}
		STACK_OF(X509) *vchain = SSL_get0_verified_chain(ssl);
		X509 *peer = SSL_get0_peer_certificate(ssl);
		const char *peername = SSL_get0_peername(ssl);
		const char *sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
		const unsigned char *alpn = NULL;
		unsigned alpn_len = 0;
		SSL_get0_alpn_selected(ssl, &alpn, &alpn_len);
		char tag[32];
		snprintf(tag, sizeof(tag), "request %d", i);
		/* (not on request 1's: a session the program changed keeps its
		 * connection from being handed to another SSL, docs/tls.md) */
		if (i > 1)
			SSL_SESSION_set_ex_data(SSL_get_session(ssl), sess_idx, tag);
		X509_set_ex_data(peer, cert_idx, tag);
		char req[128], resp[8192];
		int rl = snprintf(req, sizeof(req), "GET /x/%d HTTP/1.1\r\nHost: localhost\r\n\r\n", i);
		SSL_write(ssl, req, rl);
		size_t got;
		char *body = read_response(ssl, resp, sizeof(resp), &got);
		printf("  got: %s", body ? body : "(none)\n");
		/* the pointers taken before, read now */
		subjects("verified chain", vchain);
		/* (not the peer's chain: it is the session's, which a TLS 1.3
		 * ticket replaces, so alone that pointer dies at the read) */
		char b[256] = "-";
		if (peer)
			X509_NAME_oneline(X509_get_subject_name(peer), b, sizeof(b));
		printf("  peer: %s\n", b);
		printf("  peer name: %s\n", peername ? peername : "-");
		printf("  server name: %s\n", sni ? sni : "-");
		printf("  alpn: %.*s\n", (int)alpn_len, alpn ? (const char *)alpn : "");
		const char *st = SSL_SESSION_get_ex_data(SSL_get_session(ssl), sess_idx);
		X509 *now = SSL_get0_peer_certificate(ssl);
		const char *ct = now ? X509_get_ex_data(now, cert_idx) : NULL;
		printf("  session tag: %s; peer certificate tag: %s; the same peer object: %s\n",
		       st ? st : "-", ct ? ct : "-", now == peer ? "yes" : "no");
		tls_close(ssl);
	}
	SSL_CTX_free(ctx);
	return 0;
}
