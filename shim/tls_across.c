/* tls_across.c - sessions between processes through the broker
 * (docs/tls-across.md), and parking an engine, which keeps its session
 * here and there (tls_internal.h). */
#include "tls_internal.h"

/* ------------------------------------------------------------ across processes */

/* A ticket as bytes for the broker (docs/tls-across.md): what its
 * handshake was made under (SNI, the recorded settings, the configuration
 * read by the getters, the client certificate and chain, the security
 * level), the session (i2d_SSL_SESSION: it holds the resumption secret)
 * and the peer chain the handshake verified.  The receiving process
 * rebuilds the ticket and offers it under the very rule a ticket of its
 * own follows (kp_tls_offer_session): nothing in the bytes is trusted
 * beyond what that rule checks again. */
#define ACROSS_MAGIC 0x6b707334u /* "kps4": with what a full handshake showed */
#define ACROSS_NONE UINT32_MAX

struct wbuf {
	unsigned char *p;
	size_t len, cap;
	bool bad;
};

static void w_bytes(struct wbuf *b, const void *d, size_t n)
{
	if (b->bad || n > b->cap - b->len) {
		b->bad = true;
		return;
	}
	if (n)
		memcpy(b->p + b->len, d, n);
	b->len += n;
}

static void w_u32(struct wbuf *b, uint32_t v)
{
	w_bytes(b, &v, sizeof(v));
}

static void w_u64(struct wbuf *b, uint64_t v)
{
	w_bytes(b, &v, sizeof(v));
}

static void w_str(struct wbuf *b, const char *str)
{
	if (!str) {
		w_u32(b, ACROSS_NONE);
		return;
	}
	size_t n = strlen(str);
	w_u32(b, (uint32_t)n);
	w_bytes(b, str, n);
}

static void w_x509(struct wbuf *b, X509 *x)
{
	int n = x ? kp_ssl.i2d_X509(x, NULL) : 0;
	if (x && n <= 0) {
		b->bad = true;
		return;
	}
	w_u32(b, x ? (uint32_t)n : ACROSS_NONE);
	if (!x || b->bad || (size_t)n > b->cap - b->len) {
		b->bad |= x != NULL;
		return;
	}
	unsigned char *q = b->p + b->len;
	kp_ssl.i2d_X509(x, &q);
	b->len += (size_t)n;
}

static void w_chain(struct wbuf *b, STACK_OF(X509) *c)
{
	int n = c ? kp_ssl.OPENSSL_sk_num((OPENSSL_STACK *)c) : 0;
	w_u32(b, c ? (uint32_t)n : ACROSS_NONE);
	for (int i = 0; i < n; i++)
		w_x509(b, kp_ssl.OPENSSL_sk_value((OPENSSL_STACK *)c, i));
}

/* What the messages a resumption skips showed (struct full): the peer's
 * chain, CA names, signature algorithms, certificate types, the client's
 * own signature. */
static void w_sigalgs(struct wbuf *b, const struct sigalg *a, int n)
{
	w_u32(b, (uint32_t)n);
	for (int i = 0; i < n; i++) {
		w_u32(b, (uint32_t)a[i].sign);
		w_u32(b, (uint32_t)a[i].hash);
		w_u32(b, (uint32_t)a[i].signhash);
		w_u32(b, (uint32_t)a[i].rsig << 8 | a[i].rhash);
	}
}

static void w_shown(struct wbuf *b, const struct full *f)
{
	w_u32(b, f->shown);
	if (!f->shown)
		return;
	w_chain(b, f->chain);
	int n = f->ca_names ? kp_ssl.OPENSSL_sk_num((OPENSSL_STACK *)f->ca_names) : 0;
	w_u32(b, f->ca_names ? (uint32_t)n : ACROSS_NONE);
	for (int i = 0; i < n && !b->bad; i++) {
		X509_NAME *x = kp_ssl.OPENSSL_sk_value((OPENSSL_STACK *)f->ca_names, i);
		unsigned char *der = NULL;
		int len = kp_ssl.i2d_X509_NAME(x, &der);
		if (len <= 0) {
			b->bad = true;
		} else {
			w_u32(b, (uint32_t)len);
			w_bytes(b, der, (size_t)len);
		}
		kp_ssl.CRYPTO_free(der, __FILE__, __LINE__);
	}
	w_u32(b, f->client_ca);
	w_sigalgs(b, f->sigalgs, f->n_sigalgs);
	w_sigalgs(b, f->shared, f->n_shared);
	w_u32(b, f->cert_req);
	w_u32(b, (uint32_t)f->n_ctypes);
	w_bytes(b, f->ctypes, (size_t)f->n_ctypes);
	w_u32(b, f->pf_sent);
	w_u32(b, (uint32_t)f->n_pformats);
	w_bytes(b, f->pformats, (size_t)f->n_pformats);
	w_u32(b, (uint32_t)f->own_sig_ok << 1 | f->own_type_ok);
	w_u32(b, (uint32_t)f->own_sig_nid);
	w_u32(b, (uint32_t)f->own_type_nid);
}

/* The method as a number another process can map back: TLS_client_method
 * only (0: not shared). */
static uint32_t method_id(const SSL_METHOD *m)
{
	return m && m == kp_ssl.TLS_client_method() ? 1 : 0;
}

/* What the broker's name is made of: the fields the rule compares for
 * equality (the carried options and modes left out, as cfg_mismatch
 * leaves them).  A program's SSL writes the same bytes only when the
 * rule can pass; the rule still runs on the full record. */
static void w_shape(struct wbuf *b, const char *sni, const struct conf *conf, const struct cfg *cfg, bool whole)
{
	w_str(b, sni);
	w_u32(b, conf->never);
	for (int i = 0; i < CONF_VALS; i++)
		w_u64(b, (uint64_t)conf->val[i]);
	for (int i = 0; i < CONF_LISTS; i++) {
		w_u32(b, (uint32_t)conf->len[i]);
		w_bytes(b, conf->list[i], conf->len[i]);
	}
	w_u32(b, cfg->read);
	w_u32(b, method_id(cfg->method));
	w_u64(b, whole ? cfg->options : cfg->options & ~(uint64_t)CARRIED_OPTIONS);
	w_u64(b, (uint64_t)(whole ? cfg->mode : cfg->mode & ~(long)CARRIED_MODES));
	w_u64(b, (uint64_t)cfg->min_proto);
	w_u64(b, (uint64_t)cfg->max_proto);
	w_u32(b, (uint32_t)cfg->seclevel);
	w_u64(b, (uint64_t)cfg->max_cert_list);
	w_u32(b, (uint32_t)cfg->read_ahead);
	w_u32(b, (uint32_t)cfg->quiet_shutdown);
	w_u64(b, (uint64_t)cfg->status_type);
	w_u32(b, (uint32_t)cfg->ct);
	w_u64(b, (uint64_t)cfg->cert_flags);
	w_u32(b, (uint32_t)cfg->ca_names);
	w_u32(b, (uint32_t)cfg->nciphers);
	w_bytes(b, cfg->ciphers, (size_t)cfg->nciphers * sizeof(*cfg->ciphers));
}

/* name: SHA-256 of the shape and the client certificate (sessions made
 * with and without one live side by side); 0 or -1 */
static int shape_name(const char *sni, const struct conf *conf, const struct cfg *cfg, X509 *cert,
		      uint8_t name[32])
{
	unsigned char buf[8192];
	struct wbuf b = { buf, 0, sizeof(buf), false };
	w_shape(&b, sni, conf, cfg, false);
	w_x509(&b, cert);
	unsigned int n = 0;
	if (b.bad || !cfg->read || !method_id(cfg->method) ||
	    !kp_ssl.EVP_Digest(buf, b.len, name, &n, kp_ssl.EVP_sha256(), NULL) || n != 32)
		return -1;
	return 0;
}

/* The full handshake's values, its key-exchange key (which a resumption
 * below TLS 1.3 does not show) as a public key, then what its getters
 * show (w_shown). */
static void w_full(struct wbuf *b, const struct full *full)
{
	w_u32(b, full->known);
	w_u32(b, (uint32_t)full->sig_ok << 1 | full->type_ok);
	w_u32(b, (uint32_t)full->sig_nid);
	w_u32(b, (uint32_t)full->type_nid);
	unsigned char *key = NULL;
	int n_key = full->tmp ? kp_ssl.i2d_PUBKEY(full->tmp, &key) : 0;
	w_u32(b, n_key > 0 ? (uint32_t)n_key : 0);
	if (n_key > 0)
		w_bytes(b, key, (size_t)n_key);
	kp_ssl.CRYPTO_free(key, __FILE__, __LINE__);
	w_shown(b, full);
}

/* The configuration record of a connection's export message (its conf
 * field; docs/tls-across.md "The broker's TLS message"): what the step 1
 * rule compares in the receiving process, written as a session's message
 * writes it but for the peer (the export message carries the peer chain):
 * the shape whole, the security level, the client certificate and the
 * chain sent with it, the full handshake's values, the session timeout.
 * No secret in it.  malloc'd, *len bytes; NULL when it cannot go (another
 * method: the name could not be made either).  Caller holds tls_lock. */
static unsigned char *conn_record(const struct kp_tls *e, size_t *len)
{
	uint8_t name[32];
	if (shape_name(e->sni, &e->conf, &e->cfg, e->cert, name) < 0)
		return NULL;
	struct wbuf b = { malloc(BK_SESS_MAX), 0, BK_SESS_MAX, false };
	if (!b.p)
		return NULL;
	w_u32(&b, ACROSS_MAGIC);
	w_shape(&b, e->sni, &e->conf, &e->cfg, true);
	w_u32(&b, (uint32_t)e->seclevel);
	w_x509(&b, e->cert);
	w_chain(&b, e->chain);
	w_full(&b, &e->full);
	w_u64(&b, (uint64_t)e->sess_timeout);
	/* the process-wide crypto state its handshake ran under, as far as
	 * another process can compare it (conn_crypto_why) */
	w_u64(&b, (uint64_t)e->crypto_gen);
	w_u32(&b, __atomic_load_n(&kp_tls_crypto_odd, __ATOMIC_ACQUIRE) != 0);
	w_u64(&b, __atomic_load_n(&kp_tls_crypto_trace, __ATOMIC_ACQUIRE));
	w_str(&b, getenv("OPENSSL_CONF"));
	w_str(&b, getenv("OPENSSL_MODULES"));
	if (b.bad) {
		free(b.p);
		return NULL;
	}
	*len = b.len;
	return b.p;
}

/* t as bytes (malloc'd, *len of them), its name and the seconds its
 * session has left; NULL when it cannot go (another method, too big, a
 * session about to expire).  Caller holds tls_lock; t is its own. */
static unsigned char *across_encode(const struct ticket *t, size_t *len, uint8_t name[32], uint32_t *life)
{
	long timeout = kp_ssl.SSL_SESSION_get_timeout(t->sess);
	long left = timeout - ((long)time(NULL) - kp_ssl.SSL_SESSION_get_time(t->sess));
	if (left < 2 || shape_name(t->sni, &t->conf, &t->cfg, t->cert, name) < 0)
		return NULL;
	struct wbuf b = { malloc(BK_SESS_MAX), 0, BK_SESS_MAX, false };
	if (!b.p)
		return NULL;
	w_u32(&b, ACROSS_MAGIC);
	w_shape(&b, t->sni, &t->conf, &t->cfg, true);
	w_u32(&b, (uint32_t)t->seclevel);
	w_x509(&b, t->cert);
	w_chain(&b, t->cchain);
	w_x509(&b, t->leaf);
	w_chain(&b, t->chain);
	w_full(&b, &t->full);
	w_u64(&b, (uint64_t)t->sess_timeout);
	int n = kp_ssl.i2d_SSL_SESSION(t->sess, NULL);
	w_u32(&b, n > 0 ? (uint32_t)n : 0);
	if (n <= 0 || b.bad || (size_t)n > b.cap - b.len) {
		kp_ssl.OPENSSL_cleanse(b.p, b.len);
		free(b.p);
		return NULL;
	}
	unsigned char *q = b.p + b.len;
	kp_ssl.i2d_SSL_SESSION(t->sess, &q);
	b.len += (size_t)n;
	*len = b.len;
	*life = (uint32_t)(left - 1);
	return b.p;
}

struct rbuf {
	const unsigned char *p;
	size_t len, at;
	bool bad;
};

static const unsigned char *r_bytes(struct rbuf *b, size_t n)
{
	if (b->bad || n > b->len - b->at) {
		b->bad = true;
		return NULL;
	}
	const unsigned char *q = b->p + b->at;
	b->at += n;
	return q;
}

static uint32_t r_u32(struct rbuf *b)
{
	uint32_t v = 0;
	const unsigned char *q = r_bytes(b, sizeof(v));
	if (q)
		memcpy(&v, q, sizeof(v));
	return v;
}

static uint64_t r_u64(struct rbuf *b)
{
	uint64_t v = 0;
	const unsigned char *q = r_bytes(b, sizeof(v));
	if (q)
		memcpy(&v, q, sizeof(v));
	return v;
}

static char *r_str(struct rbuf *b)
{
	uint32_t n = r_u32(b);
	if (n == ACROSS_NONE || b->bad)
		return NULL;
	const unsigned char *q = r_bytes(b, n);
	char *str = q && !memchr(q, 0, n) ? strndup((const char *)q, n) : NULL;
	if (!str)
		b->bad = true;
	return str;
}

static X509 *r_x509(struct rbuf *b)
{
	uint32_t n = r_u32(b);
	if (n == ACROSS_NONE || b->bad)
		return NULL;
	const unsigned char *q = r_bytes(b, n), *end = q ? q + n : NULL;
	X509 *x = q && n ? kp_ssl.d2i_X509(NULL, &q, (long)n) : NULL;
	if (!x || q != end) {
		if (x)
			kp_ssl.X509_free(x);
		b->bad = true;
		return NULL;
	}
	return x;
}

static STACK_OF(X509) *r_chain(struct rbuf *b)
{
	uint32_t n = r_u32(b);
	if (n == ACROSS_NONE || b->bad)
		return NULL;
	OPENSSL_STACK *sk = n <= 16 ? kp_ssl.OPENSSL_sk_new_null() : NULL;
	if (!sk) {
		b->bad = true;
		return NULL;
	}
	for (uint32_t i = 0; i < n && !b->bad; i++) {
		X509 *x = r_x509(b);
		if (!x || !kp_ssl.OPENSSL_sk_push(sk, x)) {
			if (x)
				kp_ssl.X509_free(x);
			b->bad = true;
		}
	}
	return (STACK_OF(X509) *)sk;
}

static int r_sigalgs(struct rbuf *b, struct sigalg *a)
{
	uint32_t n = r_u32(b);
	if (n > FULL_MAX_SIGALGS) {
		b->bad = true;
		return 0;
	}
	for (uint32_t i = 0; i < n; i++) {
		a[i].sign = (int)r_u32(b);
		a[i].hash = (int)r_u32(b);
		a[i].signhash = (int)r_u32(b);
		uint32_t raw = r_u32(b);
		a[i].rsig = (unsigned char)(raw >> 8);
		a[i].rhash = (unsigned char)raw;
	}
	return (int)n;
}

static void r_shown(struct rbuf *b, struct full *f)
{
	f->shown = r_u32(b);
	if (!f->shown || b->bad)
		return;
	f->chain = r_chain(b);
	uint32_t n = r_u32(b);
	if (n != ACROSS_NONE && !b->bad) {
		OPENSSL_STACK *sk = n <= 256 ? kp_ssl.OPENSSL_sk_new_null() : NULL;
		b->bad |= !sk;
		f->ca_names = (STACK_OF(X509_NAME) *)sk;
		for (uint32_t i = 0; sk && i < n && !b->bad; i++) {
			uint32_t len = r_u32(b);
			const unsigned char *q = r_bytes(b, len), *end = q ? q + len : NULL;
			X509_NAME *x = q && len ? kp_ssl.d2i_X509_NAME(NULL, &q, (long)len) : NULL;
			if (!x || q != end || !kp_ssl.OPENSSL_sk_push(sk, x)) {
				if (x)
					kp_ssl.X509_NAME_free(x);
				b->bad = true;
			}
		}
	}
	f->client_ca = r_u32(b);
	f->n_sigalgs = r_sigalgs(b, f->sigalgs);
	f->n_shared = r_sigalgs(b, f->shared);
	f->cert_req = r_u32(b);
	n = r_u32(b);
	const unsigned char *q = n <= FULL_MAX_CTYPES ? r_bytes(b, n) : NULL;
	if (n && !q)
		b->bad = true;
	else if (n)
		memcpy(f->ctypes, q, (f->n_ctypes = (int)n));
	f->pf_sent = r_u32(b);
	n = r_u32(b);
	q = n <= FULL_MAX_PFORMATS ? r_bytes(b, n) : NULL;
	if (n && !q)
		b->bad = true;
	else if (n)
		memcpy(f->pformats, q, (f->n_pformats = (int)n));
	uint32_t oks = r_u32(b);
	f->own_sig_ok = oks >> 1 & 1;
	f->own_type_ok = oks & 1;
	f->own_sig_nid = (int)r_u32(b);
	f->own_type_nid = (int)r_u32(b);
}

static void r_shape(struct rbuf *b, struct ticket *t)
{
	t->sni = r_str(b);
	t->conf.never = r_u32(b);
	for (int i = 0; i < CONF_VALS; i++)
		t->conf.val[i] = (long)r_u64(b);
	for (int i = 0; i < CONF_LISTS && !b->bad; i++) {
		uint32_t n = r_u32(b);
		const unsigned char *q = r_bytes(b, n);
		if (q && n)
			conf_set(&t->conf, i, q, n);
	}
	bool read = r_u32(b);
	struct cfg *c = &t->cfg;
	c->method = r_u32(b) == 1 ? kp_ssl.TLS_client_method() : NULL;
	c->options = r_u64(b);
	c->mode = (long)r_u64(b);
	c->min_proto = (long)r_u64(b);
	c->max_proto = (long)r_u64(b);
	c->seclevel = (int)r_u32(b);
	c->max_cert_list = (long)r_u64(b);
	c->read_ahead = (int)r_u32(b);
	c->quiet_shutdown = (int)r_u32(b);
	c->status_type = (long)r_u64(b);
	c->ct = (int)r_u32(b);
	c->cert_flags = (long)r_u64(b);
	c->ca_names = (int)r_u32(b);
	uint32_t n = r_u32(b);
	const unsigned char *q = n <= 1024 ? r_bytes(b, (size_t)n * sizeof(*c->ciphers)) : NULL;
	if (!q || b->bad) {
		b->bad = true;
		return;
	}
	if (n && !(c->ciphers = malloc((size_t)n * sizeof(*c->ciphers)))) {
		b->bad = true;
		return;
	}
	if (n)
		memcpy(c->ciphers, q, (size_t)n * sizeof(*c->ciphers));
	c->nciphers = (int)n;
	/* a record that says it was read, and names a method we know */
	c->read = read && c->method;
}

/* What w_full wrote (a key that does not decode: not known). */
static void r_full(struct rbuf *b, struct full *f)
{
	f->known = r_u32(b);
	uint32_t oks = r_u32(b);
	f->sig_ok = oks >> 1 & 1;
	f->type_ok = oks & 1;
	f->sig_nid = (int)r_u32(b);
	f->type_nid = (int)r_u32(b);
	uint32_t n_key = r_u32(b);
	const unsigned char *pub = n_key ? r_bytes(b, n_key) : NULL;
	if (pub && !(f->tmp = kp_ssl.d2i_PUBKEY(NULL, &pub, (long)n_key)))
		b->bad = true;
	r_shown(b, f);
	if (n_key && !f->tmp)
		f->known = false;
}

/* The ticket in len bytes from the broker, for key; NULL when they are
 * not one whole (anything left over, or missing, refuses it). */
static struct ticket *across_decode(const unsigned char *p, size_t len, const struct pool_key *key)
{
	struct rbuf b = { p, len, 0, false };
	struct ticket *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->key = *key;
	if (r_u32(&b) != ACROSS_MAGIC)
		b.bad = true;
	if (!b.bad)
		r_shape(&b, t);
	t->seclevel = (int)r_u32(&b);
	t->cert = r_x509(&b);
	t->cchain = r_chain(&b);
	t->leaf = r_x509(&b);
	t->chain = r_chain(&b);
	r_full(&b, &t->full);
	t->sess_timeout = (long)r_u64(&b);
	uint32_t n = r_u32(&b);
	const unsigned char *q = r_bytes(&b, n), *end = q ? q + n : NULL;
	if (q && n && !b.bad)
		t->sess = kp_ssl.d2i_SSL_SESSION(NULL, &q, (long)n);
	if (b.bad || b.at != len || !t->sess || q != end || !t->leaf ||
	    !kp_ssl.SSL_SESSION_is_resumable(t->sess)) {
		ticket_free(t); /* SSL_SESSION_free(NULL) does nothing */
		return NULL;
	}
	return t;
}

/* The broker's name for what ssl's own settings would make (a session's
 * or a connection's: shape_name), 0; -1 for a program nothing may be
 * offered to (curl's session cache, Ruby's info callback: it does not
 * cost the broker a question) or another method. */
static int across_name(SSL *ssl, uint8_t name[32])
{
	struct cfg now;
	cfg_read(ssl, &now);
	kp_lock(&tls_lock);
	const struct conf *conf = conf_of(ssl);
	int r = never_for(ssl, conf) || watcher(ssl, conf)
			? -1
			: shape_name(kp_ssl.SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name), conf, &now,
				     kp_ssl.SSL_get_certificate(ssl), name);
	kp_unlock(&tls_lock);
	cfg_free(&now);
	return r;
}

/* A ticket from the broker for ssl's handshake to key: asked under the
 * name ssl's own settings make, rebuilt, NULL when there is none. */
static struct ticket *across_fetch(SSL *ssl, const struct pool_key *key)
{
	uint8_t name[32];
	if (!kp_broker_enabled() || across_name(ssl, name) < 0)
		return NULL;
	unsigned char *buf = malloc(BK_SESS_MAX);
	if (!buf)
		return NULL;
	ssize_t n = kp_broker_sess_get(key, name, buf, BK_SESS_MAX);
	struct ticket *t = n > 0 ? across_decode(buf, (size_t)n, key) : NULL;
	if (n > 0 && !t)
		kp_warn("a session from the broker could not be read: not offered");
	kp_debug("the broker %s", t ? "had a session" : "had no session");
	kp_ssl.OPENSSL_cleanse(buf, BK_SESS_MAX); /* the resumption secret */
	free(buf);
	return t;
}

static void ticket_keep(struct kp_tls *e, const struct pool_key *key)
{
	/* a session whose secrets the program logs (a TLS 1.2 resumption
	 * keeps the master secret its keylog wrote) is offered to no other
	 * SSL, in this process or another: what that SSL sends would be
	 * readable from the log, where alone its own handshake makes fresh
	 * keys (docs/tls.md "Callbacks that watch") */
	if (kp_tls_keylog_of(kp_ssl.SSL_get_SSL_CTX(e->ssl)))
		return;
	/* a private copy: the program's own object may change after (a
	 * reference kept past SSL_free), and one it changed is not what its
	 * handshake made (docs/tls.md "The program's own objects") */
	SSL_SESSION *own = kp_ssl.SSL_get_session(e->ssl);
	/* (the private copy where its first owner's SSL_free without a
	 * shutdown marked its own: session_freed) */
	kp_lock(&tls_lock);
	SSL_SESSION *from = own && e->sess_marked && own == e->snap_src ? e->snap : own;
	from = from && kp_ssl.SSL_SESSION_up_ref(from) ? from : NULL;
	kp_unlock(&tls_lock);
	/* (an offer copies its peer's objects into its session: tls_peer.c) */
	SSL_SESSION *sess = from && !session_changed(own) && session_peer_known(e->ssl) ? kp_ssl.SSL_SESSION_dup(from)
											 : NULL;
	if (from)
		kp_ssl.SSL_SESSION_free(from);
	if (!sess)
		return;
	struct ticket *t = calloc(1, sizeof(*t));
	STACK_OF(X509) *chain = kp_ssl.SSL_get_peer_cert_chain(e->ssl);
	if (!t || !kp_ssl.SSL_SESSION_is_resumable(sess) ||
	    kp_ssl.SSL_get_verify_result(e->ssl) != X509_V_OK ||
	    !(t->leaf = kp_ssl.SSL_get1_peer_certificate(e->ssl)) ||
	    (chain && !(t->chain = kp_ssl.X509_chain_up_ref(chain))) ||
	    (e->sni && !(t->sni = strdup(e->sni)))) {
		if (t) {
			t->sess = sess;
			ticket_free(t);
		} else {
			kp_ssl.SSL_SESSION_free(sess);
		}
		return;
	}
	t->key = *key;
	t->sess = sess;
	if (e->cert && kp_ssl.X509_up_ref(e->cert))
		t->cert = e->cert;
	if (e->chain)
		t->cchain = kp_ssl.X509_chain_up_ref(e->chain);
	t->seclevel = e->seclevel;
	struct ticket *drop = NULL;
	kp_lock(&tls_lock);
	conf_copy(&t->conf, &e->conf);
	cfg_copy(&t->cfg, &e->cfg);
	full_copy(&t->full, &e->full);
	t->sess_timeout = e->sess_timeout;
	if (!t->chain)
		t->chain = ticket_chain_of(key, t->sni, t->leaf);
	/* for a handshake in another process, through the broker: encoded
	 * now, while t is ours alone, sent after the lock */
	uint8_t name[32];
	uint32_t life = 0;
	size_t n_enc = 0;
	unsigned char *enc = kp_broker_enabled() ? across_encode(t, &n_enc, name, &life) : NULL;
	if (kp_broker_enabled() && !enc)
		kp_debug("a session not for the broker (method, size or lifetime)");
	bool once = kp_ssl.SSL_SESSION_get_protocol_version(sess) >= TLS1_3_VERSION;
	ticket_insert(t, &drop);
	kp_unlock(&tls_lock);
	if (enc) {
		int r = kp_broker_sess_put(key, name, life, once, enc, n_enc);
		kp_debug("a session %s the broker (%zu bytes, %u s)", r == 0 ? "given to" : "not given to",
			 n_enc, life);
		kp_ssl.OPENSSL_cleanse(enc, n_enc); /* the resumption secret */
		free(enc);
	}
	while (drop) {
		struct ticket *o = drop;
		drop = o->next;
		ticket_free(o);
	}
}

void kp_tls_forget_sessions(void)
{
	kp_lock(&tls_lock);
	struct ticket *t = tickets;
	tickets = NULL;
	kp_unlock(&tls_lock);
	while (t) {
		struct ticket *next = t->next;
		ticket_free(t);
		t = next;
	}
}

/* Why the program's ssl must not be offered ticket t (its shape, what its
 * full handshake negotiated, its timeout, its id), or NULL.  Caller holds
 * tls_lock. */
static const char *ticket_why(const struct ticket *t, SSL *ssl, const char *unknown_full)
{
	struct shape sh = { t->sni, &t->conf, &t->cfg, t->cert, t->cchain, t->seclevel,
			    kp_ssl.SSL_SESSION_get_protocol_version(t->sess),
			    kp_ssl.SSL_SESSION_get0_cipher(t->sess) };
	const char *why = shape_mismatch(&sh, ssl);
	if (!why && !t->full.known)
		why = unknown_full;
	/* resumed, the session keeps its timeout, which its first owner's
	 * context (or the server's ticket) gave */
	if (!why && t->sess_timeout != kp_ssl.SSL_CTX_get_timeout(session_ctx(ssl)))
		why = "the session timeout differs";
	if (!why && kp_ssl.SSL_SESSION_get_protocol_version(t->sess) < TLS1_3_VERSION &&
	    !kp_ssl.SSL_SESSION_has_ticket(t->sess))
		why = "its session id is the server's (a full handshake shows a new one)";
	return why;
}

/* What an offer of t needs, with references of its own: the session, the
 * peer's leaf and chain, what the full handshake negotiated. */
struct offer {
	SSL_SESSION *sess;
	X509 *leaf;
	STACK_OF(X509) *untrusted;
	struct full full;
};

static void offer_take(struct offer *o, const struct ticket *t)
{
	if (kp_ssl.SSL_SESSION_up_ref(t->sess) && kp_ssl.X509_up_ref(t->leaf)) {
		o->sess = t->sess;
		o->leaf = t->leaf;
		o->untrusted = t->chain ? kp_ssl.X509_chain_up_ref(t->chain) : NULL;
		full_copy(&o->full, &t->full);
	}
}

/* The program's own verification on o's peer chain, then a copy of o's
 * session set on ssl, recorded as offered (so that the program's SSL says
 * what its own full handshake would have: not reused, this chain verified,
 * kp_tls_session_ours and kp_tls_verify_result).  NULL, or why not. */
static const char *offer_verified(SSL *ssl, struct offer *o, bool across)
{
	const char *why = NULL;
	long result;
	STACK_OF(X509) *chain;
	char *peername;
	X509_VERIFY_PARAM *named = NULL;
	/* (its peer's objects its own: docs/tls.md "The program's own objects") */
	if (!offer_peer_own(&o->leaf, &o->untrusted))
		return "its peer's certificate could not be copied";
	kp_ssl.ERR_set_mark();
	int ok = verify_as(ssl, o->leaf, o->untrusted, &result, &chain, &peername, &named);
	kp_ssl.ERR_pop_to_mark();
	free(peername);
	/* a copy of the program's own, with a new id (a ticket's is the
	 * client's): resumed, it is the program's session, not one another
	 * program read (docs/tls.md "Sessions") */
	SSL_SESSION *mine = ok > 0 && result == X509_V_OK ? session_anew_own(o->sess, o->leaf, o->untrusted) : NULL;
	if (mine && kp_ssl.SSL_set_session(ssl, mine)) {
		kp_count(tls_resumed);
		kp_lock(&tls_lock);
		struct record *r = record_get(ssl, true);
		if (r) {
			if (r->offered_chain)
				kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)r->offered_chain,
							   (void (*)(void *))kp_ssl.X509_free);
			r->offered = true;
			r->offered_across = across;
			r->offered_result = result;
			r->offered_chain = chain;
			chain = NULL;
			if (r->offered_named)
				kp_ssl.X509_VERIFY_PARAM_free(r->offered_named);
			r->offered_named = named;
			named = NULL;
			offered_full_set(r, &o->full, mine);
		}
		kp_unlock(&tls_lock);
	} else {
		why = !mine && ok > 0 && result == X509_V_OK ? "its session's peer could not be made the program's own"
						    : "the program's verification fails on its chain";
	}
	if (chain)
		kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)chain, (void (*)(void *))kp_ssl.X509_free);
	if (named)
		kp_ssl.X509_VERIFY_PARAM_free(named);
	if (mine)
		kp_ssl.SSL_SESSION_free(mine); /* (SSL_set_session took its own) */
	return why;
}

static void offer_free(struct offer *o)
{
	if (o->sess)
		kp_ssl.SSL_SESSION_free(o->sess);
	if (o->leaf)
		kp_ssl.X509_free(o->leaf);
	if (o->untrusted)
		kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)o->untrusted, (void (*)(void *))kp_ssl.X509_free);
	full_free(&o->full);
}

/* A ticket from the broker, offered (why NULL): kept here as a ticket of
 * our own, its chain serving the session this handshake makes
 * (ticket_chain_of); not offered: never sent, still unused (a single-use
 * ticket too), back to the broker for the next process. */
static void imported_settle(struct ticket *imported, const struct pool_key *key, const char *why)
{
	if (!why) {
		struct ticket *drop = NULL;
		kp_lock(&tls_lock);
		ticket_insert(imported, &drop);
		kp_unlock(&tls_lock);
		while (drop) {
			struct ticket *o = drop;
			drop = o->next;
			ticket_free(o);
		}
		return;
	}
	uint8_t name[32];
	uint32_t life = 0;
	size_t n_enc = 0;
	unsigned char *enc = across_encode(imported, &n_enc, name, &life);
	if (enc) {
		kp_broker_sess_put(key, name, life,
				   kp_ssl.SSL_SESSION_get_protocol_version(imported->sess) >= TLS1_3_VERSION,
				   enc, n_enc);
		kp_ssl.OPENSSL_cleanse(enc, n_enc);
		free(enc);
	}
	ticket_free(imported);
}

#ifdef KP_TEST_ACROSS_VERIFY
static void state_from_broker(SSL *ssl, const struct pool_key *key);
#endif

/* sessions_told, taking tls_lock */
static bool told_any(SSL *ssl)
{
	kp_lock(&tls_lock);
	bool told = sessions_told(ssl) != NULL;
	kp_unlock(&tls_lock);
	return told;
}

void kp_tls_offer_session(void *ssl_, const struct pool_key *key)
{
	SSL *ssl = ssl_;
#ifdef KP_TEST_ACROSS_VERIFY
	if (kp_ssl_bind() && shim_ctx_get())
		state_from_broker(ssl, key);
#endif
	/* a TLS connection made here: it cannot move to another process
	 * (docs/tls-across.md), whatever becomes of its session */
	kp_count(tls_not_shared);
	if (!kp_ssl_bind() || !shim_ctx_get() ||
	    resuming(ssl) || /* the program resumes one of its own */
	    told_any(ssl) || /* or is told of sessions (never_for) */
	    (kp_ssl.SSL_get_options(ssl) & SSL_OP_NO_TICKET)) /* or wants none */
		return;
	/* a process that can show a session's ticket, master key or bytes:
	 * a resumption of ours would show the ones of the session it came
	 * from, as a hand-out would (declined there too: docs/tls.md "What a
	 * session shows") */
	if (session_shown_imported()) {
		kp_debug("no session of ours offered: the program can show a session's ticket, master key or bytes");
		return;
	}
	struct offer o = { 0 };
	const char *why = "none kept";
	bool found = false;
	/* one from another process (the broker) only where this process
	 * keeps none for the destination and name */
	struct ticket *imported = NULL;
	kp_lock(&tls_lock);
	const char *sni = kp_ssl.SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	for (struct ticket *t = __atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE) ? tickets : NULL; t;
	     t = t->next) {
		if (memcmp(&t->key, key, sizeof(*key)) || !same_str(t->sni, sni))
			continue;
		found = true;
		why = ticket_why(t, ssl, "what its full handshake negotiated is not known");
		if (!why)
			offer_take(&o, t);
		break;
	}
	kp_unlock(&tls_lock);
	if (!found && (imported = across_fetch(ssl, key))) {
		/* the same rule as a ticket of this process's own: the recorded
		 * configuration equal, then the program's own verification of
		 * the peer chain (offer_verified) */
		kp_lock(&tls_lock);
		why = same_str(imported->sni, sni)
			      ? ticket_why(imported, ssl, "what its full handshake negotiated is not carried")
			      : "SNI";
		kp_unlock(&tls_lock);
		if (!why)
			offer_take(&o, imported);
		else
			kp_debug("a session from the broker not offered: %s", why);
	}
	if (o.sess)
		why = offer_verified(ssl, &o, imported != NULL);
	if (imported)
		imported_settle(imported, key, why);
	offer_free(&o);
	if (why)
		kp_debug("no session offered: %s", why);
	else
		kp_debug("a cached session offered for resumption");
}

bool kp_tls_keep_session(struct kp_tls *e, const struct pool_key *key)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE) || !kp_ssl.SSL_is_init_finished(e->ssl))
		return false;
	kp_lock(&tls_lock);
	/* read as kp_tls_park reads it, the program's SSL alive or not */
	bool ours = !e->dead && !e->foreign;
	if (ours) {
		note_cert(e);
		if (!e->full.known && !kp_ssl.SSL_session_reused(e->ssl))
			full_read(e->ssl, &e->full);
	}
	kp_unlock(&tls_lock);
	if (ours)
		ticket_keep(e, key);
	return ours;
}

#ifdef KP_TEST_ACROSS_VERIFY
/* The test build's proof of an export (tests/https_across.bats): the
 * state imported into the foreign engine on the parked socket makes a
 * request of its own (GET KP_TEST_ACROSS_VERIFY) and reads the answer to
 * its end: the server takes our records only under the right keys and
 * sequence numbers, and we open its records only under the right ones.
 * The connection is spent (never parked). */
static int verify_wait(struct kp_import *im, int r)
{
	int err = tlsf_get_error(&im->f, r);
	struct pollfd p = { im->fd, err == TLSF_ERROR_WANT_WRITE ? POLLOUT : POLLIN, 0 };
	if (err != TLSF_ERROR_WANT_READ && err != TLSF_ERROR_WANT_WRITE)
		return err;
	return kp_real.poll(&p, 1, 10000) == 1 ? -1 : err;
}

static void state_verify(unsigned char *msg, long len, int fd)
{
	const char *why = NULL;
	struct kp_import *im = kp_tls_import(msg, (size_t)len, fd, 0, SSL_MODE_AUTO_RETRY, &why);
	if (!im) {
		kp_warn("across check: not imported: %s", why);
		return;
	}
	static const char req[] = "GET " KP_TEST_ACROSS_VERIFY " HTTP/1.1\r\nHost: localhost\r\n"
				  "Connection: close\r\n\r\n";
	int r, err = 0;
	while ((r = tlsf_write(&im->f, req, (int)sizeof(req) - 1)) <= 0 && (err = verify_wait(im, r)) < 0)
		;
	bool sent = r > 0;
	char head[16] = "";
	size_t got = 0;
	while (r > 0) {
		char buf[4096];
		while ((r = tlsf_read(&im->f, buf, sizeof(buf))) <= 0 && (err = verify_wait(im, r)) < 0)
			;
		if (r > 0 && got < sizeof(head) - 1)
			memcpy(head + got, buf, (size_t)r < sizeof(head) - 1 - got ? (size_t)r : sizeof(head) - 1 - got);
		got += r > 0 ? (size_t)r : 0;
	}
	kp_warn("across check: version %x, sent %s, read %zu bytes, \"%.12s\", ended with SSL error %d",
		tlsf_version(&im->f), sent ? "the request" : "nothing", got, head, err);
	kp_tls_import_free(im);
}
#endif

#ifdef KP_TEST_ACROSS_VERIFY
/* KP_TEST_ACROSS_BROKER=1 (the test build, under a broker): the export
 * proved in the next process instead.  At park the state goes to the
 * broker beside its socket (TPUT) under the name of the configuration the
 * connection was made under; at the next process's SSL_connect to the
 * destination, the state under the name the program's SSL makes comes
 * back with its socket (TGET) and makes the check's request there
 * (state_verify).  The program's own handshake goes on, on its own
 * connection.  What it proves: the fd and its state through the broker,
 * the name made in two processes from two SSLs the same, the keys and
 * sequence numbers good in another process. */
static bool across_broker_test(void)
{
	const char *v = getenv("KP_TEST_ACROSS_BROKER");
	return v && *v == '1' && kp_broker_enabled();
}
#endif


static bool state_to_broker(struct kp_tls *e, int hidden, const struct pool_key *key,
			    const struct pool_meta *pmeta, unsigned char *msg, long len)
{
	uint8_t name[32];
	kp_lock(&tls_lock);
	int r = shape_name(e->sni, &e->conf, &e->cfg, e->cert, name);
	kp_unlock(&tls_lock);
	/* kept no longer than its session (what it may be resumed by) */
	SSL_SESSION *s = kp_ssl.SSL_get_session(e->ssl);
	long left = s ? kp_ssl.SSL_SESSION_get_timeout(s) - ((long)time(NULL) - kp_ssl.SSL_SESSION_get_time(s)) : 0;
	/* (the socket's record: its options and flags, adopted as a pooled
	 * socket's by the taking process) */
	struct pool_meta meta = *pmeta;
	bool v13 = kp_ssl.SSL_version(e->ssl) >= TLS1_3_VERSION;
	size_t n = (size_t)len;
	if (r < 0 || left < 2) {
		kp_ssl.OPENSSL_cleanse(msg, n);
		free(msg);
		kp_across_note("across check: the state not for the broker (no name, or its session ends)");
		return false; /* parked in process, as without the switch */
	}
	/* once our KeyUpdate is on the wire the connection's SSL no longer
	 * knows its own sending keys: it is spent whatever the broker does
	 * (a broker gone: the connection closed, the next request dials) */
	if (!(msg = state_key_update(msg, &n, hidden))) {
		kp_across_note("across check: the state not given to the broker (its KeyUpdate not sent)");
		return true;
	}
	/* (the close_notify owed, for the broker to write if it ends it) */
	uint8_t bye[BK_TAIL_MAX];
	size_t bye_len = goodbye_seal(e, msg, n, bye);
	bool sent = kp_broker_tls_put(key, name, (uint32_t)(left - 1), hidden, &meta, msg, n, bye, bye_len) == 0;
	kp_across_note("across check: the state %s the broker (%zu bytes%s)", sent ? "given to" : "not given to", n,
		v13 ? ", our KeyUpdate sent before" : "");
	if (!sent && v13) /* spent: it ends here */
		goodbye_send(hidden, bye, bye_len);
	kp_ssl.OPENSSL_cleanse(msg, n);
	free(msg);
	return sent || v13; /* TLS 1.2 sent nothing: parked in process when the broker did not take it */
}

/* ------------------------------------------- the gate before a hand-out */

/* The connection an export message carries, as a ticket (the rule a
 * session from the broker follows is the rule here): its configuration
 * record (conn_record: the shape, the security level, the client
 * certificate and its chain, the full handshake's values, the session
 * timeout), the session and the peer chain of the message.  NULL when the
 * record or the message's session or chain does not decode whole. */
struct conn_crypto {
	uint64_t gen;   /* kp_tls_crypto_gen at its handshake */
	bool odd;       /* its process had made another change (kp_tls_crypto_odd) */
	uint64_t trace; /* what it made of the rest (kp_tls_crypto_trace) */
	char *conf, *modules; /* OPENSSL_CONF, OPENSSL_MODULES there */
};

static struct ticket *conn_ticket(const struct tlsx_state *st, const struct pool_key *key,
				  struct conn_crypto *cc)
{
	struct rbuf b = { st->conf.p, st->conf.len, 0, false };
	struct ticket *t = calloc(1, sizeof(*t));
	OPENSSL_STACK *peer = kp_ssl.OPENSSL_sk_new_null();
	if (!t || !peer) {
		free(t);
		if (peer)
			kp_ssl.OPENSSL_sk_pop_free(peer, (void (*)(void *))kp_ssl.X509_free);
		return NULL;
	}
	t->key = *key;
	if (!st->conf.p || r_u32(&b) != ACROSS_MAGIC)
		b.bad = true;
	if (!b.bad)
		r_shape(&b, t);
	t->seclevel = (int)r_u32(&b);
	t->cert = r_x509(&b);
	t->cchain = r_chain(&b);
	r_full(&b, &t->full);
	t->sess_timeout = (long)r_u64(&b);
	cc->gen = r_u64(&b);
	cc->odd = r_u32(&b);
	cc->trace = r_u64(&b);
	cc->conf = r_str(&b);
	cc->modules = r_str(&b);
	const unsigned char *q = st->session.p, *end = q ? q + st->session.len : NULL;
	if (q && !b.bad)
		t->sess = kp_ssl.d2i_SSL_SESSION(NULL, &q, (long)st->session.len);
	bool bad = b.bad || b.at != st->conf.len || !t->sess || q != end;
	for (uint32_t i = 0; i < st->chain_count && !bad; i++) {
		const uint8_t *der, *at;
		uint32_t n;
		X509 *x = tlsx_chain_cert(st, i, &der, &n) == 0 ? kp_ssl.d2i_X509(NULL, (at = der, &at), (long)n)
								: NULL;
		if (!x || at != der + n || !kp_ssl.OPENSSL_sk_push(peer, x)) {
			if (x)
				kp_ssl.X509_free(x);
			bad = true;
		}
	}
	t->chain = (STACK_OF(X509) *)peer;
	X509 *leaf = kp_ssl.OPENSSL_sk_num(peer) > 0 ? kp_ssl.OPENSSL_sk_value(peer, 0) : NULL;
	if (!bad && leaf && kp_ssl.X509_up_ref(leaf))
		t->leaf = leaf;
	/* the session is the connection's own: its version is the message's
	 * (the suite the rule compares is the session's: the message carries
	 * the record layer's cipher, not the suite) */
	if (bad || !t->leaf || kp_ssl.SSL_SESSION_get_protocol_version(t->sess) != st->version) {
		ticket_free(t);
		return NULL;
	}
	return t;
}

/* What the program's ssl does that the foreign engine would not answer as
 * its own SSL would, whatever the connection (docs/tls-across.md
 * "Declined before hand-out"), or NULL. */
static const char *conn_declined(SSL *ssl, const struct tlsx_state *st)
{
	struct cfg now;
	cfg_read(ssl, &now);
	kp_lock(&tls_lock);
	const struct conf *conf = conf_of(ssl);
	const char *why = handle_find(ssl) ? "the SSL is already in use" : never_for(ssl, conf);
	if (!why)
		why = watcher(ssl, conf);
	/* record shaping: the engine reads without read-ahead and writes
	 * 2^14 records, unpadded, one at a time */
	for (int i = 0; i < CONF_VALS && !why; i++)
		if (conf->val[i])
			why = "record shaping (fragment sizes, pipelines, padding)";
	kp_unlock(&tls_lock);
	if (!why && (!now.read || now.read_ahead))
		why = now.read ? "read-ahead" : "its configuration cannot be read";
	cfg_free(&now);
	/* a HelloRequest would make OpenSSL renegotiate, a handshake the
	 * engine cannot make */
	if (!why && st->version < TLS1_3_VERSION && !(kp_ssl.SSL_get_options(ssl) & SSL_OP_NO_RENEGOTIATION))
		why = "TLS 1.2 without SSL_OP_NO_RENEGOTIATION";
	/* its own handshake would offer its session: what the server does
	 * with it (resume or not) is not known across processes */
	if (!why && resuming(ssl))
		why = "the program offers a session of its own";
	if (!why)
		why = bio_watcher(ssl);
	if (!why && ssl_bio_imported())
		why = "the program can see past a hand-out (BIO_f_ssl, the BIO counters)";
	if (!why && session_shown_imported())
		why = "the program can show a session's ticket, master key or bytes";
	return why;
}

/* The process-wide crypto state (providers, default properties, RAND,
 * engines: docs/tls.md "Process-wide state") the program's own handshake
 * would run under, against the one the connection's ran under in its
 * process: no getter tells it, so only the one history two processes can
 * be shown to share passes: nothing but libcrypto's load of its default
 * configuration (every Python process makes it at start), as many setter
 * calls of it, under the same OPENSSL_CONF and OPENSSL_MODULES. */
static const char *conn_crypto_why(const struct conn_crypto *cc)
{
	if (cc->odd || __atomic_load_n(&kp_tls_crypto_odd, __ATOMIC_ACQUIRE))
		return "a process-wide crypto state other than the default configuration's";
	if (cc->gen != __atomic_load_n(&kp_tls_crypto_gen, __ATOMIC_ACQUIRE) ||
	    cc->trace != __atomic_load_n(&kp_tls_crypto_trace, __ATOMIC_ACQUIRE))
		return "the process-wide crypto state differs (the default configuration loaded or not, the engines registered)";
	if (!same_str(cc->conf, getenv("OPENSSL_CONF")) || !same_str(cc->modules, getenv("OPENSSL_MODULES")))
		return "another OpenSSL configuration (OPENSSL_CONF, OPENSSL_MODULES)";
	return NULL;
}

/* The program's own verification on the connection's peer chain (its
 * store, parameters, callback, security level), as a handshake of its own
 * would run it: it must pass with X509_V_OK (the connection's own
 * handshake verified it so: the session the program would read says
 * that result). */
struct conn_verdict {
	STACK_OF(X509) *chain; /* what the program's verification built */
	char *peername;        /* the name it matched */
	struct full full;      /* what the connection's full handshake showed */
	SSL_SESSION *sess;     /* the connection's session */
};

static void verdict_free(struct conn_verdict *v)
{
	free(v->peername);
	if (v->chain)
		kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)v->chain, (void (*)(void *))kp_ssl.X509_free);
	if (v->sess)
		kp_ssl.SSL_SESSION_free(v->sess);
	full_free(&v->full);
	memset(v, 0, sizeof(*v));
}

static const char *conn_verified(SSL *ssl, const struct ticket *t, struct conn_verdict *keep)
{
	long result = 0;
	struct conn_verdict v = { 0 };
	kp_ssl.ERR_set_mark();
	int ok = verify_as(ssl, t->leaf, t->chain, &result, &v.chain, &v.peername, NULL);
	kp_ssl.ERR_pop_to_mark();
	if (keep && ok > 0 && result == X509_V_OK)
		*keep = v;
	else
		verdict_free(&v);
	/* OpenSSL aborts a failed verification for any mode but
	 * SSL_VERIFY_NONE */
	if (ok <= 0 && kp_ssl.SSL_get_verify_mode(ssl) != SSL_VERIFY_NONE)
		return "the program's verification fails on it";
	if (result != X509_V_OK)
		return "the program's verification result is not X509_V_OK";
	return NULL;
}

/* Why the program's ssl must not be handed the connection the export
 * message msg (len bytes) carries to key, or NULL: the decline list, the
 * configuration record compared in full as a session's (ticket_why:
 * shape_mismatch, cfg_mismatch, the full handshake's values, the session
 * timeout), the SNI, then the program's own verification. */
static const char *across_conn_why(SSL *ssl, const struct pool_key *key, const unsigned char *msg, size_t len,
				   struct conn_verdict *keep, bool v13_only)
{
	struct tlsx_state st;
	const char *why = NULL;
	if (tlsx_decode(msg, len, &st, &why) < 0)
		return why ? why : "the state does not decode";
	/* a TLS 1.2 state stays in its process outside the test build: its
	 * keys would move without a KeyUpdate, and its program may be asked
	 * to renegotiate (docs/tls-across.md "The hand-out in the library") */
	why = v13_only && st.version < TLS1_3_VERSION ? "TLS 1.2" : conn_declined(ssl, &st);
	struct conn_crypto cc = { 0 };
	struct ticket *t = why ? NULL : conn_ticket(&st, key, &cc);
	if (!why && !t)
		why = "its configuration record, session or peer chain does not decode";
	if (!why)
		why = conn_crypto_why(&cc);
	free(cc.conf);
	free(cc.modules);
	if (!why) {
		kp_lock(&tls_lock);
		why = same_str(t->sni, kp_ssl.SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name))
			      ? ticket_why(t, ssl, "what its full handshake negotiated is not carried")
			      : "SNI";
		kp_unlock(&tls_lock);
	}
	if (!why)
		why = conn_verified(ssl, t, keep);
	if (!why && keep) {
		/* what the foreign engine's getters answer beside the state's
		 * own (its session: the cipher, the peer's certificate) */
		full_copy(&keep->full, &t->full);
		keep->sess = t->sess;
		t->sess = NULL;
	}
	if (t)
		ticket_free(t);
	tlsx_wipe(&st);
	return why;
}

#ifdef KP_TEST_ACROSS_VERIFY
static void state_from_broker(SSL *ssl, const struct pool_key *key)
{
	uint8_t name[32];
	if (!across_broker_test() || across_name(ssl, name) < 0)
		return;
	unsigned char *buf = malloc(BK_TLS_MAX);
	struct pool_meta meta;
	size_t len = 0;
	int fd = buf ? kp_broker_tls_get(key, name, &meta, buf, BK_TLS_MAX, &len) : -1;
	if (fd < 0) {
		if (buf)
			kp_ssl.OPENSSL_cleanse(buf, BK_TLS_MAX);
		free(buf);
		kp_warn("across check: no state from the broker");
		return;
	}
	kp_warn("across check: a state from the broker (%zu bytes)", len);
	/* the gate a hand-out passes first: refused, the state wiped and its
	 * socket closed (the program's own handshake goes on) */
	const char *why = across_conn_why(ssl, key, buf, len, NULL, false);
	if (why) {
		kp_warn("across check: refused: %s", why);
		kp_ssl.OPENSSL_cleanse(buf, BK_TLS_MAX);
		free(buf);
		kp_real.close(fd);
		return;
	}
	state_verify(buf, (long)len, fd); /* buf is the import's: wiped there */
	kp_real.close(fd);
}
#endif

/* ------------------------------------------- the hand-out in another process */

/* Whether connections are handed between processes here
 * (docs/tls-across.md "The hand-out in the library"): KEEPALIVE_TLS_ACROSS
 * under a broker, TLS 1.3 only, a parked state put to the broker when the
 * process's pool would not keep it (kp_tls_across_leave).  The test build
 * keeps its own modes: only KP_TEST_ACROSS_BROKER=2 hands out (TLS 1.2
 * too, every park put), =1 checks a state in the next process. */
enum { HAND_OFF, HAND_ON, HAND_TEST };
static int hand_mode(void)
{
	if (kp_tls_across_on())
		return HAND_ON;
#ifdef KP_TEST_ACROSS_VERIFY
	const char *v = getenv("KP_TEST_ACROSS_BROKER");
	if (kp_cfg.tls_across && kp_broker_enabled() && v && *v == '2')
		return HAND_TEST;
#endif
	return HAND_OFF;
}

#ifdef KP_TEST_ACROSS_VERIFY
static bool across_hand_test(void)
{
	return hand_mode() == HAND_TEST;
}
#endif

/* The foreign engine for the program's ssl on its fd, from the message msg
 * (taken) that passed the gate (v: what the program's verification built
 * and matched, taken): a placeholder SSL of ours as e->ssl, the import
 * answering, the program's handle mapped to it.  NULL with *why. */
static struct kp_tls *foreign_engine(SSL *ssl, unsigned char *msg, size_t len, int fd, const uint8_t name[32],
				     struct conn_verdict *v, const char **why)
{
	struct kp_tls *e = calloc(1, sizeof(*e));
	struct handle *h = calloc(1, sizeof(*h));
	SSL *place = e && h ? kp_ssl.SSL_new(shim_ctx_get()) : NULL;
	/* the options and modes the engine's answers depend on: the
	 * program's (the gate compared the rest) */
	struct kp_import *im = NULL;
	if (place)
		im = kp_tls_import(msg, len, fd, kp_ssl.SSL_get_options(ssl),
				   (uint32_t)kp_ssl.SSL_ctrl(ssl, SSL_CTRL_MODE, 0, NULL), why);
	else
		kp_ssl.OPENSSL_cleanse(msg, len), free(msg), *why = "no memory";
	if (!im) {
		if (place)
			kp_ssl.SSL_free(place);
		free(e);
		free(h);
		return NULL;
	}
	memcpy(im->name, name, sizeof(im->name));
	/* the placeholder answers what a session tells (SSL_get_session,
	 * SSL_get_current_cipher, the peer's certificate: libssl reads them
	 * from the session after a handshake), the record what the full
	 * handshake showed (the peer's chain, its signature) */
	kp_ssl.SSL_set_session(place, v->sess);
	e->full = v->full;
	memset(&v->full, 0, sizeof(v->full));
	char sni[256];
	if (tlsf_servername(&im->f, sni, sizeof(sni)))
		e->sni = strdup(sni);
	e->ssl = place;
	e->im = im;
	e->fd = fd;
	e->prog_fd = -1;
	e->own_bio = true;
	e->refs = 2; /* the program's handle, and the connection */
	h->ssl = ssl;
	h->e = e;
	h->fd = fd;
	h->verified = true;
	h->verify_result = X509_V_OK;
	h->vchain = v->chain;
	h->peername = v->peername;
	h->handed_at = (long)time(NULL);
	/* its peer's objects its own, as an in-process hand-out's
	 * (handout_why), and in the session it reads and is told of: the
	 * imported session's DER keeps no chain, which a resumption of it
	 * would read (SSL_get_peer_cert_chain) */
	X509 *leaf = v->sess ? kp_ssl.SSL_SESSION_get0_peer(v->sess) : NULL;
	if (leaf && e->full.shown && e->full.chain)
		peer_copies(leaf, e->full.chain, &h->peer, &h->peer_chain);
	v->chain = NULL;
	v->peername = NULL;
	kp_lock(&tls_lock);
	HASH_ADD_PTR(handles, ssl, h);
	bool added = h->hh.tbl != NULL;
	if (added) {
		__atomic_store_n(&kp_tls_used, true, __ATOMIC_RELEASE);
		__atomic_store_n(&kp_tls_foreign_ever, true, __ATOMIC_RELEASE);
		/* the handshake its own would have made, counted where libssl
		 * counts it (as kp_tls_handout; it offers no session of its
		 * own: the gate) */
		stat_add(ssl, STAT_CONNECT, 1);
		stat_add(ssl, STAT_GOOD, 1);
	}
	kp_unlock(&tls_lock);
	if (!added) {
		handle_free(h);
		engine_free(e);
		*why = "no memory";
		return NULL;
	}
	return e;
}

struct kp_tls *kp_tls_across_claim(void *ssl_, const struct pool_key *key, int fd, const uint8_t name[32],
				   unsigned char *msg, size_t len, const char **whyp)
{
	SSL *ssl = ssl_;
	uint8_t own[32];
	int mode = hand_mode();
	const char *why = NULL;
	if (mode == HAND_OFF || !kp_ssl_bind() || !shim_ctx_get())
		why = "no hand-out across processes here";
	else if (across_name(ssl, own) < 0)
		why = "the program's settings make no name";
	else if (memcmp(own, name, sizeof(own)))
		why = "made under another configuration (its name)";
	struct conn_verdict v = { 0 };
	if (!why)
		why = across_conn_why(ssl, key, msg, len, &v, mode != HAND_TEST);
	struct kp_tls *e = NULL;
	if (why) {
		kp_ssl.OPENSSL_cleanse(msg, len);
		free(msg);
	} else {
		e = foreign_engine(ssl, msg, len, fd, name, &v, &why); /* msg is the import's */
	}
	verdict_free(&v);
	if (!e)
		kp_across_note("across: a connection from the broker not taken: %s", why);
	*whyp = why;
	return e;
}

/* Its own handshake on a connection we follow starts: its secrets and
 * record counts are taken for an export at park (tls_capture.h). */
void kp_tls_capture_own(SSL *ssl)
{
	if (!kp_cfg.tls_across)
		return;
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	bool follow = h && h->e && h->e->ssl == ssl;
	bool prog_msg = conf_of(ssl)->msg_cb != NULL;
	kp_unlock(&tls_lock);
	if (follow)
		kp_tls_capture_begin(ssl, prog_msg);
}

bool kp_tls_ctx_seen;

bool kp_tls_across_at_connect(void)
{
	/* (libssl bound already by then: nothing here allocates, as
	 * connect() may run in a signal handler) */
	return (__atomic_load_n(&kp_tls_ctx_seen, __ATOMIC_ACQUIRE) || __atomic_load_n(&kp_tls_linked, __ATOMIC_ACQUIRE)) &&
	       hand_mode() == HAND_ON && kp_ssl_bind();
}

long kp_tls_across_left(const unsigned char *msg, size_t len)
{
	struct tlsx_state st;
	const char *why = NULL;
	long left = 0;
	memset(&st, 0, sizeof(st));
	if (tlsx_decode(msg, len, &st, &why) == 0 && st.session.p) {
		const unsigned char *q = st.session.p;
		SSL_SESSION *s = kp_ssl.d2i_SSL_SESSION(NULL, &q, (long)st.session.len);
		if (s) {
			left = kp_ssl.SSL_SESSION_get_timeout(s) - ((long)time(NULL) - kp_ssl.SSL_SESSION_get_time(s));
			kp_ssl.SSL_SESSION_free(s);
		}
	}
	tlsx_wipe(&st);
	return left;
}

struct kp_tls *kp_tls_across_take(void *ssl_, const struct pool_key *key, int fd, int *sock,
				  struct pool_meta *meta)
{
	*sock = -1;
	SSL *ssl = ssl_;
	uint8_t name[32];
	if (hand_mode() == HAND_OFF || !kp_ssl_bind() || !shim_ctx_get() || across_name(ssl, name) < 0)
		return NULL;
	unsigned char *buf = malloc(BK_TLS_MAX);
	size_t len = 0;
	int p = buf ? kp_broker_tls_get(key, name, meta, buf, BK_TLS_MAX, &len) : -1;
	if (p < 0) {
		if (buf)
			kp_ssl.OPENSSL_cleanse(buf, BK_TLS_MAX);
		free(buf);
		return NULL;
	}
	const char *why;
	struct kp_tls *e = kp_tls_across_claim(ssl, key, fd, name, buf, len, &why); /* buf is its */
	if (!e) {
		kp_real.close(p);
		return NULL;
	}
	*sock = p;
	return e;
}

void kp_tls_across_drop(struct kp_tls *e, void *ssl)
{
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	if (h && h->e == e) {
		HASH_DEL(handles, h);
		engine_unref(e);
	} else {
		h = NULL;
	}
	bool last = engine_unref(e);
	kp_unlock(&tls_lock);
	if (h)
		handle_free(h);
	if (last)
		engine_free(e);
}

/* Under KEEPALIVE_TLS_ACROSS: e's whole state as the export message, at a
 * record boundary with nothing pending (kp_tls_park checked it); leaving:
 * the pool will not keep it, the state goes to the broker (TLS 1.3).
 * True when the connection is spent (in the test build: proving the
 * export, or put at park). */
static bool state_export(struct kp_tls *e, int hidden, const struct pool_key *key, const struct pool_meta *meta,
			 bool leaving)
{
	unsigned char *msg = NULL;
	const char *why = NULL;
	size_t conf_len = 0;
	kp_lock(&tls_lock);
	unsigned char *conf = conn_record(e, &conf_len);
	/* a resumed handshake holds no peer chain (a session keeps the leaf
	 * only): the chain the resumed ticket came with, as ticket_keep takes
	 * it; the receiving process verifies it again */
	STACK_OF(X509) *peer = NULL;
	X509 *leaf = kp_ssl.SSL_get0_peer_certificate(e->ssl);
	if (!kp_ssl.SSL_get_peer_cert_chain(e->ssl) && leaf)
		peer = ticket_chain_of(key, e->sni, leaf);
	kp_unlock(&tls_lock);
	long len = conf ? kp_tls_capture_export(e->ssl, conf, conf_len, peer, &msg, &why) : -1;
	free(conf);
	if (peer)
		kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)peer, (void (*)(void *))kp_ssl.X509_free);
	if (len < 0) {
		kp_debug("TLS connection not exportable: %s", conf ? why : "no configuration record");
		return false;
	}
	/* the message's first bytes after the magic: version, cipher */
	kp_debug("TLS connection exportable: %ld bytes, version %02x%02x, cipher %u, configuration record %zu bytes",
		 len, msg[4], msg[5], (unsigned)(msg[6] << 8 | msg[7]), conf_len);
	if (leaving && kp_ssl.SSL_version(e->ssl) >= TLS1_3_VERSION)
		return state_to_broker(e, hidden, key, meta, msg, len);
#ifdef KP_TEST_ACROSS_VERIFY
	/* KP_TEST_ACROSS_AFTER=N: proved at the park after N parks (its
	 * counts kept through N in-process hand-outs), parked before */
	const char *after = getenv("KP_TEST_ACROSS_AFTER");
	if (!leaving && !(after && e->parks < (unsigned)atoi(after))) {
		if (across_broker_test() || across_hand_test())
			return state_to_broker(e, hidden, key, meta, msg, len);
		state_verify(msg, len, hidden);
		return true;
	}
#endif
	kp_ssl.OPENSSL_cleanse(msg, (size_t)len);
	free(msg);
	return false;
}

/* A connection parked here (hidden, to key) that the process's pool will
 * not keep (pushed out by its caps, or the process exiting): under
 * KEEPALIVE_TLS_ACROSS its TLS 1.3 state goes to the broker beside its
 * socket, our KeyUpdate first (state_key_update), for another process
 * (docs/tls-across.md "The hand-out in the library").  Only while the
 * library is its one owner: the program freed its SSL (the engine's BIO
 * is ours), nothing pending, never handed out since.  True: the engine is
 * taken out of the parked ones and freed, the state gone or not; the
 * caller closes its socket as the pool would have.  False: as before. */
bool kp_tls_across_leave(int hidden, const struct pool_key *key, const struct pool_meta *meta)
{
	if (hand_mode() != HAND_ON || !__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE) || !shim_ctx_get())
		return false;
	struct kp_tls *e;
	kp_lock(&tls_lock);
	HASH_FIND_INT(parked, &hidden, e);
	bool ours = e && e->refs == 1 && e->own_bio && !e->dead && !e->im && !e->foreign && !handle_find(e->ssl) &&
		    kp_ssl.SSL_version(e->ssl) >= TLS1_3_VERSION;
	if (ours)
		HASH_DEL(parked, e);
	kp_unlock(&tls_lock);
	if (!ours)
		return false;
	bool gone = !kp_ssl.SSL_has_pending(e->ssl) && !kp_ssl.SSL_get_shutdown(e->ssl) &&
		    kp_ssl.SSL_is_init_finished(e->ssl) && state_export(e, hidden, key, meta, true);
	if (!gone) /* it ends here: the close_notify owed, through its SSL */
		kp_tls_goodbye(e, hidden);
	kp_tls_put(e);
	return true;
}

/* A connection taken from another process, done with here: its state now
 * (tlsf_export: only at rest) goes on to the broker beside its socket,
 * under the name it was taken under, after our KeyUpdate (TLS 1.3:
 * state_key_update), for the next process (docs/tls-across.md "The hand-out
 * in another process").  Never parked here: no SSL of ours carries it. */
static void foreign_out(struct kp_tls *e, int hidden, const struct pool_key *key, const struct pool_meta *meta)
{
	struct tlsx_state st;
	const char *why = NULL;
	unsigned char *msg = NULL;
	size_t cap = 0;
	if (tlsf_export(&e->im->f, &st, &why) == 0) {
		cap = tlsx_encoded_len(&st);
		if (cap > TLSX_MAX || !(msg = malloc(cap)) || tlsx_encode(&st, msg, cap, &why) < 0) {
			if (msg)
				kp_ssl.OPENSSL_cleanse(msg, cap);
			free(msg);
			msg = NULL;
			why = why ? why : "no memory";
		}
		tlsx_wipe(&st);
	}
	/* kept no longer than its session (what it may be resumed by) */
	const unsigned char *q = e->im->st.session.p;
	SSL_SESSION *s = q ? kp_ssl.d2i_SSL_SESSION(NULL, &q, (long)e->im->st.session.len) : NULL;
	long left = s ? kp_ssl.SSL_SESSION_get_timeout(s) - ((long)time(NULL) - kp_ssl.SSL_SESSION_get_time(s)) : 0;
	if (s)
		kp_ssl.SSL_SESSION_free(s);
	if (msg && left < 2)
		why = "its session ends";
	/* (the close_notify owed: for the broker, or sent as it ends here) */
	uint8_t bye[BK_TAIL_MAX];
	if (msg && !why && (msg = state_key_update(msg, &cap, hidden))) {
		size_t bye_len = goodbye_seal(e, msg, cap, bye);
		bool sent = kp_broker_tls_put(key, e->im->name, (uint32_t)(left - 1), hidden, meta, msg, cap, bye,
					      bye_len) == 0;
		kp_across_note("across: the connection %s the broker (%zu bytes)", sent ? "passed on to" : "not taken by", cap);
		if (!sent)
			goodbye_send(hidden, bye, bye_len);
	} else {
		kp_across_note("across: the connection not passed on: %s", why ? why : "its KeyUpdate not sent");
		if (msg) /* (the state at rest, no KeyUpdate of ours sent) */
			goodbye_send(hidden, bye, goodbye_seal(e, msg, cap, bye));
	}
	if (msg) {
		kp_ssl.OPENSSL_cleanse(msg, cap);
		free(msg);
	}
}

bool kp_tls_park(struct kp_tls *e, int hidden, void *user, const struct pool_key *key,
		 const struct pool_meta *meta)
{
	if (e->im) {
		/* (only the foreign engine carries it: not parked here) */
		if (!e->dead && hand_mode() != HAND_OFF)
			foreign_out(e, hidden, key, meta);
		/* closed here (its socket went on, or is spent): a program's
		 * SSL still alive (closed before SSL_free) is answered as a
		 * closed handle (EBADF), its engine never writes to the number
		 * again */
		kp_lock(&tls_lock);
		struct handle *h = user ? handle_find(user) : NULL;
		if (h && h->e == e)
			h->closed = true;
		e->dead = true;
		kp_unlock(&tls_lock);
		return false;
	}
	if (e->dead || !shim_ctx_get())
		return false;
	if (kp_ssl.SSL_has_pending(e->ssl) || kp_ssl.SSL_get_shutdown(e->ssl) ||
	    !kp_ssl.SSL_is_init_finished(e->ssl))
		return false;
	if (kp_cfg.tls_across && !e->foreign && state_export(e, hidden, key, meta, false))
		return false;
	kp_lock(&tls_lock);
	bool ok = true;
	note_cert(e);
	kp_debug("TLS connection parked, its first SSL %s", e->own_bio ? "freed" : "still held");
	/* a handshake made behind the program's back (kp_tls_rehandshake: a
	 * replay on a fresh connection) never came through kp_tls_handshake */
	if (!e->full.known && !kp_ssl.SSL_session_reused(e->ssl))
		full_read(e->ssl, &e->full);
	int close_flag = BIO_NOCLOSE, prog_fd = e->own_bio ? -1 : prog_socket_bio(e->ssl, &close_flag);
	if (prog_fd >= 0 && close_flag != BIO_NOCLOSE) {
		/* its SSL_free would close the number again (whatever it names
		 * by then), as without the library only if the socket is gone */
		ok = false;
	} else if (prog_fd >= 0) {
		/* the program's SSL is alive (not freed) and speaks through a
		 * socket BIO: left as it is, its BIO naming the program's closed
		 * descriptor (SSL_get_fd, and a call that writes, see the same
		 * number as without the library: kept_own), until the program
		 * frees it (detach_program then, onto e->fd) or resets it
		 * (SSL_clear, restore_program) */
		e->prog_fd = prog_fd;
		e->prog_close = close_flag;
		e->fd = hidden;
	} else if (handle_find(e->ssl)) {
		/* the program's SSL is alive with a BIO of its own: parked as
		 * it is, and handed out only once the program frees it
		 * (kp_tls_free detaches it then, onto e->fd); detaching a live
		 * SSL would take its ex_data and context from under it
		 * (docs/tls.md "The first owner's SSL") */
		e->fd = hidden;
	} else {
		ok = detach_program(e, hidden, true) == 0;
	}
	if (ok) {
		e->key = *key;
		e->key_known = true;
		struct handle *h = user ? handle_find(user) : NULL;
		if (h && h->e == e)
			h->closed = true;
		/* the program's own SSL may still be alive (Ruby frees it at GC) */
		h = handle_find(e->ssl);
		if (h && h->e == e)
			h->closed = true;
		HASH_ADD_INT(parked, fd, e);
		e->parks++;
	}
	kp_unlock(&tls_lock);
	if (ok) /* e->cert says which client certificate it carries */
		ticket_keep(e, key);
	return ok;
}
