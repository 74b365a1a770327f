/*
 * tls_probe - one process, several SSL objects and settings: the HTTPS
 * trust cases a review found (tests/https_trust.bats runs
 * each without and with the shim and compares).  Each request: GET
 * /echo/<i> with "Connection: close", read to EOF, SSL_shutdown.
 * Prints "<i> ok <status line> reused=<0|1> cipher=<name>" or "<i> fail
 * <reason>", and what a scenario inspects.
 * Usage: tls_probe SCENARIO PORT TLSDIR [ARG]
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
#include <openssl/x509v3.h>

static int port; static const char *dir;
static char path[512];
static const char *P(const char *f) { snprintf(path, sizeof path, "%s/%s", dir, f); return path; }

static int dial(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) { perror("connect"); exit(2); }
	return fd;
}

static SSL_CTX *mkctx(void)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(ctx, P("ca.pem"), NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	return ctx;
}

/* handshake + GET /echo/i (Connection: close), read to EOF, shutdown; fd left open */
static int req(SSL *ssl, int fd, int i)
{
	if (fd >= 0) SSL_set_fd(ssl, fd);
	SSL_set_tlsext_host_name(ssl, "localhost");
	SSL_set1_host(ssl, "localhost");
	if (SSL_connect(ssl) != 1) {
		long v = SSL_get_verify_result(ssl);
		unsigned long e = ERR_peek_error();
		char eb[256]; ERR_error_string_n(e, eb, sizeof eb);
		printf("%d fail %s\n", i, v != X509_V_OK ? X509_verify_cert_error_string(v) : eb);
		ERR_clear_error();
		return -1;
	}
	char rq[256], resp[65536];
	int len = snprintf(rq, sizeof rq, "GET /echo/%d HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", i);
	size_t got = 0; int r;
	if (SSL_write(ssl, rq, len) != len) { printf("%d fail write\n", i); return -1; }
	while (got < sizeof(resp) - 1 && (r = SSL_read(ssl, resp + got, (int)(sizeof(resp) - 1 - got))) > 0) got += r;
	resp[got] = 0;
	char *eol = strstr(resp, "\r\n");
	printf("%d ok %.*s reused=%d cipher=%s\n", i, eol ? (int)(eol - resp) : 0, resp,
	       SSL_session_reused(ssl), SSL_get_cipher_name(ssl));
	SSL_shutdown(ssl);
	return 0;
}

static void state(const char *who, SSL *s, X509_STORE *mine)
{
	X509_STORE *st = NULL;
	SSL_ctrl(s, SSL_CTRL_GET_VERIFY_CERT_STORE, 0, &st);
	printf("%s: cert=%s seclevel=%d mode=%#lx verify_store=%s\n", who,
	       SSL_get_certificate(s) ? "yes" : "none", SSL_get_security_level(s), SSL_get_mode(s),
	       !st ? "ctx's" : st == mine ? "its own" : "another");
}

static int clear(SSL *s, int i)
{
	int r = SSL_clear(s);
	if (r != 1) printf("%d SSL_clear failed\n", i);
	return r;
}

#pragma GCC diagnostic ignored "-Wunused-parameter"
static int ext_calls;
static int ext_add(SSL *s, unsigned int t, const unsigned char **out, size_t *outlen, int *al, void *arg)
{ static const unsigned char v[] = "hi"; ext_calls++; *out = v; *outlen = 2; return 1; }
static void ext_free(SSL *s, unsigned int t, const unsigned char *out, void *arg) {}
static int ext_parse(SSL *s, unsigned int t, const unsigned char *in, size_t inlen, int *al, void *arg) { return 1; }

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 4) {
		fprintf(stderr, "usage: tls_probe SCENARIO PORT TLSDIR [ARG]\n");
		return 2;
	}
	const char *sc = argv[1]; port = atoi(argv[2]); dir = argv[3];
	if (!strcmp(sc, "clear_after_dial")) {
		/* one SSL reused; SSL_clear after connect() of the next socket */
		SSL_CTX *ctx = mkctx(); SSL *s = SSL_new(ctx);
		for (int i = 1; i <= 3; i++) {
			int fd = dial();
			if (clear(s, i) != 1) return 1;
			req(s, fd, i); close(fd);
		}
	} else if (!strcmp(sc, "clear_while_lent")) {
		/* A's connection parked, B takes it, then A is reused with SSL_clear */
		SSL_CTX *ctx = mkctx(); SSL *a = SSL_new(ctx), *b = SSL_new(ctx);
		int fd = dial(); req(a, fd, 1); close(fd);
		fd = dial(); req(b, fd, 2);
		if (clear(a, 3) != 1) return 1;
		int fd2 = dial(); req(a, fd2, 3); close(fd2); close(fd);
	} else if (!strcmp(sc, "restore")) {
		/* per-SSL settings of A survive its connection being lent to B? */
		SSL_CTX *ctx = mkctx(); SSL *a = SSL_new(ctx), *b = SSL_new(ctx);
		X509_STORE *st = X509_STORE_new(); X509_STORE_load_file(st, P("ca.pem"));
		for (SSL *s = a; s; s = s == a ? b : NULL) {
			SSL_use_certificate_file(s, P("client-a.pem"), SSL_FILETYPE_PEM);
			SSL_use_PrivateKey_file(s, P("client-a.key"), SSL_FILETYPE_PEM);
			SSL_set_security_level(s, 1);
			SSL_set1_verify_cert_store(s, st);
			SSL_set_mode(s, SSL_MODE_RELEASE_BUFFERS);
		}
		SSL_set_mode(b, SSL_MODE_ENABLE_PARTIAL_WRITE);
		state("A before", a, st);
		int fd = dial(); req(a, fd, 1); close(fd);
		fd = dial(); req(b, fd, 2); close(fd);
		if (clear(a, 3) != 1) return 1;
		state("A after SSL_clear", a, st);
		if (argc > 4) SSL_set_session(a, NULL); /* a full handshake: who does the server see? */
		fd = dial(); req(a, fd, 3); close(fd);
		SSL_free(a); SSL_free(b);
	} else if (!strcmp(sc, "restore_bio")) {
		/* A reads and writes through two socket BIOs: detached at park */
		SSL_CTX *ctx = mkctx(); SSL *a = SSL_new(ctx);
		int fd = dial();
		SSL_set_bio(a, BIO_new_socket(fd, BIO_NOCLOSE), BIO_new_socket(fd, BIO_NOCLOSE));
		req(a, -1, 1); close(fd);
		if (clear(a, 2) != 1) return 1;
		printf("after SSL_clear: SSL_get_fd=%d (program's was %d) ctx_is_own=%d\n", SSL_get_fd(a), fd, SSL_get_SSL_CTX(a) == ctx);
		fd = dial();
		SSL_set_bio(a, BIO_new_socket(fd, BIO_NOCLOSE), BIO_new_socket(fd, BIO_NOCLOSE));
		req(a, -1, 2); close(fd);
		SSL_free(a);
	} else if (!strcmp(sc, "several_certs")) {
		/* a full RSA cert+key, then an EC cert without its key (current) */
		SSL_CTX *ctx = mkctx();
		SSL_CTX_use_certificate_file(ctx, P("client-rsa.pem"), SSL_FILETYPE_PEM);
		SSL_CTX_use_PrivateKey_file(ctx, P("client-rsa.key"), SSL_FILETYPE_PEM);
		SSL_CTX_use_certificate_file(ctx, P("client-a.pem"), SSL_FILETYPE_PEM);
		SSL *a = SSL_new(ctx);
		printf("current cert before: %s\n", X509_NAME_oneline(X509_get_subject_name(SSL_get_certificate(a)), 0, 0));
		int fd = dial(); req(a, fd, 1); close(fd);
		printf("current cert after: %s\n", X509_NAME_oneline(X509_get_subject_name(SSL_get_certificate(a)), 0, 0));
	} else if (!strcmp(sc, "custom_ext")) {
		SSL_CTX *c1 = mkctx(), *c2 = mkctx();
		SSL_CTX_add_client_custom_ext(c2, 65000, ext_add, ext_free, NULL, ext_parse, NULL);
		SSL *a = SSL_new(c1); int fd = dial(); req(a, fd, 1); close(fd);
		SSL *b = SSL_new(c2); fd = dial(); req(b, fd, 2); close(fd);
		printf("custom extension add callback calls: %d\n", ext_calls);
	} else if (!strcmp(sc, "chain")) {
		/* ctx1 sends leaf + intermediate, ctx2 the same leaf alone */
		SSL_CTX *c1 = mkctx(), *c2 = mkctx();
		SSL_CTX_use_certificate_chain_file(c1, P("client-chain.pem"));
		SSL_CTX_use_PrivateKey_file(c1, P("client-int.key"), SSL_FILETYPE_PEM);
		SSL_CTX_use_certificate_file(c2, P("client-int.pem"), SSL_FILETYPE_PEM);
		SSL_CTX_use_PrivateKey_file(c2, P("client-int.key"), SSL_FILETYPE_PEM);
		SSL *a = SSL_new(c1); int fd = dial(); req(a, fd, 1); close(fd);
		SSL *b = SSL_new(c2); fd = dial(); req(b, fd, 2); close(fd);
	} else if (!strcmp(sc, "misc")) {
		/* an unverifying connection parked, then stricter SSL-level settings */
		SSL_CTX *c0 = SSL_CTX_new(TLS_client_method());
		SSL *a = SSL_new(c0); int fd = dial(); req(a, fd, 1); close(fd);
		SSL_CTX *c = mkctx();
		for (int v = 2; v <= 7; v++) {
			SSL_CTX *cx = v == 2 ? c0 : c;
			SSL *b = SSL_new(cx);
			switch (v) {
			case 2: { /* verify set on the SSL, not the context, with its own store */
				X509_STORE *st = X509_STORE_new(); X509_STORE_load_file(st, P("other-ca.pem"));
				SSL_set0_verify_cert_store(b, st);
				SSL_set_verify(b, SSL_VERIFY_PEER, NULL); break; }
			case 3: /* check time in 2040: expired */
				X509_VERIFY_PARAM_set_time(SSL_get0_param(b), 2208988800); break;
			case 4: SSL_set_verify_depth(b, 0); break;
			case 5: SSL_set_ciphersuites(b, "TLS_AES_128_GCM_SHA256"); break;
			case 6: SSL_set1_groups_list(b, "P-384"); break;
			case 7: X509_VERIFY_PARAM_set_purpose(SSL_get0_param(b), X509_PURPOSE_SSL_CLIENT); break;
			}
			fd = dial(); req(b, fd, v); close(fd);
		}
	} else if (!strcmp(sc, "evict")) {
		/* two SSLs reused with SSL_clear; the pool holds one idle connection */
		SSL_CTX *ctx = mkctx(); SSL *a = SSL_new(ctx), *b = SSL_new(ctx);
		int fa = dial(); req(a, fa, 1);
		int fb = dial(); req(b, fb, 2);
		close(fa); close(fb);
		if (clear(a, 3) != 1 || clear(b, 4) != 1) return 1;
		fa = dial(); req(a, fa, 3); close(fa);
		fb = dial(); req(b, fb, 4); close(fb);
	} else if (!strcmp(sc, "conf_groups")) {
		/* groups set through SSL_CONF_cmd (openssl s_client, nginx proxy_ssl_conf_command) */
		SSL_CTX *c1 = mkctx(), *c2 = mkctx();
		SSL_CONF_CTX *cc = SSL_CONF_CTX_new();
		SSL_CONF_CTX_set_flags(cc, SSL_CONF_FLAG_CLIENT | SSL_CONF_FLAG_FILE);
		SSL_CONF_CTX_set_ssl_ctx(cc, c2);
		printf("conf Groups: %d\n", SSL_CONF_cmd(cc, "Groups", argc > 4 ? argv[4] : "secp384r1"));
		SSL_CONF_CTX_finish(cc);
		SSL *a = SSL_new(c1); int fd = dial(); req(a, fd, 1); close(fd);
		SSL *b = SSL_new(c2); fd = dial(); req(b, fd, 2); close(fd);
		SSL_free(a); SSL_free(b);
	} else if (!strcmp(sc, "no_ticket")) {
		/* A parked (ticket kept) and freed, A2 takes it (a connection
		 * whose first SSL is still held is not handed out: docs/tls.md
		 * "The first owner's SSL"), B (NO_TICKET, cache off) connects */
		SSL_CTX *c1 = mkctx(), *c2 = mkctx();
		SSL_CTX_set_options(c2, SSL_OP_NO_TICKET);
		SSL_CTX_set_session_cache_mode(c2, SSL_SESS_CACHE_OFF);
		SSL *a = SSL_new(c1); int fd = dial(); req(a, fd, 1); close(fd); SSL_free(a);
		SSL *a2 = SSL_new(c1); int fd2 = dial(); req(a2, fd2, 2);
		SSL *b = SSL_new(c2); fd = dial(); req(b, fd, 3); close(fd); close(fd2);
	} else if (!strcmp(sc, "accept_connect")) {
		/* the SSL told to be a server, then SSL_connect (runs the accept side in OpenSSL) */
		SSL_CTX *c = SSL_CTX_new(TLS_method());
		SSL *s = SSL_new(c); SSL_set_accept_state(s);
		int fd = dial(); SSL_set_fd(s, fd);
		printf("before: is_server=%d\n", SSL_is_server(s));
		int r = SSL_connect(s);
		printf("SSL_connect=%d is_server=%d err=%d\n", r, SSL_is_server(s), SSL_get_error(s, r));
	}
	return 0;
}
