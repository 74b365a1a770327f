/*
 * tls_post.c - a program that makes one HTTPS connection per request: N
 * times connect(), SSL_connect (verifying CA's "localhost"), one SSL_write
 * of "POST /payI" with a body of BODY bytes, then SSL_read of the answer
 * (its 41 bytes).  Prints, per request, whether it got its answer or an
 * error (at the write or at the read).
 *
 * THINK_MS: a pause between the handshake and the write (a pooled
 * connection its server closed meanwhile is then written on).
 * TLS_POST_SIGPIPE set in the environment: SIGPIPE keeps its default
 * action (else ignored).
 * TLS_POST_TAKE set: the head goes by its own SSL_write, then the program
 * waits (at most 2 s) for its socket's error or hang-up (poll() with no
 * events) and takes the error by a receive of nothing on the socket
 * (recv(fd, NULL, 0): docs/replay.md "An error taken by a read of
 * nothing"), then writes the body.
 *
 *   tls_post PORT CA N BODY [THINK_MS]
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

int main(int argc, char **argv)
{
	if (argc != 5 && argc != 6) {
		fprintf(stderr, "usage: tls_post PORT CA N BODY [THINK_MS]\n");
		return 2;
	}
	if (!getenv("TLS_POST_SIGPIPE"))
		signal(SIGPIPE, SIG_IGN);
	int n = atoi(argv[3]), body = atoi(argv[4]), think = argc > 5 ? atoi(argv[5]) : 0;
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx || SSL_CTX_load_verify_locations(ctx, argv[2], NULL) != 1)
		return 1;
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	/* (refused: a pooled TLS 1.2 connection is handed only
	 * to a program that never renegotiates, docs/tls.md) */
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	char *req = malloc((size_t)body + 256);
	if (!req)
		return 1;
	for (int i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
			perror("connect");
			return 1;
		}
		SSL *s = SSL_new(ctx);
		SSL_set_tlsext_host_name(s, "localhost");
		SSL_set1_host(s, "localhost");
		SSL_set_fd(s, fd);
		if (SSL_connect(s) != 1) {
			printf("%d: handshake failed\n", i);
			return 1;
		}
		int hl = sprintf(req, "POST /pay%d HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n", i, body);
		memset(req + hl, 'a', (size_t)body);
		if (think)
			usleep((useconds_t)think * 1000);
		int r = 1, off = 0;
		if (getenv("TLS_POST_TAKE")) {
			r = SSL_write(s, req, hl);
			off = hl;
			struct pollfd p = { .fd = fd, .events = 0 };
			poll(&p, 1, 2000);
			(void)!recv(fd, NULL, 0, MSG_DONTWAIT);
		}
		if (r > 0)
			r = SSL_write(s, req + off, hl + body - off);
		if (r <= 0) {
			printf("%d: error\n", i);
		} else {
			char b[256];
			int got = 0;
			while (got < 41 && (r = SSL_read(s, b + got, (int)sizeof(b) - got)) > 0)
				got += r;
			printf("%d: %s\n", i, got == 41 ? "answered" : "error");
		}
		ERR_clear_error();
		SSL_shutdown(s);
		SSL_free(s);
		close(fd);
	}
	return 0;
}
