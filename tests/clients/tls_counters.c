/*
 * tls_counters - HTTPS with SSL_write/SSL_read, then the program's BIO
 * counters (BIO_number_read/written of its SSL's rbio/wbio: docs/tls.md
 * "BIO_f_ssl"): for each of N connections, a socket, SSL_new + SSL_set_fd
 * (verifying the server: CA file and hostname), GET /c/<i> with
 * "Connection: close" read to its end.  Prints "<i> ok <status line>
 * bytes <n> read <counted|zero> written <counted|zero>": a connection of
 * its own has carried its handshake and the request through those BIOs.
 * Usage: tls_counters PORT CAFILE HOST N
 */
#include <arpa/inet.h>
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
	if (argc != 5) {
		fprintf(stderr, "usage: tls_counters PORT CAFILE HOST N\n");
		return 2;
	}
	int port = atoi(argv[1]), n = atoi(argv[4]);
	const char *host = argv[3];
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
		char req[256], resp[65536];
		int len = snprintf(req, sizeof(req),
				   "GET /c/%d HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", i, host);
		if (SSL_connect(ssl) != 1 || SSL_write(ssl, req, len) != len) {
			printf("%d fail %s\n", i, ERR_reason_error_string(ERR_peek_error()));
		} else {
			size_t got = 0;
			int r;
			while ((r = SSL_read(ssl, resp + got, (int)(sizeof(resp) - 1 - got))) > 0)
				got += (size_t)r;
			resp[got] = 0;
			char *eol = strstr(resp, "\r\n");
			printf("%d ok %.*s bytes %zu read %s written %s\n", i, eol ? (int)(eol - resp) : 0, resp,
			       got, BIO_number_read(SSL_get_rbio(ssl)) ? "counted" : "zero",
			       BIO_number_written(SSL_get_wbio(ssl)) ? "counted" : "zero");
		}
		ERR_clear_error();
		SSL_shutdown(ssl);
		SSL_free(ssl);
		close(fd);
	}
	SSL_CTX_free(ctx);
	return 0;
}
