/*
 * tls_after - what a program reads of an SSL handed a pooled connection
 * after its handshake, and what runs in its verification
 * (tests/https_after.bats runs each scenario without and with the
 * library and compares what it prints: docs/tls.md).  Requests 1 and 2
 * make the connection that request 3 may be handed (the first teaches
 * how the server ends, docs/tls.md "Ragged closes").  Each request: GET
 * /echo/<i>, Connection: close, the response read by its Content-Length
 * and then to the end.
 * Usage: tls_after SCENARIO PORT TLSDIR [ARG]
 *   session_early   the session right after the handshake, then after
 *                   the answer
 *   watch ARG       a callback set after the handshake (info_ssl,
 *                   info_ctx, msg_ssl, msg_ctx, keylog): what it is told
 *   watch_late ARG  the same set after a first exchange kept alive
 *                   (requests 3 and 4): what it is told
 *   watch_early ARG a callback set on the context before any handshake
 *                   (info_ctx, msg_ctx, keylog): what requests 1-3 are
 *                   told; request 4 on a context with none
 *   lookup          a lookup method of its own in its store, that finds
 *                   nothing: how often it runs
 *   engine          an engine registered for the AEAD ciphers, whose
 *                   ciphers fail, after request 2
 *   sess_change ARG the sessions of requests 1 and 2, kept past SSL_free,
 *                   changed after (ARG: ex_data, timeout, hostname, alpn,
 *                   master_key, id_context); late_ARG: request 2's changed
 *                   right after request 3's handshake instead: what
 *                   requests 2 and 3 read of theirs, request 4 resuming 3's
 *   sess_once ARG   one request, its session changed as sess_change's ARG
 *                   says before its SSL_free (none: unchanged); what it
 *                   read of its session (tests/https_broker.bats runs one
 *                   process per request)
 *   peer_tag        request 2's peer certificate tagged (X509 ex_data) and
 *                   kept: what request 3 reads of its peer's
 *   peer_sess       requests 1-4: the peer certificate its session holds
 *                   (SSL_SESSION_get0_peer), after the handshake and
 *                   after the answer, each tagged (X509 ex_data) and kept:
 *                   whether a later request's is one seen before;
 *                   ARG resume: request 4 resumes request 3's session
 *   sess_ex [ARG]   request ARG's (default 3) session (TLS 1.3: before
 *                   the server's tickets) given ex_data right after its
 *                   handshake: what the session it reads after the
 *                   answer holds
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <openssl/engine.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static int port;
static const char *dir;

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

/* verifying, renegotiation refused (a TLS 1.2 connection is handed only
 * to such a program: docs/tls.md "Renegotiation") */
static SSL_CTX *mkctx(void)
{
	char ca[512];
	snprintf(ca, sizeof ca, "%s/ca.pem", dir);
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx)
		return NULL;
	SSL_CTX_load_verify_locations(ctx, ca, NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
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

/* GET /echo/i, Connection: close; the body by its length, then the end */
static int get(SSL *ssl, int i)
{
	char rq[256], resp[65536];
	int len = snprintf(rq, sizeof rq, "GET /echo/%d HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", i);
	if (SSL_write(ssl, rq, len) != len) {
		printf("%d fail write\n", i);
		return -1;
	}
	size_t got = 0;
	for (;;) {
		int r = SSL_read(ssl, resp + got, (int)(sizeof(resp) - 1 - got));
		if (r <= 0) {
			int err = SSL_get_error(ssl, r);
			if (err != SSL_ERROR_ZERO_RETURN) {
				printf("%d read ended: %d (%s)\n", i, err, errstr());
				return -1;
			}
			break;
		}
		got += (size_t)r;
	}
	resp[got] = 0;
	char *eol = strstr(resp, "\r\n");
	printf("%d ok %.*s reused=%d verify=%ld\n", i, eol ? (int)(eol - resp) : 0, resp, SSL_session_reused(ssl),
	       SSL_get_verify_result(ssl));
	return 0;
}

/* GET /echo/i kept alive, read by its Content-Length */
static int get_keep(SSL *ssl, int i)
{
	char rq[256], resp[65536];
	int len = snprintf(rq, sizeof rq, "GET /echo/%d HTTP/1.1\r\nHost: localhost\r\n\r\n", i);
	if (SSL_write(ssl, rq, len) != len) {
		printf("%d fail write\n", i);
		return -1;
	}
	size_t got = 0;
	for (;;) {
		int r = SSL_read(ssl, resp + got, (int)(sizeof(resp) - 1 - got));
		if (r <= 0) {
			printf("%d kept-alive read ended: %d (%s)\n", i, SSL_get_error(ssl, r), errstr());
			return -1;
		}
		got += (size_t)r;
		resp[got] = 0;
		char *end = strstr(resp, "\r\n\r\n"), *cl = strcasestr(resp, "\r\ncontent-length:");
		if (end && cl && cl < end && got - (size_t)(end + 4 - resp) >= (size_t)atoi(cl + 17))
			break;
	}
	char *eol = strstr(resp, "\r\n");
	printf("%d kept alive %.*s\n", i, eol ? (int)(eol - resp) : 0, resp);
	return 0;
}

static void one(SSL_CTX *ctx, int i)
{
	if (!ctx) {
		printf("%d fail context: %s\n", i, errstr());
		return;
	}
	SSL *s = SSL_new(ctx);
	int fd = dial();
	if (handshake(s, fd, i) == 0 && get(s, i) == 0)
		SSL_shutdown(s);
	close(fd);
	SSL_free(s);
}

/* the session as the program reads it (not its DER: a process that
 * imports i2d_SSL_SESSION is handed no connection, docs/tls.md "What a
 * session shows") */
static void session(SSL *s, int i, const char *when)
{
	SSL_SESSION *sess = SSL_get_session(s);
	unsigned id = 0;
	if (sess)
		SSL_SESSION_get_id(sess, &id);
	SSL_SESSION *s1 = SSL_get1_session(s);
	printf("%d session %s: %s, id %u, resumable %d, ticket %d, the same by get1 %s\n", i, when,
	       sess ? "one" : "none", id, sess ? SSL_SESSION_is_resumable(sess) : -1,
	       sess ? SSL_SESSION_has_ticket(sess) : -1, s1 == sess ? "yes" : "no");
	SSL_SESSION_free(s1);
}

/* scenario watch: what callbacks set after the handshake are told */
static int info_calls, info_alerts, msg_calls, keylog_lines;
static SSL *watched;
static int foreign;
static void info_cb(const SSL *s, int where, int ret)
{
	(void)ret;
	info_calls++;
	foreign += watched && s != watched;
	info_alerts += !!(where & SSL_CB_ALERT);
}
static int msg_arg;
static void msg_cb(int write_p, int version, int type, const void *buf, size_t len, SSL *s, void *arg)
{
	(void)write_p, (void)version, (void)type, (void)buf, (void)len;
	msg_calls++;
	foreign += watched && (s != watched || arg != &msg_arg);
}
static void keylog_cb(const SSL *s, const char *line)
{
	(void)s, (void)line;
	keylog_lines++;
}

/* scenario lookup: a lookup method of the program's, finding nothing */
static int lookup_calls;
static int lookup_by_subject(X509_LOOKUP *l, X509_LOOKUP_TYPE t, const X509_NAME *name, X509_OBJECT *ret)
{
	(void)l, (void)t, (void)name, (void)ret;
	lookup_calls++;
	return 0;
}

/* scenario engine: AEAD ciphers whose key setting fails */
static int fail_init(EVP_CIPHER_CTX *c, const unsigned char *k, const unsigned char *iv, int enc)
{
	(void)c, (void)k, (void)iv, (void)enc;
	return 0;
}
static int fail_do(EVP_CIPHER_CTX *c, unsigned char *o, const unsigned char *in, size_t n)
{
	(void)c, (void)o, (void)in, (void)n;
	return -1;
}
static const int fail_nids[] = { NID_aes_128_gcm, NID_aes_256_gcm, NID_chacha20_poly1305 };
static int fail_ciphers(ENGINE *e, const EVP_CIPHER **c, const int **nids, int nid)
{
	(void)e;
	static EVP_CIPHER *made[3];
	if (!c) {
		*nids = fail_nids;
		return 3;
	}
	for (int k = 0; k < 3; k++) {
		if (nid != fail_nids[k])
			continue;
		if (!made[k]) {
			made[k] = EVP_CIPHER_meth_new(nid, 1, k == 0 ? 16 : 32);
			EVP_CIPHER_meth_set_iv_length(made[k], 12);
			EVP_CIPHER_meth_set_flags(made[k], EVP_CIPH_FLAG_AEAD_CIPHER | EVP_CIPH_CUSTOM_IV |
								   (k < 2 ? EVP_CIPH_GCM_MODE : 0));
			EVP_CIPHER_meth_set_init(made[k], fail_init);
			EVP_CIPHER_meth_set_do_cipher(made[k], fail_do);
		}
		*c = made[k];
		return 1;
	}
	*c = NULL;
	return 0;
}

/* scenario sess_change: a session changed as ARG says */
static int sess_idx, x509_idx;
static unsigned char new_key[48];
static void change(SSL_SESSION *k, const char *what)
{
	if (!strcmp(what, "ex_data"))
		SSL_SESSION_set_ex_data(k, sess_idx, "tagged");
	else if (!strcmp(what, "timeout"))
		SSL_SESSION_set_timeout(k, 12345);
	else if (!strcmp(what, "hostname"))
		SSL_SESSION_set1_hostname(k, "changed.example");
	else if (!strcmp(what, "alpn"))
		SSL_SESSION_set1_alpn_selected(k, (const unsigned char *)"h9", 2);
	else if (!strcmp(what, "master_key"))
		SSL_SESSION_set1_master_key(k, new_key, sizeof new_key);
	else if (!strcmp(what, "id_context"))
		SSL_SESSION_set1_id_context(k, (const unsigned char *)"changed", 7);
}

/* what the program reads of its session that the scenario may change
 * (not its master key: a process that can read one is handed nothing,
 * docs/tls.md "What a session shows"; a changed one fails request 4) */
static void sess_fields(SSL *s, int i)
{
	SSL_SESSION *k = SSL_get_session(s);
	if (!k) {
		printf("%d session: none\n", i);
		return;
	}
	const char *tag = SSL_SESSION_get_ex_data(k, sess_idx), *host = SSL_SESSION_get0_hostname(k);
	const unsigned char *alpn, *ctx;
	size_t alen;
	unsigned clen;
	SSL_SESSION_get0_alpn_selected(k, &alpn, &alen);
	ctx = SSL_SESSION_get0_id_context(k, &clen);
	printf("%d session: ex_data %s, timeout %ld, hostname %s, alpn %.*s, id context %.*s\n", i,
	       tag ? tag : "(none)", SSL_SESSION_get_timeout(k), host ? host : "(none)", (int)alen,
	       alen ? (const char *)alpn : "", (int)clen, clen ? (const char *)ctx : "");
}

static void sess_change(const char *arg)
{
	const char *late = !strncmp(arg, "late_", 5) ? arg + 5 : NULL;
	memset(new_key, 0x5a, sizeof new_key);
	sess_idx = SSL_SESSION_get_ex_new_index(0, NULL, NULL, NULL, NULL);
	SSL_SESSION *kept[4] = { NULL };
	for (int i = 1; i <= 4; i++) {
		SSL_CTX *ctx = mkctx();
		SSL *s = SSL_new(ctx);
		int fd = dial();
		if (i == 4 && kept[3])
			SSL_set_session(s, kept[3]);
		if (handshake(s, fd, i) == 0) {
			if (late && i == 3 && kept[2])
				change(kept[2], late);
			if (i > 1)
				sess_fields(s, i);
			if (get(s, i) == 0)
				SSL_shutdown(s);
			if (i < 4)
				kept[i] = SSL_get1_session(s);
		}
		close(fd);
		SSL_free(s);
		SSL_CTX_free(ctx);
		if (!late && i < 3 && kept[i])
			change(kept[i], arg);
	}
	for (int i = 1; i < 4; i++)
		SSL_SESSION_free(kept[i]);
}

static void sess_once(const char *arg)
{
	memset(new_key, 0x5a, sizeof new_key);
	sess_idx = SSL_SESSION_get_ex_new_index(0, NULL, NULL, NULL, NULL);
	SSL_CTX *ctx = mkctx();
	SSL *s = SSL_new(ctx);
	int fd = dial();
	if (handshake(s, fd, 1) == 0) {
		sess_fields(s, 1);
		if (get(s, 1) == 0)
			SSL_shutdown(s);
		change(SSL_get_session(s), arg);
	}
	close(fd);
	SSL_free(s);
	SSL_CTX_free(ctx);
}

/* scenario peer_tag: request 2's peer certificate tagged and kept */
static void peer_tag(void)
{
	x509_idx = X509_get_ex_new_index(0, NULL, NULL, NULL, NULL);
	X509 *kept = NULL;
	for (int i = 1; i <= 3; i++) {
		SSL_CTX *ctx = mkctx();
		SSL *s = SSL_new(ctx);
		int fd = dial();
		if (handshake(s, fd, i) == 0) {
			X509 *p = SSL_get0_peer_certificate(s), *p1 = SSL_get1_peer_certificate(s);
			STACK_OF(X509) *pc = SSL_get_peer_cert_chain(s), *vc = SSL_get0_verified_chain(s);
			const char *tag = p ? X509_get_ex_data(p, x509_idx) : NULL;
			printf("%d peer: tag %s, request 2's object %s, get1's the same %s, the chain's first it %s, the verified chain's first it %s\n",
			       i, tag ? tag : "(none)", p && p == kept ? "yes" : "no", p1 == p ? "yes" : "no",
			       pc && sk_X509_num(pc) && sk_X509_value(pc, 0) == p ? "yes" : "no",
			       vc && sk_X509_num(vc) && sk_X509_value(vc, 0) == p ? "yes" : "no");
			X509_free(p1);
			if (i == 2 && p && X509_up_ref(p)) {
				kept = p;
				X509_set_ex_data(p, x509_idx, "tagged");
			}
			if (get(s, i) == 0)
				SSL_shutdown(s);
		}
		close(fd);
		SSL_free(s);
		SSL_CTX_free(ctx);
	}
	X509_free(kept);
}

/* scenario peer_sess: the peer its session holds, tagged and kept */
static X509 *seen[16];
static int n_seen;
static void sess_peer(SSL *s, int i, const char *when)
{
	SSL_SESSION *k = SSL_get_session(s);
	X509 *sp = k ? SSL_SESSION_get0_peer(k) : NULL, *p = SSL_get0_peer_certificate(s);
	STACK_OF(X509) *pc = SSL_get_peer_cert_chain(s);
	const char *tag = sp ? X509_get_ex_data(sp, x509_idx) : NULL;
	int before = 0;
	for (int j = 0; sp && j < n_seen; j++)
		before |= seen[j] == sp;
	printf("%d session's peer %s: %s, tag %s, one seen before %s, the SSL's peer %s, the chain's first %s\n", i,
	       when, sp ? "one" : "none", tag ? tag : "(none)", before ? "yes" : "no", sp == p ? "yes" : "no",
	       pc && sk_X509_num(pc) && sk_X509_value(pc, 0) == sp ? "yes" : "no");
	if (sp && n_seen < 16 && X509_up_ref(sp)) {
		static const char *const tags[] = { "", "request 1", "request 2", "request 3", "request 4" };
		X509_set_ex_data(sp, x509_idx, (void *)tags[i < 5 ? i : 0]);
		seen[n_seen++] = sp;
	}
}

static void peer_sess(const char *arg)
{
	x509_idx = X509_get_ex_new_index(0, NULL, NULL, NULL, NULL);
	SSL_SESSION *third = NULL;
	for (int i = 1; i <= 4; i++) {
		SSL_CTX *ctx = mkctx();
		SSL *s = SSL_new(ctx);
		int fd = dial();
		int seen_before = n_seen;
		if (i == 4 && third)
			SSL_set_session(s, third);
		if (handshake(s, fd, i) == 0) {
			sess_peer(s, i, "after the handshake");
			/* (this request's own objects are not "seen before") */
			int mine = n_seen;
			n_seen = seen_before;
			if (get(s, i) == 0) {
				sess_peer(s, i, "after the answer");
				SSL_shutdown(s);
			}
			if (i == 3 && !strcmp(arg, "resume"))
				third = SSL_get1_session(s);
			if (n_seen < mine)
				n_seen = mine;
		}
		close(fd);
		SSL_free(s);
		SSL_CTX_free(ctx);
	}
	SSL_SESSION_free(third);
	for (int j = 0; j < n_seen; j++)
		X509_free(seen[j]);
}

/* scenario sess_ex: ex_data on request w's session before the tickets */
static void sess_ex_one(int i)
{
	SSL_CTX *ctx = mkctx();
	SSL *s = SSL_new(ctx);
	int fd = dial();
	if (handshake(s, fd, i) == 0) {
		SSL_SESSION *k = SSL_get1_session(s);
		if (k)
			SSL_SESSION_set_ex_data(k, sess_idx, "mine");
		if (get(s, i) == 0) {
			SSL_SESSION *n = SSL_get_session(s);
			const char *v = n ? SSL_SESSION_get_ex_data(n, sess_idx) : NULL;
			printf("%d session after the answer: %s, ex_data %s\n", i, n == k ? "the same" : "another",
			       v ? v : "(none)");
			SSL_shutdown(s);
		}
		SSL_SESSION_free(k);
	}
	close(fd);
	SSL_free(s);
	SSL_CTX_free(ctx);
}

static void sess_ex(const char *arg)
{
	int w = *arg ? atoi(arg) : 3;
	sess_idx = SSL_SESSION_get_ex_new_index(0, NULL, NULL, NULL, NULL);
	for (int i = 1; i <= 4; i++) {
		if (i == w)
			sess_ex_one(i);
		else
			one(mkctx(), i);
	}
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 4) {
		fprintf(stderr, "usage: tls_after SCENARIO PORT TLSDIR [ARG]\n");
		return 2;
	}
	const char *sc = argv[1], *arg = argc > 4 ? argv[4] : "";
	port = atoi(argv[2]);
	dir = argv[3];
	if (!strcmp(sc, "session_early")) {
		/* request 2 (no connection free: the first taught) may resume a
		 * session of the library's, request 3 be handed 2's connection */
		one(mkctx(), 1);
		for (int i = 2; i <= 3; i++) {
			SSL_CTX *ctx = mkctx();
			SSL *s = SSL_new(ctx);
			int fd = dial();
			if (handshake(s, fd, i) == 0) {
				session(s, i, "after the handshake");
				if (get(s, i) == 0)
					session(s, i, "after the answer");
				SSL_shutdown(s);
			}
			close(fd);
			SSL_free(s);
		}
	} else if (!strcmp(sc, "watch")) {
		one(mkctx(), 1);
		one(mkctx(), 2);
		SSL_CTX *ctx = mkctx();
		SSL *s = SSL_new(ctx);
		int fd = dial();
		if (handshake(s, fd, 3) == 0) {
			if (!strcmp(arg, "info_ssl"))
				SSL_set_info_callback(s, info_cb);
			else if (!strcmp(arg, "info_ctx"))
				SSL_CTX_set_info_callback(ctx, info_cb);
			else if (!strcmp(arg, "msg_ssl"))
				SSL_set_msg_callback(s, msg_cb);
			else if (!strcmp(arg, "msg_ctx"))
				SSL_CTX_set_msg_callback(ctx, msg_cb);
			else if (!strcmp(arg, "keylog"))
				SSL_CTX_set_keylog_callback(ctx, keylog_cb);
			if (get(s, 3) == 0)
				SSL_shutdown(s);
		}
		close(fd);
		SSL_free(s);
		printf("told after the handshake: info %d (alerts %d), messages %d, keylog lines %d\n", info_calls,
		       info_alerts, msg_calls, keylog_lines);
	} else if (!strcmp(sc, "watch_early")) {
		SSL_CTX *ctx = mkctx();
		if (!strcmp(arg, "info_ctx"))
			SSL_CTX_set_info_callback(ctx, info_cb);
		else if (!strcmp(arg, "msg_ctx"))
			SSL_CTX_set_msg_callback(ctx, msg_cb);
		else if (!strcmp(arg, "keylog"))
			SSL_CTX_set_keylog_callback(ctx, keylog_cb);
		for (int i = 1; i <= 3; i++) {
			info_calls = info_alerts = msg_calls = keylog_lines = 0;
			one(ctx, i);
			printf("%d told: info %d (alerts %d), messages %d, keylog lines %d\n", i, info_calls,
			       info_alerts, msg_calls, keylog_lines);
		}
		one(mkctx(), 4);
	} else if (!strcmp(sc, "watch_late")) {
		/* the callback set after a first exchange kept alive: request 3
		 * on a connection handed out, request 4 on its own */
		one(mkctx(), 1);
		one(mkctx(), 2);
		for (int i = 3; i <= 4; i++) {
			SSL_CTX *ctx = mkctx();
			SSL *s = SSL_new(ctx);
			int fd = dial();
			info_calls = info_alerts = msg_calls = foreign = 0;
			if (handshake(s, fd, i) == 0 && get_keep(s, i) == 0) {
				watched = s;
				if (!strcmp(arg, "info_ssl"))
					SSL_set_info_callback(s, info_cb);
				else if (!strcmp(arg, "info_ctx"))
					SSL_CTX_set_info_callback(ctx, info_cb);
				else if (!strcmp(arg, "msg_ssl")) {
					SSL_set_msg_callback_arg(s, &msg_arg);
					SSL_set_msg_callback(s, msg_cb);
				}
				if (get(s, i) == 0)
					printf("%d shutdown %d\n", i, SSL_shutdown(s));
			}
			close(fd);
			SSL_free(s);
			watched = NULL;
			SSL_CTX_free(ctx);
			printf("%d told after the first exchange: info %d (alerts %d), messages %d, not its own SSL or argument %d\n",
			       i, info_calls, info_alerts, msg_calls, foreign);
		}
	} else if (!strcmp(sc, "lookup")) {
		one(mkctx(), 1);
		one(mkctx(), 2);
		SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
		SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
		X509_LOOKUP_METHOD *m = X509_LOOKUP_meth_new("tls_after");
		X509_LOOKUP_meth_set_get_by_subject(m, lookup_by_subject);
		X509_STORE_add_lookup(SSL_CTX_get_cert_store(ctx), m);
		for (int i = 3; i <= 4; i++) {
			one(ctx, i);
			printf("%d lookup method: %d calls\n", i, lookup_calls);
			lookup_calls = 0;
		}
	} else if (!strcmp(sc, "engine")) {
		one(mkctx(), 1);
		one(mkctx(), 2);
		ENGINE *e = ENGINE_new();
		ENGINE_set_id(e, "tls_after");
		ENGINE_set_name(e, "ciphers that fail");
		ENGINE_set_ciphers(e, fail_ciphers);
		printf("registered: %d\n", ENGINE_register_ciphers(e));
		for (int i = 3; i <= 4; i++)
			one(mkctx(), i);
	} else if (!strcmp(sc, "sess_change")) {
		sess_change(arg);
	} else if (!strcmp(sc, "sess_once")) {
		sess_once(arg);
	} else if (!strcmp(sc, "peer_tag")) {
		peer_tag();
	} else if (!strcmp(sc, "peer_sess")) {
		peer_sess(arg);
	} else if (!strcmp(sc, "sess_ex")) {
		sess_ex(arg);
	} else {
		fprintf(stderr, "unknown scenario %s\n", sc);
		return 2;
	}
	return 0;
}
