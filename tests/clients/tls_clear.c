/*
 * tls_clear - one SSL object for many HTTPS connections, reset between
 * them with SSL_clear() (documented OpenSSL usage): connect, verify the
 * server (CA file and hostname), GET /echo/<i> with "Connection: close",
 * read to EOF, SSL_shutdown, close, SSL_clear, and again.
 * Prints "<i> ok <status line> <body>" or "<i> fail <verify error>".
 * Usage: tls_clear PORT CAFILE HOST...   (one connection per HOST: the
 * name sent and verified)
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "tls_common.h"
#include <openssl/x509v3.h>

/* "<status line> <body>" of a response read to its end */
static void print_response(int i, const char *resp)
{
	const char *eol = strstr(resp, "\r\n"), *body = strstr(resp, "\r\n\r\n");
	if (!eol || !body) {
		printf("%d fail short response\n", i);
		return;
	}
	body += 4;
	size_t blen = strlen(body);
	while (blen && (body[blen - 1] == '\n' || body[blen - 1] == '\r'))
		blen--;
	printf("%d ok %.*s %.*s\n", i, (int)(eol - resp), resp, (int)blen, body);
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: tls_clear PORT CAFILE HOST...\n");
		return 2;
	}
	int port = atoi(argv[1]), n = argc - 3;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx || SSL_CTX_load_verify_locations(ctx, argv[2], NULL) != 1)
		return 2;
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL *ssl = SSL_new(ctx);
	if (!ssl)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i <= n; i++) {
		const char *host = argv[2 + i];
		int fd = dial(port);
		SSL_set_fd(ssl, fd);
		SSL_set_tlsext_host_name(ssl, host);
		SSL_set1_host(ssl, host);
		if (SSL_connect(ssl) != 1) {
			long v = SSL_get_verify_result(ssl);
			printf("%d fail %s\n", i,
			       v != X509_V_OK ? X509_verify_cert_error_string(v) : "handshake");
			ERR_clear_error();
		} else {
			char req[256], resp[65536];
			int len = snprintf(req, sizeof(req),
					   "GET /echo/%d HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
					   i, host);
			size_t got = 0;
			int r;
			if (SSL_write(ssl, req, len) != len) {
				printf("%d fail write\n", i);
			} else {
				while (got < sizeof(resp) - 1 &&
				       (r = SSL_read(ssl, resp + got, (int)(sizeof(resp) - 1 - got))) > 0)
					got += (size_t)r;
				resp[got] = 0;
				print_response(i, resp);
			}
			SSL_shutdown(ssl);
		}
		close(fd);
		if (SSL_clear(ssl) != 1) {
			printf("%d fail SSL_clear\n", i);
			return 1;
		}
	}
	SSL_free(ssl);
	SSL_CTX_free(ctx);
	return 0;
}
