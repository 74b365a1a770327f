/*
 * tls_told.c - a client whose context keeps sessions as curl's does (a
 * client session cache, its new-session callback, no internal store):
 * GET /f on one connection, then a second connection that resumes the
 * last session its callback was told of, as curl does from its cache.
 *
 *   tls_told PORT CA_FILE [noshut]
 *
 * Prints what the program sees: the body's length, whether its callback
 * was told of a session before the body was read, and whether that
 * session was the one SSL_get_session answered and resumable; then
 * whether the second connection resumed it, and the peer chain it reads.
 * noshut: the first SSL freed without SSL_shutdown (libssl then makes its
 * session not resumable, and tells the remove-session callback).  (How many times the callback
 * ran is the server's choice, the number of tickets it sends: not
 * printed.)
 */
#include <stdbool.h>
#include <unistd.h>

#include "tls_common.h"

static int told;
static SSL_SESSION *last;

static int removed;

static void remove_session(SSL_CTX *ctx, SSL_SESSION *sess)
{
	(void)ctx, (void)sess;
	removed++;
}

static int new_session(SSL *ssl, SSL_SESSION *sess)
{
	told++;
	if (last)
		SSL_SESSION_free(last);
	last = sess; /* kept: returning 1 takes the reference */
	(void)ssl;
	return 1;
}

static SSL *connected(SSL_CTX *ctx, int port, SSL_SESSION *offer)
{
	SSL *ssl = tls_new(ctx, port);
	if (offer)
		SSL_set_session(ssl, offer);
	if (SSL_connect(ssl) != 1) {
		printf("handshake failed: %s\n", reason());
		exit(1);
	}
	return ssl;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: tls_told PORT CA_FILE [noshut]\n");
		return 2;
	}
	bool noshut = argc > 3 && !strcmp(argv[3], "noshut");
	int port = atoi(argv[1]);
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (!SSL_CTX_load_verify_locations(ctx, argv[2], NULL))
		return 2;
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
	SSL_CTX_sess_set_new_cb(ctx, new_session);
	SSL_CTX_sess_set_remove_cb(ctx, remove_session);

	static char resp[1 << 16];
	size_t got;
	SSL *ssl = connected(ctx, port, NULL);
	char *body = tls_get_f(ssl, resp, sizeof(resp), &got);
	printf("body %ld\n", body ? (long)(got - (size_t)(body - resp)) : -1L);
	printf("told of a session: %s\n", told ? "yes" : "no");
	if (last) {
		printf("  the one it reads: %s\n", last == SSL_get_session(ssl) ? "yes" : "no");
		printf("  resumable: %d\n", SSL_SESSION_is_resumable(last));
		printf("  version %04x, cipher %s, peer %s\n", SSL_SESSION_get_protocol_version(last),
		       SSL_CIPHER_get_name(SSL_SESSION_get0_cipher(last)),
		       SSL_SESSION_get0_peer(last) ? "kept" : "none");
	}
	printf("first reused %d\n", SSL_session_reused(ssl));
	if (noshut) {
		int fd = SSL_get_fd(ssl);
		SSL_free(ssl);
		close(fd);
		printf("after SSL_free alone: resumable %d, removed %d\n", last ? SSL_SESSION_is_resumable(last) : -1,
		       removed);
	} else {
		tls_close(ssl);
	}

	SSL_SESSION *offer = last ? (SSL_SESSION_up_ref(last), last) : NULL;
	ssl = connected(ctx, port, offer);
	STACK_OF(X509) *chain = SSL_get_peer_cert_chain(ssl);
	printf("second reused %d, peer chain %d\n", SSL_session_reused(ssl), chain ? sk_X509_num(chain) : -1);
	body = tls_get_f(ssl, resp, sizeof(resp), &got);
	printf("second body %ld\n", body ? (long)(got - (size_t)(body - resp)) : -1L);
	tls_close(ssl);
	if (offer)
		SSL_SESSION_free(offer);
	if (last)
		SSL_SESSION_free(last);
	SSL_CTX_free(ctx);
	return 0;
}
