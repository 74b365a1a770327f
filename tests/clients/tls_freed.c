/*
 * tls_freed.c PORT CAFILE MODE OFFERS - one round per OFFERS entry (a
 * comma-separated list), one SSL and connection each: GET /f (keep-alive,
 * so that the library may pool the connection), the SSL's session kept
 * (SSL_get1_session), then MODE "free": SSL_free without SSL_shutdown, or
 * "shut": SSL_shutdown first; then the socket closed.  Round i's entry j
 * > 0: it offers the session round j kept (SSL_set_session); 0: none.
 * Prints per round "<i> reused=<0|1> <status line>" and, after the
 * SSL_free, "<i> kept session resumable=<0|1>".
 * libssl's SSL_free marks a session whose close_notify was not sent not
 * resumable (ssl_clear_bad_session): alone, MODE free never resumes
 * (docs/tls.md "Found by the HTTPS review at 4183573", item 3).
 */
#include <unistd.h>

#include "tls_common.h"

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: tls_freed PORT CAFILE free|shut OFFERS\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	int port = atoi(argv[1]), shut = !strcmp(argv[3], "shut");
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_load_verify_locations(ctx, argv[2], NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_SESSION *kept[16] = { NULL };
	const char *o = argv[4];
	for (int i = 1; i < 16 && *o; i++) {
		int j = (int)strtol(o, (char **)&o, 10);
		if (*o == ',')
			o++;
		SSL *ssl = tls_new(ctx, port);
		if (j > 0 && j < i && kept[j])
			SSL_set_session(ssl, kept[j]);
		if (SSL_connect(ssl) != 1) {
			printf("%d connect failed: %s\n", i, reason());
			return 1;
		}
		char resp[8192];
		size_t got;
		char *body = tls_get_f(ssl, resp, sizeof(resp), &got);
		char *eol = strstr(resp, "\r\n");
		if (eol)
			*eol = 0;
		printf("%d reused=%d %s\n", i, SSL_session_reused(ssl), body ? resp : "(no answer)");
		kept[i] = SSL_get1_session(ssl);
		int fd = SSL_get_fd(ssl);
		if (shut)
			SSL_shutdown(ssl);
		SSL_free(ssl);
		close(fd);
		printf("%d kept session resumable=%d\n", i, kept[i] ? SSL_SESSION_is_resumable(kept[i]) : -1);
	}
	for (int i = 0; i < 16; i++)
		SSL_SESSION_free(kept[i]);
	SSL_CTX_free(ctx);
	return 0;
}
