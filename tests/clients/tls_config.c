/*
 * tls_config - one process, a pooled TLS connection, then an SSL whose
 * configuration differs in one way that no Ruby/Python/curl option spells
 * (tests/https_config.bats runs each scenario without and with the
 * library and compares what it prints: docs/tls.md).  Each request: GET
 * /echo/<i>, Connection: close unless said otherwise, the response read
 * by its Content-Length and then to the end.
 * Prints "<i> ok <status line> reused=<0|1> chain=<n> verify=<n>" or
 * "<i> fail <reason>", and what a scenario inspects.
 * Usage: tls_config SCENARIO PORT TLSDIR [ARG]
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

static int port;
static const char *dir;
static char path[512];
static const char *P(const char *f)
{
	snprintf(path, sizeof path, "%s/%s", dir, f);
	return path;
}

static int dial(void)
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

/* A verifying context that refuses renegotiation: a TLS 1.2 connection
 * is handed only to such a program (docs/tls.md "Renegotiation") */
static SSL_CTX *mkctx(void)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_load_verify_locations(ctx, P("ca.pem"), NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	return ctx;
}

/* ... and one that allows it, as OpenSSL's default */
static SSL_CTX *mkctx_reneg(void)
{
	SSL_CTX *ctx = mkctx();
	SSL_CTX_clear_options(ctx, SSL_OP_NO_RENEGOTIATION);
	return ctx;
}

static const char *errstr(void)
{
	static char eb[256];
	unsigned long e = ERR_peek_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;
	snprintf(eb, sizeof eb, "%s", r ? r : "no error queued");
	ERR_clear_error();
	return eb;
}

static int handshake(SSL *ssl, int fd, int i)
{
	SSL_set_fd(ssl, fd);
	SSL_set_tlsext_host_name(ssl, "localhost");
	SSL_set1_host(ssl, "localhost");
	if (SSL_connect(ssl) != 1) {
		long v = SSL_get_verify_result(ssl);
		printf("%d fail %s\n", i, v != X509_V_OK ? X509_verify_cert_error_string(v) : errstr());
		return -1;
	}
	return 0;
}

/* what the program reads of its handshake */
static void show(SSL *ssl, int i, const char *status)
{
	STACK_OF(X509) *vc = SSL_get0_verified_chain(ssl);
	printf("%d ok %s reused=%d chain=%d verify=%ld version=%s\n", i, status, SSL_session_reused(ssl),
	       vc ? sk_X509_num(vc) : -1, SSL_get_verify_result(ssl), SSL_get_version(ssl));
}

/* GET /echo/i; read the head and Content-Length bytes of body; to_eof:
 * then read on to the end.  Prints the outcome; 0 when the body came
 * whole. */
static int get(SSL *ssl, int i, int close_it, int to_eof)
{
	char rq[256], resp[65536];
	int len = snprintf(rq, sizeof rq, "GET /echo/%d HTTP/1.1\r\nHost: localhost\r\n%s\r\n", i,
			   close_it ? "Connection: close\r\n" : "");
	int w = SSL_write(ssl, rq, len);
	if (w != len) {
		int err = SSL_get_error(ssl, w);
		printf("%d fail write %d SSL_get_error=%d (%s)\n", i, w, err, errstr());
		return -1;
	}
	size_t got = 0;
	char *body = NULL;
	long want = -1;
	for (;;) {
		if (body && (long)(got - (size_t)(body - resp)) >= want && !to_eof)
			break;
		int r = SSL_read(ssl, resp + got, (int)(sizeof(resp) - 1 - got));
		if (r <= 0) {
			int err = SSL_get_error(ssl, r);
			resp[got] = 0;
			long have = body ? (long)(got - (size_t)(body - resp)) : -1;
			if (body && have >= want && (err == SSL_ERROR_ZERO_RETURN))
				break;
			printf("%d read ended: ret=%d SSL_get_error=%d body %ld of %ld (%s) shutdown=%d\n", i, r,
			       err, have, want, err == SSL_ERROR_SSL ? errstr() : "-", SSL_get_shutdown(ssl));
			ERR_clear_error();
			return -1;
		}
		got += (size_t)r;
		resp[got] = 0;
		if (!body && (body = strstr(resp, "\r\n\r\n"))) {
			body += 4;
			char *cl = strcasestr(resp, "Content-Length:");
			want = cl ? atol(cl + 15) : 0;
		}
	}
	char *eol = strstr(resp, "\r\n");
	char status[64];
	snprintf(status, sizeof status, "%.*s", eol ? (int)(eol - resp) : 0, resp);
	show(ssl, i, status);
	return 0;
}

/* the connection pooled first: a default context's request */
static void first(void)
{
	SSL_CTX *ctx = mkctx();
	SSL *s = SSL_new(ctx);
	int fd = dial();
	if (handshake(s, fd, 1) == 0 && get(s, 1, 1, 1) == 0)
		SSL_shutdown(s);
	close(fd);
	SSL_free(s);
	SSL_CTX_free(ctx);
}

static SSL_SESSION *latest;
static int keep_own; /* one() keeps each SSL's session in latest */

/* one request on a fresh SSL of ctx (close: Connection: close) */
/* A call that resets an established SSL, named by arg (the reset
 * scenarios' ARG: set_session with sess, set_session_null, set_method,
 * accept_state, connect_state, stateless, clear): what it returned, -9
 * for a call without a value. */
static long reset_call(SSL *s, const char *arg, SSL_SESSION *sess)
{
	if (!strcmp(arg, "set_session"))
		return SSL_set_session(s, sess);
	if (!strcmp(arg, "set_session_null"))
		return SSL_set_session(s, NULL);
	if (!strcmp(arg, "set_method"))
		return SSL_set_ssl_method(s, TLS_client_method());
	if (!strcmp(arg, "stateless"))
		return SSL_stateless(s);
	if (!strcmp(arg, "clear"))
		return SSL_clear(s);
	if (!strcmp(arg, "accept_state"))
		SSL_set_accept_state(s);
	else if (!strcmp(arg, "connect_state"))
		SSL_set_connect_state(s);
	return -9;
}

static void one(SSL_CTX *ctx, SSL *s, int i)
{
	if (!s)
		s = SSL_new(ctx);
	int fd = dial();
	if (handshake(s, fd, i) == 0 && get(s, i, 1, 1) == 0)
		SSL_shutdown(s);
	SSL_SESSION *sess = keep_own ? SSL_get1_session(s) : NULL;
	if (sess) {
		if (latest)
			SSL_SESSION_free(latest);
		latest = sess;
	}
	close(fd);
	SSL_free(s);
}

/* watchers of the second SSL's handshake (scenario watch) */
static int keylog_lines, info_start, info_done, msgs;
static void keylog_cb(const SSL *s, const char *line)
{
	(void)s;
	(void)line;
	keylog_lines++;
}
static void info_cb(const SSL *s, int where, int ret)
{
	(void)s;
	(void)ret;
	info_start += !!(where & SSL_CB_HANDSHAKE_START);
	info_done += !!(where & SSL_CB_HANDSHAKE_DONE);
}
static void msg_cb(int write_p, int version, int type, const void *buf, size_t len, SSL *s, void *arg)
{
	(void)write_p, (void)version, (void)buf, (void)len, (void)s, (void)arg;
	msgs += type == SSL3_RT_HANDSHAKE;
}

/* the first owner's SSL, kept after its socket closed (scenario
 * kept_ssl): what its ex_data free callback is given */
static void exfree_cb(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
	(void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
	printf("ex_data freed: %s\n", ptr ? (const char *)ptr : "(null)");
}

/* the calls a verify callback gets (scenario verify_cb): it accepts
 * everything, as a pinning callback that decides alone */
static int info_events;
static void count_info(const SSL *s, int where, int ret)
{
	(void)s, (void)where, (void)ret;
	info_events++;
}

static int verify_calls;static int verify_calls;
static int accept_all(int ok, X509_STORE_CTX *x)
{
	(void)ok, (void)x;
	verify_calls++;
	return 1;
}

/* the sessions a callback was told of: for which SSL, resumable */
static SSL *live[8];
static int told, told_resumable, told_not_live;
static int count_session_cb(SSL *s, SSL_SESSION *sess)
{
	int known = 0;
	for (int i = 0; i < 8; i++)
		known |= live[i] == s;
	told++;
	told_resumable += SSL_SESSION_is_resumable(sess);
	told_not_live += !known;
	return 0; /* not kept */
}

/* one request on a fresh SSL of ctx, noted live while it is */
static void one_live(SSL_CTX *ctx, int i)
{
	SSL *s = SSL_new(ctx);
	live[i] = s;
	int fd = dial();
	if (handshake(s, fd, i) == 0 && get(s, i, 1, 1) == 0)
		SSL_shutdown(s);
	close(fd);
	live[i] = NULL;
	SSL_free(s);
}

/* scenario store_cb: the calls the trust store's functions get */
static int store_cb_calls, store_rev_calls;
static int store_accept_all(int ok, X509_STORE_CTX *x)
{
	(void)ok, (void)x;
	store_cb_calls++;
	return 1;
}
static int store_revocation(X509_STORE_CTX *x)
{
	(void)x;
	store_rev_calls++;
	return 1;
}

/* scenario bio_watch: what the program's own BIO saw */
static long bio_read, bio_written;
static long bio_cb_ex(BIO *b, int oper, const char *argp, size_t len, int argi, long argl, int ret,
		      size_t *processed)
{
	(void)b, (void)argp, (void)len, (void)argi, (void)argl;
	if ((oper & BIO_CB_RETURN) && ret > 0 && processed) {
		if ((oper & ~BIO_CB_RETURN) == BIO_CB_READ)
			bio_read += (long)*processed;
		if ((oper & ~BIO_CB_RETURN) == BIO_CB_WRITE)
			bio_written += (long)*processed;
	}
	return ret;
}
/* a counting filter of the program's own, pushed on the socket BIO */
static int cnt_write(BIO *b, const char *d, int n)
{
	int r = BIO_write(BIO_next(b), d, n);
	BIO_clear_retry_flags(b);
	BIO_copy_next_retry(b);
	if (r > 0)
		bio_written += r;
	return r;
}
static int cnt_read(BIO *b, char *d, int n)
{
	int r = BIO_read(BIO_next(b), d, n);
	BIO_clear_retry_flags(b);
	BIO_copy_next_retry(b);
	if (r > 0)
		bio_read += r;
	return r;
}
static long cnt_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	return BIO_ctrl(BIO_next(b), cmd, num, ptr);
}
static int cnt_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

/* one request on s over fd whose BIOs are the caller's (no SSL_set_fd) */
static void one_bio(SSL *s, int fd, int i)
{
	SSL_set_tlsext_host_name(s, "localhost");
	SSL_set1_host(s, "localhost");
	if (SSL_connect(s) != 1)
		printf("%d fail %s\n", i, errstr());
	else if (get(s, i, 1, 1) == 0)
		SSL_shutdown(s);
	close(fd);
	SSL_free(s);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 4) {
		fprintf(stderr, "usage: tls_config SCENARIO PORT TLSDIR [ARG]\n");
		return 2;
	}
	const char *sc = argv[1], *arg = argc > 4 ? argv[4] : "";
	port = atoi(argv[2]);
	dir = argv[3];
	/* TLS_CONFIG_TEACH=1: one exchange before the scenario, whose close
	 * teaches the library how the server ends (docs/tls.md "Ragged
	 * closes"), so that the scenario's first request may be pooled */
	if (getenv("TLS_CONFIG_TEACH"))
		first();
	if (!strcmp(sc, "kept_ssl")) {
		/* the first SSL closes its socket and is freed only after a
		 * second SSL's request (Ruby frees at GC): it keeps its
		 * ex_data and context until then; then a third request.
		 * ARG "free": its ex_data index has a free callback */
		SSL_CTX *ctx = mkctx();
		int idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, !strcmp(arg, "free") ? exfree_cb : NULL);
		SSL *a = SSL_new(ctx);
		SSL_set_ex_data(a, idx, "first SSL's data");
		int fd = dial();
		if (handshake(a, fd, 1) == 0 && get(a, 1, 1, 1) == 0)
			SSL_shutdown(a);
		close(fd);
		one(mkctx(), NULL, 2);
		const char *d = SSL_get_ex_data(a, idx);
		printf("after 2: ex_data %s, context %s, verify mode %d\n", d ? d : "(null)",
		       SSL_get_SSL_CTX(a) == ctx ? "its own" : "another", SSL_get_verify_mode(a));
		SSL_free(a);
		one(mkctx(), NULL, 3);
		SSL_CTX_free(ctx);
	} else if (!strcmp(sc, "ctx_free")) {
		/* a context whose ex_data index has a free callback (ARG
		 * "session": a session's index with one): it runs at the
		 * program's SSL_CTX_free, not later, and never for an object
		 * of the library's (the engine of a pooled connection keeps
		 * its context) */
		int idx = !strcmp(arg, "session") ? SSL_SESSION_get_ex_new_index(0, NULL, NULL, NULL, exfree_cb)
						   : SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, exfree_cb);
		SSL_CTX *ctx = mkctx();
		SSL_CTX_set_ex_data(ctx, idx, "first context's data");
		one(ctx, NULL, 1);
		printf("freeing the first context\n");
		SSL_CTX_free(ctx);
		printf("freed\n");
		one(mkctx(), NULL, 2);
		one(mkctx(), NULL, 3);
	} else if (!strcmp(sc, "kept_clear")) {
		/* the first SSL closes its socket, a second SSL makes a
		 * request and keeps its socket, then the first is reset
		 * (SSL_clear) for a new connection of its own */
		SSL_CTX *ctx = mkctx();
		SSL *a = SSL_new(ctx);
		int fd = dial();
		if (handshake(a, fd, 1) == 0 && get(a, 1, 1, 1) == 0)
			SSL_shutdown(a);
		close(fd);
		/* the second keeps its socket open meanwhile */
		SSL_CTX *ctx2 = mkctx();
		SSL *b = SSL_new(ctx2);
		int fd2 = dial();
		if (handshake(b, fd2, 2) == 0)
			get(b, 2, 0, 0);
		int r = SSL_clear(a);
		printf("SSL_clear: %d%s\n", r, r == 1 ? "" : errstr());
		fd = dial();
		if (r == 1 && handshake(a, fd, 3) == 0 && get(a, 3, 1, 1) == 0)
			SSL_shutdown(a);
		close(fd);
		SSL_free(a);
		SSL_CTX_free(ctx);
		close(fd2);
		SSL_free(b);
		SSL_CTX_free(ctx2);
	} else if (!strcmp(sc, "verify_cb")) {
		/* no trust store, a verify callback that accepts all: its
		 * result (untrusted) differs from the pooled connection's, so
		 * its own handshake is made; the callback runs as often as
		 * there */
		first();
		SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, accept_all);
		SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
		one(ctx, NULL, 2);
		printf("verify callback: %d calls\n", verify_calls);
		verify_calls = 0;
		one(ctx, NULL, 3);
		printf("verify callback: %d calls\n", verify_calls);
	} else if (!strcmp(sc, "verify_mode")) {
		/* a connection made without verification, then a context whose
		 * mode lacks SSL_VERIFY_PEER but is not SSL_VERIFY_NONE, with a
		 * trust store that cannot verify the server: OpenSSL aborts */
		SSL_CTX *lax = SSL_CTX_new(TLS_client_method());
		one(lax, NULL, 1);
		SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
		SSL_CTX_load_verify_locations(ctx, P("other-ca.pem"), NULL);
		int mode = !strcmp(arg, "once")	    ? SSL_VERIFY_CLIENT_ONCE
			   : !strcmp(arg, "post")   ? SSL_VERIFY_POST_HANDSHAKE
						    : SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
		SSL_CTX_set_verify(ctx, mode, NULL);
		one(ctx, NULL, 2);
	} else if (!strcmp(sc, "legacy")) {
		/* a server without secure renegotiation (RFC 5746): only a
		 * context with SSL_OP_LEGACY_SERVER_CONNECT may talk to it.
		 * (All refuse renegotiation: a TLS 1.2 connection is handed
		 * only to such a program, docs/tls.md "Renegotiation".) */
		SSL_CTX *ctx = mkctx();
		SSL_CTX_set_options(ctx, SSL_OP_LEGACY_SERVER_CONNECT | SSL_OP_NO_RENEGOTIATION);
		one(ctx, NULL, 1);
		SSL_CTX *strict = mkctx();
		SSL_CTX_clear_options(strict, SSL_OP_LEGACY_SERVER_CONNECT);
		SSL_CTX_set_options(strict, SSL_OP_NO_RENEGOTIATION);
		one(strict, NULL, 2);
		one(ctx, NULL, 3);
	} else if (!strcmp(sc, "eof")) {
		/* keep-alive requests to a server whose second response is cut
		 * short without close_notify: what the second program reads is
		 * its own options' verdict (ARG strict: the first one lax) */
		int lax_first = strcmp(arg, "strict_first") != 0;
		for (int i = 1; i <= 2; i++) {
			SSL_CTX *ctx = mkctx();
			if ((i == 1) == lax_first)
				SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
			SSL *s = SSL_new(ctx);
			int fd = dial();
			if (handshake(s, fd, i) == 0)
				get(s, i, 0, 0);
			close(fd);
			SSL_free(s);
		}
	} else if (!strcmp(sc, "shut_keep") || !strcmp(sc, "fork_parked")) {
		/* three keep-alive requests, each on a fresh SSL ended with
		 * SSL_shutdown (our close_notify) and close(): alone the server
		 * reads a close_notify at each connection's end.  fork_parked:
		 * a fork before the second whose child exits at once (its end
		 * touches none of the parent's connections) */
		SSL_CTX *ctx = mkctx();
		for (int i = 1; i <= 3; i++) {
			if (i == 2 && !strcmp(sc, "fork_parked")) {
				pid_t pid = fork();
				if (pid == 0)
					_exit(0);
				waitpid(pid, NULL, 0);
			}
			SSL *s = SSL_new(ctx);
			int fd = dial();
			if (handshake(s, fd, i) == 0 && get(s, i, 0, 0) == 0)
				printf("%d shutdown=%d\n", i, SSL_shutdown(s));
			close(fd);
			SSL_free(s);
		}
	} else if (!strcmp(sc, "ctx_info_after")) {
		/* each SSL moved after its handshake to a context with an info
		 * callback (SSL_set_SSL_CTX): libssl calls it at every event
		 * after, the tickets read and the close_notify sent */
		SSL_CTX *ctx = mkctx(), *watching = mkctx();
		SSL_CTX_set_info_callback(watching, count_info);
		for (int i = 1; i <= 3; i++) {
			SSL *s = SSL_new(ctx);
			int fd = dial();
			if (handshake(s, fd, i) == 0) {
				SSL_set_SSL_CTX(s, watching);
				if (get(s, i, 0, 0) == 0)
					SSL_shutdown(s);
			}
			printf("%d info events %d\n", i, info_events);
			close(fd);
			SSL_free(s);
		}
	} else if (!strcmp(sc, "kept_cut")) {
		/* the first request keeps its session and ends cleanly; the
		 * second's answer is cut short (no close_notify: a fatal error
		 * on its connection, the first's with the library); the first's
		 * session offered then resumes, as alone: the failure was the
		 * second connection's */
		SSL_CTX *ctx = mkctx();
		SSL_SESSION *kept = NULL;
		for (int i = 1; i <= 2; i++) {
			SSL *s = SSL_new(ctx);
			int fd = dial();
			if (handshake(s, fd, i) == 0 && get(s, i, 0, 0) == 0)
				SSL_shutdown(s);
			if (i == 1)
				kept = SSL_get1_session(s);
			close(fd);
			SSL_free(s);
		}
		printf("kept resumable=%d\n", kept ? SSL_SESSION_is_resumable(kept) : -1);
		/* (the server answers keep-alive whatever is asked: no read to
		 * the end; its fourth answer, cut, leaves its count even for
		 * the next run) */
		SSL *s = SSL_new(ctx);
		if (kept)
			SSL_set_session(s, kept);
		int fd = dial();
		if (handshake(s, fd, 3) == 0 && get(s, 3, 0, 0) == 0)
			get(s, 4, 0, 0);
		close(fd);
		SSL_free(s);
	} else if (!strcmp(sc, "set_ctx")) {
		/* an SSL made from a default context, moved to one whose
		 * signature algorithms the server's ECDSA certificate cannot
		 * meet: its handshake is the new context's */
		first();
		SSL_CTX *ctx = mkctx(), *rsa = mkctx();
		SSL_CTX_set1_sigalgs_list(rsa, "RSA-PSS+SHA256:RSA+SHA256");
		SSL *s = SSL_new(ctx);
		SSL_set_SSL_CTX(s, rsa);
		one(NULL, s, 2);
		/* and back: a context like the first */
		s = SSL_new(rsa);
		SSL_set_SSL_CTX(s, ctx);
		one(NULL, s, 3);
	} else if (!strcmp(sc, "max_cert_list")) {
		first();
		SSL_CTX *ctx = mkctx();
		SSL *s = SSL_new(ctx);
		SSL_set_max_cert_list(s, 64);
		one(NULL, s, 2);
	} else if (!strcmp(sc, "setting")) {
		/* a setting that acts after the handshake, not readable back
		 * (padding, fragment size) or readable: a fresh connection, or
		 * one that behaves the same */
		first();
		SSL_CTX *ctx = mkctx();
		SSL *s = SSL_new(ctx);
		if (!strcmp(arg, "block_padding"))
			SSL_set_block_padding(s, 1024);
		else if (!strcmp(arg, "max_send_fragment"))
			SSL_set_max_send_fragment(s, 512);
		else if (!strcmp(arg, "read_ahead"))
			SSL_set_read_ahead(s, 1);
		else if (!strcmp(arg, "quiet_shutdown"))
			SSL_set_quiet_shutdown(s, 1);
		else if (!strcmp(arg, "ctrl_unknown"))
			SSL_ctrl(s, 9999, 1, NULL);
		one(NULL, s, 2);
	} else if (!strcmp(sc, "shutdown")) {
		/* Connection: close, the body read by its length (not to EOF),
		 * then while (SSL_shutdown() == 0): OpenSSL says 0, then 1 */
		SSL_CTX *ctx = mkctx();
		for (int i = 1; i <= 2; i++) {
			SSL *s = SSL_new(ctx);
			int fd = dial();
			if (handshake(s, fd, i) == 0 && get(s, i, 1, 0) == 0) {
				int n = 0, r;
				printf("%d shutdown:", i);
				while ((r = SSL_shutdown(s)) == 0 && ++n < 5)
					printf(" %d", r);
				printf(" %d get_shutdown=%d\n", r, SSL_get_shutdown(s));
			}
			close(fd);
			SSL_free(s);
		}
	} else if (!strcmp(sc, "own_session")) {
		/* the program keeps each connection's session itself
		 * (SSL_get1_session, Python's and Ruby's session attribute: a
		 * context that keeps sessions is not followed) and resumes the
		 * latest */
		SSL_CTX *ctx = mkctx();
		keep_own = 1;
		one(ctx, NULL, 1);
		SSL *s = SSL_new(ctx);
		if (latest)
			SSL_set_session(s, latest);
		one(NULL, s, 2);
		/* a session of another connection: its own handshake */
		SSL_SESSION *old = latest;
		SSL_SESSION_up_ref(old);
		one(ctx, NULL, 3);
		s = SSL_new(ctx);
		SSL_set_session(s, old);
		one(NULL, s, 4);
	} else if (!strcmp(sc, "session_after")) {
		/* the program offers the session it read last on each of four
		 * connections and reads its session after the answer: a TLS 1.3
		 * server's ticket after a resumption makes it a new one (a new
		 * object, a new id), as after a full handshake */
		SSL_CTX *ctx = mkctx();
		SSL_SESSION *kept = NULL;
		for (int i = 1; i <= 4; i++) {
			SSL *s = SSL_new(ctx);
			if (kept)
				SSL_set_session(s, kept);
			int fd = dial();
			if (handshake(s, fd, i) == 0 && get(s, i, 1, 1) == 0)
				SSL_shutdown(s);
			SSL_SESSION *after = SSL_get1_session(s);
			unsigned int la = 0, lk = 0;
			const unsigned char *ia = after ? SSL_SESSION_get_id(after, &la) : NULL;
			const unsigned char *ik = kept ? SSL_SESSION_get_id(kept, &lk) : NULL;
			printf("%d session after the answer: %s, id %s, resumable=%d\n", i,
			       !after ? "none" : after == kept ? "the one it offered" : "another",
			       !ik ? "-" : la == lk && !memcmp(ia, ik, la) ? "the same" : "another",
			       after ? SSL_SESSION_is_resumable(after) : -1);
			if (kept)
				SSL_SESSION_free(kept);
			kept = after;
			close(fd);
			SSL_free(s);
		}
		if (kept)
			SSL_SESSION_free(kept);
	} else if (!strcmp(sc, "observe")) {
		/* A pooled; B takes it and stays open; C finds none free (the
		 * library may resume A's session); then D after B and C closed */
		SSL_CTX *ctx = mkctx();
		one(ctx, NULL, 1);
		SSL *b = SSL_new(ctx), *c = SSL_new(ctx);
		int fb = dial();
		if (handshake(b, fb, 2) == 0)
			get(b, 2, 1, 1);
		int fc = dial();
		if (handshake(c, fc, 3) == 0)
			get(c, 3, 1, 1);
		SSL_shutdown(b);
		SSL_shutdown(c);
		close(fb);
		close(fc);
		SSL_free(b);
		SSL_free(c);
		one(ctx, NULL, 4);
		one(ctx, NULL, 5);
		printf("context: connect %ld good %ld hits %ld\n", SSL_CTX_sess_connect(ctx),
		       SSL_CTX_sess_connect_good(ctx), SSL_CTX_sess_hits(ctx));
	} else if (!strcmp(sc, "reneg")) {
		/* a TLS 1.2 server asking to renegotiate before each answer:
		 * the second SSL's own handshake allows it, or (ARG refuse)
		 * refuses it (SSL_OP_NO_RENEGOTIATION) */
		one(mkctx_reneg(), NULL, 1);
		SSL_CTX *ctx = !strcmp(arg, "refuse") ? mkctx() : mkctx_reneg();
		one(ctx, NULL, 2);
		one(ctx, NULL, 3);
	} else if (!strcmp(sc, "reneg_client")) {
		/* the second SSL renegotiates itself before its request */
		one(mkctx(), NULL, 1);
		SSL_CTX *ctx = !strcmp(arg, "refuse") ? mkctx() : mkctx_reneg();
		SSL *s = SSL_new(ctx);
		int fd = dial();
		if (handshake(s, fd, 2) == 0) {
			int r = SSL_renegotiate(s);
			int h = r == 1 ? SSL_do_handshake(s) : -1;
			printf("2 renegotiate=%d handshake=%d (%s) pending=%d\n", r, h,
			       r == 1 && h == 1 ? "-" : errstr(), SSL_renegotiate_pending(s));
			ERR_clear_error();
			if (get(s, 2, 1, 1) == 0)
				SSL_shutdown(s);
		}
		close(fd);
		SSL_free(s);
	} else if (!strcmp(sc, "watch")) {
		/* the second SSL's handshake is watched: a keylog, info or
		 * message callback sees its own handshake */
		one(mkctx(), NULL, 1);
		SSL_CTX *ctx = mkctx();
		SSL *s = NULL;
		if (!strcmp(arg, "keylog"))
			SSL_CTX_set_keylog_callback(ctx, keylog_cb);
		else if (!strcmp(arg, "info"))
			SSL_CTX_set_info_callback(ctx, info_cb);
		else if (!strcmp(arg, "info_ssl"))
			SSL_set_info_callback(s = SSL_new(ctx), info_cb);
		else if (!strcmp(arg, "msg"))
			SSL_CTX_set_msg_callback(ctx, msg_cb);
		one(ctx, s, 2);
		printf("keylog lines %d, info: %d starts %d done, handshake messages %d\n", keylog_lines,
		       info_start, info_done, msgs);
		/* and what the context counted */
		printf("context: connect %ld good %ld hits %ld\n", SSL_CTX_sess_connect(ctx),
		       SSL_CTX_sess_connect_good(ctx), SSL_CTX_sess_hits(ctx));
	} else if (!strcmp(sc, "session_owner")) {
		/* the first SSL's context keeps sessions (new-session
		 * callback); a default context's SSL comes second, against a
		 * server sending a ticket before each answer: the callback is
		 * told only of its own SSLs', while they live */
		SSL_CTX *ctx = mkctx();
		SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
		SSL_CTX_sess_set_new_cb(ctx, count_session_cb);
		one_live(ctx, 1);
		int first = told;
		one(mkctx(), NULL, 2);
		one(mkctx(), NULL, 3);
		printf("told %d during the first, %d after; for an SSL not live: %d\n", first, told - first,
		       told_not_live);
	} else if (!strcmp(sc, "session_told")) {
		/* a default context's SSL first; the second's context keeps
		 * sessions: told what its own handshake would tell */
		one(mkctx(), NULL, 1);
		SSL_CTX *ctx = mkctx();
		SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
		SSL_CTX_sess_set_new_cb(ctx, count_session_cb);
		one_live(ctx, 2);
		printf("told %d sessions, %d resumable, %d for an SSL not live\n", told, told_resumable,
		       told_not_live);
	} else if (!strcmp(sc, "told_late")) {
		/* the context starts keeping sessions after each SSL's
		 * handshake, before its request (ARG "store": its internal
		 * store too): told of what that connection's server sends
		 * after it (TLS 1.3: its tickets, at the first read).  One such
		 * request: a third would resume a session of ours, after which
		 * a server sends fewer tickets (docs/tls.md, left) */
		one(mkctx(), NULL, 1);
		for (int i = 2; i <= 2; i++) {
			SSL_CTX *ctx = mkctx();
			SSL *s = SSL_new(ctx);
			int fd = dial();
			if (handshake(s, fd, i) == 0) {
				SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT |
									(!strcmp(arg, "store") ? 0 : SSL_SESS_CACHE_NO_INTERNAL_STORE));
				SSL_CTX_sess_set_new_cb(ctx, count_session_cb);
				live[0] = s;
				if (get(s, i, 1, 1) == 0)
					SSL_shutdown(s);
				live[0] = NULL;
			}
			close(fd);
			SSL_free(s);
			printf("%d told %d sessions, %d resumable, %d for an SSL not live; the store holds %ld\n", i, told,
			       told_resumable, told_not_live, SSL_CTX_sess_number(ctx));
			told = told_resumable = told_not_live = 0;
			SSL_CTX_free(ctx);
		}
	} else if (!strcmp(sc, "store_cb")) {
		/* no trust store of its own, a verify callback on its
		 * X509_STORE that accepts all (ARG revocation: and a
		 * check_revocation function): its result (untrusted) differs
		 * from the pooled connection's; each function runs as often as
		 * in its own handshakes */
		first();
		SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
		SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
		X509_STORE *st = SSL_CTX_get_cert_store(ctx);
		X509_STORE_set_verify_cb(st, store_accept_all);
		if (!strcmp(arg, "revocation"))
			X509_STORE_set_check_revocation(st, store_revocation);
		for (int i = 2; i <= 3; i++) {
			one(ctx, NULL, i);
			printf("store verify callback: %d calls, check_revocation: %d calls\n", store_cb_calls,
			       store_rev_calls);
			store_cb_calls = store_rev_calls = 0;
		}
	} else if (!strcmp(sc, "crypto_state")) {
		/* the process's default properties changed between two
		 * requests (ARG fips: fips=yes, which no provider here
		 * meets; else a no-op "?fips=no"): its own handshake runs
		 * under them */
		SSL_CTX *ctx = mkctx();
		if (strstr(arg, "_nv")) { /* no verification: no trust store */
			ctx = SSL_CTX_new(TLS_client_method());
			SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
		}
		one(ctx, NULL, 1);
		one(ctx, NULL, 2); /* (teaches how the server ends: docs/tls.md "Ragged closes") */
		int r = EVP_set_default_properties(NULL, !strncmp(arg, "fips", 4) ? "fips=yes" : "?fips=no");
		printf("set default properties: %d\n", r);
		ERR_clear_error();
		for (int i = 3; i <= 5; i++)
			one(ctx, NULL, i);
	} else if (!strcmp(sc, "clear_again")) {
		/* one SSL, two connections: SSL_shutdown, close, SSL_clear,
		 * then a new connection: its handshake offers the session the
		 * first left it (the server resumes it) */
		first();
		SSL_CTX *ctx = mkctx();
		one(ctx, NULL, 2); /* (teaches how the server ends: docs/tls.md "Ragged closes") */
		SSL *a = SSL_new(ctx);
		for (int i = 3; i <= 4; i++) {
			if (i == 4)
				printf("SSL_clear: %d\n", SSL_clear(a));
			int fd = dial();
			if (handshake(a, fd, i) == 0 && get(a, i, 1, 1) == 0)
				SSL_shutdown(a);
			close(fd);
		}
		SSL_free(a);
	} else if (!strcmp(sc, "clear_resumed")) {
		/* request 2 (no connection free: the first taught) may resume a
		 * session of the library's; then SSL_shutdown, close, SSL_clear
		 * and a new connection on the same SSL, which resumes the
		 * session the first left: what it reads of its verified chain,
		 * peer and result after the clear and after that handshake
		 * (libssl keeps the verified chain through SSL_clear) */
		first();
		SSL_CTX *ctx = mkctx();
		SSL *a = SSL_new(ctx);
		for (int i = 2; i <= 3; i++) {
			if (i == 3) {
				printf("SSL_clear: %d\n", SSL_clear(a));
				STACK_OF(X509) *vc = SSL_get0_verified_chain(a);
				printf("after SSL_clear: chain=%d peer=%s verify=%ld\n", vc ? sk_X509_num(vc) : -1,
				       SSL_get0_peer_certificate(a) ? "yes" : "no", SSL_get_verify_result(a));
			}
			int fd = dial();
			if (handshake(a, fd, i) == 0 && get(a, i, 1, 1) == 0)
				printf("%d SSL_shutdown: %d peer=%s\n", i, SSL_shutdown(a),
				       SSL_get0_peer_certificate(a) ? "yes" : "no");
			close(fd);
		}
		SSL_free(a);
		SSL_CTX_free(ctx);
	} else if (!strcmp(sc, "kept_handed")) {
		/* request 3 (which may be handed request 2's pooled
		 * connection), its socket closed while its SSL is kept, then
		 * SSL_shutdown until it says 1 (three calls at most).  ARG: eof
		 * (the response read to the end first), body (read by its
		 * length only), shut_first and body_shut (the same, one
		 * SSL_shutdown before the close), quiet (quiet shutdown, read
		 * to the end) */
		first();
		SSL_CTX *ctx = mkctx();
		one(ctx, NULL, 2);
		SSL *a = SSL_new(ctx);
		if (!strcmp(arg, "quiet"))
			SSL_set_quiet_shutdown(a, 1);
		int fd = dial();
		if (handshake(a, fd, 3) == 0 && get(a, 3, 1, strncmp(arg, "body", 4) != 0) == 0) {
			if (strstr(arg, "shut"))
				printf("before the close: SSL_shutdown %d\n", SSL_shutdown(a));
			close(fd);
			for (int k = 0; k < 3; k++) {
				errno = 0;
				int r = SSL_shutdown(a);
				int err = SSL_get_error(a, r);
				printf("SSL_shutdown: %d error %d errno %s get_shutdown %d\n", r, r < 0 ? err : 0,
				       r < 0 ? strerror(errno) : "-", SSL_get_shutdown(a));
				if (r == 1)
					break;
			}
		} else {
			close(fd);
		}
		ERR_clear_error();
		SSL_free(a);
		SSL_CTX_free(ctx);
	} else if (!strcmp(sc, "kept_fd")) {
		/* an SSL kept after its socket closed (no SSL_shutdown before):
		 * what it answers of its descriptor, and SSL_shutdown on it
		 * (ARG reuse: the number opened again, on /dev/null) */
		SSL_CTX *ctx = mkctx();
		SSL *a = SSL_new(ctx);
		int fd = dial();
		if (handshake(a, fd, 1) == 0)
			get(a, 1, 1, 1);
		close(fd);
		int other = -1;
		if (!strcmp(arg, "reuse"))
			other = open("/dev/null", O_WRONLY);
		printf("SSL_get_fd: %s%s\n", SSL_get_fd(a) == fd ? "its own number" : "another",
		       other == fd ? " (reused)" : "");
		int r = SSL_shutdown(a);
		printf("SSL_shutdown: %d error %d get_shutdown %d\n", r, r < 0 ? SSL_get_error(a, r) : 0,
		       SSL_get_shutdown(a));
		ERR_clear_error();
		SSL_free(a);
		if (other >= 0)
			close(other);
		one(ctx, NULL, 2);
		one(ctx, NULL, 3);
	} else if (!strcmp(sc, "bio_watch")) {
		/* the second SSL's socket BIO has a callback (ARG cb: set
		 * through dlsym, as a program that finds it so) or a counting
		 * filter of the program's under the SSL (ARG chain): what they
		 * saw */
		first();
		SSL_CTX *ctx = mkctx();
		for (int i = 2; i <= 3; i++) {
			SSL *s = SSL_new(ctx);
			int fd = dial();
			BIO *b = BIO_new_socket(fd, BIO_NOCLOSE);
			if (!strcmp(arg, "cb")) {
				void (*set)(BIO *, BIO_callback_fn_ex);
				*(void **)&set = dlsym(RTLD_DEFAULT, "BIO_set_callback_ex");
				set(b, bio_cb_ex);
			} else {
				static BIO_METHOD *m;
				if (!m) {
					m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_FILTER, "count");
					BIO_meth_set_write(m, cnt_write);
					BIO_meth_set_read(m, cnt_read);
					BIO_meth_set_ctrl(m, cnt_ctrl);
					BIO_meth_set_create(m, cnt_create);
				}
				b = BIO_push(BIO_new(m), b);
			}
			SSL_set_bio(s, b, b);
			bio_read = bio_written = 0;
			one_bio(s, fd, i);
			printf("%d the program's BIO saw: read %s, written %s\n", i, bio_read ? "some" : "none",
			       bio_written ? "some" : "none");
		}
	} else if (!strcmp(sc, "values")) {
		/* the handshake values of two requests (found through dlsym):
		 * client and server random, the keying-material exporter */
		size_t (*cr)(const SSL *, unsigned char *, size_t), (*sr)(const SSL *, unsigned char *, size_t);
		int (*ekm)(SSL *, unsigned char *, size_t, const char *, size_t, const unsigned char *, size_t,
			   int);
		*(void **)&cr = dlsym(RTLD_DEFAULT, "SSL_get_client_random");
		*(void **)&sr = dlsym(RTLD_DEFAULT, "SSL_get_server_random");
		*(void **)&ekm = dlsym(RTLD_DEFAULT, "SSL_export_keying_material");
		unsigned char v[3][3][32];
		memset(v, 0, sizeof v);
		SSL_CTX *ctx = mkctx();
		for (int i = 1; i <= 3; i++) {
			SSL *s = SSL_new(ctx);
			int fd = dial();
			if (handshake(s, fd, i) == 0 && get(s, i, 1, 1) == 0) {
				cr(s, v[0][i - 1], 32);
				sr(s, v[1][i - 1], 32);
				ekm(s, v[2][i - 1], 32, "EXPERIMENTAL-kp", 15, NULL, 0, 0);
				SSL_shutdown(s);
			}
			close(fd);
			SSL_free(s);
		}
		/* (any two of the three requests) */
		const char *rep[3];
		for (int k = 0; k < 3; k++)
			rep[k] = memcmp(v[k][0], v[k][1], 32) && memcmp(v[k][0], v[k][2], 32) &&
					 memcmp(v[k][1], v[k][2], 32)
				 ? "no"
				 : "yes";
		printf("repeated: client random %s, server random %s, exporter %s\n", rep[0], rep[1], rep[2]);
	} else if (!strcmp(sc, "sendfile_named")) {
		/* SSL_sendfile looked up (through dlsym, as values), never
		 * called: three requests (a process that can reach it is not
		 * handed a connection) */
		void *sf = dlsym(RTLD_DEFAULT, "SSL_sendfile");
		printf("SSL_sendfile %s\n", sf ? "found" : "not found");
		SSL_CTX *ctx = mkctx();
		for (int i = 1; i <= 3; i++)
			one(ctx, NULL, i);
	} else if (!strcmp(sc, "reset")) {
		/* a call that resets an established SSL (ARG: set_session,
		 * set_session_null, set_method, connect_state, accept_state,
		 * stateless, clear), made after each handshake but the first's,
		 * before its request: alone it breaks the connection */
		SSL_CTX *ctx = mkctx();
		SSL_SESSION *prev = NULL;
		for (int i = 1; i <= 3; i++) {
			SSL *s = SSL_new(ctx);
			int fd = dial();
			if (handshake(s, fd, i) == 0) {
				if (i > 1) {
					long r = reset_call(s, arg, prev);
					printf("%d %s %ld (%s) state %s\n", i, arg, r, errstr(), SSL_state_string(s));
				}
				if (get(s, i, 1, 1) == 0)
					SSL_shutdown(s);
			}
			if (prev)
				SSL_SESSION_free(prev);
			prev = SSL_get1_session(s);
			close(fd);
			SSL_free(s);
		}
		if (prev)
			SSL_SESSION_free(prev);
	} else if (!strcmp(sc, "reset_mid") || !strcmp(sc, "reset_mid_own")) {
		/* a call that resets an established SSL (ARG as reset's) made
		 * between two keep-alive requests on it, after its first I/O:
		 * alone the second fails; then one request on an SSL of its
		 * own.  reset_mid: a keep-alive request on an SSL of its own
		 * first, shut down and closed (the reset SSL may be handed its
		 * connection) */
		SSL_CTX *ctx = mkctx();
		if (!strcmp(sc, "reset_mid")) {
			SSL *z = SSL_new(ctx);
			int zfd = dial();
			if (handshake(z, zfd, 0) == 0 && get(z, 0, 0, 0) == 0)
				SSL_shutdown(z);
			close(zfd);
			SSL_free(z);
		}
		SSL *a = SSL_new(ctx);
		int fd = dial();
		if (handshake(a, fd, 1) == 0 && get(a, 1, 0, 0) == 0) {
			SSL_SESSION *sess = SSL_get1_session(a);
			long r = reset_call(a, arg, sess);
			printf("1 %s %ld (%s) state %s\n", arg, r, errstr(), SSL_state_string(a));
			ERR_clear_error();
			if (get(a, 2, 1, 1) == 0)
				SSL_shutdown(a);
			SSL_SESSION_free(sess);
		}
		close(fd);
		SSL_free(a);
		one(ctx, NULL, 3);
	} else if (!strcmp(sc, "own_reset") || !strcmp(sc, "own_reset_open")) {
		/* the first SSL's request done and shut down, its socket
		 * closed (own_reset_open: still open), then a call that resets
		 * it (ARG as reset's), then freed; two more requests, each on
		 * an SSL of its own */
		SSL_CTX *ctx = mkctx();
		SSL *a = SSL_new(ctx);
		int fd = dial();
		if (handshake(a, fd, 1) == 0 && get(a, 1, 1, 1) == 0)
			SSL_shutdown(a);
		SSL_SESSION *sess = SSL_get1_session(a);
		if (!strcmp(sc, "own_reset"))
			close(fd);
		long r = reset_call(a, arg, sess);
		printf("1 %s %ld (%s)\n", arg, r, errstr());
		if (strcmp(sc, "own_reset"))
			close(fd);
		SSL_free(a);
		SSL_SESSION_free(sess);
		one(ctx, NULL, 2);
		one(ctx, NULL, 3);
	} else if (!strcmp(sc, "method")) {
		/* the SSL's method and the suites it supports after each of
		 * three requests (found through dlsym, as values: an import
		 * would decline every scenario of this client): a handshake
		 * moves the SSL to its version's method */
		const SSL_METHOD *(*method)(const SSL *);
		STACK_OF(SSL_CIPHER) * (*supported)(SSL *);
		*(void **)&method = dlsym(RTLD_DEFAULT, "SSL_get_ssl_method");
		*(void **)&supported = dlsym(RTLD_DEFAULT, "SSL_get1_supported_ciphers");
		SSL_CTX *ctx = mkctx();
		for (int i = 1; i <= 3; i++) {
			SSL *s = SSL_new(ctx);
			int fd = dial();
			if (handshake(s, fd, i) == 0 && get(s, i, 1, 1) == 0) {
				STACK_OF(SSL_CIPHER) *sup = supported(s);
				printf("%d method %s, %d suites supported\n", i,
				       method(s) == TLS_client_method() ? "TLS_client_method" : "the version's own",
				       sup ? sk_SSL_CIPHER_num(sup) : -1);
				sk_SSL_CIPHER_free(sup);
				SSL_shutdown(s);
			}
			close(fd);
			SSL_free(s);
		}
	} else {
		fprintf(stderr, "unknown scenario %s\n", sc);
		return 2;
	}
	return 0;
}
