/*
 * tls_errq.c PORT CAFILE N - N HTTPS requests, one connection and SSL
 * each (one context, the peer verified, renegotiation refused: a TLS 1.2
 * connection may be handed out).  Before each SSL_connect it
 * leaves an error on OpenSSL's queue and EBADF in errno, as a program does
 * after an ignored failing call (an optional file missing); after it,
 * prints what the queue and errno hold, then, its socket made non-blocking,
 * what a read before any request says (SSL_get_error), then GET /f.
 * Alone the handshake's state machine clears both first: the queue empty,
 * errno 0, and the read WANT_READ (2); a handed-out connection must show
 * the same (docs/tls.md "The handshake's clean slate").
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "tls_common.h"

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: tls_errq PORT CAFILE N\n");
		return 2;
	}
	int port = atoi(argv[1]), n = atoi(argv[3]);
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(ctx, argv[2], NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	for (int i = 1; i <= n; i++) {
		SSL *ssl = tls_new(ctx, port);
		ERR_raise(ERR_LIB_SYS, ENOENT); /* left by a call it ignored */
		errno = EBADF;
		int r = SSL_connect(ssl);
		int err = errno;
		printf("%d: connect %d, errors queued %d, errno %d\n", i, r, ERR_peek_error() != 0, err);
		ERR_clear_error();
		int fd = SSL_get_fd(ssl);
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		char resp[8192];
		r = SSL_read(ssl, resp, sizeof(resp));
		printf("%d: a read before the request: %d, SSL_get_error %d\n", i, r, SSL_get_error(ssl, r));
		ERR_clear_error();
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
		size_t got;
		char *body = tls_get_f(ssl, resp, sizeof(resp), &got);
		printf("%d: %s\n", i, body && strstr(resp, " 200 ") ? "answered" : "no answer");
		tls_close(ssl);
	}
	SSL_CTX_free(ctx);
	return 0;
}
