/*
 * tls_bio - HTTPS through OpenSSL's SSL BIO filter (docs/tls.md, "BIO_f_ssl"):
 * for each of N connections, a socket, SSL_new + SSL_set_fd (verifying the
 * server: CA file and hostname), then the request written and the answer
 * read through BIO_f_ssl pushed over that SSL (MODE push: BIO_new(BIO_f_ssl())
 * + BIO_set_ssl, with SSL_connect made by the BIO's first write) or with
 * SSL_connect first (MODE connected; MODE mixed: so, but the first two
 * connections written and read with SSL_write/SSL_read: the first teaches
 * the library how the server ends a connection, the second is pooled and
 * handed to the next, docs/tls.md), GET /b/<i> with "Connection: close",
 * BIO_read to the end.  Prints "<i> ok <status line> bytes <n> end <how>"
 * (how: the last BIO_read's return and SSL_get_error) or "<i> fail ...".
 * Built as tls_bio_dlsym (tests/clients/tls_bio_dlsym.c, TLS_BIO_BY_NAME)
 * it finds BIO_f_ssl with dlsym(RTLD_DEFAULT), before the first
 * connection, and imports none of the BIO_f_ssl family.
 * Usage: tls_bio PORT CAFILE HOST N push|connected|mixed
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: tls_bio PORT CAFILE HOST N push|connected\n");
		return 2;
	}
	int port = atoi(argv[1]), n = atoi(argv[4]);
	const char *host = argv[3];
	int mixed = !strcmp(argv[5], "mixed");
#ifdef TLS_BIO_BY_NAME
	const BIO_METHOD *(*f_ssl)(void);
#if TLS_BIO_BY_NAME == 2
	*(void **)&f_ssl = dlvsym(RTLD_DEFAULT, "BIO_f_ssl", "OPENSSL_3.0.0");
#else
	*(void **)&f_ssl = dlsym(RTLD_DEFAULT, "BIO_f_ssl");
#endif
	if (!f_ssl)
		return 2;
#else
	const BIO_METHOD *(*f_ssl)(void) = BIO_f_ssl;
#endif
	int connected = mixed || !strcmp(argv[5], "connected");
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx || SSL_CTX_load_verify_locations(ctx, argv[2], NULL) != 1)
		return 2;
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i <= n; i++) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
		inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
			return 2;
		SSL *ssl = SSL_new(ctx);
		SSL_set_fd(ssl, fd);
		SSL_set_tlsext_host_name(ssl, host);
		SSL_set1_host(ssl, host);
		if (connected && SSL_connect(ssl) != 1) {
			printf("%d fail connect %s\n", i, ERR_reason_error_string(ERR_peek_error()));
			ERR_clear_error();
			SSL_free(ssl);
			close(fd);
			continue;
		}
		if (!connected)
			SSL_set_connect_state(ssl);
		BIO *b = BIO_new(f_ssl());
		BIO_set_ssl(b, ssl, BIO_NOCLOSE);
		char req[256], resp[65536];
		int len = snprintf(req, sizeof(req),
				   "GET /b/%d HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", i, host);
		if (mixed && i <= 2) {
			size_t got = 0;
			int r = SSL_write(ssl, req, len);
			while (r > 0 && (r = SSL_read(ssl, resp + got, (int)(sizeof(resp) - 1 - got))) > 0)
				got += (size_t)r;
			resp[got] = 0;
			char *eol = strstr(resp, "\r\n");
			printf("%d ok %.*s bytes %zu end %d %d (SSL_read)\n", i, eol ? (int)(eol - resp) : 0,
			       resp, got, r, SSL_get_error(ssl, r));
			ERR_clear_error();
		} else if (BIO_write(b, req, len) != len) {
			printf("%d fail write %s\n", i, ERR_reason_error_string(ERR_peek_error()));
			ERR_clear_error();
		} else {
			size_t got = 0;
			int r;
			while ((r = BIO_read(b, resp + got, (int)(sizeof(resp) - 1 - got))) > 0)
				got += (size_t)r;
			resp[got] = 0;
			char *eol = strstr(resp, "\r\n");
			printf("%d ok %.*s bytes %zu end %d %d\n", i, eol ? (int)(eol - resp) : 0, resp,
			       got, r, SSL_get_error(ssl, r));
			ERR_clear_error();
		}
		BIO_free(b);
		SSL_shutdown(ssl);
		SSL_free(ssl);
		close(fd);
	}
	SSL_CTX_free(ctx);
	return 0;
}
