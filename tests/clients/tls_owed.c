/*
 * tls_owed - what becomes of the close_notify a program's SSL_shutdown is
 * told it sent, which the library holds while the connection may be
 * parked (docs/tls.md "The close_notify owed"), against a strict server
 * that logs how each connection ended (tests/servers/tls_close.py,
 * TLS_CLOSE_STRICT=1).  N rounds of a keep-alive GET /f, then by MODE:
 *   noclose    SSL_shutdown, SSL_free, the socket left open to the exit
 *   nofree     SSL_shutdown, neither SSL_free nor close before the exit
 *   shutwr     SSL_shutdown, shutdown(SHUT_WR), SSL_free, close
 *   rdwr       SSL_shutdown, shutdown(SHUT_RDWR), SSL_free, close
 *   setshut    SSL_set_shutdown(SENT) (nothing sent), a 2 s receive
 *              timeout, SSL_shutdown (alone: it waits for the server's)
 *   setshut_read  the same with SSL_read
 * Prints what each call returned.
 * Usage: tls_owed PORT CAFILE N MODE
 */
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "tls_common.h"

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: tls_owed PORT CAFILE N MODE\n");
		return 2;
	}
	int port = atoi(argv[1]), n = atoi(argv[3]);
	const char *mode = argv[4];
	setvbuf(stdout, NULL, _IOLBF, 0);
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(ctx, argv[2], NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	for (int r = 1; r <= n; r++) {
		SSL *ssl = tls_new(ctx, port);
		int c = SSL_connect(ssl);
		char resp[8192];
		size_t got = 0;
		if (c == 1)
			tls_get_f(ssl, resp, sizeof resp, &got);
		int fd = SSL_get_fd(ssl);
		if (!strncmp(mode, "setshut", 7)) {
			struct timeval tv = { 2, 0 };
			setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
			SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN);
			ERR_clear_error();
			char rb[64];
			int s = strcmp(mode, "setshut_read") ? SSL_shutdown(ssl) : SSL_read(ssl, rb, sizeof rb);
			printf("%d connect=%d got=%zu call=%d err=%d reason=%s bits=%d\n", r, c, got, s,
			       SSL_get_error(ssl, s), reason(), SSL_get_shutdown(ssl));
			ERR_clear_error();
			SSL_free(ssl);
			close(fd);
			continue;
		}
		int s = SSL_shutdown(ssl), sw = 99;
		if (!strcmp(mode, "shutwr"))
			sw = shutdown(fd, SHUT_WR);
		else if (!strcmp(mode, "rdwr"))
			sw = shutdown(fd, SHUT_RDWR);
		printf("%d connect=%d got=%zu shutdown=%d shutdown(2)=%d\n", r, c, got, s, sw);
		if (strcmp(mode, "nofree"))
			SSL_free(ssl);
		if (strcmp(mode, "nofree") && strcmp(mode, "noclose"))
			close(fd);
	}
	return 0;
}
