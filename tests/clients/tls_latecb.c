/*
 * tls_latecb - a new-session callback switched on after an SSL's first
 * read (docs/tls.md "Callbacks that watch"), against a server that sends
 * a TLS 1.3 ticket before each answer (tests/clients/gnutls_server.c,
 * KP_GNUTLS_TICKET=1).  Round 0 asks to close (its end teaches the
 * library how the server ends); round 1 a keep-alive GET on an SSL of
 * context A, shut down, freed, closed (its connection may be parked);
 * round 2 a GET on an SSL of context A (TWO=1: of context B) and its
 * answer read; then A's client session cache (without its internal
 * store) and a new-session callback switched on; then a second GET on
 * that SSL.  The callback prints which of the program's SSLs it was
 * called with and that SSL's ex_data (at index 40 with MANY=1: 40
 * indexes taken first).
 * Usage: tls_latecb PORT CAFILE
 */
#include <unistd.h>

#include "tls_common.h"

static SSL *live[3];
static int idx;

static int told(SSL *s, SSL_SESSION *sess)
{
	int which = -1;
	for (int i = 0; i < 3; i++)
		if (live[i] && live[i] == s)
			which = i;
	const char *tag = SSL_get_ex_data(s, idx);
	printf("   told: the SSL of round %d (-1: none of the program's), ex_data %s, resumable %d\n", which,
	       tag ? tag : "NULL", SSL_SESSION_is_resumable(sess));
	return 0;
}

static void get(SSL *ssl, int r, const char *conn)
{
	char req[128], resp[8192];
	size_t got = 0;
	int len = snprintf(req, sizeof req, "GET /f HTTP/1.1\r\nHost: localhost\r\n%s\r\n", conn);
	int w = SSL_write(ssl, req, len);
	char *body = read_response(ssl, resp, sizeof resp, &got);
	printf("%d write=%d got=%zu body=%d\n", r, w, got, body != NULL);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: tls_latecb PORT CAFILE\n");
		return 2;
	}
	int port = atoi(argv[1]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < (getenv("MANY") ? 40 : 1); i++)
		idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
	SSL_CTX *a = SSL_CTX_new(TLS_client_method()), *b = SSL_CTX_new(TLS_client_method());
	SSL_CTX *ctxs[2] = { a, b };
	for (int i = 0; i < 2; i++) {
		SSL_CTX_load_verify_locations(ctxs[i], argv[2], NULL);
		SSL_CTX_set_verify(ctxs[i], SSL_VERIFY_PEER, NULL);
		SSL_CTX_set_options(ctxs[i], SSL_OP_NO_RENEGOTIATION);
	}
	static const char *const tags[3] = { "round 0", "round 1", "round 2" };
	for (int r = 0; r <= 2; r++) {
		SSL *ssl = tls_new(r == 2 && getenv("TWO") ? b : a, port);
		SSL_set_ex_data(ssl, idx, (void *)tags[r]);
		live[r] = ssl;
		int fd = SSL_get_fd(ssl);
		if (SSL_connect(ssl) != 1) {
			printf("%d connect failed (%s)\n", r, reason());
			return 1;
		}
		get(ssl, r, r == 0 ? "Connection: close\r\n" : "");
		if (r == 2) {
			SSL_CTX_set_session_cache_mode(a, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
			SSL_CTX_sess_set_new_cb(a, told);
			printf("2 the callback is %s\n", SSL_CTX_sess_get_new_cb(a) == told ? "ours" : "another");
			get(ssl, 2, "");
		}
		SSL_shutdown(ssl);
		SSL_free(ssl);
		live[r] = NULL;
		close(fd);
	}
	return 0;
}
