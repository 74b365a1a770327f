/*
 * tls_pairs - the configuration-pair fuzzer (docs/tls.md "The fuzzer").
 * For each pair, from a fixed seed: a server, and two random client
 * configurations A and B (verify mode, trust store, host check, option
 * bits, versions, ciphers and TLS 1.3 suites, groups, signature
 * algorithms, ALPN, client certificate, padding, max cert list, security
 * level, X509 flags, purpose, depth, mode, quiet shutdown, a session
 * cache of the program's own (a new-session callback) and its sessions
 * offered, a change of context, a keylog, info or message callback,
 * renegotiation allowed or refused); one request with A, then one
 * with B, each on a fresh SSL and socket, Connection: close, read to the
 * end, SSL_shutdown until it says 1.  Everything each one reads is
 * printed, one line per request: tests/https_pairs.bats runs it without
 * and with the library and compares the two outputs.
 * Usage: tls_pairs TLSDIR SEED PAIRS PORT...
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

static const char *dir;
static char path[512];
static const char *P(const char *f)
{
	snprintf(path, sizeof path, "%s/%s", dir, f);
	return path;
}

/* the calls its verify callback got (it says what libssl said) */
static int vcb_calls;
static int verify_cb(int ok, X509_STORE_CTX *x)
{
	(void)x;
	vcb_calls++;
	return ok;
}

enum {
	F_VERIFY, F_CA, F_HOST, F_OPTS, F_MAXV, F_CIPHERS, F_SUITES, F_GROUPS, F_SIGALGS, F_ALPN,
	F_CERT, F_PAD, F_MAXCERT, F_SECLEVEL, F_SESSION, F_VFLAGS, F_PURPOSE, F_DEPTH, F_MODE,
	F_QUIET, F_SWITCH, F_WATCH, F_RENEG, F_TIMEOUT, F_VCB,
	/* the review of 2026-12-05 (docs/tls.md): program code in the trust
	 * store, a BIO chain of the program's, process-wide crypto state,
	 * SSL_clear and a new connection, the SSL kept after close */
	F_STORE, F_BIO, F_CRYPTO, F_CLEAR, F_KEPT, F_N
};
static const int choices[F_N] = { 3, 3, 3, 8, 2, 3, 3, 4, 3, 3, 3, 2, 2, 2, 3, 3, 2, 2, 2, 2, 2, 4, 2, 2, 2,
				  3, 2, 2, 2, 2 };

static int nservers, ports[8];
static int cur_server;

/* the calls the trust store's functions got (F_STORE) */
static int store_calls;
static int store_cb(int ok, X509_STORE_CTX *x)
{
	(void)x;
	store_calls++;
	return ok;
}
static int store_revocation(X509_STORE_CTX *x)
{
	(void)x;
	store_calls++;
	return 1;
}

/* a counting filter of the program's own under the SSL (F_BIO): what it
 * saw */
static long bio_bytes;
static int cnt_write(BIO *b, const char *d, int n)
{
	int r = BIO_write(BIO_next(b), d, n);
	BIO_clear_retry_flags(b);
	BIO_copy_next_retry(b);
	bio_bytes += r > 0 ? r : 0;
	return r;
}
static int cnt_read(BIO *b, char *d, int n)
{
	int r = BIO_read(BIO_next(b), d, n);
	BIO_clear_retry_flags(b);
	BIO_copy_next_retry(b);
	bio_bytes += r > 0 ? r : 0;
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
static void set_io(SSL *s, int fd, const int *f)
{
	static BIO_METHOD *m;
	if (!f[F_BIO]) {
		SSL_set_fd(s, fd);
		return;
	}
	if (!m) {
		m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_FILTER, "count");
		BIO_meth_set_write(m, cnt_write);
		BIO_meth_set_read(m, cnt_read);
		BIO_meth_set_ctrl(m, cnt_ctrl);
		BIO_meth_set_create(m, cnt_create);
	}
	BIO *b = BIO_push(BIO_new(m), BIO_new_socket(fd, BIO_NOCLOSE));
	SSL_set_bio(s, b, b);
}

static int dial(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(ports[cur_server]) };
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		printf(" connect failed\n");
		exit(2);
	}
	return fd;
}

/* the id of the session the last request read */
static unsigned char last_id[SSL_MAX_SSL_SESSION_ID_LENGTH];
static unsigned last_id_len;

static uint64_t rng;
static unsigned rnd(unsigned n)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (unsigned)(rng >> 33) % n;
}
/* mostly 0 (the default), so that pairs often meet */
static int pick(int n)
{
	return rnd(10) < 6 ? 0 : (int)rnd((unsigned)n);
}

static const uint64_t opt_bits[] = { 0,
				     SSL_OP_IGNORE_UNEXPECTED_EOF,
				     SSL_OP_NO_TICKET,
				     SSL_OP_LEGACY_SERVER_CONNECT,
				     SSL_OP_NO_TLSv1_3,
				     SSL_OP_NO_RENEGOTIATION,
				     SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_TICKET,
				     SSL_OP_CIPHER_SERVER_PREFERENCE };
static const char *const ciphers[] = { NULL, "ECDHE-ECDSA-AES128-GCM-SHA256",
				       "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES128-GCM-SHA256" };
static const char *const suites[] = { NULL, "TLS_AES_128_GCM_SHA256", "TLS_CHACHA20_POLY1305_SHA256" };
static const char *const groups[] = { NULL, "X25519", "P-256", "P-384:P-256" };
static const char *const sigalgs[] = { NULL, "ECDSA+SHA256", "RSA+SHA256:RSA-PSS+SHA256" };
static const unsigned char *const alpn[] = { NULL, (const unsigned char *)"\x08http/1.1",
					     (const unsigned char *)"\x02h2\x08http/1.1" };

static SSL_SESSION *latest[8], *pending;
/* what the request's callbacks saw: sessions told, keylog lines,
 * handshakes started and done, handshake messages; the SSL they were
 * called for (0: not the request's own) */
static int told, keylogs, info_start, info_done, msgs, foreign;
static SSL *cur_ssl;

/* kept once the request had its whole answer: a server that refuses the
 * client after a TLS 1.3 handshake sends its tickets or not, by chance */
static int new_session_cb(SSL *s, SSL_SESSION *sess)
{
	foreign += s != cur_ssl;
	told++;
	if (pending)
		SSL_SESSION_free(pending);
	pending = sess;
	return 1;
}

static void keylog_cb(const SSL *s, const char *line)
{
	(void)line;
	foreign += s != cur_ssl;
	keylogs++;
}

static void info_cb(const SSL *s, int where, int ret)
{
	(void)ret;
	foreign += s != cur_ssl;
	info_start += !!(where & SSL_CB_HANDSHAKE_START);
	info_done += !!(where & SSL_CB_HANDSHAKE_DONE);
}

static void msg_cb(int write_p, int version, int type, const void *buf, size_t len, SSL *s, void *arg)
{
	(void)write_p, (void)version, (void)buf, (void)len, (void)arg;
	foreign += s != cur_ssl;
	msgs += type == SSL3_RT_HANDSHAKE;
}

static void keep_session(bool keep)
{
	if (keep && pending) {
		if (latest[cur_server])
			SSL_SESSION_free(latest[cur_server]);
		latest[cur_server] = pending;
	} else if (pending) {
		SSL_SESSION_free(pending);
	}
	pending = NULL;
}

static SSL_CTX *make_ctx(const int *f, int sigalg_choice)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	if (f[F_SESSION]) { /* a cache of its own (curl's way) */
		SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
		SSL_CTX_sess_set_new_cb(ctx, new_session_cb);
	}
	if (f[F_WATCH] == 1)
		SSL_CTX_set_keylog_callback(ctx, keylog_cb);
	else if (f[F_WATCH] == 2)
		SSL_CTX_set_info_callback(ctx, info_cb);
	else if (f[F_WATCH] == 3)
		SSL_CTX_set_msg_callback(ctx, msg_cb);
	if (f[F_CA] == 0)
		SSL_CTX_load_verify_locations(ctx, P("ca.pem"), NULL);
	else if (f[F_CA] == 1)
		SSL_CTX_load_verify_locations(ctx, P("other-ca.pem"), NULL);
	SSL_CTX_set_verify(ctx, f[F_VERIFY] == 0 ? SSL_VERIFY_PEER : f[F_VERIFY] == 1 ? SSL_VERIFY_NONE
											: SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
			   f[F_VCB] ? verify_cb : NULL);
	if (f[F_TIMEOUT])
		SSL_CTX_set_timeout(ctx, 300);
	if (f[F_STORE] == 1)
		X509_STORE_set_verify_cb(SSL_CTX_get_cert_store(ctx), store_cb);
	else if (f[F_STORE] == 2)
		X509_STORE_set_check_revocation(SSL_CTX_get_cert_store(ctx), store_revocation);
	if (sigalgs[sigalg_choice])
		SSL_CTX_set1_sigalgs_list(ctx, sigalgs[sigalg_choice]);
	if (f[F_CERT]) {
		const char *c = f[F_CERT] == 1 ? "client-a" : "client-b";
		char cert[600], key[600];
		snprintf(cert, sizeof cert, "%s/%s.pem", dir, c);
		snprintf(key, sizeof key, "%s/%s.key", dir, c);
		SSL_CTX_use_certificate_file(ctx, cert, SSL_FILETYPE_PEM);
		SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM);
	}
	return ctx;
}

static SSL *make_ssl(const int *f, SSL_CTX **ctxs)
{
	ctxs[0] = make_ctx(f, f[F_SIGALGS]);
	ctxs[1] = NULL;
	SSL *s = SSL_new(ctxs[0]);
	if (f[F_SWITCH]) {
		/* made from a context with other signature algorithms, then
		 * moved to this one */
		ctxs[1] = make_ctx(f, (f[F_SIGALGS] + 1) % 3);
		SSL_free(s);
		s = SSL_new(ctxs[1]);
		SSL_set_SSL_CTX(s, ctxs[0]);
	}
	SSL_set_options(s, opt_bits[f[F_OPTS]]);
	if (f[F_OPTS] != 3)
		SSL_clear_options(s, SSL_OP_LEGACY_SERVER_CONNECT);
	/* mostly refused, so that TLS 1.2 pairs meet (docs/tls.md
	 * "Renegotiation") */
	if (!f[F_RENEG])
		SSL_set_options(s, SSL_OP_NO_RENEGOTIATION);
	if (f[F_MAXV])
		SSL_set_max_proto_version(s, TLS1_2_VERSION);
	if (ciphers[f[F_CIPHERS]])
		SSL_set_cipher_list(s, ciphers[f[F_CIPHERS]]);
	if (suites[f[F_SUITES]])
		SSL_set_ciphersuites(s, suites[f[F_SUITES]]);
	if (groups[f[F_GROUPS]])
		SSL_set1_groups_list(s, groups[f[F_GROUPS]]);
	if (alpn[f[F_ALPN]])
		SSL_set_alpn_protos(s, alpn[f[F_ALPN]], (unsigned)strlen((const char *)alpn[f[F_ALPN]]));
	if (f[F_PAD])
		SSL_set_block_padding(s, 512);
	if (f[F_MAXCERT])
		SSL_set_max_cert_list(s, 64);
	if (f[F_SECLEVEL])
		SSL_set_security_level(s, 2);
	X509_VERIFY_PARAM *vp = SSL_get0_param(s);
	if (f[F_VFLAGS] == 1)
		X509_VERIFY_PARAM_set_flags(vp, X509_V_FLAG_X509_STRICT);
	else if (f[F_VFLAGS] == 2)
		X509_VERIFY_PARAM_set_flags(vp, X509_V_FLAG_PARTIAL_CHAIN);
	if (f[F_PURPOSE])
		X509_VERIFY_PARAM_set_purpose(vp, X509_PURPOSE_SSL_CLIENT);
	if (f[F_DEPTH])
		SSL_set_verify_depth(s, 0);
	if (f[F_MODE])
		SSL_set_mode(s, SSL_MODE_ENABLE_PARTIAL_WRITE);
	if (f[F_QUIET])
		SSL_set_quiet_shutdown(s, 1);
	SSL_set_tlsext_host_name(s, "localhost");
	if (f[F_HOST])
		SSL_set1_host(s, f[F_HOST] == 1 ? "localhost" : "wrong.example");
	if (f[F_SESSION] == 1 && latest[cur_server])
		SSL_set_session(s, latest[cur_server]);
	return s;
}

static const char *err_reason(void)
{
	static char b[160];
	unsigned long e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;
	snprintf(b, sizeof b, "%s", r ? r : "-");
	ERR_clear_error();
	return b;
}

/* one request with configuration f; everything the program reads */
static void request(int pair, char who, const int *f)
{
	printf("%d%c s%d", pair, who, cur_server);
	for (int i = 0; i < F_N; i++)
		printf("%c%d", i ? '.' : ' ', f[i]);
	SSL_CTX *ctxs[2];
	told = keylogs = info_start = info_done = msgs = foreign = vcb_calls = store_calls = 0;
	bio_bytes = 0;
	SSL *s = make_ssl(f, ctxs);
	cur_ssl = s;
	/* process-wide state changed for this request, once its SSL is
	 * made: fips=yes (which no provider here meets), set back after it */
	if (f[F_CRYPTO])
		EVP_set_default_properties(NULL, "fips=yes");
	int fd = dial();
	set_io(s, fd, f);
	int r = SSL_connect(s);
	if (r != 1) {
		/* a failed handshake's verify result is the one of the session
		 * the program set, if any: which session its cache holds may
		 * differ (docs/tls.md "Found and left") */
		printf(" : handshake fails: %d verify=%ld %s", SSL_get_error(s, r),
		       f[F_SESSION] ? -2L : SSL_get_verify_result(s), err_reason());
		goto out;
	}
	const unsigned char *sel;
	unsigned sel_len;
	SSL_get0_alpn_selected(s, &sel, &sel_len);
	STACK_OF(X509) *vc = SSL_get0_verified_chain(s);
	X509 *peer = SSL_get0_peer_certificate(s);
	printf(" : %s %s reused=%d chain=%d verify=%ld alpn=%.*s peer=%s pending=%d", SSL_get_version(s),
	       SSL_get_cipher_name(s), SSL_session_reused(s), vc ? sk_X509_num(vc) : -1,
	       SSL_get_verify_result(s), (int)sel_len, sel, peer ? "yes" : "no", SSL_pending(s));
	/* what the handshake negotiated beyond the cipher, the name its
	 * verification matched */
	int sig = 0, psig = 0;
	EVP_PKEY *tmp = NULL;
	SSL_get_peer_signature_type_nid(s, &sig);
	SSL_get_peer_signature_nid(s, &psig);
	SSL_get_peer_tmp_key(s, &tmp);
	const char *pn = SSL_get0_peername(s), *vpn = X509_VERIFY_PARAM_get0_peername(SSL_get0_param(s));
	printf(" sig=%d/%d tmp=%d peername=%s/%s", sig, psig, tmp ? EVP_PKEY_get_id(tmp) : -1, pn ? pn : "-",
	       vpn ? vpn : "-");
	EVP_PKEY_free(tmp);
	char rq[128], buf[4096];
	int len = snprintf(rq, sizeof rq,
			   "GET /echo/%d%c HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", pair, who);
	/* a server that refuses the client after a TLS 1.3 handshake (no
	 * certificate): the write or the read fails first, by chance */
	if (SSL_write(s, rq, len) != len) {
		printf(" | no response");
		goto out;
	}
	/* the status line and the body (the Connection header may differ:
	 * hop-by-hop) */
	size_t got = 0;
	while (got < sizeof(buf) - 1 && (r = SSL_read(s, buf + got, (int)(sizeof(buf) - 1 - got))) > 0)
		got += (size_t)r;
	buf[got] = 0;
	char *body = strstr(buf, "\r\n\r\n");
	int status_len = (int)strcspn(buf, "\r\n");
	body = body ? body + 4 : buf + got;
	body[strcspn(body, "\r\n")] = 0;
	if (!got) {
		printf(" | no response");
		goto out;
	}
	int err = SSL_get_error(s, r);
	/* its session once the answer was read (a TLS 1.3 server's ticket
	 * comes after the handshake: docs/tls.md "Found and left") */
	SSL_SESSION *ss = SSL_get_session(s);
	if (ss) {
		unsigned idlen;
		const unsigned char *id = SSL_SESSION_get_id(ss, &idlen);
		long age = (long)time(NULL) - (long)SSL_SESSION_get_time(ss);
		bool seen = idlen && idlen == last_id_len && !memcmp(id, last_id, idlen);
		/* (a resumed session's age is the run's timing: only a new
		 * session's is printed) */
		printf(" | session timeout=%ld age=%s id=%u%s", SSL_SESSION_get_timeout(ss),
		       SSL_session_reused(s) ? "-" : age <= 2 ? "new" : "old", idlen, seen ? " seen" : "");
		if (idlen) {
			memcpy(last_id, id, idlen);
			last_id_len = idlen;
		}
	}
	printf(" | %.*s | %s | end %d/%d %s | shutdown", status_len, buf, body, r, err,
	       err == SSL_ERROR_SSL ? err_reason() : "-");
	ERR_clear_error();
	if (f[F_KEPT]) { /* the socket closed first, the SSL kept */
		close(fd);
		printf(" kept fd=%s", SSL_get_fd(s) == fd ? "own" : "other");
	}
	for (int i = 0; i < 3; i++) {
		r = SSL_shutdown(s);
		printf(" %d", r);
		if (r < 0)
			printf("/%d", SSL_get_error(s, r));
		if (r != 0)
			break;
	}
	printf(" get_shutdown=%d", SSL_get_shutdown(s));
	ERR_clear_error();
	if (f[F_CLEAR]) {
		/* SSL_clear, a new connection on the same SSL: what its
		 * handshake reads (the session the first left it offered) */
		if (!f[F_KEPT])
			close(fd);
		int c = SSL_clear(s);
		fd = dial();
		set_io(s, fd, f);
		r = c == 1 ? SSL_connect(s) : -1;
		STACK_OF(X509) *vc2 = r == 1 ? SSL_get0_verified_chain(s) : NULL;
		printf(" | again clear=%d connect=%d reused=%d chain=%d verify=%ld", c, r, SSL_session_reused(s),
		       vc2 ? sk_X509_num(vc2) : -1, SSL_get_verify_result(s));
		if (r == 1)
			SSL_shutdown(s);
		ERR_clear_error();
	} else if (f[F_KEPT]) {
		fd = -1;
	}
	/* (what its BIOs counted, BIO_number_read/written, is not printed: a
	 * handed-out SSL's stay 0, docs/tls.md "Found and left") */
	keep_session(true);
out:
	/* what the callbacks saw, what the context counted */
	printf(" | told %d keylog %d info %d/%d msgs %d foreign %d verify_cb %d store %d bio %s", told, keylogs,
	       info_start, info_done, msgs, foreign, vcb_calls, store_calls, bio_bytes ? "some" : "none");
	for (int i = 0; i < 2 && ctxs[i]; i++)
		printf(" | ctx %ld/%ld/%ld/%ld", SSL_CTX_sess_connect(ctxs[i]), SSL_CTX_sess_connect_good(ctxs[i]),
		       SSL_CTX_sess_hits(ctxs[i]), SSL_CTX_sess_misses(ctxs[i]));
	printf("\n");
	keep_session(false);
	ERR_clear_error();
	if (fd >= 0)
		close(fd);
	SSL_free(s);
	if (f[F_CRYPTO])
		EVP_set_default_properties(NULL, "");
	SSL_CTX_free(ctxs[0]);
	if (ctxs[1])
		SSL_CTX_free(ctxs[1]);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 5) {
		fprintf(stderr, "usage: tls_pairs TLSDIR SEED PAIRS PORT...\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN); /* a server that hung up: errors, as with any program */
	dir = argv[1];
	rng = strtoull(argv[2], NULL, 10);
	int pairs = atoi(argv[3]);
	for (int i = 4; i < argc && nservers < 8; i++)
		ports[nservers++] = atoi(argv[i]);
	for (int k = 1; k <= pairs; k++) {
		int fa[F_N], fb[F_N];
		cur_server = (int)rnd((unsigned)nservers);
		/* (the review's axes rarer: each declines, or drops the
		 * connection, and the run must still hand out) */
		for (int i = 0; i < F_N; i++)
			fa[i] = i < F_STORE ? pick(choices[i]) : rnd(10) < 8 ? 0 : (int)rnd((unsigned)choices[i]);
		/* B: A with a few fields changed, or anew */
		for (int i = 0; i < F_N; i++)
			fb[i] = fa[i];
		int changes = (int)rnd(4);
		for (int c = 0; c < changes; c++) {
			int i = (int)rnd(F_N);
			fb[i] = (int)rnd((unsigned)choices[i]);
		}
		request(k, 'a', fa);
		request(k, 'b', fb);
	}
	return 0;
}
