/*
 * tls.c - whole TLS connections in the pool: engines and handles (tls.h).
 *
 * A TLS connection is handed only to a program that would have accepted
 * it from a handshake of its own: the same destination (the pool's key),
 * SNI, offered ALPN, client certificate and protocol limits, and its own
 * verification (trust store, verify parameters such as the hostname,
 * verify callback) passing on the connection's peer chain, run afresh for
 * each hand-out as OpenSSL's ssl_verify_cert_chain() runs it.  The
 * verification result the program reads is that one, never the engine's.
 */
#include "tls.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/err.h>
#include <uthash.h>

#include "config.h"
#include "conn.h"
#include "fdtable.h"
#include "real.h"
#include "tls_real.h"

__thread void *kp_tls_handshaking;
bool kp_tls_used;

/* wait at most this long for a TLS record to go out, or for the handshake
 * a fresh connection makes behind the program's back */
#define TLS_WAIT_MS 30000

struct kp_tls {
	SSL *ssl;
	int refs;            /* handles mapped to it, the socket carrying it */
	int fd;              /* where its BIO writes (or the program's BIO did) */
	bool own_bio;        /* the program's BIO and callbacks are detached */
	bool dead;           /* its socket went away under it: never parked */
	bool foreign;        /* ssl is the program's again (SSL_clear): never freed */
	char *sni;           /* what its handshake asked for */
	unsigned char *alpn;
	unsigned alpn_len;
	X509 *cert;          /* the client certificate it had (NULL: none) */
	int seclevel;        /* the security level its handshake ran at */
	UT_hash_handle hh;   /* in parked, by fd */
};

/* a program's SSL that we follow */
struct handle {
	SSL *ssl;
	struct kp_tls *e;    /* answers for it (e->ssl == ssl: its own) */
	int fd;
	bool closed;         /* its fd was closed and its engine parked */
	int synth_err;       /* SSL_get_error() for a result we made up */
	int shut;            /* SSL_get_shutdown() bits we made up */
	bool verified;       /* handed out: verify_result/vchain are its own */
	long verify_result;
	STACK_OF(X509) *vchain;
	char *peername;      /* the name our verification matched */
	UT_hash_handle hh;
};

/* ALPN lists the program offered (no getter exists), and contexts with an
 * application verify callback (no getter either): by object address */
struct record {
	const void *obj;
	unsigned char *alpn;
	unsigned alpn_len;
	bool app_verify;
	int defer_fd;        /* + 1: kp_tls_defer */
	UT_hash_handle hh;
};

/* The fallback where no pooled connection can serve: the newest session
 * of a parked connection per destination and SNI, with what its handshake
 * asked for and the peer chain it verified (a resumed handshake skips the
 * certificate: the program's own verification runs on this chain before
 * the session is offered). */
struct ticket {
	struct pool_key key;
	char *sni;
	unsigned char *alpn;
	unsigned alpn_len;
	X509 *cert;
	int seclevel;
	SSL_SESSION *sess;
	X509 *leaf;
	STACK_OF(X509) *chain;
	struct ticket *next;
};
#define MAX_TICKETS 64

static pthread_mutex_t tls_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ticket *tickets; /* newest first */
static struct handle *handles;
static struct kp_tls *parked;
static struct record *records;
static SSL_CTX *shim_ctx; /* parked engines belong to it: no program callbacks */


static struct handle *handle_find(const SSL *ssl);
static bool engine_unref(struct kp_tls *e);
static void engine_free(struct kp_tls *e);
static void handle_free(struct handle *h);
static void ticket_keep(struct kp_tls *e, const struct pool_key *key);

/* ------------------------------------------------------------ records */

static struct record *record_get(const void *obj, bool create)
{
	struct record *r;
	HASH_FIND_PTR(records, &obj, r);
	if (!r && create && (r = calloc(1, sizeof(*r)))) {
		r->obj = obj;
		HASH_ADD_PTR(records, obj, r);
	}
	return r;
}

static void record_drop(const void *obj)
{
	struct record *r;
	HASH_FIND_PTR(records, &obj, r);
	if (r) {
		HASH_DEL(records, r);
		free(r->alpn);
		free(r);
	}
}

static int record_alpn(struct record *r, const unsigned char *p, unsigned len)
{
	unsigned char *copy = len ? malloc(len) : NULL;
	if (len && !copy)
		return -1;
	if (len)
		memcpy(copy, p, len);
	free(r->alpn);
	r->alpn = copy;
	r->alpn_len = len;
	return 0;
}

void kp_tls_note_alpn(const void *obj, const unsigned char *p, unsigned len)
{
	pthread_mutex_lock(&tls_lock);
	struct record *r = record_get(obj, true);
	if (r && record_alpn(r, p, len) < 0)
		r->app_verify = true; /* offer unknown (out of memory): never hand out */
	pthread_mutex_unlock(&tls_lock);
}

void kp_tls_note_app_verify(const void *ctx, bool on)
{
	pthread_mutex_lock(&tls_lock);
	struct record *r = record_get(ctx, on);
	if (r)
		r->app_verify = on;
	pthread_mutex_unlock(&tls_lock);
}

void kp_tls_defer(void *ssl, int fd)
{
	pthread_mutex_lock(&tls_lock);
	struct record *r = record_get(ssl, true);
	if (r)
		r->defer_fd = fd + 1;
	pthread_mutex_unlock(&tls_lock);
}

static int deferred_fd(SSL *ssl)
{
	pthread_mutex_lock(&tls_lock);
	struct record *r = record_get(ssl, false);
	int fd = r ? r->defer_fd - 1 : -1;
	if (r)
		r->defer_fd = 0;
	pthread_mutex_unlock(&tls_lock);
	return fd;
}

/* A new object at an address: nothing recorded of an older one applies;
 * an SSL starts with its context's ALPN list. */
void kp_tls_note_new(const void *obj, const void *ctx)
{
	pthread_mutex_lock(&tls_lock);
	record_drop(obj);
	/* an SSL freed behind our back (never seen by SSL_free): its handle
	 * must not answer for the new one */
	struct handle *stale = ctx ? handle_find(obj) : NULL;
	struct kp_tls *drop = NULL;
	if (stale) {
		HASH_DEL(handles, stale);
		if (stale->e->ssl == obj)
			stale->e->dead = stale->e->foreign = true;
		if (engine_unref(stale->e))
			drop = stale->e;
	}
	struct record *cr = ctx ? record_get(ctx, false) : NULL;
	if (cr) {
		struct record *r = record_get(obj, true);
		if (r && (record_alpn(r, cr->alpn, cr->alpn_len) < 0 || cr->app_verify))
			r->app_verify = true;
	}
	pthread_mutex_unlock(&tls_lock);
	if (stale)
		handle_free(stale);
	if (drop)
		engine_free(drop);
}

/* ------------------------------------------------------------ engines */

static struct handle *handle_find(const SSL *ssl)
{
	struct handle *h;
	HASH_FIND_PTR(handles, &ssl, h);
	return h;
}

static void engine_free(struct kp_tls *e)
{
	if (!e->foreign) {
		/* a clean end for OpenSSL: no session removal (the first
		 * owner's remove-session callback) for a connection never shut */
		kp_ssl.SSL_set_shutdown(e->ssl, SSL_SENT_SHUTDOWN);
		kp_ssl.SSL_free(e->ssl);
	}
	if (e->cert)
		kp_ssl.X509_free(e->cert);
	free(e->sni);
	free(e->alpn);
	free(e);
}

/* Caller holds tls_lock.  True when the caller must engine_free(e) after
 * letting go of the lock. */
static bool engine_unref(struct kp_tls *e)
{
	return --e->refs == 0;
}

void kp_tls_put(struct kp_tls *e)
{
	pthread_mutex_lock(&tls_lock);
	bool last = engine_unref(e);
	pthread_mutex_unlock(&tls_lock);
	if (last)
		engine_free(e);
}

static void handle_free(struct handle *h)
{
	free(h->peername);
	if (h->vchain)
		kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)h->vchain, (void (*)(void *))kp_ssl.X509_free);
	free(h);
}

struct kp_tls *kp_tls_bind(void *ssl_, int fd)
{
	SSL *ssl = ssl_;
	if (!kp_ssl_bind())
		return NULL;
	struct kp_tls *e = calloc(1, sizeof(*e));
	struct handle *h = calloc(1, sizeof(*h));
	const char *sni;
	sni = kp_ssl.SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	if (!e || !h || (sni && !(e->sni = strdup(sni))))
		goto fail;
	pthread_mutex_lock(&tls_lock);
	struct record *r = record_get(ssl, false);
	if (handle_find(ssl) || (r && r->app_verify) ||
	    (r && r->alpn_len && !(e->alpn = malloc(r->alpn_len)))) {
		pthread_mutex_unlock(&tls_lock);
		goto fail;
	}
	if (r && r->alpn_len) {
		memcpy(e->alpn, r->alpn, r->alpn_len);
		e->alpn_len = r->alpn_len;
	}
	e->ssl = ssl;
	e->fd = fd;
	e->seclevel = kp_ssl.SSL_get_security_level(ssl);
	e->refs = 2; /* its own handle, and the connection */
	h->ssl = ssl;
	h->e = e;
	h->fd = fd;
	HASH_ADD_PTR(handles, ssl, h);
	__atomic_store_n(&kp_tls_used, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&tls_lock);
	kp_debug("fd %d: following the TLS connection of SSL %p", fd, (void *)ssl);
	return e;
fail:
	if (e)
		free(e->sni);
	free(e);
	free(h);
	return NULL;
}

/* The program is done with e's SSL as its own object (freed it, or closed
 * its socket to park it): give e a BIO of ours on fd, and cut every path by
 * which OpenSSL could call back into the program: callbacks, ex_data (its
 * objects behind them), and the context (its session and info callbacks).
 * Caller holds tls_lock. */
static int detach_program(struct kp_tls *e, int fd)
{
	if (e->own_bio) {
		kp_ssl.BIO_int_ctrl(kp_ssl.SSL_get_rbio(e->ssl), BIO_C_SET_FD, BIO_NOCLOSE, fd);
		e->fd = fd;
		return 0;
	}
	if (!shim_ctx) {
		shim_ctx = kp_ssl.SSL_CTX_new(kp_ssl.TLS_client_method());
		if (!shim_ctx)
			return -1;
	}
	BIO *b = kp_ssl.BIO_new_socket(fd, BIO_NOCLOSE);
	if (!b)
		return -1;
	kp_ssl.SSL_set_bio(e->ssl, b, b); /* frees the program's BIO (curl's) now */
	X509 *cert = kp_ssl.SSL_get_certificate(e->ssl);
	if (cert && kp_ssl.X509_up_ref(cert))
		e->cert = cert;
	kp_ssl.SSL_set_info_callback(e->ssl, NULL);
	kp_ssl.SSL_set_msg_callback(e->ssl, NULL);
	kp_ssl.SSL_set_verify(e->ssl, kp_ssl.SSL_get_verify_mode(e->ssl), NULL);
	/* a server's renegotiation would verify against nobody's trust now */
	kp_ssl.SSL_set_options(e->ssl, SSL_OP_NO_RENEGOTIATION);
	for (int i = 0; i < 32; i++)
		kp_ssl.SSL_set_ex_data(e->ssl, i, NULL);
	SSL_CTX *ctx = kp_ssl.SSL_set_SSL_CTX(e->ssl, shim_ctx);
	e->own_bio = true;
	e->fd = fd;
	return ctx == shim_ctx ? 0 : -1;
}

bool kp_tls_park(struct kp_tls *e, int hidden, void *user, const struct pool_key *key)
{
	if (e->dead)
		return false;
	if (kp_ssl.SSL_has_pending(e->ssl) || kp_ssl.SSL_get_shutdown(e->ssl) ||
	    !kp_ssl.SSL_is_init_finished(e->ssl))
		return false;
	pthread_mutex_lock(&tls_lock);
	bool ok = detach_program(e, hidden) == 0;
	if (ok) {
		struct handle *h = user ? handle_find(user) : NULL;
		if (h && h->e == e)
			h->closed = true;
		/* the program's own SSL may still be alive (Ruby frees it at GC) */
		h = handle_find(e->ssl);
		if (h && h->e == e)
			h->closed = true;
		HASH_ADD_INT(parked, fd, e);
	}
	pthread_mutex_unlock(&tls_lock);
	if (ok) /* detached: e->cert says which client certificate it carries */
		ticket_keep(e, key);
	return ok;
}

struct kp_tls *kp_tls_unpark(int hidden)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return NULL;
	struct kp_tls *e;
	pthread_mutex_lock(&tls_lock);
	HASH_FIND_INT(parked, &hidden, e);
	if (e)
		HASH_DEL(parked, e);
	pthread_mutex_unlock(&tls_lock);
	return e;
}

bool kp_tls_is_parked(int hidden)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return false;
	struct kp_tls *e;
	pthread_mutex_lock(&tls_lock);
	HASH_FIND_INT(parked, &hidden, e);
	pthread_mutex_unlock(&tls_lock);
	return e != NULL;
}

/* ------------------------------------------------------------ hand-out */

static bool same_str(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* What a past handshake asked for and got: a pooled engine's, or a
 * cached session's. */
struct shape {
	const char *sni;
	const unsigned char *alpn;
	unsigned alpn_len;
	X509 *cert;
	int seclevel;
	int version;
};

/* What a handshake of ssl's own would have asked differently, or under
 * stricter rules than the handshake that made sh.  Caller holds tls_lock. */
static const char *shape_mismatch(const struct shape *sh, SSL *ssl)
{
	const char *sni = kp_ssl.SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	if (!same_str(sni, sh->sni))
		return "SNI";
	struct record *r = record_get(ssl, false);
	struct record *cr = record_get(kp_ssl.SSL_get_SSL_CTX(ssl), false);
	if ((r && r->app_verify) || (cr && cr->app_verify))
		return "an application verify callback";
	unsigned alen = r ? r->alpn_len : 0;
	if (alen != sh->alpn_len || (alen && memcmp(r->alpn, sh->alpn, alen)))
		return "ALPN offered";
	X509 *cert = kp_ssl.SSL_get_certificate(ssl);
	if (!cert != !sh->cert || (cert && kp_ssl.X509_cmp(cert, sh->cert)))
		return "client certificate";
	int ver = sh->version;
	long min = kp_ssl.SSL_ctrl(ssl, SSL_CTRL_GET_MIN_PROTO_VERSION, 0, NULL);
	long max = kp_ssl.SSL_ctrl(ssl, SSL_CTRL_GET_MAX_PROTO_VERSION, 0, NULL);
	uint64_t opts = kp_ssl.SSL_get_options(ssl);
	if ((min && ver < min) || (max && ver > max) ||
	    (ver == TLS1_3_VERSION && (opts & SSL_OP_NO_TLSv1_3)) ||
	    (ver == TLS1_2_VERSION && (opts & SSL_OP_NO_TLSv1_2)) ||
	    (ver == TLS1_1_VERSION && (opts & SSL_OP_NO_TLSv1_1)) ||
	    (ver == TLS1_VERSION && (opts & SSL_OP_NO_TLSv1)))
		return "protocol version";
	/* a stricter program would have refused keys, groups or signatures
	 * its handshake allowed */
	if (kp_ssl.SSL_get_security_level(ssl) > sh->seclevel)
		return "security level";
	if (kp_ssl.SSL_ctrl(ssl, SSL_CTRL_CERT_FLAGS, 0, NULL) & SSL_CERT_FLAG_SUITEB_128_LOS)
		return "Suite B";
	if (kp_ssl.SSL_ctrl(ssl, SSL_CTRL_GET_TLSEXT_STATUS_REQ_TYPE, 0, NULL) != -1)
		return "OCSP stapling asked";
	if (kp_ssl.SSL_ct_is_enabled(ssl))
		return "certificate transparency";
	return NULL;
}

/* ... and for a pooled engine, also what the server chose.  Caller holds
 * tls_lock. */
static const char *mismatch(struct kp_tls *e, SSL *ssl)
{
	struct shape sh = { e->sni, e->alpn, e->alpn_len, e->cert, e->seclevel,
			    kp_ssl.SSL_version(e->ssl) };
	const char *why = shape_mismatch(&sh, ssl);
	if (why)
		return why;
	const unsigned char *sel;
	unsigned sel_len;
	kp_ssl.SSL_get0_alpn_selected(e->ssl, &sel, &sel_len);
	if (sel_len && !(sel_len == 8 && !memcmp(sel, "http/1.1", 8)))
		return "ALPN selected";
	const SSL_CIPHER *cur = kp_ssl.SSL_get_current_cipher(e->ssl);
	STACK_OF(SSL_CIPHER) *allowed = kp_ssl.SSL_get_ciphers(ssl);
	bool found = false;
	for (int i = 0; cur && allowed && i < kp_ssl.OPENSSL_sk_num((OPENSSL_STACK *)allowed); i++)
		found |= kp_ssl.SSL_CIPHER_get_id(kp_ssl.OPENSSL_sk_value(
				 (OPENSSL_STACK *)allowed, i)) == kp_ssl.SSL_CIPHER_get_id(cur);
	return found ? NULL : "cipher";
}

/* ssl's own verification of a peer chain (leaf, untrusted), as OpenSSL's
 * handshake runs it (ssl/statem: ssl_verify_cert_chain).  Returns the
 * verify callback's (or X509_verify_cert's) verdict, > 0 for good, with
 * the error, the verified chain and the name matched. */
static int verify_as(SSL *ssl, X509 *leaf, STACK_OF(X509) *untrusted, long *result,
		     STACK_OF(X509) **chain, char **peername)
{
	X509_STORE *store = NULL;
	kp_ssl.SSL_ctrl(ssl, SSL_CTRL_GET_VERIFY_CERT_STORE, 0, &store);
	if (!store)
		store = kp_ssl.SSL_CTX_get_cert_store(kp_ssl.SSL_get_SSL_CTX(ssl));
	X509_STORE_CTX *sctx = kp_ssl.X509_STORE_CTX_new();
	int ok = 0;
	*result = X509_V_ERR_UNSPECIFIED;
	*chain = NULL;
	*peername = NULL;
	if (!leaf || !store || !sctx || !kp_ssl.X509_STORE_CTX_init(sctx, store, leaf, untrusted) ||
	    !kp_ssl.X509_STORE_CTX_set_ex_data(sctx, kp_ssl.SSL_get_ex_data_X509_STORE_CTX_idx(), ssl))
		goto out;
	kp_ssl.X509_STORE_CTX_set_default(sctx, "ssl_server");
	X509_VERIFY_PARAM *param = kp_ssl.X509_STORE_CTX_get0_param(sctx);
	kp_ssl.X509_VERIFY_PARAM_set1(param, kp_ssl.SSL_get0_param(ssl));
	kp_ssl.X509_VERIFY_PARAM_set_auth_level(param, kp_ssl.SSL_get_security_level(ssl));
	SSL_verify_cb cb = kp_ssl.SSL_get_verify_callback(ssl);
	if (cb)
		kp_ssl.X509_STORE_CTX_set_verify_cb(sctx, cb);
	ok = kp_ssl.X509_verify_cert(sctx);
	*result = kp_ssl.X509_STORE_CTX_get_error(sctx);
	*chain = kp_ssl.X509_STORE_CTX_get1_chain(sctx);
	const char *pn = kp_ssl.X509_VERIFY_PARAM_get0_peername(param);
	*peername = pn ? strdup(pn) : NULL;
out:
	if (sctx)
		kp_ssl.X509_STORE_CTX_free(sctx);
	return ok;
}

int kp_tls_handout(struct kp_tls *e, void *ssl_, int fd)
{
	SSL *ssl = ssl_;
	if (!kp_ssl_bind() || e->dead)
		return -1;
	struct handle *h = calloc(1, sizeof(*h));
	if (!h)
		return -1;
	pthread_mutex_lock(&tls_lock);
	const char *why = handle_find(ssl) ? "the SSL is already in use" : mismatch(e, ssl);
	pthread_mutex_unlock(&tls_lock);
	long result = 0;
	STACK_OF(X509) *chain = NULL;
	char *peername = NULL;
	if (!why) {
		/* the program's verify callback runs here, as in a handshake: no
		 * lock of ours held.  Its errors stay off the program's queue. */
		kp_ssl.ERR_set_mark();
		int ok = verify_as(ssl, kp_ssl.SSL_get0_peer_certificate(e->ssl),
				   kp_ssl.SSL_get_peer_cert_chain(e->ssl), &result, &chain, &peername);
		kp_ssl.ERR_pop_to_mark();
		if (ok <= 0 && (kp_ssl.SSL_get_verify_mode(ssl) & SSL_VERIFY_PEER)) {
			why = "the program's verification fails on it";
			kp_debug("fd %d: verification error %ld", fd, result);
		}
	}
	if (why) {
		free(peername);
		if (chain)
			kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)chain, (void (*)(void *))kp_ssl.X509_free);
		free(h);
		kp_count(tls_declined);
		kp_debug("fd %d: pooled TLS connection not handed out: %s", fd, why);
		return -1;
	}
	/* the engine does the program's I/O now: the program's modes apply */
	long mode = kp_ssl.SSL_ctrl(ssl, SSL_CTRL_MODE, 0, NULL);
	kp_ssl.SSL_ctrl(e->ssl, SSL_CTRL_CLEAR_MODE, ~0L, NULL);
	kp_ssl.SSL_ctrl(e->ssl, SSL_CTRL_MODE, mode | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER, NULL);
	kp_ssl.BIO_int_ctrl(kp_ssl.SSL_get_rbio(e->ssl), BIO_C_SET_FD, BIO_NOCLOSE, fd);
	pthread_mutex_lock(&tls_lock);
	e->fd = fd;
	e->refs++;
	h->ssl = ssl;
	h->e = e;
	h->fd = fd;
	h->verified = true;
	h->verify_result = result;
	h->vchain = chain;
	h->peername = peername;
	HASH_ADD_PTR(handles, ssl, h);
	pthread_mutex_unlock(&tls_lock);
	kp_count(tls_reused);
	return 0;
}

/* ------------------------------------------------------------ resumption */

static void ticket_free(struct ticket *t)
{
	kp_ssl.SSL_SESSION_free(t->sess);
	if (t->leaf)
		kp_ssl.X509_free(t->leaf);
	if (t->chain)
		kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)t->chain, (void (*)(void *))kp_ssl.X509_free);
	if (t->cert)
		kp_ssl.X509_free(t->cert);
	free(t->sni);
	free(t->alpn);
	free(t);
}

/* Keep e's session for key, replacing the one of the same destination and
 * SNI.  Only a session whose handshake verified its peer (X509_V_OK):
 * resumed, it tells the program "verified", so it is offered only where
 * the program's own verification also says so. */
static void ticket_keep(struct kp_tls *e, const struct pool_key *key)
{
	SSL_SESSION *sess = kp_ssl.SSL_get1_session(e->ssl);
	if (!sess)
		return;
	struct ticket *t = calloc(1, sizeof(*t));
	STACK_OF(X509) *chain = kp_ssl.SSL_get_peer_cert_chain(e->ssl);
	if (!t || !kp_ssl.SSL_SESSION_is_resumable(sess) ||
	    kp_ssl.SSL_get_verify_result(e->ssl) != X509_V_OK ||
	    !(t->leaf = kp_ssl.SSL_get1_peer_certificate(e->ssl)) ||
	    (chain && !(t->chain = kp_ssl.X509_chain_up_ref(chain))) ||
	    (e->sni && !(t->sni = strdup(e->sni))) ||
	    (e->alpn_len && !(t->alpn = malloc(e->alpn_len)))) {
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
	if (e->alpn_len)
		memcpy(t->alpn, e->alpn, e->alpn_len);
	t->alpn_len = e->alpn_len;
	if (e->cert && kp_ssl.X509_up_ref(e->cert))
		t->cert = e->cert;
	t->seclevel = e->seclevel;
	struct ticket *drop = NULL, **pp;
	pthread_mutex_lock(&tls_lock);
	unsigned n = 0;
	for (pp = &tickets; *pp;) {
		struct ticket *o = *pp;
		if ((!memcmp(&o->key, key, sizeof(*key)) && same_str(o->sni, t->sni)) ||
		    ++n >= MAX_TICKETS) {
			*pp = o->next;
			o->next = drop;
			drop = o;
			continue;
		}
		pp = &o->next;
	}
	t->next = tickets;
	tickets = t;
	pthread_mutex_unlock(&tls_lock);
	while (drop) {
		struct ticket *o = drop;
		drop = o->next;
		ticket_free(o);
	}
}

void kp_tls_offer_session(void *ssl_, const struct pool_key *key)
{
	SSL *ssl = ssl_;
	if (!kp_ssl_bind() || !__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE) ||
	    kp_ssl.SSL_get_session(ssl)) /* the program resumes one of its own */
		return;
	SSL_SESSION *sess = NULL;
	X509 *leaf = NULL;
	STACK_OF(X509) *untrusted = NULL;
	const char *why = "none kept";
	pthread_mutex_lock(&tls_lock);
	const char *sni = kp_ssl.SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	for (struct ticket *t = tickets; t; t = t->next) {
		if (memcmp(&t->key, key, sizeof(*key)) || !same_str(t->sni, sni))
			continue;
		struct shape sh = { t->sni, t->alpn, t->alpn_len, t->cert, t->seclevel,
				    kp_ssl.SSL_SESSION_get_protocol_version(t->sess) };
		why = shape_mismatch(&sh, ssl);
		if (!why && kp_ssl.SSL_SESSION_up_ref(t->sess) && kp_ssl.X509_up_ref(t->leaf)) {
			sess = t->sess;
			leaf = t->leaf;
			untrusted = t->chain ? kp_ssl.X509_chain_up_ref(t->chain) : NULL;
		}
		break;
	}
	pthread_mutex_unlock(&tls_lock);
	if (sess) {
		long result;
		STACK_OF(X509) *chain;
		char *peername;
		kp_ssl.ERR_set_mark();
		int ok = verify_as(ssl, leaf, untrusted, &result, &chain, &peername);
		kp_ssl.ERR_pop_to_mark();
		free(peername);
		if (chain)
			kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)chain, (void (*)(void *))kp_ssl.X509_free);
		if (ok > 0 && result == X509_V_OK && kp_ssl.SSL_set_session(ssl, sess)) {
			kp_count(tls_resumed);
			why = NULL;
		} else {
			why = "the program's verification fails on its chain";
		}
		kp_ssl.SSL_SESSION_free(sess);
		kp_ssl.X509_free(leaf);
		if (untrusted)
			kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)untrusted, (void (*)(void *))kp_ssl.X509_free);
	}
	if (why)
		kp_debug("no session offered: %s", why);
	else
		kp_debug("a cached session offered for resumption");
}

/* ------------------------------------------------------------ fresh again */

/* Run ssl's handshake on fd to its end, waiting (bounded) as a blocking
 * socket would. */
static int handshake_wait(SSL *ssl, int fd)
{
	int waited = 0;
	for (;;) {
		int r;
		r = kp_ssl.SSL_connect(ssl);
		if (r == 1)
			return 0;
		int err;
		err = kp_ssl.SSL_get_error(ssl, r);
		short ev = err == SSL_ERROR_WANT_READ ? POLLIN : err == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
		if (!ev || waited >= TLS_WAIT_MS)
			return -1;
		struct pollfd pfd = { .fd = fd, .events = ev };
		KP_REAL(poll)(&pfd, 1, 100);
		waited += 100;
	}
}

int kp_tls_rehandshake(struct kp_conn *c, int fd, void *ssl_)
{
	SSL *ssl = ssl_;
	struct kp_tls *old = c->tls, *e = calloc(1, sizeof(*e));
	__atomic_store_n(&c->tls, NULL, __ATOMIC_RELEASE);
	bool free_old = false;
	pthread_mutex_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	if (h && e) {
		free_old = engine_unref(h->e); /* the handle's reference */
		e->ssl = ssl;
		e->fd = fd;
		e->refs = 2;
		e->seclevel = kp_ssl.SSL_get_security_level(ssl);
		if (h->e->sni)
			e->sni = strdup(h->e->sni);
		if (h->e->alpn_len && (e->alpn = malloc(h->e->alpn_len))) {
			memcpy(e->alpn, h->e->alpn, h->e->alpn_len);
			e->alpn_len = h->e->alpn_len;
		}
		if (free_old && h->e != old)
			engine_free(h->e);
		free_old = false;
		h->e = e;
		h->closed = false; /* parking the old engine closed it */
		h->shut = h->synth_err = 0;
		h->verified = false;
		if (h->vchain)
			kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)h->vchain,
						   (void (*)(void *))kp_ssl.X509_free);
		h->vchain = NULL;
		free(h->peername);
		h->peername = NULL;
	}
	if (old)
		free_old = engine_unref(old);
	pthread_mutex_unlock(&tls_lock);
	if (free_old) {
		old->dead = true;
		engine_free(old);
	} else if (old) {
		old->dead = true; /* its socket is gone; an old handle may still ask it things */
	}
	if (!h || !e) {
		free(e);
		return -1;
	}
	__atomic_store_n(&c->tls, e, __ATOMIC_RELEASE);
	int r = handshake_wait(ssl, fd);
	kp_debug("fd %d: the program's SSL made its own handshake on a fresh connection: %s", fd,
		 r == 0 ? "done" : "failed");
	return r;
}

/* ------------------------------------------------------------ I/O */

ssize_t kp_tls_xmit(struct kp_tls *e, int fd, const struct iovec *iov, int iovcnt)
{
	size_t len = 0;
	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	char small[4096], *buf = small;
	if (iovcnt != 1 && len > sizeof(small) && !(buf = malloc(len))) {
		errno = ENOMEM;
		return -1;
	}
	if (iovcnt == 1) {
		buf = iov[0].iov_base;
	} else {
		size_t off = 0;
		for (int i = 0; i < iovcnt; i++) {
			memcpy(buf + off, iov[i].iov_base, iov[i].iov_len);
			off += iov[i].iov_len;
		}
	}
	ssize_t ret = -1;
	size_t off = 0;
	int waited = 0, err = EPIPE;
	for (;;) {
		size_t w = 0;
		int r, e2;
		/* the program's SSL_MODE_ENABLE_PARTIAL_WRITE (Ruby) may write
		 * a record at a time */
		r = kp_ssl.SSL_write_ex(e->ssl, buf + off, len - off, &w);
		if (r == 1) {
			off += w;
			if (off < len)
				continue;
			ret = (ssize_t)len;
			break;
		}
		int saved = errno;
		e2 = kp_ssl.SSL_get_error(e->ssl, r);
		short ev = e2 == SSL_ERROR_WANT_READ ? POLLIN : e2 == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
		if (!ev || waited >= TLS_WAIT_MS) {
			err = e2 == SSL_ERROR_SYSCALL && saved ? saved
			      : e2 == SSL_ERROR_SSL	     ? EPROTO
							     : EPIPE;
			break;
		}
		struct pollfd pfd = { .fd = fd, .events = ev };
		KP_REAL(poll)(&pfd, 1, 100);
		waited += 100;
	}
	if (buf != small && buf != iov[0].iov_base)
		free(buf);
	if (ret < 0)
		errno = err;
	return ret;
}

/* ------------------------------------------------------------ wrappers' logic */

SSL *kp_tls_route(const SSL *ssl, bool mutates)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return (SSL *)ssl;
	pthread_mutex_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	SSL *e = h ? h->e->ssl : (SSL *)ssl;
	/* its connection went to the pool (maybe to another owner by now):
	 * it may still be asked what it was, but not act on it */
	if (h && h->closed && mutates)
		e = NULL;
	pthread_mutex_unlock(&tls_lock);
	return e;
}

long kp_tls_ctrl(SSL *ssl, int cmd, long larg, void *parg)
{
	SSL *e = kp_tls_route(ssl, false);
	if (e == ssl)
		return kp_ssl.SSL_ctrl(ssl, cmd, larg, parg);
	switch (cmd) {
	case SSL_CTRL_MODE:
	case SSL_CTRL_CLEAR_MODE:
		if (!kp_tls_route(ssl, true))
			break;
		kp_ssl.SSL_ctrl(e, cmd, larg, parg); /* the engine does its I/O */
		break;
	case SSL_CTRL_GET_CLIENT_CERT_REQUEST:
	case SSL_CTRL_GET_NUM_RENEGOTIATIONS:
	case SSL_CTRL_GET_TOTAL_RENEGOTIATIONS:
	case SSL_CTRL_GET_FLAGS:
	case SSL_CTRL_GET_RI_SUPPORT:
	case SSL_CTRL_GET_PEER_SIGNATURE_NID:
	case SSL_CTRL_GET_PEER_TMP_KEY:
	case SSL_CTRL_GET_TMP_KEY:
	case SSL_CTRL_GET_SIGNATURE_NID:
	case SSL_CTRL_GET_RAW_CIPHERLIST:
	case SSL_CTRL_GET_EC_POINT_FORMATS:
	case SSL_CTRL_GET_SHARED_GROUP:
	case SSL_CTRL_GET_NEGOTIATED_GROUP:
	case SSL_CTRL_GET_EXTMS_SUPPORT:
	case SSL_CTRL_GET_TLSEXT_STATUS_REQ_OCSP_RESP:
	case SSL_CTRL_GET_TLSEXT_STATUS_REQ_EXTS:
	case SSL_CTRL_GET_TLSEXT_STATUS_REQ_IDS:
		return kp_ssl.SSL_ctrl(e, cmd, larg, parg);
	}
	return kp_ssl.SSL_ctrl(ssl, cmd, larg, parg);
}

bool kp_tls_peername(SSL *ssl, const char **name)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return false;
	pthread_mutex_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	bool own = h && h->verified;
	if (own)
		*name = h->peername;
	pthread_mutex_unlock(&tls_lock);
	return own;
}

/* The handle of ssl with what it needs for I/O, or NULL: not ours. */
struct io {
	struct handle *h;
	SSL *e;
	struct kp_conn *c; /* the connection that frames it, or NULL */
	int fd;
	bool closed;
};

static bool io_get(SSL *ssl, struct io *io)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return false;
	pthread_mutex_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	if (h) {
		h->synth_err = 0;
		io->h = h;
		io->e = h->e->ssl;
		io->fd = h->fd;
		io->closed = h->closed;
		struct kp_conn *c = kp_fd_conn(h->fd);
		io->c = c && c != KP_POOLED && __atomic_load_n(&c->tls, __ATOMIC_ACQUIRE) == h->e &&
				c->tls_ssl == ssl
			? c
			: NULL;
	}
	pthread_mutex_unlock(&tls_lock);
	return h != NULL;
}

static void synth(struct io *io, int err)
{
	pthread_mutex_lock(&tls_lock);
	struct handle *h = handle_find(io->h->ssl);
	if (h) {
		h->synth_err = err;
		if (err == SSL_ERROR_ZERO_RETURN)
			h->shut |= SSL_RECEIVED_SHUTDOWN;
	}
	pthread_mutex_unlock(&tls_lock);
}

/* a closed handle's I/O: what the program would have got from its fd */
static int refused(struct io *io)
{
	synth(io, SSL_ERROR_SYSCALL);
	errno = EBADF;
	return -1;
}

int kp_tls_handshake(SSL *ssl, int (*real)(SSL *))
{
	struct io io;
	if (!kp_ssl_bind())
		return real(ssl);
	if (io_get(ssl, &io)) {
		if (io.closed)
			return refused(&io);
		if (io.e != ssl)
			return 1; /* handed out: the connection is established */
	} else {
		int fd = deferred_fd(ssl);
		if (fd < 0)
			fd = kp_ssl.SSL_get_fd(ssl);
		if (fd >= 0 && kp_fd_conn(fd) && kp_conn_tls_start(fd, ssl) == KP_TLS_HANDED)
			return 1;
	}
	/* its own handshake; a BIO of the program's own shows us the fd when
	 * the first record goes out (kp_send_intercept) */
	void *prev = kp_tls_handshaking;
	kp_tls_handshaking = ssl;
	int r;
	r = real(ssl);
	kp_tls_handshaking = prev;
	if (io_get(ssl, &io) && io.e != ssl) {
		/* handed out at that first write, which never went out */
		kp_ssl.ERR_clear_error();
		return 1;
	}
	if (r == 1 && io_get(ssl, &io) && io.c) {
		const unsigned char *sel;
		unsigned sel_len;
		kp_ssl.SSL_get0_alpn_selected(ssl, &sel, &sel_len);
		if (sel_len && !(sel_len == 8 && !memcmp(sel, "http/1.1", 8)))
			kp_conn_tls_spoil(io.c, io.fd, "ALPN chose a protocol other than HTTP/1.1");
	}
	return r;
}

static int io_real(SSL *ssl, enum kp_tls_op op, void *buf, size_t n, size_t *done)
{
	int r = -1;
	switch (op) {
	case KP_TLS_READ:
		r = kp_ssl.SSL_read(ssl, buf, (int)n);
		break;
	case KP_TLS_READ_EX:
		r = kp_ssl.SSL_read_ex(ssl, buf, n, done);
		break;
	case KP_TLS_PEEK:
		r = kp_ssl.SSL_peek(ssl, buf, (int)n);
		break;
	case KP_TLS_PEEK_EX:
		r = kp_ssl.SSL_peek_ex(ssl, buf, n, done);
		break;
	case KP_TLS_WRITE:
		r = kp_ssl.SSL_write(ssl, buf, (int)n);
		break;
	case KP_TLS_WRITE_EX:
		r = kp_ssl.SSL_write_ex(ssl, buf, n, done);
		break;
	}
	return r;
}

/* A failed SSL call as a socket call's result: 0 for the server's end
 * (close_notify, or EOF without it: OpenSSL 3 calls that an error), -1
 * with errno (EAGAIN for WANT_READ/WANT_WRITE). */
static ssize_t io_error(SSL *e, int r)
{
	int saved = errno, err = kp_ssl.SSL_get_error(e, r);
	unsigned long code = kp_ssl.ERR_peek_error();
	switch (err) {
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_SYSCALL:
		if (!saved)
			return 0;
		errno = saved;
		return -1;
	case SSL_ERROR_SSL:
		if (ERR_GET_LIB(code) == ERR_LIB_SSL &&
		    ERR_GET_REASON(code) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
			return 0;
		/* fall through */
	default:
		errno = EPROTO;
		return -1;
	}
}

/* Plaintext I/O through the handle's engine, framed. */
int kp_tls_io(SSL *ssl, enum kp_tls_op op, void *buf, size_t n, size_t *done)
{
	struct io io;
	bool ex = op == KP_TLS_READ_EX || op == KP_TLS_PEEK_EX || op == KP_TLS_WRITE_EX;
	bool write = op == KP_TLS_WRITE || op == KP_TLS_WRITE_EX;
	bool peek = op == KP_TLS_PEEK || op == KP_TLS_PEEK_EX;
	if (!io_get(ssl, &io))
		return io_real(ssl, op, buf, n, done);
	if (io.closed) {
		int r = refused(&io);
		return ex ? 0 : r;
	}
	struct kp_conn *c = io.c;
	if (!c)
		return io_real(io.e, op, buf, n, done);
	if (write) {
		ssize_t ret;
		int saved = errno;
		if (n && kp_conn_tls_send(c, io.fd, buf, n, &ret)) {
			if (ret >= 0) {
				if (done)
					*done = (size_t)ret;
				errno = saved;
				return ex ? 1 : (int)ret;
			}
			synth(&io, SSL_ERROR_SYSCALL);
			return ex ? 0 : -1;
		}
		io_get(ssl, &io); /* a fresh connection may have been made */
		int r = io_real(io.e, op, buf, n, done);
		ssize_t got = ex ? (r == 1 ? (ssize_t)*done : -1) : r;
		saved = errno;
		if (got <= 0)
			got = io_error(io.e, r);
		kp_conn_tls_send_done(c, io.fd, buf, n, got);
		errno = saved;
		return r;
	}
	for (;;) {
		int pending;
		pending = kp_ssl.SSL_has_pending(io.e);
		if (kp_conn_tls_eof(c, io.fd, pending)) {
			synth(&io, SSL_ERROR_ZERO_RETURN);
			if (done)
				*done = 0;
			return 0;
		}
		int r = io_real(io.e, op, buf, n, done);
		int saved = errno;
		ssize_t got = ex ? (r == 1 ? (ssize_t)*done : -1) : r;
		if (got <= 0) /* as the socket calls would say it (recv_done) */
			got = io_error(io.e, r);
		bool again = kp_conn_tls_recv_done(c, io.fd, buf, n, got, peek ? MSG_PEEK : 0);
		errno = saved;
		if (!again)
			return r;
		/* replayed on a fresh connection: the dead one's errors go */
		kp_ssl.ERR_clear_error();
		if (!io_get(ssl, &io) || !(c = io.c))
			return r;
	}
}

int kp_tls_get_error(const SSL *ssl, int ret)
{
	if (__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&tls_lock);
		struct handle *h = handle_find(ssl);
		int synth_err = h ? h->synth_err : 0;
		SSL *e = h ? h->e->ssl : (SSL *)ssl;
		pthread_mutex_unlock(&tls_lock);
		if (synth_err)
			return synth_err;
		ssl = e;
	}
	int r;
	r = kp_ssl.SSL_get_error(ssl, ret);
	return r;
}

int kp_tls_shutdown(SSL *ssl)
{
	struct io io;
	int r;
	if (!io_get(ssl, &io)) {
		r = kp_ssl.SSL_shutdown(ssl);
		return r;
	}
	if (io.closed)
		return refused(&io);
	if (io.c && kp_conn_tls_at_end(io.c, io.fd)) {
		/* no close_notify: the connection may be parked.  The program
		 * saw the server's (our EOF) if it read to the end. */
		pthread_mutex_lock(&tls_lock);
		io.h->shut |= SSL_SENT_SHUTDOWN;
		r = io.h->shut & SSL_RECEIVED_SHUTDOWN ? 1 : 0;
		io.h->synth_err = r ? 0 : SSL_ERROR_SYSCALL;
		pthread_mutex_unlock(&tls_lock);
		return r;
	}
	if (io.c)
		kp_conn_tls_spoil(io.c, io.fd, "SSL_shutdown mid-exchange");
	r = kp_ssl.SSL_shutdown(io.e);
	return r;
}

int kp_tls_get_shutdown(const SSL *ssl)
{
	int shut = 0, r;
	if (__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&tls_lock);
		struct handle *h = handle_find(ssl);
		if (h) {
			shut = h->shut;
			ssl = h->e->ssl;
		}
		pthread_mutex_unlock(&tls_lock);
	}
	r = kp_ssl.SSL_get_shutdown(ssl);
	return r | shut;
}

int kp_tls_pending(const SSL *ssl, bool has)
{
	struct io io;
	int r;
	if (io_get((SSL *)ssl, &io)) {
		if (io.closed || (io.c && __atomic_load_n(&io.c->eof_owed, __ATOMIC_ACQUIRE)))
			return 0;
		ssl = io.e;
	}
	r = has ? kp_ssl.SSL_has_pending(ssl) : kp_ssl.SSL_pending(ssl);
	return r;
}

bool kp_tls_verify_result(const SSL *ssl, long *result, STACK_OF(X509) **chain)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return false;
	pthread_mutex_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	bool own = h && h->verified;
	if (own) {
		*result = h->verify_result;
		*chain = h->vchain;
	}
	pthread_mutex_unlock(&tls_lock);
	return own;
}

void kp_tls_free(SSL *ssl)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE)) {
		kp_ssl.SSL_free(ssl);
		return;
	}
	pthread_mutex_lock(&tls_lock);
	record_drop(ssl);
	struct handle *h = handle_find(ssl);
	struct kp_tls *e = h ? h->e : NULL;
	bool last = false, own = e && e->ssl == ssl;
	if (h) {
		HASH_DEL(handles, h);
		if (own && e->refs > 1 && !e->dead && detach_program(e, e->fd) < 0)
			e->dead = true; /* kept for the socket, but never parked */
		last = engine_unref(e);
	}
	pthread_mutex_unlock(&tls_lock);
	if (h)
		handle_free(h);
	if (!own)
		kp_ssl.SSL_free(ssl);
	if (last)
		engine_free(e);
}

bool kp_tls_reset(SSL *ssl, bool clear)
{
	struct io io;
	if (!io_get(ssl, &io))
		return false;
	bool own = io.e == ssl;
	if (!clear && (io.closed || (io.c && kp_conn_tls_at_end(io.c, io.fd))))
		return own; /* curl, before SSL_free: the engine stays whole; a
			       handle handed a pooled one is a shell anyway */
	if (io.c)
		kp_conn_tls_spoil(io.c, io.fd, clear ? "SSL_clear" : "SSL_set_connect_state");
	if (clear) { /* a new connection on this object: we follow it no more */
		bool last = false;
		pthread_mutex_lock(&tls_lock);
		struct handle *h = handle_find(ssl);
		if (h) {
			HASH_DEL(handles, h);
			if (own)
				h->e->dead = h->e->foreign = true;
			last = engine_unref(h->e);
		}
		pthread_mutex_unlock(&tls_lock);
		if (h) {
			if (last)
				engine_free(h->e);
			handle_free(h);
		}
	}
	return false;
}

void kp_tls_before_fork(void)
{
	pthread_mutex_lock(&tls_lock);
}

void kp_tls_after_fork_parent(void)
{
	pthread_mutex_unlock(&tls_lock);
}

void kp_tls_after_fork_child(void)
{
	pthread_mutex_init(&tls_lock, NULL);
}
