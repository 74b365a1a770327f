/*
 * tls_bioflags - what a program's own socket BIO shows after its SSL's
 * I/O, for code that asks BIO_should_retry(SSL_get_rbio(ssl)) rather than
 * SSL_get_error (docs/tls.md "What the program's BIO shows").  N rounds:
 * a blocking SSL_connect, the socket then non-blocking, GET /f, SSL_read
 * (with poll) until its Content-Length is in; then one more SSL_read,
 * which has nothing to read: its return, SSL_get_error, SSL_want and the
 * rbio's retry flags are printed; then, the socket blocking again, a
 * write and its flags.
 * Usage: tls_bioflags PORT CAFILE N
 */
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "tls_common.h"

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: tls_bioflags PORT CAFILE N\n");
		return 2;
	}
	int port = atoi(argv[1]), n = atoi(argv[3]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(ctx, argv[2], NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	for (int r = 1; r <= n; r++) {
		SSL *ssl = tls_new(ctx, port);
		int c = SSL_connect(ssl);
		int fd = SSL_get_fd(ssl);
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		static const char req[] = "GET /f HTTP/1.1\r\nHost: localhost\r\n\r\n";
		int w = SSL_write(ssl, req, (int)sizeof(req) - 1);
		char resp[16384];
		size_t got = 0;
		long want = -1;
		char *body = NULL;
		while (got < sizeof(resp) - 1 && (!body || (long)(got - (size_t)(body - resp)) < want)) {
			int k = SSL_read(ssl, resp + got, (int)(sizeof(resp) - 1 - got));
			if (k > 0) {
				got += (size_t)k;
				resp[got] = 0;
				if (!body && (body = strstr(resp, "\r\n\r\n"))) {
					body += 4;
					const char *cl = strcasestr(resp, "content-length:");
					want = cl ? atol(cl + 15) : 0;
				}
				continue;
			}
			if (SSL_get_error(ssl, k) != SSL_ERROR_WANT_READ)
				break;
			struct pollfd p = { fd, POLLIN, 0 };
			poll(&p, 1, 3000);
		}
		BIO *rb = SSL_get_rbio(ssl), *wb = SSL_get_wbio(ssl);
		char b[64];
		int k = SSL_read(ssl, b, sizeof b);
		printf("%d connect=%d write=%d got=%zu extra read=%d err=%d want=%d should_retry=%d should_read=%d "
		       "eof=%d\n",
		       r, c, w, got, k, SSL_get_error(ssl, k), SSL_want(ssl), BIO_should_retry(rb) ? 1 : 0,
		       BIO_should_read(rb) ? 1 : 0, (int)BIO_eof(rb));
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
		k = SSL_write(ssl, req, 0); /* (nothing to write: the BIO untouched alone) */
		printf("%d empty write=%d should_retry=%d should_write=%d\n", r, k, BIO_should_retry(wb) ? 1 : 0,
		       BIO_should_write(wb) ? 1 : 0);
		ERR_clear_error();
		SSL_shutdown(ssl);
		SSL_free(ssl);
		close(fd);
	}
	return 0;
}
