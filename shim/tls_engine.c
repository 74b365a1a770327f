/* tls_engine.c - engines and handles: the SSL that carries a pooled
 * connection, the program's SSL mapped to it, detaching and restoring the
 * program's settings, what each destination does with sessions and how it
 * ends a connection, records out (tls_internal.h). */
/* a table that cannot grow costs following the connection, never the
 * host (uthash's default on a failed allocation is exit(-1)) */
#define HASH_NONFATAL_OOM 1
#include "tls_internal.h"
#include "sigwait.h"

__thread void *kp_tls_handshaking;
bool kp_tls_used;
bool kp_tls_ssl_ex_funcs;
unsigned long kp_tls_crypto_gen;
unsigned long kp_tls_crypto_odd;
uint64_t kp_tls_crypto_trace;

void stat_add(SSL *ssl, int which, long n)
{
	struct record *r = record_get(session_ctx(ssl), true);
	if (r)
		r->stat_adj[which] += n;
}

struct ticket *tickets; /* newest first */
struct handle *handles;
struct kp_tls *parked;

/* How a server ends is learnt per destination and kind of request: the
 * hash of its User-Agent (0: none).  A server may decide by it (Apache's
 * ssl-unclean-shutdown is set by BrowserMatch): a request of another kind
 * is not known until its own end teaches (docs/tls.md "Ragged closes"). */
static struct closer {
	struct pool_key key;
	uint32_t kind;
	int state; /* CL_* */
} closers[MAX_CLOSERS];

static unsigned n_closers;

/* Caller holds tls_lock. */
static struct closer *closer(const struct pool_key *key, uint32_t kind)
{
	for (unsigned i = 0; i < MAX_CLOSERS && i < n_closers; i++)
		if (closers[i].kind == kind && !memcmp(&closers[i].key, key, sizeof(*key)))
			return &closers[i];
	return NULL;
}

/* What was learnt travels through the broker as an entry of its session
 * store under this name (a SHA-256 of a configuration never equals it),
 * its last four bytes the kind (none: the name as it was): one byte, 1
 * close_notify, 0 the FIN alone.  So a process that makes one request
 * rewrites it when an earlier one saw the server's end. */
static const uint8_t closer_name_base[BK_SESS_NAME] = "libkeepalive: how servers end.";

static void closer_name(uint32_t kind, uint8_t name[BK_SESS_NAME])
{
	memcpy(name, closer_name_base, BK_SESS_NAME);
	if (kind)
		memcpy(name + BK_SESS_NAME - sizeof(kind), &kind, sizeof(kind));
}

/* told: only where nothing is known of the server (a server's way wins) */
static void closer_set(const struct pool_key *key, uint32_t kind, int state)
{
	kp_lock(&tls_lock);
	struct closer *seen = closer(key, kind);
	if (seen && state == CL_TELLS) {
		kp_unlock(&tls_lock);
		return;
	}
	if (!seen)
		seen = &closers[n_closers++ % MAX_CLOSERS];
	*seen = (struct closer){ *key, kind, state };
	kp_unlock(&tls_lock);
}

/* a program looked at the end we owed where the server's way is not
 * known, or it is known ragged, for a kind of request: a pooled
 * connection is not handed out (the program's request, of a kind not
 * known before the hand-out, then goes on a fresh connection, not
 * rewritten, whose close reaches the server and teaches; docs/tls.md
 * "Ragged closes") */
bool closer_looked(const struct pool_key *key)
{
	bool looked = false;
	kp_lock(&tls_lock);
	for (unsigned i = 0; i < MAX_CLOSERS && i < n_closers && !looked; i++)
		looked = !memcmp(&closers[i].key, key, sizeof(*key)) &&
			 (closers[i].state == CL_TELLS || closers[i].state == CL_RAGGED);
	kp_unlock(&tls_lock);
	return looked;
}

void closer_told(const struct pool_key *key, uint32_t kind)
{
	closer_set(key, kind, CL_TELLS);
}

/* the server's way is known (close_notify or the FIN alone) */
static bool closer_known(const struct pool_key *key, uint32_t kind)
{
	kp_lock(&tls_lock);
	struct closer *cl = closer(key, kind);
	bool known = cl && (cl->state == CL_NOTIFY || cl->state == CL_RAGGED);
	kp_unlock(&tls_lock);
	return known;
}

static void learn_poll(const struct pool_key *key, bool last);

bool kp_tls_closes_clean(const struct pool_key *key, uint32_t kind)
{
	learn_poll(key, false); /* a connection closed before may know now */
	kp_lock(&tls_lock);
	struct closer *seen = closer(key, kind);
	int state = seen ? seen->state : -1;
	kp_unlock(&tls_lock);
	if (state < 0 || state == CL_TELLS) {
		uint8_t b[8], name[BK_SESS_NAME];
		closer_name(kind, name);
		if (kp_broker_sess_get(key, name, b, sizeof(b)) == 1 && b[0] <= 1) {
			state = b[0];
			closer_set(key, kind, state);
			kp_debug("the broker knows how the server ends: %s", state ? "close_notify" : "FIN alone");
		}
	}
	return state == CL_NOTIFY || (state < 0 && CLOSER_UNKNOWN_OWES);
}

/* e's read r met the end of a connection its server was asked to end
 * (io.c says so): learn how.  SSL_ERROR_ZERO_RETURN is a close_notify
 * unless SSL_OP_IGNORE_UNEXPECTED_EOF made a bare FIN read as one; then a
 * socket BIO that met its EOF (BIO_eof: OpenSSL 3 sets it at read 0)
 * tells: a close_notify ends SSL_read before the FIN is read.  "unexpected
 * eof", or an SSL_ERROR_SYSCALL end: the FIN alone.  Anything else
 * teaches nothing. */
void closer_learn(SSL *e, int r, const struct pool_key *key, uint32_t kind)
{
	int err = kp_ssl.SSL_get_error(e, r);
	unsigned long code = kp_ssl.ERR_peek_error();
	int notify = -1;
	if (err == SSL_ERROR_ZERO_RETURN) {
		BIO *b = kp_ssl.SSL_get_rbio(e);
		if (!(kp_ssl.SSL_get_options(e) & SSL_OP_IGNORE_UNEXPECTED_EOF))
			notify = 1;
		else if (b && kp_ssl.BIO_method_type(b) == BIO_TYPE_SOCKET)
			notify = kp_ssl.BIO_ctrl(b, BIO_CTRL_EOF, 0, NULL) == 0;
	} else if ((err == SSL_ERROR_SSL && ERR_GET_LIB(code) == ERR_LIB_SSL &&
		    ERR_GET_REASON(code) == SSL_R_UNEXPECTED_EOF_WHILE_READING) ||
		   (err == SSL_ERROR_SYSCALL && !code)) {
		notify = 0;
	}
	if (notify < 0)
		return;
	closer_set(key, kind, notify == 1 ? CL_NOTIFY : CL_RAGGED);
	uint8_t b = (uint8_t)notify, name[BK_SESS_NAME];
	closer_name(kind, name);
	kp_broker_sess_put(key, name, CLOSER_KEEP_S, false, &b, 1);
	kp_debug("the server ended a TLS connection %s", notify == 1 ? "with close_notify" : "without close_notify");
}

/* ------------------------------------------------------------ learning at close */

/*
 * A connection whose server was asked to end it (the request's close was
 * not rewritten), closed by the program before it read that end (urllib
 * reads Content-Length bytes and closes), where it is not known how the
 * server ends: the library keeps its socket (hidden, as a parked one) and
 * its engine, and reads on, never waiting: one recv(MSG_DONTWAIT) at the
 * close, at the next close request or TLS connection of the process, and
 * at exit (before OpenSSL's own exit handler), until close_notify or the
 * bare FIN shows the server's way (docs/tls.md "Ragged closes").  The
 * engine reads from a memory BIO we fill, and writes into another: no
 * byte (an alert) ever reaches the server, and no wrapper of ours sees a
 * read.  Only an engine no program can reach (the program freed its SSL
 * first: CPython, curl) is kept.  A few, for a few seconds.
 */
#define MAX_LEARNERS 4
#define LEARN_KEEP_MS 5000
static struct learner {
	struct kp_tls *e;
	int fd;
	struct pool_key key;
	uint32_t kind; /* of the request whose end it reads */
	uint64_t since_ms;
} learners[MAX_LEARNERS];
static unsigned n_learners;
static bool learn_atexit, learn_over; /* registered; ran (exit under way) */

/* read what the socket has into l's engine; true when l is done (learnt,
 * or it never will be).  Caller holds no lock of ours. */
static bool learn_step(struct learner *l)
{
	SSL *s = l->e->ssl;
	BIO *rb = kp_ssl.SSL_get_rbio(s);
	char buf[4096];
	int saved = errno;
	bool fin = false, gone = false;
	for (int i = 0; i < 16; i++) {
		ssize_t n = KP_REAL(recv)(l->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n > 0 && kp_ssl.BIO_write(rb, buf, (int)n) == (int)n)
			continue;
		fin = n == 0;
		gone = n != 0 && (n > 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR));
		break;
	}
	errno = saved;
	if (gone) /* a reset, or no memory: teaches nothing */
		return true;
	if (fin) /* the memory BIO's end is the TCP FIN: read 0, not retry */
		kp_ssl.BIO_ctrl(rb, BIO_C_SET_BUF_MEM_EOF_RETURN, 0, NULL);
	kp_ssl.ERR_set_mark();
	int r = kp_ssl.SSL_read(s, buf, sizeof(buf));
	bool done = true;
	if (r <= 0 && kp_ssl.SSL_get_error(s, r) == SSL_ERROR_WANT_READ && !fin)
		done = false;
	else if (r <= 0) /* r > 0: bytes after the response: teaches nothing */
		closer_learn(s, r, &l->key, l->kind);
	kp_ssl.ERR_pop_to_mark();
	errno = saved;
	return done;
}

static void learner_drop(struct learner *l)
{
	kp_fd_swap(l->fd, NULL);
	KP_REAL(close)(l->fd);
	kp_tls_put(l->e);
}

/* Step the learners (those for key, or all when key is NULL; all that are
 * too old go), or drop them all (at exit: one last step each). */
static void learn_poll(const struct pool_key *key, bool last)
{
	if (!__atomic_load_n(&n_learners, __ATOMIC_ACQUIRE))
		return;
	struct learner mine[MAX_LEARNERS];
	unsigned n = 0;
	uint64_t now = kp_now_ms();
	kp_lock(&tls_lock);
	for (unsigned i = 0; i < n_learners;) {
		struct learner *l = &learners[i];
		if (last || !key || !memcmp(&l->key, key, sizeof(*key)) || now - l->since_ms > LEARN_KEEP_MS) {
			mine[n++] = *l;
			*l = learners[--n_learners];
		} else {
			i++;
		}
	}
	kp_unlock(&tls_lock);
	for (unsigned i = 0; i < n; i++) {
		struct learner *l = &mine[i];
		bool old = now - l->since_ms > LEARN_KEEP_MS;
		bool known = closer_known(&l->key, l->kind);
		if (known || learn_step(l) || old || last) {
			learner_drop(l);
			continue;
		}
		kp_lock(&tls_lock);
		bool room = n_learners < MAX_LEARNERS;
		if (room)
			learners[n_learners++] = *l;
		kp_unlock(&tls_lock);
		if (!room)
			learner_drop(l);
	}
}

static void learn_exit(void)
{
	__atomic_store_n(&learn_over, true, __ATOMIC_RELEASE); /* OpenSSL's handler comes next */
	learn_poll(NULL, true);
}

unsigned kp_tls_learners(void)
{
	return __atomic_load_n(&n_learners, __ATOMIC_ACQUIRE);
}

bool kp_tls_learn(struct kp_tls *e, int hidden, const struct pool_key *key, uint32_t kind)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE) || __atomic_load_n(&learn_over, __ATOMIC_ACQUIRE) ||
	    closer_known(key, kind))
		return false;
	kp_lock(&tls_lock);
	/* no program's SSL speaks through it any more, nor ever will */
	bool ours = e->refs == 1 && !e->dead && !e->foreign && e->own_bio &&
		    !(kp_ssl.SSL_get_shutdown(e->ssl) & SSL_RECEIVED_SHUTDOWN);
	kp_unlock(&tls_lock);
	if (!ours)
		return false;
	BIO *rb = kp_ssl.BIO_new(kp_ssl.BIO_s_mem()), *wb = kp_ssl.BIO_new(kp_ssl.BIO_s_mem());
	if (!rb || !wb) {
		if (rb)
			kp_ssl.BIO_free(rb);
		if (wb)
			kp_ssl.BIO_free(wb);
		return false;
	}
	kp_ssl.BIO_ctrl(rb, BIO_C_SET_BUF_MEM_EOF_RETURN, -1, NULL); /* empty: retry */
	kp_ssl.SSL_set_bio(e->ssl, rb, wb); /* frees its socket BIO (no close) */
	e->fd = hidden;
	/* the end as it is on the wire: close_notify is ZERO_RETURN, the FIN
	 * alone "unexpected eof" (closer_learn) */
	kp_ssl.SSL_clear_options(e->ssl, SSL_OP_IGNORE_UNEXPECTED_EOF);
	struct learner l = { e, hidden, *key, kind, kp_now_ms() };
	if (learn_step(&l) || closer_known(key, kind))
		return learner_drop(&l), true;
	struct learner out = { 0 };
	bool evict = false, first = !learn_atexit;
	kp_lock(&tls_lock);
	if (n_learners == MAX_LEARNERS) { /* the oldest goes */
		out = learners[0];
		learners[0] = learners[--n_learners];
		evict = true;
	}
	learners[n_learners] = l;
	__atomic_store_n(&n_learners, n_learners + 1, __ATOMIC_RELEASE);
	learn_atexit = true;
	kp_unlock(&tls_lock);
	if (evict)
		learner_drop(&out);
	/* before OpenSSL's own handler (registered at its first use, so
	 * earlier), which frees what the engines need */
	if (first)
		atexit(learn_exit);
	return true;
}

bool kp_tls_learner_forget(int fd)
{
	if (!__atomic_load_n(&n_learners, __ATOMIC_ACQUIRE))
		return false;
	struct learner out = { 0 };
	kp_lock(&tls_lock);
	for (unsigned i = 0; i < n_learners; i++) {
		if (learners[i].fd == fd) {
			out = learners[i];
			learners[i] = learners[--n_learners];
			break;
		}
	}
	kp_unlock(&tls_lock);
	if (out.e)
		kp_tls_put(out.e);
	return out.e != NULL;
}

size_t kp_tls_learner_fds(int *fds, size_t cap)
{
	size_t n = 0;
	if (!__atomic_load_n(&n_learners, __ATOMIC_ACQUIRE))
		return 0;
	kp_lock(&tls_lock);
	for (unsigned i = 0; i < n_learners && n < cap; i++)
		fds[n++] = learners[i].fd;
	kp_unlock(&tls_lock);
	return n;
}

unsigned kp_tls_learners_drain(void)
{
	unsigned n = kp_tls_learners();
	learn_poll(NULL, true);
	return n;
}

static SSL_CTX *shim_ctx; /* parked engines belong to it: no program callbacks */
static pthread_once_t shim_ctx_once = PTHREAD_ONCE_INIT;

static void shim_ctx_make(void)
{
	shim_ctx = kp_ssl.SSL_CTX_new(kp_ssl.TLS_client_method());
}

/* The shim's context, made once and never under tls_lock: making one
 * reads the system's OpenSSL configuration, whose settings reach our
 * SSL_CTX_ctrl wrapper (which takes the lock to note them). */
SSL_CTX *shim_ctx_get(void)
{
	pthread_once(&shim_ctx_once, shim_ctx_make);
	return shim_ctx;
}

static STACK_OF(X509) *client_chain(SSL *ssl, X509 *cert);

/* ------------------------------------------------------------ engines */

struct handle *handle_find(const SSL *ssl)
{
	struct handle *h;
	HASH_FIND_PTR(handles, &ssl, h);
	return h;
}

/* What detaching took from the program's SSL, given back if the program
 * makes it a new connection (SSL_clear) while its old one is parked. */
struct saved {
	SSL_CTX *ctx; /* a reference of ours */
	SSL *hold;    /* shares the program's certificates, keys and their
			 settings (SSL_copy_session_id), which a change of
			 context would replace */
	BIO *rbio, *wbio; /* references of ours */
	int verify_mode;
	SSL_verify_cb verify_cb;
	void (*info_cb)(const SSL *, int, int);
	uint64_t options;
	long mode;
	void *ex[32];
};

void saved_free(struct saved *sv)
{
	if (!sv)
		return;
	if (sv->ctx)
		kp_ssl.SSL_CTX_free(sv->ctx);
	if (sv->hold)
		kp_ssl.SSL_free(sv->hold);
	if (sv->rbio)
		kp_ssl.BIO_free(sv->rbio);
	if (sv->wbio && sv->wbio != sv->rbio)
		kp_ssl.BIO_free(sv->wbio);
	free(sv);
}

/* fd and close flag of the program's socket BIO, or fd -1 (a BIO of its
 * own, or not the same one both ways) */
int prog_socket_bio(SSL *ssl, int *close_flag)
{
	BIO *b = kp_ssl.SSL_get_rbio(ssl);
	int fd = -1;
	if (!b || b != kp_ssl.SSL_get_wbio(ssl) || kp_ssl.BIO_method_type(b) != BIO_TYPE_SOCKET ||
	    kp_ssl.BIO_ctrl(b, BIO_C_GET_FD, 0, &fd) < 0)
		return -1;
	*close_flag = (int)kp_ssl.BIO_ctrl(b, BIO_CTRL_GET_CLOSE, 0, NULL);
	return fd;
}

static void shown_drop(struct shown *sh);

void engine_free(struct kp_tls *e)
{
	kp_tls_import_free(e->im);
	if (!e->foreign) {
		/* a clean end for OpenSSL: no session removal (the first
		 * owner's remove-session callback) for a connection never shut */
		kp_ssl.SSL_set_shutdown(e->ssl, SSL_SENT_SHUTDOWN);
		kp_tls_capture_forget(e->ssl);
		kp_ssl.SSL_free(e->ssl);
	}
	if (e->cert)
		kp_ssl.X509_free(e->cert);
	if (e->snap)
		kp_ssl.SSL_SESSION_free(e->snap);
	if (e->snap_src)
		kp_ssl.SSL_SESSION_free(e->snap_src);
	shown_drop(&e->shown);
	saved_free(e->saved);
	if (e->hs_ctx)
		kp_ssl.SSL_CTX_free(e->hs_ctx);
	full_free(&e->full);
	if (e->chain)
		kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)e->chain, (void (*)(void *))kp_ssl.X509_free);
	free(e->sni);
	conf_free(&e->conf);
	cfg_free(&e->cfg);
	free(e);
}

int engine_version(const struct kp_tls *e)
{
	return e->im ? tlsf_version(&e->im->f) : kp_ssl.SSL_version(e->ssl);
}

/* Caller holds tls_lock.  True when the caller must engine_free(e) after
 * letting go of the lock. */
bool engine_unref(struct kp_tls *e)
{
	return --e->refs == 0;
}

void kp_tls_put(struct kp_tls *e)
{
	kp_lock(&tls_lock);
	bool last = engine_unref(e);
	kp_unlock(&tls_lock);
	if (last)
		engine_free(e);
}

/* What h kept of a hand-out after a fresh connection took its place
 * (handle_keep_shown).  Not under tls_lock (engine_free). */
static void handle_kept_free(struct handle *h)
{
	if (h->kept_vchain)
		kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)h->kept_vchain, (void (*)(void *))kp_ssl.X509_free);
	free(h->kept_peername);
	own_free(&h->kept_own);
	if (h->kept_engine) {
		kp_lock(&tls_lock);
		bool last = engine_unref(h->kept_engine);
		kp_unlock(&tls_lock);
		if (last)
			engine_free(h->kept_engine);
	}
}

/* A fresh connection takes the place of the one h was handed (a replay,
 * the server's close met before the first request, a watcher set after
 * the hand-out): what the program was shown stays valid, as libssl's own
 * answers stay valid until SSL_free.  It may hold the verified chain, the
 * peer's name, our copies (CA names, keys) and pointers into the engine's
 * SSL (ALPN, the server name); freeing them at the swap crashed a program
 * that read them after (a review of HTTPS).  Kept once: later swaps have
 * nothing of a hand-out to keep (the SSL is its own since).  Returns true
 * where h keeps its reference to its engine (the caller must not drop
 * it).  Caller holds tls_lock. */
static bool handle_keep_shown(struct handle *h)
{
	if (h->kept_engine || h->kept_vchain || h->kept_peername || h->kept_own.ca || h->kept_own.key[0] ||
	    h->kept_own.key[1]) {
		if (h->vchain)
			kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)h->vchain, (void (*)(void *))kp_ssl.X509_free);
		free(h->peername);
		own_free(&h->own);
		h->vchain = NULL;
		h->peername = NULL;
		memset(&h->own, 0, sizeof(h->own));
		return false;
	}
	h->kept_vchain = h->vchain;
	h->kept_peername = h->peername;
	h->kept_own = h->own;
	h->vchain = NULL;
	h->peername = NULL;
	memset(&h->own, 0, sizeof(h->own));
	h->kept_engine = h->e;
	return true;
}

void handle_free(struct handle *h)
{
	if (h->sess)
		kp_ssl.SSL_SESSION_free(h->sess);
	free(h->peername);
	if (h->vchain)
		kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)h->vchain, (void (*)(void *))kp_ssl.X509_free);
	if (h->peer_chain)
		kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)h->peer_chain, (void (*)(void *))kp_ssl.X509_free);
	if (h->peer)
		kp_ssl.X509_free(h->peer);
	own_free(&h->own);
	handle_kept_free(h);
	free(h);
}

/* Not the default security callback: a program with its own may refuse
 * what its handshake would meet.  Caller holds tls_lock. */
static bool custom_security_cb(SSL *ssl)
{
	return !shim_ctx ||
	       kp_ssl.SSL_get_security_callback(ssl) != kp_ssl.SSL_CTX_get_security_callback(shim_ctx);
}

/* More than one certificate with its key set for ssl: the handshake picks
 * one by what the server asks, and which one it sent is not told.  Walks
 * them as SSL_CTX_set_current_cert does, and leaves the current one as it
 * was. */
static bool several_certs(SSL *ssl)
{
	X509 *cur = kp_ssl.SSL_get_certificate(ssl);
	if (!cur)
		return false; /* at most one: a key without its certificate */
	/* the walk visits only certificates with their keys: it could not
	 * come back to this one */
	if (!kp_ssl.SSL_get_privatekey(ssl))
		return true;
	int n = 0;
	for (long r = kp_ssl.SSL_ctrl(ssl, SSL_CTRL_SET_CURRENT_CERT, SSL_CERT_SET_FIRST, NULL);
	     r > 0 && n < 2; r = kp_ssl.SSL_ctrl(ssl, SSL_CTRL_SET_CURRENT_CERT, SSL_CERT_SET_NEXT, NULL))
		n++;
	for (long r = kp_ssl.SSL_ctrl(ssl, SSL_CTRL_SET_CURRENT_CERT, SSL_CERT_SET_FIRST, NULL);
	     r > 0 && kp_ssl.SSL_get_certificate(ssl) != cur;
	     r = kp_ssl.SSL_ctrl(ssl, SSL_CTRL_SET_CURRENT_CERT, SSL_CERT_SET_NEXT, NULL))
		;
	return n > 1;
}

/* The context ssl's new sessions go to: libssl's session_ctx, the one it
 * was made with (SSL_set_SSL_CTX does not move it).  Caller holds
 * tls_lock. */
SSL_CTX *session_ctx(SSL *ssl)
{
	struct record *r = record_get(ssl, false);
	return r && r->sess_ctx ? (SSL_CTX *)r->sess_ctx : kp_ssl.SSL_get_SSL_CTX(ssl);
}

/* A client handshake on an SSL whose sessions go to ctx tells the program
 * of them: its new-session callback, or the context's own cache.  What it
 * is told cannot be made what its own handshake would tell (docs/tls.md
 * "Callbacks that watch"). */
bool tells_sessions(SSL_CTX *ctx)
{
	long mode = ctx ? kp_ssl.SSL_CTX_ctrl(ctx, SSL_CTRL_GET_SESS_CACHE_MODE, 0, NULL) : 0;
	return (mode & SSL_SESS_CACHE_CLIENT) && (prog_new_cb(ctx) || !(mode & SSL_SESS_CACHE_NO_INTERNAL_STORE));
}

/* ours, where it stands in a context for the program's new-session
 * callback (tls_handout.c new_session_told) */
kp_new_session_cb new_cb_stand_in;

kp_new_session_cb prog_new_cb(SSL_CTX *ctx)
{
	kp_new_session_cb cb = ctx ? kp_ssl.SSL_CTX_sess_get_new_cb(ctx) : NULL;
	if (!cb || cb != __atomic_load_n(&new_cb_stand_in, __ATOMIC_ACQUIRE))
		return cb;
	struct record *r = record_get(ctx, false);
	return r ? r->new_cb : NULL;
}

/* Why a connection of this process or a session of ours must not be
 * handed to ssl: its context is told of sessions (tells_sessions), or
 * NULL.  Caller holds tls_lock. */
const char *sessions_told(SSL *ssl)
{
	return tells_sessions(session_ctx(ssl)) ? "a new-session callback or a client session cache" : NULL;
}

/* The store ssl's verification uses runs code of the program's: a verify
 * callback (X509_STORE_set_verify_cb) or one of the store's functions
 * (verify, check_revocation, lookup_crls...: X509_STORE_CTX_init copies
 * each into the context of every verification).  Our check of a peer
 * chain (verify_as) would run it at a time the program's own handshake
 * would not, and a declined hand-out's handshake then runs it again; the
 * chain store too: libssl builds the client certificate's chain with it,
 * and so does client_chain at park (docs/tls.md "Callbacks that watch").
 * libssl leaves them NULL. */
static bool store_runs_code(SSL *ssl)
{
	kp_any_fn (*const get[])(const X509_STORE *) = {
		kp_ssl.X509_STORE_get_verify_cb,      kp_ssl.X509_STORE_get_verify,
		kp_ssl.X509_STORE_get_get_issuer,     kp_ssl.X509_STORE_get_check_issued,
		kp_ssl.X509_STORE_get_check_revocation, kp_ssl.X509_STORE_get_get_crl,
		kp_ssl.X509_STORE_get_check_crl,      kp_ssl.X509_STORE_get_cert_crl,
		kp_ssl.X509_STORE_get_check_policy,   kp_ssl.X509_STORE_get_lookup_certs,
		kp_ssl.X509_STORE_get_lookup_crls,    kp_ssl.X509_STORE_get_cleanup,
	};
	static const int which[] = { SSL_CTRL_GET_VERIFY_CERT_STORE, SSL_CTRL_GET_CHAIN_CERT_STORE };
	for (int w = 0; w < 2; w++) {
		X509_STORE *store = NULL;
		kp_ssl.SSL_ctrl(ssl, which[w], 0, &store);
		if (!store)
			store = kp_ssl.SSL_CTX_get_cert_store(kp_ssl.SSL_get_SSL_CTX(ssl));
		for (size_t i = 0; store && i < sizeof(get) / sizeof(*get); i++)
			if (get[i](store))
				return true;
		/* a lookup method of the program's (X509_STORE_add_lookup):
		 * its get_by_subject runs in every verification */
		struct record *sr = store ? record_get(store, false) : NULL;
		if (sr && (sr->conf.never & (1u << NEVER_LOOKUP)))
			return true;
	}
	return false;
}

/* ssl's BIOs carry code or a view of the program's: a BIO callback
 * (BIO_set_callback[_ex]) or a chain (a filter of its own under the SSL).
 * A handed-out SSL's I/O goes through the engine's socket BIO: they would
 * see no traffic (docs/tls.md "BIO_f_ssl").  curl's own BIO (a method of
 * its own, alone) is allowed: see there. */
/* A BIO whose I/O runs no code of the program's and shows it nothing but
 * the bytes: libcrypto's socket, descriptor and connect BIOs, and curl's
 * (a method of its own, named so, forwarding to curl's socket filter,
 * whose last I/O curl reads: a foreign engine's records go through it,
 * through_own_bio; docs/tls.md "BIO_f_ssl").  Another
 * method of the program's would see none of a handed-out SSL's traffic
 * (its read and write never run: the engine's socket BIO carries it), and
 * a memory BIO or pair is pumped by the program itself. */
static bool bio_known(BIO *b)
{
	static const struct {
		int type;
		const char *name;
	} known[] = {
		{ BIO_TYPE_SOCKET, "socket" },
		{ BIO_TYPE_FD, "file descriptor" },
		{ BIO_TYPE_CONNECT, "socket connect" },
		{ BIO_TYPE_MEM, "OpenSSL CF BIO" }, /* curl 7.88 and 8 */
	};
	int type = kp_ssl.BIO_method_type(b);
	const char *name = kp_ssl.BIO_method_name(b);
	for (size_t i = 0; name && i < sizeof(known) / sizeof(*known); i++)
		if (type == known[i].type && !strcmp(name, known[i].name))
			return true;
	return false;
}

int prog_bio_sigpipe(SSL *ssl)
{
	BIO *b = kp_ssl.SSL_get_wbio(ssl);
	if (!b || kp_ssl.BIO_next(b) || !bio_known(b))
		return -1;
	/* libcrypto's writesocket() and the fd BIO's write are write(2);
	 * curl's socket filter sends with MSG_NOSIGNAL */
	return kp_ssl.BIO_method_type(b) != BIO_TYPE_MEM;
}

const char *bio_watcher(SSL *ssl)
{
	BIO *b[2] = { kp_ssl.SSL_get_rbio(ssl), kp_ssl.SSL_get_wbio(ssl) };
	for (int i = 0; i < 2; i++) {
		if (!b[i])
			continue;
		if (kp_ssl.BIO_get_callback(b[i]) || kp_ssl.BIO_get_callback_ex(b[i]))
			return "a BIO callback on the program's BIO";
		if (kp_ssl.BIO_next(b[i]))
			return "a chain of BIOs under the program's SSL";
		if (!bio_known(b[i]))
			return "a BIO of the program's own (or a memory BIO) under the SSL";
	}
	return NULL;
}

/* A handshake's first write through a BIO of the program's, on a pooled
 * TLS connection: whether waiting for the program's next call could still
 * hand the connection out.  A BIO a hand-out refuses (bio_watcher) makes
 * the decision now: a blocking BIO of the program's own would take the
 * deferral's EAGAIN for a failure (docs/tls.md "BIO_f_ssl"). */
bool kp_tls_defer_may_hand(void *ssl)
{
	return !bio_watcher(ssl);
}

/* Code of the program's that watches ssl's handshake: what it would see
 * of a handshake of its own, a handed-out connection (none) or a session
 * of ours (a resumption) cannot show it.  Caller holds tls_lock. */
const char *watcher(SSL *ssl, const struct conf *conf)
{
	SSL_CTX *ctx = kp_ssl.SSL_get_SSL_CTX(ssl);
	if (kp_tls_keylog_of(ctx)) /* the program's: ours only takes the secrets */
		return "a keylog callback";
	if (kp_ssl.SSL_get_info_callback(ssl) || kp_ssl.SSL_CTX_get_info_callback(ctx))
		return "an info callback";
	if (conf->msg_cb)
		return "a message callback";
	return NULL;
}

/* A handed-out SSL's first read: its own TLS 1.3 connection would take
 * the server's tickets there (they follow its Finished), each in libssl's
 * state_machine, which begins with ERR_clear_error() and errno = 0; the
 * first owner's read took them (a ticket in its session says one came).
 * (docs/tls.md "The handshake's clean slate").  Caller holds tls_lock. */
void tickets_taken(SSL *e)
{
	SSL_SESSION *sess = kp_ssl.SSL_get_session(e);
	if (kp_ssl.SSL_version(e) >= TLS1_3_VERSION && sess && kp_ssl.SSL_SESSION_has_ticket(sess)) {
		kp_ssl.ERR_clear_error();
		errno = 0;
	}
}

/* Why ssl's handshake (with recorded settings conf) can neither be handed
 * a pooled connection or session nor have its own connection pooled, or
 * NULL.  Caller holds tls_lock. */
const char *never_for(SSL *ssl, const struct conf *conf)
{
	/* a TLS_method() SSL says "server" until its handshake starts:
	 * kp_tls_handshake made SSL_connect's own choice by then */
	if (kp_ssl.SSL_is_server(ssl))
		return "not a client handshake";
	SSL_CTX *ctx = kp_ssl.SSL_get_SSL_CTX(ssl);
	struct record *cr = record_get(ctx, false);
	/* the context's own too: its callbacks are read from it during the
	 * handshake, not copied at SSL_new */
	const char *why = never_reason(conf->never | (cr ? cr->conf.never : 0));
	if (why)
		return why;
	/* a servername callback is read from the session context too when
	 * the context has none (final_server_name) */
	struct record *sr = record_get(session_ctx(ssl), false);
	if (sr && (sr->conf.never & (1u << NEVER_SERVERNAME_CB)))
		return never_reason(1u << NEVER_SERVERNAME_CB);
	if (kp_ssl.SSL_CTX_get_client_cert_cb(ctx))
		return "a client certificate callback";
	/* (not followed at all: parking runs the chain store, client_chain) */
	if (store_runs_code(ssl))
		return "program code in its trust store (a verify callback or store function)";
	if (custom_security_cb(ssl))
		return "a security callback";
	if (several_certs(ssl))
		return "several client certificates";
	/* its own connection parked: a ticket that comes while another SSL
	 * reads it would reach this callback or cache (libssl calls the
	 * session_ctx's, whoever owns the connection now); handed one: it
	 * would be told of another session than its own handshake's.  Under
	 * the hand-out across processes followed all the same: its own go
	 * only to other processes, and it is handed only theirs (told of
	 * their session: docs/tls-across.md "Programs that keep sessions") */
	const char *told = sessions_told(ssl);
	if (told && !kp_tls_across_on())
		return told;
	/* the engine keeps an SSL the program frees (SSL_free runs the free
	 * callbacks only when the connection is dropped, with nothing), or
	 * copies it (dup) (docs/tls.md "The first owner's SSL") */
	if (__atomic_load_n(&kp_tls_ssl_ex_funcs, __ATOMIC_ACQUIRE))
		return "an SSL ex_data index with a free or dup callback";
	return NULL;
}

static const struct conf no_conf;

/* ssl's recorded settings.  Caller holds tls_lock. */
const struct conf *conf_of(const SSL *ssl)
{
	struct record *r = record_get(ssl, false);
	return r ? &r->conf : &no_conf;
}

struct kp_tls *kp_tls_bind(void *ssl_, int fd)
{
	SSL *ssl = ssl_;
	if (!kp_ssl_bind() || !shim_ctx_get())
		return NULL;
	learn_poll(NULL, false); /* connections closed before may know now */
	struct kp_tls *e = calloc(1, sizeof(*e));
	struct handle *h = calloc(1, sizeof(*h));
	const char *sni;
	sni = kp_ssl.SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	if (!e || !h || (sni && !(e->sni = strdup(sni))))
		goto fail;
	kp_lock(&tls_lock);
	const struct conf *conf = conf_of(ssl);
	const char *never = handle_find(ssl) ? "already followed" : never_for(ssl, conf);
	if (!never) {
		conf_copy(&e->conf, conf);
		never = never_reason(e->conf.never);
	}
	if (never) {
		kp_unlock(&tls_lock);
		kp_debug("fd %d: TLS connection not followed: %s", fd, never);
		goto fail;
	}
	e->ssl = ssl;
	e->fd = fd;
	e->prog_fd = -1;
	e->seclevel = kp_ssl.SSL_get_security_level(ssl);
	e->sess_ctx = session_ctx(ssl);
	e->sess_timeout = kp_ssl.SSL_CTX_get_timeout(e->sess_ctx);
	e->crypto_gen = __atomic_load_n(&kp_tls_crypto_gen, __ATOMIC_ACQUIRE);
	cfg_read(ssl, &e->cfg);
	e->refs = 2; /* its own handle, and the connection */
	h->ssl = ssl;
	h->e = e;
	h->fd = fd;
	HASH_ADD_PTR(handles, ssl, h);
	if (!h->hh.tbl) {
		kp_unlock(&tls_lock);
		goto fail;
	}
	__atomic_store_n(&kp_tls_used, true, __ATOMIC_RELEASE);
	bool prog_msg = conf->msg_cb != NULL;
	kp_unlock(&tls_lock);
	kp_debug("fd %d: following the TLS connection of SSL %p", fd, (void *)ssl);
	/* found once its handshake began, through a BIO of the program's
	 * own (curl's: at its first write, or at the SSL_connect after it
	 * was deferred): the capture its SSL_connect begins only before the
	 * handshake (kp_tls_capture_own), begun here before any secret is
	 * made (tls_capture.h) */
	if (kp_ssl.SSL_in_init(ssl) && !kp_ssl.SSL_in_before(ssl))
		kp_tls_capture_begin(ssl, prog_msg);
	return e;
fail:
	if (e) {
		conf_free(&e->conf);
		cfg_free(&e->cfg);
		free(e->sni);
	}
	free(e);
	free(h);
	return NULL;
}

/* The client certificate e's handshake had (set in the context or the
 * SSL): read once, before detaching replaces the SSL's certificates with
 * the shim context's. */
void note_cert(struct kp_tls *e)
{
	if (e->cert_known)
		return;
	X509 *cert = kp_ssl.SSL_get_certificate(e->ssl);
	if (cert && kp_ssl.X509_up_ref(cert)) {
		e->cert = cert;
		e->chain = client_chain(e->ssl, cert);
	}
	e->cert_known = true;
}

/* The chain ssl's handshake sends with its client certificate cert, as
 * libssl builds it (ssl_add_cert_chain): the certificate's own chain, or
 * the context's extra chain certificates, or else (unless
 * SSL_MODE_NO_AUTO_CHAIN) what the chain store (the verify store if none)
 * builds from cert.  NULL for the leaf alone.  Caller holds tls_lock. */
static STACK_OF(X509) *client_chain(SSL *ssl, X509 *cert)
{
	STACK_OF(X509) *sk = NULL;
	kp_ssl.SSL_ctrl(ssl, SSL_CTRL_GET_CHAIN_CERTS, 0, &sk);
	if (!sk || !kp_ssl.OPENSSL_sk_num((OPENSSL_STACK *)sk))
		kp_ssl.SSL_CTX_ctrl(kp_ssl.SSL_get_SSL_CTX(ssl), SSL_CTRL_GET_EXTRA_CHAIN_CERTS, 1, &sk);
	if (sk && kp_ssl.OPENSSL_sk_num((OPENSSL_STACK *)sk))
		return kp_ssl.X509_chain_up_ref(sk);
	if (kp_ssl.SSL_ctrl(ssl, SSL_CTRL_MODE, 0, NULL) & SSL_MODE_NO_AUTO_CHAIN)
		return NULL;
	X509_STORE *store = NULL;
	kp_ssl.SSL_ctrl(ssl, SSL_CTRL_GET_CHAIN_CERT_STORE, 0, &store);
	if (!store)
		store = kp_ssl.SSL_CTX_get_cert_store(kp_ssl.SSL_get_SSL_CTX(ssl));
	X509_STORE_CTX *sctx = store ? kp_ssl.X509_STORE_CTX_new() : NULL;
	STACK_OF(X509) *chain = NULL;
	kp_ssl.ERR_set_mark();
	if (sctx && kp_ssl.X509_STORE_CTX_init(sctx, store, cert, NULL)) {
		kp_ssl.X509_verify_cert(sctx); /* errors do not matter: what it built */
		chain = kp_ssl.X509_STORE_CTX_get1_chain(sctx);
	}
	kp_ssl.ERR_pop_to_mark();
	if (sctx)
		kp_ssl.X509_STORE_CTX_free(sctx);
	return chain;
}

/* ssl (whose certificate is cert) would send the chain want.  Caller
 * holds tls_lock. */
bool chain_equal(X509 *cert, SSL *ssl, STACK_OF(X509) *want)
{
	STACK_OF(X509) *have = client_chain(ssl, cert);
	int n = have ? kp_ssl.OPENSSL_sk_num((OPENSSL_STACK *)have) : 0;
	bool same = n == (want ? kp_ssl.OPENSSL_sk_num((OPENSSL_STACK *)want) : 0);
	for (int i = 0; same && i < n; i++)
		same = !kp_ssl.X509_cmp(kp_ssl.OPENSSL_sk_value((OPENSSL_STACK *)have, i),
					kp_ssl.OPENSSL_sk_value((OPENSSL_STACK *)want, i));
	if (have)
		kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)have, (void (*)(void *))kp_ssl.X509_free);
	return same;
}

/* e's SSL is about to serve another SSL of the program's, or the program
 * freed it: give e a BIO of ours on fd, and cut every path by which
 * OpenSSL could call back into the program: callbacks, ex_data (its
 * objects behind them), and the context (its session and info callbacks).
 * An SSL the program still holds (prog_alive) keeps what was cut in
 * e->saved, for SSL_clear.  Caller holds tls_lock. */
int detach_program(struct kp_tls *e, int fd, bool prog_alive)
{
	if (e->own_bio) {
		kp_ssl.BIO_int_ctrl(kp_ssl.SSL_get_rbio(e->ssl), BIO_C_SET_FD, BIO_NOCLOSE, fd);
		e->fd = fd;
		return 0;
	}
	if (!shim_ctx)
		return -1;
	struct saved *sv = prog_alive ? calloc(1, sizeof(*sv)) : NULL;
	BIO *b = kp_ssl.BIO_new_socket(fd, BIO_NOCLOSE);
	if (!b || (prog_alive && (!sv || !(sv->hold = kp_ssl.SSL_new(shim_ctx)) ||
				  !kp_ssl.SSL_copy_session_id(sv->hold, e->ssl)))) {
		if (b)
			kp_ssl.BIO_free(b);
		saved_free(sv);
		return -1;
	}
	note_cert(e);
	if (sv) {
		sv->ctx = kp_ssl.SSL_get_SSL_CTX(e->ssl);
		if (!kp_ssl.SSL_CTX_up_ref(sv->ctx))
			sv->ctx = NULL;
		/* its BIOs outlive SSL_set_bio below (which frees one reference) */
		sv->rbio = kp_ssl.SSL_get_rbio(e->ssl);
		sv->wbio = kp_ssl.SSL_get_wbio(e->ssl);
		if (sv->rbio && !kp_ssl.BIO_up_ref(sv->rbio))
			sv->rbio = NULL;
		if (sv->wbio && sv->wbio != sv->rbio && !kp_ssl.BIO_up_ref(sv->wbio))
			sv->wbio = NULL;
		sv->verify_mode = kp_ssl.SSL_get_verify_mode(e->ssl);
		sv->verify_cb = kp_ssl.SSL_get_verify_callback(e->ssl);
		sv->info_cb = kp_ssl.SSL_get_info_callback(e->ssl);
		sv->options = kp_ssl.SSL_get_options(e->ssl);
		sv->mode = kp_ssl.SSL_ctrl(e->ssl, SSL_CTRL_MODE, 0, NULL);
		for (int i = 0; i < 32; i++)
			sv->ex[i] = kp_ssl.SSL_get_ex_data(e->ssl, i);
		e->saved = sv;
	}
	kp_ssl.SSL_set_bio(e->ssl, b, b); /* frees the program's BIO (curl's) now */
	kp_ssl.SSL_set_info_callback(e->ssl, NULL);
	/* (a padding callback of its first owner's would be called for the
	 * records of every later one) */
	kp_ssl.SSL_set_record_padding_callback(e->ssl, NULL);
	/* ours, where its records are counted (tls_capture.h), goes on */
	kp_ssl.SSL_set_msg_callback(e->ssl, kp_tls_capture_msg_cb(e->ssl));
	kp_ssl.SSL_set_verify(e->ssl, kp_ssl.SSL_get_verify_mode(e->ssl), NULL);
	/* a server's renegotiation would verify against nobody's trust now */
	kp_ssl.SSL_set_options(e->ssl, SSL_OP_NO_RENEGOTIATION);
	for (int i = 0; i < 32; i++)
		kp_ssl.SSL_set_ex_data(e->ssl, i, NULL);
	SSL_CTX *was = kp_ssl.SSL_get_SSL_CTX(e->ssl);
	if (!e->hs_ctx && was && kp_ssl.SSL_CTX_up_ref(was))
		e->hs_ctx = was;
	SSL_CTX *ctx = kp_ssl.SSL_set_SSL_CTX(e->ssl, shim_ctx);
	e->own_bio = true;
	e->fd = fd;
	return ctx == shim_ctx ? 0 : -1;
}

/* The program makes its SSL, e's, a new connection (SSL_clear) while the
 * pool has e: give it back what it had.  Caller holds tls_lock. */
void restore_program(struct kp_tls *e)
{
	struct saved *sv = e->saved;
	if (!sv) { /* never detached: only its BIO followed the socket */
		if (e->prog_fd >= 0)
			kp_ssl.BIO_int_ctrl(kp_ssl.SSL_get_rbio(e->ssl), BIO_C_SET_FD, e->prog_close,
					    e->prog_fd);
		return;
	}
	if (sv->ctx)
		kp_ssl.SSL_set_SSL_CTX(e->ssl, sv->ctx);
	/* its own certificates and their settings, which the change of
	 * context replaced (SSL_copy_session_id also sets the session: its
	 * current one is kept) */
	SSL_SESSION *sess = kp_ssl.SSL_get1_session(e->ssl);
	kp_ssl.SSL_copy_session_id(e->ssl, sv->hold);
	kp_ssl.SSL_set_session(e->ssl, sess);
	if (sess)
		kp_ssl.SSL_SESSION_free(sess);
	kp_ssl.SSL_set_verify(e->ssl, sv->verify_mode, sv->verify_cb);
	kp_ssl.SSL_set_info_callback(e->ssl, sv->info_cb);
	kp_ssl.SSL_set_msg_callback(e->ssl, conf_of(e->ssl)->msg_cb);
	kp_ssl.SSL_clear_options(e->ssl, ~sv->options);
	kp_ssl.SSL_set_options(e->ssl, sv->options);
	kp_ssl.SSL_ctrl(e->ssl, SSL_CTRL_CLEAR_MODE, ~0L, NULL);
	kp_ssl.SSL_ctrl(e->ssl, SSL_CTRL_MODE, sv->mode, NULL);
	for (int i = 0; i < 32; i++)
		kp_ssl.SSL_set_ex_data(e->ssl, i, sv->ex[i]);
	if (sv->rbio || sv->wbio) { /* its BIOs, our references handed back */
		kp_ssl.SSL_set_bio(e->ssl, sv->rbio, sv->wbio);
		sv->rbio = sv->wbio = NULL;
		if (e->prog_fd >= 0) /* a socket BIO that followed the socket */
			kp_ssl.BIO_int_ctrl(kp_ssl.SSL_get_rbio(e->ssl), BIO_C_SET_FD, e->prog_close,
					    e->prog_fd);
	}
	e->saved = NULL;
	saved_free(sv);
}

bool kp_tls_dead(struct kp_tls *e)
{
	kp_lock(&tls_lock);
	bool dead = e->dead;
	kp_unlock(&tls_lock);
	return dead;
}

struct kp_tls *kp_tls_unpark(int hidden)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return NULL;
	struct kp_tls *e;
	kp_lock(&tls_lock);
	HASH_FIND_INT(parked, &hidden, e);
	if (e)
		HASH_DEL(parked, e);
	kp_unlock(&tls_lock);
	return e;
}

bool kp_tls_is_parked(int hidden)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return false;
	struct kp_tls *e;
	kp_lock(&tls_lock);
	HASH_FIND_INT(parked, &hidden, e);
	kp_unlock(&tls_lock);
	return e != NULL;
}

/* ------------------------------------------------------------ fresh again */

__thread uint64_t kp_tls_wait_end_ms;
__thread bool kp_tls_wait_cut;

/* How long a wait of ours may still last, having waited `waited` ms:
 * TLS_WAIT_MS, or what is left of the program's call (kp_tls_wait_end_ms). */
static int wait_slice(void)
{
	if (!kp_tls_wait_end_ms)
		return 100;
	uint64_t now = kp_now_ms();
	uint64_t left = kp_tls_wait_end_ms > now ? kp_tls_wait_end_ms - now : 0;
	return left < 100 ? (int)left : 100;
}

static bool may_wait(int waited)
{
	if (waited >= TLS_WAIT_MS)
		return false;
	return !kp_tls_wait_end_ms || kp_now_ms() < kp_tls_wait_end_ms;
}

/* One slice of a fresh handshake's wait for fd (handshake_wait), under
 * kp_sigwait: false when a handler ran that ends the program's call
 * (kp_call_restarts; docs/hold.md "Signals during the library's waits"). */
static bool slice_wait(int fd, short ev)
{
	struct pollfd pfd = { .fd = fd, .events = ev };
	bool restartable = kp_call_restarts(fd);
	struct kp_sigwait sw;
	kp_sigwait_begin(&sw);
	int r;
	do
		r = kp_sigwait_poll(&sw, &pfd, 1, wait_slice());
	while (r < 0 && errno == EINTR && restartable && sw.restarts);
	kp_sigwait_end(&sw);
	return !(r < 0 && errno == EINTR);
}

/* Run ssl's handshake on fd to its end, waiting (bounded: may_wait) as a
 * blocking socket would: 0 done, 1 not done when the wait ended (the
 * handshake wants the socket), -1 failed.  A signal that ends the
 * program's call ends the wait with 1, as OpenSSL tells a blocking
 * handshake of the program's own the kernel's EINTR (WANT_READ, WANT_WRITE):
 * on a blocking socket the kernel's own call judged it (its EINTR), else
 * slice_wait. */
static int handshake_wait(SSL *ssl, int fd)
{
	int waited = 0;
	kp_tls_wait_cut = false;
	for (;;) {
		int r;
		errno = 0;
		r = KP_OUTSIDE(kp_ssl.SSL_connect(ssl));
		if (r == 1)
			return 0;
		int err, sys = errno;
		err = kp_ssl.SSL_get_error(ssl, r);
		short ev = err == SSL_ERROR_WANT_READ ? POLLIN : err == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
		if (!ev)
			return -1;
		if (sys == EINTR || (may_wait(waited) && !slice_wait(fd, ev))) {
			kp_tls_wait_cut = true;
			return 1;
		}
		if (!may_wait(waited))
			return 1;
		waited += 100;
	}
}

/* The program read its peer (peer_seen) or a Finished message
 * (finished_seen: a channel binding, RFC 5929's tls-unique) of the
 * connection its SSL stands for: a fresh handshake in its place must show
 * the same peer (shown_same), and can never show the same Finished. */
static void seen(const SSL *ssl, bool finished)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return;
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	if (h && finished)
		h->finished_seen = true;
	else if (h)
		h->peer_seen = true;
	kp_unlock(&tls_lock);
}
void kp_tls_peer_seen(const SSL *ssl)
{
	seen(ssl, false);
}
void kp_tls_finished_seen(const SSL *ssl)
{
	seen(ssl, true);
}

/* What the program was shown of the handed-out connection h's engine
 * answers for, kept on e, the engine of the fresh handshake that replaces
 * it.  Caller holds tls_lock. */
bool kp_tls_shown_ever;

static void shown_keep(struct kp_tls *e, const struct handle *h)
{
	__atomic_store_n(&kp_tls_shown_ever, true, __ATOMIC_RELAXED);
	SSL *was = h->e->ssl;
	struct shown *sh = &e->shown;
	sh->leaf = kp_ssl.SSL_get1_peer_certificate(was);
	sh->result_known = !h->verify_set;
	sh->result = h->verified ? h->verify_result : kp_ssl.SSL_get_verify_result(was);
	/* (a foreign engine's placeholder holds the session: its peer and
	 * suite; the version and ALPN are the import's) */
	sh->version = engine_version(h->e);
	const SSL_CIPHER *ci = kp_ssl.SSL_get_current_cipher(was);
	sh->cipher = ci ? kp_ssl.SSL_CIPHER_get_id(ci) : 0;
	const unsigned char *alpn = NULL;
	unsigned alpn_len = 0;
	if (h->e->im)
		tlsf_alpn(&h->e->im->f, &alpn, &alpn_len);
	else
		kp_ssl.SSL_get0_alpn_selected(was, &alpn, &alpn_len);
	sh->alpn_len = alpn && alpn_len <= sizeof(sh->alpn) ? alpn_len : 0;
	if (sh->alpn_len)
		memcpy(sh->alpn, alpn, sh->alpn_len);
	/* it looked at the peer (a getter, or its verify callback ran on the
	 * pooled chain at the hand-out): the fresh one must be the same; else
	 * its own handshake's verification is all it would have had alone */
	sh->peer = h->peer_seen || kp_ssl.SSL_get_verify_callback(h->ssl);
	/* it read a Finished (tls-unique): a fresh handshake's differs, and a
	 * binding it sent would be another connection's (docs/tls.md "Found by
	 * the HTTPS review at 4183573", item 2) */
	sh->finished = h->finished_seen;
	/* what it set on the session it read goes onto the fresh one's, as
	 * libssl's copy for a ticket carries it (its own connection keeps one
	 * session line) */
	if (h->sess && kp_ssl.SSL_SESSION_up_ref(h->sess))
		sh->sess = h->sess;
	sh->pending = true;
}

static void shown_drop(struct shown *sh)
{
	if (sh->leaf)
		kp_ssl.X509_free(sh->leaf);
	if (sh->sess)
		kp_ssl.SSL_SESSION_free(sh->sess);
	sh->leaf = NULL;
	sh->sess = NULL;
	sh->pending = false;
}

/* The fresh handshake's peer and terms against what the program was shown:
 * the same certificate, verification result, version, suite and ALPN; no
 * Finished read. */
static bool shown_same(SSL *ssl, const struct shown *sh)
{
	X509 *leaf = kp_ssl.SSL_get0_peer_certificate(ssl);
	const SSL_CIPHER *ci = kp_ssl.SSL_get_current_cipher(ssl);
	const unsigned char *alpn = NULL;
	unsigned alpn_len = 0;
	kp_ssl.SSL_get0_alpn_selected(ssl, &alpn, &alpn_len);
	if (sh->finished)
		return false; /* its Finished: never the same */
	if (alpn_len != sh->alpn_len || (alpn_len && memcmp(alpn, sh->alpn, alpn_len) != 0))
		return false; /* another protocol on the wire */
	return !sh->peer ||
	       (leaf && sh->leaf && kp_ssl.X509_cmp(leaf, sh->leaf) == 0 &&
		(!sh->result_known || kp_ssl.SSL_get_verify_result(ssl) == sh->result) &&
		kp_ssl.SSL_version(ssl) == sh->version && ci && kp_ssl.SSL_CIPHER_get_id(ci) == sh->cipher);
}

int shown_gate(struct kp_tls *e, int *hs)
{
	if (e->shown.refused)
		return -1;
	if (!e->shown.pending)
		return 1;
	if (kp_ssl.SSL_in_init(e->ssl)) {
		*hs = KP_OUTSIDE(kp_ssl.SSL_do_handshake(e->ssl));
		if (*hs != 1)
			return 0;
	}
	bool same = shown_same(e->ssl, &e->shown);
	if (same && e->shown.sess)
		session_ex_carry(e->shown.sess, kp_ssl.SSL_get_session(e->ssl));
	shown_drop(&e->shown);
	if (same)
		return 1;
	/* the program checked the handed-out connection's peer, not this
	 * one's: nothing of its goes here, and nothing can come (its reads
	 * meet our shutdown's EOF, its writes EPIPE) */
	kp_debug("fd %d: the fresh handshake in place of a handed-out connection showed another "
		 "peer or terms than the program was shown: nothing sent on it", e->fd);
	KP_REAL(shutdown)(e->fd, SHUT_RDWR);
	e->dead = true;
	e->shown.refused = true;
	return -1;
}

/* The handshake a hand-out counted in the program's context (kp_tls_handout,
 * the hand-out across: a connect, a good one) is taken back where the program's SSL makes its
 * own on a fresh connection: libssl counts that one itself, and the
 * program's counts say one handshake a connection, as alone, whichever
 * swap made it (a replay, the write or the read that met the server's
 * close before the first request, a watcher set after the hand-out).
 * Caller holds tls_lock. */
static void handout_uncount(SSL *ssl)
{
	stat_add(ssl, STAT_CONNECT, -1);
	stat_add(ssl, STAT_GOOD, -1);
}

int kp_tls_rehandshake(struct kp_tls **slot, int fd, void *ssl_)
{
	SSL *ssl = ssl_;
	struct kp_tls *old = *slot, *e = calloc(1, sizeof(*e));
	__atomic_store_n(slot, NULL, __ATOMIC_RELEASE);
	bool free_old = false;
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	if (h && e) {
		bool handed = h->e->ssl != ssl;
		if (handed)
			handout_uncount(ssl);
		shown_keep(e, h);
		/* the handle's reference: kept with what it showed, or dropped */
		if (!(handed && handle_keep_shown(h)))
			free_old = engine_unref(h->e);
		e->ssl = ssl;
		e->fd = fd;
		e->refs = 2;
		e->seclevel = kp_ssl.SSL_get_security_level(ssl);
		e->sess_ctx = session_ctx(ssl);
		e->sess_timeout = kp_ssl.SSL_CTX_get_timeout(e->sess_ctx);
		e->crypto_gen = __atomic_load_n(&kp_tls_crypto_gen, __ATOMIC_ACQUIRE);
		if (h->e->sni)
			e->sni = strdup(h->e->sni);
		e->prog_fd = -1;
		conf_copy(&e->conf, conf_of(ssl));
		cfg_read(ssl, &e->cfg);
		if (free_old && h->e != old)
			engine_free(h->e);
		free_old = false;
		h->e = e;
		h->closed = false; /* parking the old engine closed it */
		h->shut = h->synth_err = 0;
		h->peer_kept = handed && h->peer_seen && h->verified && h->peer;
		h->verified = false;
		if (!handed) { /* (a hand-out's: kept above) */
			if (h->vchain)
				kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)h->vchain,
							   (void (*)(void *))kp_ssl.X509_free);
			h->vchain = NULL;
			free(h->peername);
			h->peername = NULL;
			own_free(&h->own); /* a fresh connection's objects are new */
		}
	}
	if (old)
		free_old = engine_unref(old);
	kp_unlock(&tls_lock);
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
	__atomic_store_n(slot, e, __ATOMIC_RELEASE);
	/* its secrets and counts are the fresh connection's, for an export
	 * at its park (a capture begun at the program's SSL_connect, before a
	 * hand-out, saw no handshake) */
	kp_lock(&tls_lock);
	bool prog_msg = conf_of(ssl)->msg_cb != NULL;
	kp_unlock(&tls_lock);
	kp_tls_capture_begin(ssl, prog_msg);
	int r = handshake_wait(ssl, fd), hs;
	if (r == 0)
		kp_tls_capture_done(ssl);
	if (r == 0 && shown_gate(e, &hs) < 0)
		r = -1;
	kp_debug("fd %d: the program's SSL made its own handshake on a fresh connection: %s", fd,
		 r == 0 ? "done" : r > 0 ? "under way" : "failed");
	return r;
}

int kp_tls_replay_step(struct kp_tls *e, const char *buf, size_t len, size_t *off)
{
	SSL *ssl = e->ssl;
	int r = 1;
	if (kp_ssl.SSL_in_init(ssl)) {
		r = KP_OUTSIDE(kp_ssl.SSL_connect(ssl));
		if (r != 1)
			goto stopped;
	}
	int g = shown_gate(e, &r);
	if (g < 0)
		return -1;
	if (g == 0)
		goto stopped;
	while (*off < len) {
		size_t w = 0;
		/* after WANT_WRITE, the same bytes at the same address: what
		 * libssl asks of a write it took in part */
		r = KP_OUTSIDE(kp_ssl.SSL_write_ex(ssl, buf + *off, len - *off, &w));
		if (r != 1)
			goto stopped;
		*off += w;
	}
	return 1;
stopped:;
	int err = kp_ssl.SSL_get_error(ssl, r);
	return err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE ? 0 : -1;
}

int kp_tls_want(const struct kp_tls *e)
{
	return kp_ssl.SSL_want(e->ssl) == SSL_WRITING ? SSL_ERROR_WANT_WRITE : SSL_ERROR_WANT_READ;
}

/* Whole TLS records, and nothing else, in the n bytes at p. */
static bool whole_records(const unsigned char *p, size_t n)
{
	size_t off = 0;
	while (n - off >= 5) {
		size_t len = (size_t)p[off + 3] << 8 | p[off + 4];
		if (len > n - off - 5)
			return false;
		off += 5 + len;
	}
	return off == n;
}

bool kp_tls_ends_unanswered(struct kp_tls *e, int fd, int avail, char *peek, size_t cap, size_t *peeked)
{
	unsigned char raw[4096];
	*peeked = 0;
	if (e->im || !e->ssl || avail <= 0 || (size_t)avail > sizeof(raw) || !cap)
		return false;
	/* a record cut short would make libssl read on into the reset and
	 * take the socket's error, which is the program's to meet */
	ssize_t got = KP_REAL(recv)(fd, raw, (size_t)avail, MSG_PEEK | MSG_DONTWAIT);
	if (got != avail || !whole_records(raw, (size_t)got))
		return false;
	int saved = errno;
	size_t n = 0;
	kp_ssl.ERR_set_mark();
	int r = KP_OUTSIDE(kp_ssl.SSL_peek_ex(e->ssl, peek, cap, &n));
	bool end = r != 1 && kp_ssl.SSL_get_error(e->ssl, r) == SSL_ERROR_ZERO_RETURN;
	kp_ssl.ERR_pop_to_mark();
	errno = saved;
	if (r == 1)
		*peeked = n;
	return end;
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
		int g = shown_gate(e, &r);
		if (g < 0) { /* another peer than shown: as a reset */
			err = ECONNRESET;
			break;
		}
		if (g > 0)
			r = e->im ? tlsf_write_ex(&e->im->f, buf + off, len - off, &w)
				  : KP_OUTSIDE(kp_ssl.SSL_write_ex(e->ssl, buf + off, len - off, &w));
		if (r == 1) {
			off += w;
			if (off < len)
				continue;
			ret = (ssize_t)len;
			break;
		}
		int saved = errno;
		e2 = e->im ? tlsf_get_error(&e->im->f, r) : kp_ssl.SSL_get_error(e->ssl, r);
		short ev = e2 == SSL_ERROR_WANT_READ ? POLLIN : e2 == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
		if (!ev || !may_wait(waited)) {
			err = e2 == SSL_ERROR_SYSCALL && saved ? saved
			      : e2 == SSL_ERROR_SSL	     ? EPROTO
							     : EPIPE;
			break;
		}
		struct pollfd pfd = { .fd = fd, .events = ev };
		KP_REAL(poll)(&pfd, 1, wait_slice());
		waited += 100;
	}
	if (buf != small && buf != iov[0].iov_base)
		free(buf);
	if (ret < 0)
		errno = err;
	return ret;
}

/* The SSL error a failed kp_tls_push left for the program's call on this
 * thread (0: none): kp_tls_io reports it as the program's SSL_get_error. */
__thread int kp_tls_push_err;
__thread bool kp_tls_push_wire;

/* kp_tls_push on a foreign engine (docs/tls-across.md "The hand-out in
 * another process"): the same answers, the reason of an SSL error raised
 * as the program's own SSL would have queued it */
static int push_foreign(struct kp_import *im, const void *buf, size_t len, size_t *w)
{
	uint64_t before = im->written;
	int r = tlsf_write_ex(&im->f, buf, len, w);
	kp_tls_push_wire = im->written != before;
	if (r == 1) {
		kp_tls_push_err = 0;
		return 1;
	}
	int saved = errno, err = tlsf_get_error(&im->f, r), reason = tlsf_last_reason(&im->f);
	*w = 0;
	kp_tls_push_err = err;
	if (err == SSL_ERROR_SSL && reason >= 0) {
		kp_ssl.ERR_new();
		kp_ssl.ERR_set_error(ERR_LIB_SSL, reason, NULL);
	}
	if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ)
		errno = saved == EINTR ? EINTR : EAGAIN;
	else
		errno = err == SSL_ERROR_SYSCALL && saved ? saved : err == SSL_ERROR_SSL ? EPROTO : EPIPE;
	return 0;
}

int kp_tls_push(struct kp_tls *e, const void *buf, size_t len, size_t *w)
{
	int r;
	*w = 0;
	if (e->im)
		return push_foreign(e->im, buf, len, w);
	BIO *wbio = kp_ssl.SSL_get_wbio(e->ssl);
	uint64_t before = wbio ? kp_ssl.BIO_number_written(wbio) : 0;
	int g = shown_gate(e, &r);
	if (g < 0) { /* another peer than shown: as a reset */
		kp_tls_push_wire = false;
		kp_tls_push_err = SSL_ERROR_SYSCALL;
		errno = ECONNRESET;
		return 0;
	}
	if (g > 0)
		r = KP_OUTSIDE(kp_ssl.SSL_write_ex(e->ssl, buf, len, w));
	/* a failed write may have put whole records on the wire before it
	 * failed: the server may have read them (docs/replay.md "A send that
	 * failed") */
	kp_tls_push_wire = !wbio || kp_ssl.BIO_number_written(wbio) != before;
	if (r == 1) {
		kp_tls_push_err = 0;
		return 1;
	}
	int saved = errno, err = kp_ssl.SSL_get_error(e->ssl, r);
	*w = 0;
	kp_tls_push_err = err;
	if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ)
		/* what its socket said: EAGAIN, or EINTR on a blocking one
		 * (OpenSSL's socket BIO retries neither) */
		errno = saved == EINTR ? EINTR : EAGAIN;
	else
		errno = err == SSL_ERROR_SYSCALL && saved ? saved : err == SSL_ERROR_SSL ? EPROTO : EPIPE;
	return 0;
}

void kp_tls_push_fail(int ssl_err)
{
	kp_tls_push_err = ssl_err;
}

/* A new object at an address: nothing recorded of an older one applies;
 * an SSL starts with its context's ALPN list. */
void kp_tls_note_new(const void *obj, const void *ctx)
{
	kp_lock(&tls_lock);
	/* a context keeps what its SSL_CTX_new noted (openssl.cnf) */
	if (ctx || !ctx_new_made(obj))
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
		if (r)
			conf_copy(&r->conf, &cr->conf);
	}
	kp_unlock(&tls_lock);
	if (stale)
		handle_free(stale);
	if (drop)
		engine_free(drop);
}

void kp_tls_before_fork(void)
{
	kp_lock(&tls_lock);
}

void kp_tls_after_fork_parent(void)
{
	kp_unlock(&tls_lock);
}

void kp_tls_after_fork_child(void)
{
	kp_mutex_init(&tls_lock);
	/* the parked connections are the parent's: the child's copies of
	 * their sockets go (pool_after_fork_child, hidden_close) and write
	 * nothing, no close_notify owed the parent's program (kp_tls_goodbye) */
	for (struct kp_tls *e = parked; e; e = e->hh.next)
		e->notify_owed = false;
	for (struct handle *h = handles; h; h = h->hh.next)
		h->e->notify_owed = false;
	/* the learners' sockets are the parent's: the child's copies go */
	for (unsigned i = 0; i < n_learners; i++) {
		kp_fd_swap(learners[i].fd, NULL);
		KP_REAL(close)(learners[i].fd);
		if (engine_unref(learners[i].e))
			engine_free(learners[i].e);
	}
	n_learners = 0;
}

/* ALPN chose a protocol, and not HTTP/1.1: not ours to frame. */
bool alpn_not_http11(SSL *ssl)
{
	const unsigned char *sel;
	unsigned sel_len;
	kp_ssl.SSL_get0_alpn_selected(ssl, &sel, &sel_len);
	return sel_len && !(sel_len == 8 && !memcmp(sel, "http/1.1", 8));
}

/* The library steps aside for a seccomp filter (docs/owner.md "A
 * sandbox") on a connection whose EOF we owe: the answer to a request
 * the program asked to close was read whole, the server told keep-alive.
 * That EOF stands in the engine's own state from now on: its SSL (or the
 * foreign engine) "received" a close_notify, so libssl's SSL_read answers
 * 0 without reading (ssl_read_internal) and SSL_shutdown sends ours and
 * says 1, and each handle it answers reads SSL_ERROR_ZERO_RETURN
 * (close_made: kp_tls_get_error).  No call is made; the server closes
 * once the program's close_notify or close reaches it.  Caller holds
 * the connection's lock. */
void kp_tls_sandbox_eof(struct kp_tls *e)
{
	kp_lock(&tls_lock);
	if (e->im)
		tlsf_set_shutdown(&e->im->f, tlsf_get_shutdown(&e->im->f) | SSL_RECEIVED_SHUTDOWN);
	else
		kp_ssl.SSL_set_shutdown(e->ssl, kp_ssl.SSL_get_shutdown(e->ssl) | SSL_RECEIVED_SHUTDOWN);
	for (struct handle *h = handles; h; h = h->hh.next)
		if (h->e == e)
			h->close_made = true;
	kp_unlock(&tls_lock);
}

/* The same install on a connection whose rewritten request is whole and
 * its answer still to come: the engine sends our close_notify (the caller
 * our FIN), so that the server ends after its answer.  Without it a FIN
 * alone ends the program's read as a truncation, and libssl's fatal alert
 * then meets our FIN: EPIPE and SIGPIPE.  The program's error queue is
 * left as it was. */
void kp_tls_sandbox_close(struct kp_tls *e)
{
	int saved = errno;
	kp_ssl.ERR_set_mark();
	if (e->im)
		(void)tlsf_shutdown(&e->im->f);
	else
		(void)KP_OUTSIDE(kp_ssl.SSL_shutdown(e->ssl));
	kp_ssl.ERR_pop_to_mark();
	errno = saved;
}
