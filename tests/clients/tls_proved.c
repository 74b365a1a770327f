/*
 * tls_proved - what a pooled TLS connection, or a session of the library's,
 * must not change (tests/https_proved.bats runs each scenario without and
 * with the library and compares what it prints: docs/tls.md "Found by the
 * fifth HTTPS review").  Usage: tls_proved SCENARIO PORT TLSDIR [ARG]
 *   sni count|reject  request 1 on a plain context, 2 and 3 on one with a
 *                     client-side servername callback (counting, or failing
 *                     the handshake)
 *   once [SIDCTX]     one request on a context (of that session id context)
 *   sid_ctx           request 1 on context "A", 2 on "B", 3 on "B" offering
 *                     request 2's session: the session's id context
 *   errq_read         an error left on the queue before each first read
 *   errq_calls        an error on the queue and errno set before each call
 *   shut_write        a zero-length SSL_write_ex before each request, then
 *                     SSL_shutdown and a write after it
 *   copy|get1|dup     request 2's session (or SSL) given to a third SSL
 */
#include <errno.h>
#include <unistd.h>

#include "tls_common.h"

static const char *dir;
static int port;

static SSL_CTX *mkctx(const char *sid_ctx)
{
	char ca[512];
	snprintf(ca, sizeof ca, "%s/ca.pem", dir);
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(ctx, ca, NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	if (sid_ctx && *sid_ctx)
		SSL_CTX_set_session_id_context(ctx, (const unsigned char *)sid_ctx, (unsigned)strlen(sid_ctx));
	return ctx;
}

/* connect, print the outcome, GET /f; 0 when the body came */
static int request(SSL *s, int i)
{
	int r = SSL_connect(s);
	printf("%d: connect=%d %s reused=%d\n", i, r, r == 1 ? "" : reason(), SSL_session_reused(s));
	ERR_clear_error();
	if (r != 1)
		return -1;
	char resp[65536];
	size_t got;
	char *body = tls_get_f(s, resp, sizeof resp, &got);
	printf("  body=%s\n", body ? "yes" : "no");
	return body ? 0 : -1;
}

static int sni_calls, sni_reject;
static int sni_cb(SSL *s, int *alert, void *arg)
{
	(void)arg;
	sni_calls++;
	printf("  servername callback (%s)\n", SSL_get_servername(s, TLSEXT_NAMETYPE_host_name));
	if (!sni_reject)
		return SSL_TLSEXT_ERR_OK;
	*alert = SSL_AD_ACCESS_DENIED;
	return SSL_TLSEXT_ERR_ALERT_FATAL;
}

static void sni(const char *mode)
{
	sni_reject = !strcmp(mode, "reject");
	SSL_CTX *a = mkctx(NULL), *b = mkctx(NULL);
	SSL_CTX_set_tlsext_servername_callback(b, sni_cb);
	for (int i = 1; i <= 3; i++) {
		SSL *s = tls_new(i == 1 ? a : b, port);
		request(s, i);
		printf("  calls=%d\n", sni_calls);
		tls_close(s);
	}
}

static void sid_ctx(void)
{
	SSL_CTX *a = mkctx("A"), *b = mkctx("B");
	SSL_SESSION *kept = NULL;
	for (int i = 1; i <= 3; i++) {
		SSL *s = tls_new(i == 1 ? a : b, port);
		if (i == 3)
			SSL_set_session(s, kept);
		if (request(s, i) == 0) {
			unsigned len = 0;
			SSL_SESSION *sess = SSL_get_session(s);
			const unsigned char *id = sess ? SSL_SESSION_get0_id_context(sess, &len) : NULL;
			printf("  session id context [%.*s]\n", (int)len, id ? (const char *)id : "");
		}
		if (i == 2)
			kept = SSL_get1_session(s);
		tls_close(s);
	}
	SSL_SESSION_free(kept);
}

/* an error of the program's own on the queue (as an ignored failing call
 * leaves one), and errno set */
static void mark(void)
{
	ERR_raise_data(ERR_LIB_USER, 42, "left by the program");
	errno = 12345;
}

static void said(SSL *s, const char *call, int r)
{
	int e = errno;
	printf("  %s r=%d SSL_get_error=%d queue=%s errno=%d\n", call, r, SSL_get_error(s, r),
	       ERR_peek_error() ? "error" : "empty", e);
	ERR_clear_error();
}

static void errq(int calls)
{
	SSL_CTX *ctx = mkctx(NULL);
	static const char req[] = "GET /f HTTP/1.1\r\nHost: localhost\r\n\r\n";
	for (int i = 1; i <= 3; i++) {
		SSL *s = tls_new(ctx, port);
		printf("%d: connect=%d\n", i, SSL_connect(s));
		if (calls)
			mark();
		int r = SSL_write(s, req, (int)sizeof req - 1);
		if (calls)
			said(s, "write", r);
		char resp[65536];
		size_t got = 0;
		long want = -1;
		char *body = NULL;
		for (int k = 0; !body || (long)(got - (size_t)(body - resp)) < want; k++) {
			if (!k)
				mark();
			r = SSL_read(s, resp + got, (int)(sizeof resp - 1 - got));
			/* (errno: the socket BIO's read clears it) */
			if (!k)
				printf("  first read %s, queue=%s\n", r > 0 ? "ok" : "failed",
				       ERR_peek_error() ? "error" : "empty");
			ERR_clear_error();
			if (r <= 0)
				break;
			got += (size_t)r;
			resp[got] = 0;
			if (!body && (body = strstr(resp, "\r\n\r\n"))) {
				body += 4;
				const char *cl = strcasestr(resp, "content-length:");
				want = cl ? atol(cl + 15) : 0;
			}
		}
		printf("  body=%s\n", body ? "yes" : "no");
		if (calls) {
			mark();
			said(s, "shutdown", SSL_shutdown(s));
			errno = 77;
			said(s, "write after shutdown", SSL_write(s, "x", 1));
		}
		int fd = SSL_get_fd(s);
		SSL_free(s);
		close(fd);
	}
}

static void shut_write(void)
{
	SSL_CTX *ctx = mkctx(NULL);
	for (int i = 1; i <= 3; i++) {
		SSL *s = tls_new(ctx, port);
		printf("%d: connect=%d\n", i, SSL_connect(s));
		size_t put = 0;
		int r = SSL_write_ex(s, "", 0, &put);
		printf("  zero-length write_ex r=%d put=%zu\n", r, put);
		char resp[65536];
		size_t got;
		printf("  body=%s\n", tls_get_f(s, resp, sizeof resp, &got) ? "yes" : "no");
		printf("  shutdown r=%d\n", SSL_shutdown(s));
		r = SSL_write(s, "x", 1);
		printf("  write after shutdown r=%d SSL_get_error=%d (%s)\n", r, SSL_get_error(s, r), reason());
		ERR_clear_error();
		int fd = SSL_get_fd(s);
		SSL_free(s);
		close(fd);
	}
}

static void show(const char *what, SSL *s)
{
	SSL_SESSION *sess = SSL_get_session(s);
	STACK_OF(X509) *vc = SSL_get0_verified_chain(s);
	printf("%s: reused=%d session=%s resumable=%d chain=%d\n", what, SSL_session_reused(s), sess ? "yes" : "no",
	       sess ? SSL_SESSION_is_resumable(sess) : -1, vc ? sk_X509_num(vc) : -1);
}

/* request 2's session (copy, get1) or SSL (dup) given to a third SSL */
static void handed(const char *mode)
{
	SSL_CTX *ctx = mkctx(NULL);
	SSL *s1 = tls_new(ctx, port);
	request(s1, 1);
	tls_close(s1);
	SSL *s2 = tls_new(ctx, port);
	request(s2, 2);
	show("2", s2);
	SSL *t;
	if (!strcmp(mode, "dup")) {
		t = SSL_dup(s2);
		printf("dup: %s, the same SSL: %s\n", t ? "ok" : "failed", t == s2 ? "yes" : "no");
		if (!t)
			return;
		/* (a connected SSL dup'ed is itself: its new socket gets records of the old keys) */
		SSL_set_fd(t, dial(port));
	} else {
		t = tls_new(ctx, port);
		if (!strcmp(mode, "copy"))
			printf("copy=%d\n", SSL_copy_session_id(t, s2));
		else {
			SSL_SESSION *sess = SSL_get1_session(s2);
			printf("set=%d\n", SSL_set_session(t, sess));
			SSL_SESSION_free(sess);
		}
	}
	request(t, 3);
	show("3", t);
	if (t == s2)
		SSL_free(t); /* the reference dup took */
	tls_close(t == s2 ? s2 : t);
	if (t != s2)
		tls_close(s2);
	SSL *s4 = tls_new(ctx, port);
	request(s4, 4);
	show("4", s4);
	tls_close(s4);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 4) {
		fprintf(stderr, "usage: tls_proved SCENARIO PORT TLSDIR [ARG]\n");
		return 2;
	}
	const char *sc = argv[1], *arg = argc > 4 ? argv[4] : "";
	port = atoi(argv[2]);
	dir = argv[3];
	if (!strcmp(sc, "sni"))
		sni(arg);
	else if (!strcmp(sc, "once")) {
		SSL *s = tls_new(mkctx(arg), port);
		request(s, 1);
		tls_close(s);
	} else if (!strcmp(sc, "sid_ctx"))
		sid_ctx();
	else if (!strcmp(sc, "errq_read") || !strcmp(sc, "errq_calls"))
		errq(!strcmp(sc, "errq_calls"));
	else if (!strcmp(sc, "shut_write"))
		shut_write();
	else if (!strcmp(sc, "copy") || !strcmp(sc, "get1") || !strcmp(sc, "dup"))
		handed(sc);
	else {
		fprintf(stderr, "unknown scenario %s\n", sc);
		return 2;
	}
	return 0;
}
