/*
 * tls_common.h - shared by the C HTTPS test clients that talk to one
 * server on 127.0.0.1 (header-only, as common.h: the Makefile builds each
 * tests/clients/NAME.c on its own).
 */
#ifndef TEST_CLIENTS_TLS_COMMON_H
#define TEST_CLIENTS_TLS_COMMON_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

/* A new TCP connection to 127.0.0.1:port, or exit 2. */
static inline int dial(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("connect");
		exit(2);
	}
	return fd;
}

/* The reason of OpenSSL's last error, or "none". */
static inline const char *reason(void)
{
	unsigned long e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;
	return r ? r : "none";
}

/* Read one response into resp (cap bytes, kept NUL-terminated) until its
 * Content-Length is in, or SSL_read ends: *got bytes.  Returns where its
 * body starts, or NULL if the head never ended. */
static inline char *read_response(SSL *ssl, char *resp, size_t cap, size_t *got)
{
	long want = -1;
	char *body = NULL;
	*got = 0;
	while (!body || (long)(*got - (size_t)(body - resp)) < want) {
		int r = SSL_read(ssl, resp + *got, (int)(cap - 1 - *got));
		if (r <= 0)
			break;
		*got += (size_t)r;
		resp[*got] = 0;
		if (!body && (body = strstr(resp, "\r\n\r\n"))) {
			body += 4;
			const char *cl = strcasestr(resp, "content-length:");
			want = cl ? atol(cl + 15) : 0;
		}
	}
	return body;
}

/* A new SSL on a new connection to 127.0.0.1:port, named and verified as
 * "localhost"; not connected yet (a caller may offer a session first). */
static inline SSL *tls_new(SSL_CTX *ctx, int port)
{
	SSL *ssl = SSL_new(ctx);
	SSL_set_fd(ssl, dial(port));
	SSL_set_tlsext_host_name(ssl, "localhost");
	SSL_set1_host(ssl, "localhost");
	return ssl;
}

/* GET /f on ssl, its response read into resp (read_response). */
static inline char *tls_get_f(SSL *ssl, char *resp, size_t cap, size_t *got)
{
	static const char req[] = "GET /f HTTP/1.1\r\nHost: localhost\r\n\r\n";
	SSL_write(ssl, req, (int)sizeof(req) - 1);
	return read_response(ssl, resp, cap, got);
}

/* Shut down and free ssl, then close its socket (freed before its socket is
 * closed, as curl and CPython do). */
static inline void tls_close(SSL *ssl)
{
	int fd = SSL_get_fd(ssl);
	SSL_shutdown(ssl);
	SSL_free(ssl);
	close(fd);
}

#endif
