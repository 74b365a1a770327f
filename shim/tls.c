/*
 * tls.c - whole TLS connections in the pool: engines and handles (tls.h).
 *
 * A TLS connection (or a session, for resumption) is handed only to a
 * program that would have accepted it from a handshake of its own:
 *  - everything its handshake would offer or limit is what the connection
 *    was made with, or allows what it negotiated: the destination (the
 *    pool's key), SNI, ALPN, key-exchange groups and signature algorithms
 *    (compared as the program set them: no getter tells them), client
 *    certificate, protocol versions, cipher, security level;
 *  - its own verification (trust store, verify parameters such as the
 *    hostname, verify callback) passes on the connection's peer chain,
 *    run afresh for each hand-out as OpenSSL's ssl_verify_cert_chain()
 *    runs it in a client's handshake;
 *  - nothing is decided during the handshake by code of the program's that
 *    we cannot ask (a client-certificate or certificate callback, a
 *    security callback, an application verify callback, DANE, NPN, post-
 *    handshake authentication): such a program gets a fresh handshake.
 * The verification result the program reads is its own, never the
 * engine's.  Where anything cannot be read or compared: decline.
 */
#include "tls.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/err.h>
#include <uthash.h>

#include "broker_client.h"
#include "broker_proto.h"
#include "clock.h"
#include "config.h"
#include "conn.h"
#include "dl_real.h"
#include "fdtable.h"
#include "real.h"
#include "tls_real.h"

__thread void *kp_tls_handshaking;
bool kp_tls_used;
bool kp_tls_ssl_ex_funcs;

/* wait at most this long for a TLS record to go out, or for the handshake
 * a fresh connection makes behind the program's back */
#define TLS_WAIT_MS 30000

/* A client SSL's configuration as libssl will use it in a handshake,
 * read with libssl's own getters (docs/tls.md "The record"): read for
 * the SSL that makes a connection when its handshake starts, and for the
 * program's SSL at every hand-out; compared field by field (cfg_mismatch).
 * What no getter tells is in struct conf, recorded from the setters. */
struct cfg {
	bool read;
	const SSL_METHOD *method;
	uint64_t options;
	long mode;
	long min_proto, max_proto;
	int seclevel;
	long max_cert_list;
	int read_ahead;
	int quiet_shutdown;
	long status_type;
	int ct;
	long cert_flags;
	int ca_names;
	int nciphers;
	uint32_t *ciphers; /* ids, in the order offered (TLS 1.3 suites first) */
};

/* What a full handshake negotiated that a resumption does not show: the
 * peer's signature (type and hash) and, below TLS 1.3, its key-exchange
 * key (a TLS 1.3 resumption makes a key exchange of its own).  Read from
 * a connection's own full handshake, or carried from the ticket a
 * resumption of ours came from; a connection or ticket without it is
 * neither handed out nor offered (docs/tls.md "After the handshake"). */
struct full {
	bool known;
	bool sig_ok, type_ok;
	int sig_nid, type_nid;
	EVP_PKEY *tmp; /* a reference of ours, or NULL: none */
};

struct kp_tls {
	SSL *ssl;
	struct cfg cfg;      /* what its handshake was made with */
	struct pool_key key; /* its destination, once parked */
	bool key_known;
	int refs;            /* handles mapped to it, the socket carrying it */
	int fd;              /* where its BIO writes (or the program's BIO did) */
	bool own_bio;        /* detached: the program's BIO, callbacks, context gone */
	bool dead;           /* its socket went away under it: never parked */
	bool foreign;        /* ssl is the program's again (SSL_clear): never freed */
	bool cert_known;     /* cert and chain below were read */
	STACK_OF(X509) *chain; /* the certificate chain it sends with cert */
	int prog_fd;         /* the program's socket BIO's fd and close flag, */
	int prog_close;      /* before parking moved it (-1: none) */
	char *sni;           /* what its handshake asked for */
	struct conf conf;    /* what its handshake offered that no getter tells */
	X509 *cert;          /* the client certificate it had (NULL: none) */
	int seclevel;        /* the security level its handshake ran at */
	struct saved *saved; /* the program's settings, kept when detached */
	SSL_CTX *sess_ctx;   /* where its SSL's new sessions go (session_ctx()) */
	long sess_timeout;   /* that context's session timeout at its handshake */
	struct full full;    /* its full handshake's (engine_full) */
	SSL_CTX *hs_ctx;     /* a reference of ours to the context it had when
				detached: what its handshake negotiated points
				into it (the peer's signature algorithm, in
				the context's sigalg table: docs/tls.md
				"After the handshake") */
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
	bool resumed;        /* ... as the resumption of its own session */
	long verify_result;
	STACK_OF(X509) *vchain;
	char *peername;      /* the name our verification matched */
	/* handed out: the session it reads (kp_tls_session), a copy of the
	 * engine's session src made to look as its own handshake's would */
	SSL_SESSION *sess, *sess_src;
	long handed_at;      /* time() of the hand-out: its "handshake" */
	UT_hash_handle hh;
};

/* A context's or an SSL's settings that no getter tells, by object
 * address.  SSL_new copies a context's into the SSL, as libssl copies the
 * settings themselves. */
struct record {
	const void *obj;
	struct conf conf;
	int defer_fd;        /* + 1: kp_tls_defer */
	/* a session of ours offered to the SSL (kp_tls_offer_session): what
	 * the program's own verification said of its peer chain */
	int offer_kind;      /* + 1: the kind of session its handshake offered */
	bool offered;
	bool offered_across; /* ... a session from the broker (another process's) */
	bool across_counted; /* its resumption counted (tls_resumed_across) */
	bool hit_unmade;     /* its resumption taken off its context's hits */
	bool hit_unmade_time; /* ... and its session's time made its own */
	long offered_result;
	STACK_OF(X509) *offered_chain;
	X509_VERIFY_PARAM *offered_named; /* the name that check matched */
	struct full offered_full; /* the full handshake the session came from */
	/* the context an SSL was made with, where SSL_set_SSL_CTX changed it
	 * since: libssl's session_ctx, which keeps its new-session callback
	 * and cache (docs/tls.md "Callbacks that watch") */
	const void *sess_ctx;
	/* a context's: what its SSL_CTX_sess_connect, _connect_good and
	 * _hits answer beyond libssl's count (handshakes it did not make,
	 * or made as a resumption we answer as full), and _misses (a session
	 * of ours the server refused: the program offered none) */
	long stat_adj[4];
	UT_hash_handle hh;
};

enum { STAT_CONNECT, STAT_GOOD, STAT_HIT, STAT_MISS };

/* ssl's session context counts a handshake its program did not make, or
 * unmakes a hit.  Caller holds tls_lock. */
static SSL_CTX *session_ctx(SSL *ssl);
static struct record *record_get(const void *obj, bool create);
static void stat_add(SSL *ssl, int which, long n)
{
	struct record *r = record_get(session_ctx(ssl), true);
	if (r)
		r->stat_adj[which] += n;
}

/* The fallback where no pooled connection can serve: the newest session
 * of a parked connection per destination and SNI, with what its handshake
 * asked for and the peer chain it verified (a resumed handshake skips the
 * certificate: the program's own verification runs on this chain before
 * the session is offered). */
struct ticket {
	struct pool_key key;
	char *sni;
	struct conf conf;
	X509 *cert;
	STACK_OF(X509) *cchain; /* the chain sent with cert */
	int seclevel;
	struct cfg cfg;
	SSL_SESSION *sess;
	X509 *leaf;
	STACK_OF(X509) *chain;
	struct full full;
	long sess_timeout;   /* its first owner's context's session timeout */
	struct ticket *next;
};

static void full_free(struct full *f)
{
	if (f->tmp)
		kp_ssl.EVP_PKEY_free(f->tmp);
	memset(f, 0, sizeof(*f));
}

static void full_copy(struct full *dst, const struct full *src)
{
	full_free(dst);
	*dst = *src;
	if (dst->tmp && !kp_ssl.EVP_PKEY_up_ref(dst->tmp))
		memset(dst, 0, sizeof(*dst)); /* not known */
}

/* what ssl's (full) handshake negotiated */
static void full_read(SSL *ssl, struct full *f)
{
	full_free(f);
	f->type_ok = kp_ssl.SSL_get_peer_signature_type_nid(ssl, &f->type_nid) > 0;
	f->sig_ok = kp_ssl.SSL_ctrl(ssl, SSL_CTRL_GET_PEER_SIGNATURE_NID, 0, &f->sig_nid) > 0;
	if (kp_ssl.SSL_ctrl(ssl, SSL_CTRL_GET_PEER_TMP_KEY, 0, &f->tmp) <= 0)
		f->tmp = NULL;
	f->known = true;
}
#define MAX_TICKETS 64

static kp_mutex_t tls_lock = KP_MUTEX_INITIALIZER;
static struct ticket *tickets; /* newest first */
static struct handle *handles;
static struct kp_tls *parked;
static struct record *records;
/* What a destination did with the last session a handshake we followed
 * offered it, by kind of offer: resumed it, or made a full handshake.  A
 * program offering a session of its own is handed a pooled connection
 * only where this is known, as what the server would do: the resumption
 * (its own connection's session only) or a full handshake (docs/tls.md
 * "Sessions").  A small ring. */
#define MAX_RESUMERS 16
static struct resumer {
	struct pool_key key;
	int kind; /* resumption_kind(): a server may resume tickets, not ids */
	bool resumes;
} resumers[MAX_RESUMERS];
static unsigned n_resumers;

/* How each destination ended the last TLS connection it was asked to end
 * (a request's close that reached it, or its own Connection: close), as
 * a followed read met it: close_notify first, or the TCP FIN alone; or,
 * not known yet, that a program of this process would tell the
 * difference (it read an EOF we owed, or called SSL_shutdown again after
 * it).  An EOF the library owes is shown as a close_notify, so a request
 * that asks to close is rewritten where that is what the server sends,
 * or where nothing is known yet and no program has looked (docs/tls.md
 * "Ragged closes").  A small ring, as resumers. */
enum { CL_RAGGED = 0, CL_NOTIFY = 1, CL_TELLS = 2 };
/* 0: a destination not known owes no EOF at all (strict default deny:
 * measured, docs/tls.md, it costs Python's urllib all its HTTPS reuse) */
#define CLOSER_UNKNOWN_OWES 0
#define MAX_CLOSERS 16
static struct closer {
	struct pool_key key;
	int state; /* CL_* */
} closers[MAX_CLOSERS];
static unsigned n_closers;

/* Caller holds tls_lock. */
static struct closer *closer(const struct pool_key *key)
{
	for (unsigned i = 0; i < MAX_CLOSERS && i < n_closers; i++)
		if (!memcmp(&closers[i].key, key, sizeof(*key)))
			return &closers[i];
	return NULL;
}

/* What was learnt travels through the broker as an entry of its session
 * store under this name (a SHA-256 of a configuration never equals it):
 * one byte, 1 close_notify, 0 the FIN alone.  So a process that makes one
 * request rewrites it when an earlier one saw the server's end. */
static const uint8_t closer_name[BK_SESS_NAME] = "libkeepalive: how servers end.";
#define CLOSER_KEEP_S 3600

/* told: only where nothing is known of the server (a server's way wins) */
static void closer_set(const struct pool_key *key, int state)
{
	kp_lock(&tls_lock);
	struct closer *seen = closer(key);
	if (seen && state == CL_TELLS) {
		kp_unlock(&tls_lock);
		return;
	}
	if (!seen)
		seen = &closers[n_closers++ % MAX_CLOSERS];
	*seen = (struct closer){ *key, state };
	kp_unlock(&tls_lock);
}

/* a program looked at the end we owed where the server's way is not
 * known, or it is known ragged: a pooled connection is not handed out (the
 * program's request then goes on a fresh connection, not rewritten, whose
 * close reaches the server and teaches; docs/tls.md "Ragged closes") */
static bool closer_looked(const struct pool_key *key)
{
	kp_lock(&tls_lock);
	struct closer *cl = closer(key);
	bool looked = cl && (cl->state == CL_TELLS || cl->state == CL_RAGGED);
	kp_unlock(&tls_lock);
	return looked;
}

static void closer_told(const struct pool_key *key)
{
	closer_set(key, CL_TELLS);
}

/* the server's way is known (close_notify or the FIN alone) */
static bool closer_known(const struct pool_key *key)
{
	kp_lock(&tls_lock);
	struct closer *cl = closer(key);
	bool known = cl && (cl->state == CL_NOTIFY || cl->state == CL_RAGGED);
	kp_unlock(&tls_lock);
	return known;
}

static void learn_poll(const struct pool_key *key, bool last);

bool kp_tls_closes_clean(const struct pool_key *key)
{
	learn_poll(key, false); /* a connection closed before may know now */
	kp_lock(&tls_lock);
	struct closer *seen = closer(key);
	int state = seen ? seen->state : -1;
	kp_unlock(&tls_lock);
	if (state < 0 || state == CL_TELLS) {
		uint8_t b[8];
		if (kp_broker_sess_get(key, closer_name, b, sizeof(b)) == 1 && b[0] <= 1) {
			state = b[0];
			closer_set(key, state);
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
static void closer_learn(SSL *e, int r, const struct pool_key *key)
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
	closer_set(key, notify == 1 ? CL_NOTIFY : CL_RAGGED);
	uint8_t b = (uint8_t)notify;
	kp_broker_sess_put(key, closer_name, CLOSER_KEEP_S, false, &b, 1);
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
		closer_learn(s, r, &l->key);
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
		bool known = closer_known(&l->key);
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

bool kp_tls_learn(struct kp_tls *e, int hidden, const struct pool_key *key)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE) || __atomic_load_n(&learn_over, __ATOMIC_ACQUIRE) ||
	    closer_known(key))
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
	struct learner l = { e, hidden, *key, kp_now_ms() };
	if (learn_step(&l) || closer_known(key))
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

/* How ssl's handshake offers session sess: its protocol version, with a
 * ticket or by id (SSL_OP_NO_TICKET sends no ticket). */
static int resumption_kind(SSL *ssl, SSL_SESSION *sess)
{
	bool ticket = kp_ssl.SSL_SESSION_has_ticket(sess) && !(kp_ssl.SSL_get_options(ssl) & SSL_OP_NO_TICKET);
	return kp_ssl.SSL_SESSION_get_protocol_version(sess) << 1 | ticket;
}

/* Caller holds tls_lock. */
static struct resumer *resumer(const struct pool_key *key, int kind)
{
	for (unsigned i = 0; i < n_resumers && i < MAX_RESUMERS; i++)
		if (resumers[i].kind == kind && !memcmp(&resumers[i].key, key, sizeof(*key)))
			return &resumers[i];
	return NULL;
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
static SSL_CTX *shim_ctx_get(void)
{
	pthread_once(&shim_ctx_once, shim_ctx_make);
	return shim_ctx;
}


static struct handle *handle_find(const SSL *ssl);
static bool engine_unref(struct kp_tls *e);
static STACK_OF(X509) *client_chain(SSL *ssl, X509 *cert);
static void engine_free(struct kp_tls *e);
static void handle_free(struct handle *h);
static void ticket_keep(struct kp_tls *e, const struct pool_key *key);
static SSL_SESSION *session_anew(SSL_SESSION *sess, long at);

/* ------------------------------------------------------------ settings */

static const char *const never_why[] = {
	[NEVER_APP_VERIFY] = "an application verify callback",
	[NEVER_DANE] = "DANE",
	[NEVER_CERT_CB] = "a certificate callback",
	[NEVER_NPN] = "NPN",
	[NEVER_ENGINE] = "a client certificate engine",
	[NEVER_TMP_ECDH] = "a temporary ECDH key",
	[NEVER_CUSTOM_EXT] = "custom TLS extensions",
	[NEVER_PSK] = "a PSK callback",
	[NEVER_ACCEPT] = "the server side (SSL_set_accept_state)",
	[NEVER_LIBCTX] = "a library context of its own (our re-verification uses the default)",
	[NEVER_UNKNOWN] = "settings not recorded (out of memory, or SSL_dup)",
	[NEVER_UNKNOWN_CTRL] = "an SSL_ctrl command not in our table",
	[NEVER_UNKNOWN_CB] = "a callback (SSL_callback_ctrl) not in our table",
	[NEVER_SRP] = "SRP",
	[NEVER_STATUS_CB] = "an OCSP status callback",
	[NEVER_PADDING_CB] = "a record padding callback",
	[NEVER_TICKET_EXT] = "a session ticket extension of its own",
};

static const char *const val_what[CONF_VALS] = {
	[VAL_MAX_SEND_FRAGMENT] = "max send fragment",
	[VAL_SPLIT_SEND_FRAGMENT] = "split send fragment",
	[VAL_MAX_PIPELINES] = "max pipelines",
	[VAL_BLOCK_PADDING] = "record block padding",
	[VAL_MAX_FRAG_LEN] = "max fragment length extension",
};

static const char *const list_what[CONF_LISTS] = {
	[CONF_ALPN] = "ALPN offered",
	[CONF_GROUPS] = "key-exchange groups",
	[CONF_SIGALGS] = "signature algorithms",
	[CONF_CLIENT_SIGALGS] = "client signature algorithms",
	[CONF_PHA] = "post-handshake authentication",
};

static void conf_free(struct conf *c)
{
	for (int i = 0; i < CONF_LISTS; i++)
		free(c->list[i]);
	memset(c, 0, sizeof(*c));
}

/* list i of c becomes a copy of p (n bytes); an empty one is the default */
static void conf_set(struct conf *c, int i, const void *p, size_t n)
{
	unsigned char *copy = n ? malloc(n) : NULL;
	if (n && !copy)
		c->never |= 1u << NEVER_UNKNOWN;
	else if (n)
		memcpy(copy, p, n);
	free(c->list[i]);
	c->list[i] = copy;
	c->len[i] = copy ? n : 0;
}

static void conf_copy(struct conf *dst, const struct conf *src)
{
	conf_free(dst);
	dst->never = src->never;
	dst->msg_cb = src->msg_cb;
	memcpy(dst->val, src->val, sizeof(dst->val));
	for (int i = 0; i < CONF_LISTS; i++)
		conf_set(dst, i, src->list[i], src->len[i]);
}

/* What a handshake with settings b would offer differently from one with
 * settings a: compared as set, so an equal list written another way
 * declines (a fresh handshake is always correct). */
static const char *conf_mismatch(const struct conf *a, const struct conf *b)
{
	for (int i = 0; i < CONF_LISTS; i++)
		if (a->len[i] != b->len[i] || (a->len[i] && memcmp(a->list[i], b->list[i], a->len[i])))
			return list_what[i];
	for (int i = 0; i < CONF_VALS; i++)
		if (a->val[i] != b->val[i])
			return val_what[i];
	return NULL;
}

static const char *never_reason(unsigned never)
{
	for (unsigned i = 0; i < sizeof(never_why) / sizeof(never_why[0]); i++)
		if (never & (1u << i))
			return never_why[i];
	return NULL;
}

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
		conf_free(&r->conf);
		if (r->offered_chain)
			kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)r->offered_chain,
						   (void (*)(void *))kp_ssl.X509_free);
		if (r->offered_named)
			kp_ssl.X509_VERIFY_PARAM_free(r->offered_named);
		full_free(&r->offered_full);
		free(r);
	}
}

void kp_tls_note_list(const void *obj, enum kp_conf_list i, const void *p, size_t n)
{
	kp_lock(&tls_lock);
	struct record *r = record_get(obj, true);
	if (r)
		conf_set(&r->conf, i, p, n);
	kp_unlock(&tls_lock);
}

void kp_tls_note_never(const void *obj, enum kp_never why, bool on)
{
	kp_lock(&tls_lock);
	struct record *r = record_get(obj, on);
	if (r && on)
		r->conf.never |= 1u << why;
	else if (r)
		r->conf.never &= ~(1u << why);
	kp_unlock(&tls_lock);
}

void kp_tls_note_msg_cb(const void *obj, kp_msg_cb cb)
{
	kp_lock(&tls_lock);
	struct record *r = record_get(obj, true);
	if (r)
		r->conf.msg_cb = cb;
	kp_unlock(&tls_lock);
}

void kp_tls_note_val(const void *obj, enum kp_conf_val i, long v)
{
	kp_lock(&tls_lock);
	struct record *r = record_get(obj, true);
	if (r)
		r->conf.val[i] = v;
	kp_unlock(&tls_lock);
}

/* What an SSL_ctrl / SSL_CTX_ctrl command is to a client's handshake
 * (docs/tls.md "ctrl commands").  Anything not listed is CTRL_UNKNOWN:
 * the object's handshakes are never pooled. */
enum ctrl_kind {
	CTRL_UNKNOWN,
	CTRL_GETTER, /* reads, changes nothing */
	CTRL_READ,   /* a setting a getter reads at hand-out */
	CTRL_RECORD, /* a setting no getter tells: recorded here */
	CTRL_SERVER, /* used by a server's handshake only */
	CTRL_ALLOWED, /* cannot change a client's handshake or its I/O (docs/tls.md) */
	CTRL_NEVER,  /* decided in code of the program's, or unreadable */
};

static enum ctrl_kind ctrl_kind(int cmd)
{
	switch (cmd) {
	case SSL_CTRL_GET_CLIENT_CERT_REQUEST:
	case SSL_CTRL_GET_NUM_RENEGOTIATIONS:
	case SSL_CTRL_CLEAR_NUM_RENEGOTIATIONS:
	case SSL_CTRL_GET_TOTAL_RENEGOTIATIONS:
	case SSL_CTRL_GET_FLAGS:
	case SSL_CTRL_SESS_NUMBER:
	case SSL_CTRL_SESS_CONNECT:
	case SSL_CTRL_SESS_CONNECT_GOOD:
	case SSL_CTRL_SESS_CONNECT_RENEGOTIATE:
	case SSL_CTRL_SESS_ACCEPT:
	case SSL_CTRL_SESS_ACCEPT_GOOD:
	case SSL_CTRL_SESS_ACCEPT_RENEGOTIATE:
	case SSL_CTRL_SESS_HIT:
	case SSL_CTRL_SESS_CB_HIT:
	case SSL_CTRL_SESS_MISSES:
	case SSL_CTRL_SESS_TIMEOUTS:
	case SSL_CTRL_SESS_CACHE_FULL:
	case SSL_CTRL_GET_READ_AHEAD:
	case SSL_CTRL_GET_SESS_CACHE_SIZE:
	case SSL_CTRL_GET_SESS_CACHE_MODE:
	case SSL_CTRL_GET_MAX_CERT_LIST:
	case SSL_CTRL_GET_TLSEXT_TICKET_KEYS:
	case SSL_CTRL_GET_TLSEXT_STATUS_REQ_EXTS:
	case SSL_CTRL_GET_TLSEXT_STATUS_REQ_IDS:
	case SSL_CTRL_GET_TLSEXT_STATUS_REQ_OCSP_RESP:
	case SSL_CTRL_GET_RI_SUPPORT:
	case SSL_CTRL_GET_EXTRA_CHAIN_CERTS:
	case SSL_CTRL_GET_GROUPS:
	case SSL_CTRL_GET_SHARED_GROUP:
	case SSL_CTRL_GET_CLIENT_CERT_TYPES:
	case SSL_CTRL_GET_PEER_SIGNATURE_NID:
	case SSL_CTRL_GET_PEER_TMP_KEY:
	case SSL_CTRL_GET_RAW_CIPHERLIST:
	case SSL_CTRL_GET_EC_POINT_FORMATS:
	case SSL_CTRL_GET_CHAIN_CERTS:
	case SSL_CTRL_GET_EXTMS_SUPPORT:
	case SSL_CTRL_GET_TLSEXT_STATUS_REQ_TYPE:
	case SSL_CTRL_GET_TLSEXT_STATUS_REQ_CB:
	case SSL_CTRL_GET_TLSEXT_STATUS_REQ_CB_ARG:
	case SSL_CTRL_GET_MIN_PROTO_VERSION:
	case SSL_CTRL_GET_MAX_PROTO_VERSION:
	case SSL_CTRL_GET_SIGNATURE_NID:
	case SSL_CTRL_GET_TMP_KEY:
	case SSL_CTRL_GET_NEGOTIATED_GROUP:
	case SSL_CTRL_GET_VERIFY_CERT_STORE:
	case SSL_CTRL_GET_CHAIN_CERT_STORE:
		return CTRL_GETTER;
	case SSL_CTRL_EXTRA_CHAIN_CERT:
	case SSL_CTRL_MODE:
	case SSL_CTRL_CLEAR_MODE:
	case SSL_CTRL_SET_READ_AHEAD:
	case SSL_CTRL_SET_MAX_CERT_LIST:
	case SSL_CTRL_SET_TLSEXT_HOSTNAME:
	case SSL_CTRL_SET_TLSEXT_STATUS_REQ_TYPE:
	case SSL_CTRL_CLEAR_EXTRA_CHAIN_CERTS:
	case SSL_CTRL_CHAIN:
	case SSL_CTRL_CHAIN_CERT:
	case SSL_CTRL_CERT_FLAGS:
	case SSL_CTRL_CLEAR_CERT_FLAGS:
	case SSL_CTRL_BUILD_CERT_CHAIN:
	case SSL_CTRL_SET_VERIFY_CERT_STORE:
	case SSL_CTRL_SET_CHAIN_CERT_STORE:
	case SSL_CTRL_SELECT_CURRENT_CERT:
	case SSL_CTRL_SET_CURRENT_CERT:
	case SSL_CTRL_SET_MIN_PROTO_VERSION:
	case SSL_CTRL_SET_MAX_PROTO_VERSION:
		return CTRL_READ;
	case SSL_CTRL_SET_MAX_SEND_FRAGMENT:
	case SSL_CTRL_SET_SPLIT_SEND_FRAGMENT:
	case SSL_CTRL_SET_MAX_PIPELINES:
	case SSL_CTRL_SET_GROUPS:
	case SSL_CTRL_SET_GROUPS_LIST:
	case SSL_CTRL_SET_SIGALGS:
	case SSL_CTRL_SET_SIGALGS_LIST:
	case SSL_CTRL_SET_CLIENT_SIGALGS:
	case SSL_CTRL_SET_CLIENT_SIGALGS_LIST:
		return CTRL_RECORD;
	case SSL_CTRL_SET_TMP_DH:
	case SSL_CTRL_SET_TLSEXT_SERVERNAME_ARG:
	case SSL_CTRL_SET_TLSEXT_TICKET_KEYS:
	case SSL_CTRL_SET_TLSEXT_STATUS_REQ_OCSP_RESP:
	case SSL_CTRL_SET_CLIENT_CERT_TYPES:
	case SSL_CTRL_SET_DH_AUTO:
		return CTRL_SERVER;
	case SSL_CTRL_SET_MSG_CALLBACK_ARG:
	case SSL_CTRL_SET_MTU:
	case SSL_CTRL_SET_SESS_CACHE_SIZE:
	case SSL_CTRL_SET_SESS_CACHE_MODE:
	case SSL_CTRL_SET_TLSEXT_DEBUG_ARG:
	case SSL_CTRL_SET_TLSEXT_STATUS_REQ_CB_ARG:
	case SSL_CTRL_SET_TLSEXT_STATUS_REQ_EXTS:
	case SSL_CTRL_SET_TLSEXT_STATUS_REQ_IDS:
		return CTRL_ALLOWED;
	case SSL_CTRL_SET_TMP_ECDH:
	case SSL_CTRL_SET_TLS_EXT_SRP_USERNAME:
	case SSL_CTRL_SET_TLS_EXT_SRP_STRENGTH:
	case SSL_CTRL_SET_TLS_EXT_SRP_PASSWORD:
	case SSL_CTRL_SET_RETRY_VERIFY:
		return CTRL_NEVER;
	}
	return CTRL_UNKNOWN;
}

/* SSL_ctrl and SSL_CTX_ctrl: what no getter tells, recorded; the unknown
 * noted.  Getters and what a getter reads return at once, without a
 * lock: libssl calls these under ours too (SSL_set_msg_callback). */
void kp_tls_note_ctrl(const void *obj, int cmd, long larg, const void *parg, long ret)
{
	enum ctrl_kind kind = ctrl_kind(cmd);
	if (kind == CTRL_GETTER || kind == CTRL_READ || kind == CTRL_SERVER || kind == CTRL_ALLOWED)
		return;
	if (kind == CTRL_UNKNOWN) {
		kp_tls_note_never(obj, NEVER_UNKNOWN_CTRL, true);
		return;
	}
	if (kind == CTRL_NEVER) {
		kp_tls_note_never(obj, cmd == SSL_CTRL_SET_TMP_ECDH ? NEVER_TMP_ECDH
				       : cmd == SSL_CTRL_SET_RETRY_VERIFY ? NEVER_APP_VERIFY
									   : NEVER_SRP,
				  true);
		return;
	}
	if (ret <= 0) /* refused: nothing changed */
		return;
	enum kp_conf_list i;
	switch (cmd) {
	case SSL_CTRL_SET_MAX_SEND_FRAGMENT:
	case SSL_CTRL_SET_SPLIT_SEND_FRAGMENT:
		/* 16384 is the default */
		kp_tls_note_val(obj, cmd == SSL_CTRL_SET_MAX_SEND_FRAGMENT ? VAL_MAX_SEND_FRAGMENT
									  : VAL_SPLIT_SEND_FRAGMENT,
				larg == SSL3_RT_MAX_PLAIN_LENGTH ? 0 : larg);
		return;
	case SSL_CTRL_SET_MAX_PIPELINES:
		kp_tls_note_val(obj, VAL_MAX_PIPELINES, larg <= 1 ? 0 : larg);
		return;
	case SSL_CTRL_SET_GROUPS:
		i = CONF_GROUPS;
		break;
	case SSL_CTRL_SET_SIGALGS:
		i = CONF_SIGALGS;
		break;
	case SSL_CTRL_SET_CLIENT_SIGALGS:
		i = CONF_CLIENT_SIGALGS;
		break;
	case SSL_CTRL_SET_GROUPS_LIST:
	case SSL_CTRL_SET_SIGALGS_LIST:
	case SSL_CTRL_SET_CLIENT_SIGALGS_LIST: {
		i = cmd == SSL_CTRL_SET_GROUPS_LIST    ? CONF_GROUPS
		    : cmd == SSL_CTRL_SET_SIGALGS_LIST ? CONF_SIGALGS
						       : CONF_CLIENT_SIGALGS;
		/* 's' and the text: never equal to a list of numbers */
		size_t n = parg ? strlen(parg) : 0;
		char *b = malloc(n + 1);
		if (!b) {
			kp_tls_note_never(obj, NEVER_UNKNOWN, true);
			return;
		}
		b[0] = 's';
		if (n)
			memcpy(b + 1, parg, n);
		kp_tls_note_list(obj, i, b, n + 1);
		free(b);
		return;
	}
	default:
		return;
	}
	/* a count of ints (sigalgs: pairs of them) */
	if (larg < 0 || larg > 1024 || (larg && !parg))
		kp_tls_note_never(obj, NEVER_UNKNOWN, true);
	else
		kp_tls_note_list(obj, i, parg, (size_t)larg * sizeof(int));
}

/* SSL_callback_ctrl and SSL_CTX_callback_ctrl: the callbacks in the table
 * (docs/tls.md); the message and debug callbacks only watch */
void kp_tls_note_callback_ctrl(const void *obj, int cmd, bool set)
{
	switch (cmd) {
	case SSL_CTRL_SET_MSG_CALLBACK:
	case SSL_CTRL_SET_TLSEXT_DEBUG_CB:
	case SSL_CTRL_SET_TLSEXT_SERVERNAME_CB: /* a server's */
	case SSL_CTRL_SET_TLSEXT_TICKET_KEY_CB:  /* a server's */
	case SSL_CTRL_SET_TMP_DH_CB:             /* a server's */
	case SSL_CTRL_SET_NOT_RESUMABLE_SESS_CB: /* a server's */
		return;
	case SSL_CTRL_SET_TLSEXT_STATUS_REQ_CB:
		kp_tls_note_never(obj, NEVER_STATUS_CB, set);
		return;
	case SSL_CTRL_SET_TLS_EXT_SRP_USERNAME_CB:
	case SSL_CTRL_SET_SRP_VERIFY_PARAM_CB:
	case SSL_CTRL_SET_SRP_GIVE_CLIENT_PWD_CB:
		if (set)
			kp_tls_note_never(obj, NEVER_SRP, true);
		return;
	}
	kp_tls_note_never(obj, NEVER_UNKNOWN_CB, true);
}

/* SSL_set_SSL_CTX: the SSL's certificate settings (libssl's CERT: the
 * signature algorithms, the certificate callback, ...) are a copy of the
 * new context's now; the getters read the rest */
void kp_tls_note_set_ctx(const void *ssl, const void *ctx, const void *before)
{
	kp_lock(&tls_lock);
	struct record *r = record_get(ssl, true), *cr = record_get(ctx, false);
	if (r && !r->sess_ctx)
		r->sess_ctx = before;
	if (r) {
		static const enum kp_conf_list in_cert[] = { CONF_SIGALGS, CONF_CLIENT_SIGALGS };
		for (unsigned k = 0; k < sizeof(in_cert) / sizeof(in_cert[0]); k++) {
			enum kp_conf_list i = in_cert[k];
			conf_set(&r->conf, i, cr ? cr->conf.list[i] : NULL, cr ? cr->conf.len[i] : 0);
		}
		unsigned bit = 1u << NEVER_CERT_CB;
		r->conf.never = (r->conf.never & ~bit) | (cr ? cr->conf.never & bit : 0);
	}
	kp_unlock(&tls_lock);
}

void kp_tls_defer(void *ssl, int fd)
{
	kp_lock(&tls_lock);
	struct record *r = record_get(ssl, true);
	if (r)
		r->defer_fd = fd + 1;
	kp_unlock(&tls_lock);
}

static int deferred_fd(SSL *ssl)
{
	kp_lock(&tls_lock);
	struct record *r = record_get(ssl, false);
	int fd = r ? r->defer_fd - 1 : -1;
	if (r)
		r->defer_fd = 0;
	kp_unlock(&tls_lock);
	return fd;
}

/* A new object at an address: nothing recorded of an older one applies;
 * an SSL starts with its context's ALPN list. */
void kp_tls_note_new(const void *obj, const void *ctx)
{
	kp_lock(&tls_lock);
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

/* ------------------------------------------------------------ the record */

/* Option bits libssl 3.0 defines (bit 5 is unused); any other bit set
 * declines: we do not know what it changes. */
#define KNOWN_OPTIONS ((uint64_t)0xffffffff & ~SSL_OP_BIT(5))
/* Options that may differ (docs/tls.md "allow-list"): they act only after
 * the handshake, and the engine takes the program's at hand-out
 * (SSL_OP_NO_RENEGOTIATION: the engine refuses renegotiation whatever
 * the program's says, docs/tls.md "Renegotiation"). */
#define CARRIED_OPTIONS (SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION)
#define KNOWN_MODES                                                                              \
	(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_AUTO_RETRY | \
	 SSL_MODE_NO_AUTO_CHAIN | SSL_MODE_RELEASE_BUFFERS | SSL_MODE_SEND_CLIENTHELLO_TIME |        \
	 SSL_MODE_SEND_SERVERHELLO_TIME | SSL_MODE_SEND_FALLBACK_SCSV | SSL_MODE_ASYNC |             \
	 SSL_MODE_DTLS_SCTP_LABEL_LENGTH_BUG)
/* modes of the I/O calls only: the engine takes the program's */
#define CARRIED_MODES                                                                            \
	(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_AUTO_RETRY | \
	 SSL_MODE_RELEASE_BUFFERS)

static void cfg_free(struct cfg *c)
{
	free(c->ciphers);
	memset(c, 0, sizeof(*c));
}

/* Read ssl's configuration with the real getters (no wrapper, no lock
 * needed).  c->read stays false when it cannot (out of memory): such a
 * record equals nothing. */
static void cfg_read(SSL *ssl, struct cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->method = kp_ssl.SSL_get_ssl_method(ssl);
	c->options = kp_ssl.SSL_get_options(ssl);
	c->mode = kp_ssl.SSL_ctrl(ssl, SSL_CTRL_MODE, 0, NULL);
	c->min_proto = kp_ssl.SSL_ctrl(ssl, SSL_CTRL_GET_MIN_PROTO_VERSION, 0, NULL);
	c->max_proto = kp_ssl.SSL_ctrl(ssl, SSL_CTRL_GET_MAX_PROTO_VERSION, 0, NULL);
	c->seclevel = kp_ssl.SSL_get_security_level(ssl);
	c->max_cert_list = kp_ssl.SSL_ctrl(ssl, SSL_CTRL_GET_MAX_CERT_LIST, 0, NULL);
	c->read_ahead = kp_ssl.SSL_get_read_ahead(ssl);
	c->quiet_shutdown = kp_ssl.SSL_get_quiet_shutdown(ssl);
	c->status_type = kp_ssl.SSL_ctrl(ssl, SSL_CTRL_GET_TLSEXT_STATUS_REQ_TYPE, 0, NULL);
	c->ct = kp_ssl.SSL_ct_is_enabled(ssl);
	c->cert_flags = kp_ssl.SSL_ctrl(ssl, SSL_CTRL_CERT_FLAGS, 0, NULL);
	const STACK_OF(X509_NAME) *ca = kp_ssl.SSL_get0_CA_list(ssl);
	c->ca_names = ca ? kp_ssl.OPENSSL_sk_num((const OPENSSL_STACK *)ca) : 0;
	STACK_OF(SSL_CIPHER) *ciphers = kp_ssl.SSL_get_ciphers(ssl);
	int n = ciphers ? kp_ssl.OPENSSL_sk_num((OPENSSL_STACK *)ciphers) : 0;
	if (n > 0 && !(c->ciphers = malloc((size_t)n * sizeof(*c->ciphers))))
		return;
	for (int i = 0; i < n; i++)
		c->ciphers[i] = kp_ssl.SSL_CIPHER_get_id(kp_ssl.OPENSSL_sk_value((OPENSSL_STACK *)ciphers, i));
	c->nciphers = n;
	c->read = true;
}

static void cfg_copy(struct cfg *dst, const struct cfg *src)
{
	cfg_free(dst);
	*dst = *src;
	dst->ciphers = NULL;
	if (src->nciphers && !(dst->ciphers = malloc((size_t)src->nciphers * sizeof(*src->ciphers)))) {
		dst->read = false;
		dst->nciphers = 0;
		return;
	}
	if (src->nciphers)
		memcpy(dst->ciphers, src->ciphers, (size_t)src->nciphers * sizeof(*src->ciphers));
}

/* Where a handshake made with configuration now would differ from one
 * made with was, field by field; NULL: the same but for the allow-list
 * (docs/tls.md). */
static const char *cfg_mismatch(const struct cfg *was, const struct cfg *now)
{
	if (!was->read || !now->read)
		return "configuration not read";
	if ((was->options | now->options) & ~KNOWN_OPTIONS)
		return "an option bit not in our table";
	if ((was->options ^ now->options) & ~CARRIED_OPTIONS)
		return "options";
	if ((was->mode | now->mode) & ~KNOWN_MODES)
		return "a mode bit not in our table";
	if ((was->mode ^ now->mode) & ~CARRIED_MODES)
		return "mode";
	if (was->method != now->method)
		return "SSL method";
	if (was->min_proto != now->min_proto || was->max_proto != now->max_proto)
		return "protocol version limits";
	if (was->seclevel != now->seclevel)
		return "security level";
	if (was->max_cert_list != now->max_cert_list)
		return "max certificate list";
	if (was->read_ahead != now->read_ahead)
		return "read ahead";
	if (was->quiet_shutdown != now->quiet_shutdown)
		return "quiet shutdown";
	if (was->status_type != -1 || now->status_type != -1)
		return "OCSP stapling asked";
	if (was->ct || now->ct)
		return "certificate transparency";
	if (was->cert_flags != now->cert_flags)
		return "certificate flags (Suite B)";
	if (was->ca_names || now->ca_names)
		return "certificate authorities sent";
	if (was->nciphers != now->nciphers ||
	    (was->nciphers && memcmp(was->ciphers, now->ciphers, (size_t)was->nciphers * sizeof(*was->ciphers))))
		return "ciphers";
	return NULL;
}

/* ------------------------------------------------------------ engines */

static struct handle *handle_find(const SSL *ssl)
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

static void saved_free(struct saved *sv)
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
static int prog_socket_bio(SSL *ssl, int *close_flag)
{
	BIO *b = kp_ssl.SSL_get_rbio(ssl);
	int fd = -1;
	if (!b || b != kp_ssl.SSL_get_wbio(ssl) || kp_ssl.BIO_method_type(b) != BIO_TYPE_SOCKET ||
	    kp_ssl.BIO_ctrl(b, BIO_C_GET_FD, 0, &fd) < 0)
		return -1;
	*close_flag = (int)kp_ssl.BIO_ctrl(b, BIO_CTRL_GET_CLOSE, 0, NULL);
	return fd;
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

/* Caller holds tls_lock.  True when the caller must engine_free(e) after
 * letting go of the lock. */
static bool engine_unref(struct kp_tls *e)
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

static void handle_free(struct handle *h)
{
	if (h->sess)
		kp_ssl.SSL_SESSION_free(h->sess);
	free(h->peername);
	if (h->vchain)
		kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)h->vchain, (void (*)(void *))kp_ssl.X509_free);
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
static SSL_CTX *session_ctx(SSL *ssl)
{
	struct record *r = record_get(ssl, false);
	return r && r->sess_ctx ? (SSL_CTX *)r->sess_ctx : kp_ssl.SSL_get_SSL_CTX(ssl);
}

/* A client handshake on an SSL whose sessions go to ctx tells the program
 * of them: its new-session callback, or the context's own cache.  What it
 * is told cannot be made what its own handshake would tell (docs/tls.md
 * "Callbacks that watch"). */
static bool tells_sessions(SSL_CTX *ctx)
{
	long mode = ctx ? kp_ssl.SSL_CTX_ctrl(ctx, SSL_CTRL_GET_SESS_CACHE_MODE, 0, NULL) : 0;
	return (mode & SSL_SESS_CACHE_CLIENT) &&
	       (kp_ssl.SSL_CTX_sess_get_new_cb(ctx) || !(mode & SSL_SESS_CACHE_NO_INTERNAL_STORE));
}

/* Code of the program's that watches ssl's handshake: what it would see
 * of a handshake of its own, a handed-out connection (none) or a session
 * of ours (a resumption) cannot show it.  Caller holds tls_lock. */
static const char *watcher(SSL *ssl, const struct conf *conf)
{
	SSL_CTX *ctx = kp_ssl.SSL_get_SSL_CTX(ssl);
	if (kp_ssl.SSL_CTX_get_keylog_callback(ctx))
		return "a keylog callback";
	if (kp_ssl.SSL_get_info_callback(ssl) || kp_ssl.SSL_CTX_get_info_callback(ctx))
		return "an info callback";
	if (conf->msg_cb)
		return "a message callback";
	return NULL;
}

/* Why ssl's handshake (with recorded settings conf) can neither be handed
 * a pooled connection or session nor have its own connection pooled, or
 * NULL.  Caller holds tls_lock. */
static const char *never_for(SSL *ssl, const struct conf *conf)
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
	if (kp_ssl.SSL_CTX_get_client_cert_cb(ctx))
		return "a client certificate callback";
	if (custom_security_cb(ssl))
		return "a security callback";
	if (several_certs(ssl))
		return "several client certificates";
	/* its own connection parked: a ticket that comes while another SSL
	 * reads it would reach this callback or cache (libssl calls the
	 * session_ctx's, whoever owns the connection now); handed one: it
	 * would be told of another session than its own handshake's */
	if (tells_sessions(session_ctx(ssl)))
		return "a new-session callback or a client session cache";
	/* the engine keeps an SSL the program frees (SSL_free runs the free
	 * callbacks only when the connection is dropped, with nothing), or
	 * copies it (dup) (docs/tls.md "The first owner's SSL") */
	if (__atomic_load_n(&kp_tls_ssl_ex_funcs, __ATOMIC_ACQUIRE))
		return "an SSL ex_data index with a free or dup callback";
	return NULL;
}

static const struct conf no_conf;

/* ssl's recorded settings.  Caller holds tls_lock. */
static const struct conf *conf_of(const SSL *ssl)
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
	cfg_read(ssl, &e->cfg);
	e->refs = 2; /* its own handle, and the connection */
	h->ssl = ssl;
	h->e = e;
	h->fd = fd;
	HASH_ADD_PTR(handles, ssl, h);
	__atomic_store_n(&kp_tls_used, true, __ATOMIC_RELEASE);
	kp_unlock(&tls_lock);
	kp_debug("fd %d: following the TLS connection of SSL %p", fd, (void *)ssl);
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
static void note_cert(struct kp_tls *e)
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
static bool chain_equal(X509 *cert, SSL *ssl, STACK_OF(X509) *want)
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
static int detach_program(struct kp_tls *e, int fd, bool prog_alive)
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
	kp_ssl.SSL_set_msg_callback(e->ssl, NULL);
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
static void restore_program(struct kp_tls *e)
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

bool kp_tls_park(struct kp_tls *e, int hidden, void *user, const struct pool_key *key)
{
	if (e->dead || !shim_ctx_get())
		return false;
	if (kp_ssl.SSL_has_pending(e->ssl) || kp_ssl.SSL_get_shutdown(e->ssl) ||
	    !kp_ssl.SSL_is_init_finished(e->ssl))
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
	if (prog_fd >= 0) {
		/* the program's SSL is alive (not freed) and speaks through a
		 * socket BIO: left as it is until another SSL is handed it
		 * (detach_program then), so that an SSL_clear finds it whole;
		 * only its BIO follows the socket */
		e->prog_fd = prog_fd;
		e->prog_close = close_flag;
		kp_ssl.BIO_int_ctrl(kp_ssl.SSL_get_rbio(e->ssl), BIO_C_SET_FD, BIO_NOCLOSE, hidden);
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
	}
	kp_unlock(&tls_lock);
	if (ok) /* e->cert says which client certificate it carries */
		ticket_keep(e, key);
	return ok;
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

/* ------------------------------------------------------------ hand-out */

static bool same_str(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* What a past handshake asked for and got: a pooled engine's, or a
 * cached session's. */
struct shape {
	const char *sni;
	const struct conf *conf;
	const struct cfg *cfg;
	X509 *cert;
	STACK_OF(X509) *chain;
	int seclevel;
	int version;
	const SSL_CIPHER *cipher;
};

/* What a handshake of ssl's own would have asked differently, or under
 * stricter rules than the handshake that made sh.  Caller holds tls_lock. */
static const char *shape_mismatch(const struct shape *sh, SSL *ssl)
{
	const char *sni = kp_ssl.SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	if (!same_str(sni, sh->sni))
		return "SNI";
	const struct conf *conf = conf_of(ssl);
	const char *why = never_for(ssl, conf);
	if (why || (why = watcher(ssl, conf)) || (why = conf_mismatch(conf, sh->conf)))
		return why;
	/* our check of the peer chain would call it, at a time its own
	 * handshake would not, and once more when its handshake is made
	 * after all (docs/tls.md "Callbacks that watch") */
	if (kp_ssl.SSL_get_verify_callback(ssl))
		return "a verify callback";
	struct cfg now;
	cfg_read(ssl, &now);
	why = cfg_mismatch(sh->cfg, &now);
	cfg_free(&now);
	if (why)
		return why;
	/* set in the context or the SSL (a callback's was declined above) */
	X509 *cert = kp_ssl.SSL_get_certificate(ssl);
	if (!cert != !sh->cert || (cert && kp_ssl.X509_cmp(cert, sh->cert)))
		return "client certificate";
	if (cert && !chain_equal(cert, ssl, sh->chain))
		return "client certificate chain";
	/* (Ruby and curl offer it always.)  A detached engine has no
	 * certificate left to answer the server's later request with */
	if (cert && conf->len[CONF_PHA])
		return "post-handshake authentication with a client certificate";
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
	/* the cipher (TLS 1.3: suite) must be one ssl offers: a server
	 * answers the resumption of another with illegal_parameter */
	STACK_OF(SSL_CIPHER) *allowed = kp_ssl.SSL_get_ciphers(ssl);
	bool found = false;
	for (int i = 0; sh->cipher && allowed && i < kp_ssl.OPENSSL_sk_num((OPENSSL_STACK *)allowed); i++)
		found |= kp_ssl.SSL_CIPHER_get_id(kp_ssl.OPENSSL_sk_value((OPENSSL_STACK *)allowed, i)) ==
			 kp_ssl.SSL_CIPHER_get_id(sh->cipher);
	if (!found)
		return "cipher";
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
/* The session ssl's handshake offers for resumption: set by the program
 * (SSL_set_session, or kept by SSL_clear), or NULL.  A handshake under
 * way (curl's deferred one) holds a new empty session of libssl's: not
 * resumable, it offers nothing. */
static SSL_SESSION *resuming(SSL *ssl)
{
	SSL_SESSION *sess = kp_ssl.SSL_get_session(ssl);
	return sess && kp_ssl.SSL_SESSION_is_resumable(sess) ? sess : NULL;
}

static const char *mismatch(struct kp_tls *e, SSL *ssl)
{
	struct shape sh = { e->sni, &e->conf, &e->cfg, e->cert, e->chain, e->seclevel,
			    kp_ssl.SSL_version(e->ssl), kp_ssl.SSL_get_current_cipher(e->ssl) };
	const char *why = shape_mismatch(&sh, ssl);
	if (why)
		return why;
	/* a callback set on its first owner's context since its handshake */
	if (tells_sessions(e->sess_ctx))
		return "the connection's first owner keeps its sessions";
	/* Before TLS 1.3 the server may ask to renegotiate: a detached engine
	 * refuses (no trust store, certificate or callback of the program's
	 * to renegotiate with), as only a program that refuses does
	 * (docs/tls.md "Renegotiation") */
	if (kp_ssl.SSL_version(e->ssl) < TLS1_3_VERSION &&
	    !(kp_ssl.SSL_get_options(ssl) & SSL_OP_NO_RENEGOTIATION))
		return "the program would renegotiate (TLS 1.2)";
	/* it resumes a session of its own (SSL_set_session, or kept by
	 * SSL_clear: curl's cache): only this connection's own session, at a
	 * server seen resuming, and the connection is then handed out as
	 * that resumption (reused, no chain verified in it: docs/tls.md
	 * "Sessions") */
	SSL_SESSION *own = resuming(ssl);
	struct resumer *seen = own && e->key_known ? resumer(&e->key, resumption_kind(ssl, own)) : NULL;
	if (own && !seen)
		return "the program offers a session, and what the server does with one is not known";
	if (own && seen->resumes && own != kp_ssl.SSL_get_session(e->ssl))
		return "the program resumes a session of another connection";
	const unsigned char *sel;
	unsigned sel_len;
	kp_ssl.SSL_get0_alpn_selected(e->ssl, &sel, &sel_len);
	if (sel_len && !(sel_len == 8 && !memcmp(sel, "http/1.1", 8)))
		return "ALPN selected";
	return NULL;
}

/* ssl's own verification of a peer chain (leaf, untrusted), as OpenSSL's
 * handshake runs it (ssl/statem: ssl_verify_cert_chain).  Returns the
 * verify callback's (or X509_verify_cert's) verdict, > 0 for good, with
 * the error, the verified chain and the name matched. */
static int verify_as(SSL *ssl, X509 *leaf, STACK_OF(X509) *untrusted, long *result,
		     STACK_OF(X509) **chain, char **peername, X509_VERIFY_PARAM **keep)
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
	/* in ssl_verify_cert_chain's order: the program's own parameters
	 * (an auth level among them) override the defaults */
	X509_VERIFY_PARAM *param = kp_ssl.X509_STORE_CTX_get0_param(sctx);
	kp_ssl.X509_VERIFY_PARAM_set_auth_level(param, kp_ssl.SSL_get_security_level(ssl));
	kp_ssl.X509_STORE_CTX_set_default(sctx, "ssl_server"); /* a client's check */
	kp_ssl.X509_VERIFY_PARAM_set1(param, kp_ssl.SSL_get0_param(ssl));
	SSL_verify_cb cb = kp_ssl.SSL_get_verify_callback(ssl);
	if (cb)
		kp_ssl.X509_STORE_CTX_set_verify_cb(sctx, cb);
	ok = kp_ssl.X509_verify_cert(sctx);
	*result = kp_ssl.X509_STORE_CTX_get_error(sctx);
	*chain = kp_ssl.X509_STORE_CTX_get1_chain(sctx);
	const char *pn = kp_ssl.X509_VERIFY_PARAM_get0_peername(param);
	*peername = pn ? strdup(pn) : NULL;
	/* and the program's parameters keep the name matched, as the
	 * handshake's verification leaves it there (a handshake of its own
	 * verifies again and replaces it): X509_VERIFY_PARAM_get0_peername
	 * on SSL_get0_param reads it (docs/tls.md "After the handshake").
	 * For a session offered, kept for after its handshake (which clears
	 * it first) in *keep. */
	if (!keep)
		kp_ssl.X509_VERIFY_PARAM_move_peername(kp_ssl.SSL_get0_param(ssl), param);
	else if ((*keep = kp_ssl.X509_VERIFY_PARAM_new()))
		kp_ssl.X509_VERIFY_PARAM_move_peername(*keep, param);
out:
	if (sctx)
		kp_ssl.X509_STORE_CTX_free(sctx);
	return ok;
}

/* The program's ssl, handed e, offers a session the server would resume
 * (mismatch() made sure it is e's own).  Takes tls_lock. */
static bool resumed_as(struct kp_tls *e, SSL *ssl)
{
	SSL_SESSION *own = resuming(ssl);
	if (!own || !e->key_known)
		return false;
	kp_lock(&tls_lock);
	struct resumer *seen = resumer(&e->key, resumption_kind(ssl, own));
	bool resumes = seen && seen->resumes;
	kp_unlock(&tls_lock);
	return resumes;
}

/*
 * OpenSSL's SSL BIO filter (BIO_f_ssl, and BIO_new_ssl, BIO_new_ssl_connect,
 * BIO_new_buffer_ssl_connect that build one) reads and writes the
 * program's SSL from inside libssl, past our SSL_* wrappers: a handed-out
 * SSL (which never made its own handshake) then fails there ("uninitialized",
 * docs/tls.md "BIO_f_ssl").  The BIO may be built after the hand-out, so the
 * question is whether the program can build one at all: whether an object
 * loaded in the process imports one of those names (an undefined symbol of
 * its relocations), looked up again whenever objects were loaded.  The
 * same holds of the BIO counters (kp_dl_sees_past, shim/dl_real.c).
 */
static bool rel_imports(const ElfW(Sym) *symtab, const char *strtab, const void *rel, size_t size,
			size_t entsize, bool rela)
{
	for (size_t off = 0; entsize && off + entsize <= size; off += entsize) {
		const char *r = (const char *)rel + off;
		ElfW(Xword) info = rela ? ((const ElfW(Rela) *)r)->r_info : ((const ElfW(Rel) *)r)->r_info;
#if __WORDSIZE == 64
		size_t idx = ELF64_R_SYM(info);
#else
		size_t idx = ELF32_R_SYM(info);
#endif
		if (!idx || symtab[idx].st_shndx != SHN_UNDEF)
			continue;
		if (kp_dl_sees_past(strtab + symtab[idx].st_name))
			return true;
	}
	return false;
}

static int ssl_bio_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	int *found = arg;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		if (info->dlpi_phdr[i].p_type != PT_DYNAMIC)
			continue;
		const ElfW(Dyn) *d = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
		const ElfW(Sym) *symtab = NULL;
		const char *strtab = NULL;
		const void *jmprel = NULL, *rel = NULL;
		size_t pltsz = 0, relsz = 0, relent = 0;
		bool rela = true, plt_rela = true;
		for (; d->d_tag != DT_NULL; d++) {
			/* glibc has relocated these to addresses already */
			switch (d->d_tag) {
			case DT_SYMTAB: symtab = (const void *)d->d_un.d_ptr; break;
			case DT_STRTAB: strtab = (const void *)d->d_un.d_ptr; break;
			case DT_JMPREL: jmprel = (const void *)d->d_un.d_ptr; break;
			case DT_PLTRELSZ: pltsz = d->d_un.d_val; break;
			case DT_PLTREL: plt_rela = d->d_un.d_val == DT_RELA; break;
			case DT_RELA: rel = (const void *)d->d_un.d_ptr; rela = true; break;
			case DT_REL: rel = (const void *)d->d_un.d_ptr; rela = false; break;
			case DT_RELASZ: case DT_RELSZ: relsz = d->d_un.d_val; break;
			case DT_RELAENT: case DT_RELENT: relent = d->d_un.d_val; break;
			}
		}
		/* the vDSO's entries are not relocated: it imports nothing */
		if (!symtab || !strtab || (uintptr_t)symtab < info->dlpi_addr)
			break;
		if ((jmprel && rel_imports(symtab, strtab, jmprel, pltsz,
					   plt_rela ? sizeof(ElfW(Rela)) : sizeof(ElfW(Rel)), plt_rela)) ||
		    (rel && rel_imports(symtab, strtab, rel, relsz, relent, rela))) {
			*found = 1;
			return 1;
		}
		break;
	}
	return 0;
}

static int ssl_bio_adds_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(unsigned long long *)arg = info->dlpi_adds;
	return 1;
}

static bool ssl_bio_imported(void)
{
	if (kp_dl_ssl_bio_named()) /* found by dlsym (shim/dl_real.c) */
		return true;
	static unsigned long long seen_adds = ~0ull;
	static int found;
	unsigned long long adds = 0;
	dl_iterate_phdr(ssl_bio_adds_cb, &adds);
	if (adds != __atomic_load_n(&seen_adds, __ATOMIC_ACQUIRE)) {
		int f = 0;
		dl_iterate_phdr(ssl_bio_object, &f);
		__atomic_store_n(&found, f, __ATOMIC_RELAXED);
		__atomic_store_n(&seen_adds, adds, __ATOMIC_RELEASE);
	}
	return __atomic_load_n(&found, __ATOMIC_RELAXED);
}

int kp_tls_handout(struct kp_tls *e, void *ssl_, int fd)
{
	SSL *ssl = ssl_;
	if (!kp_ssl_bind() || !shim_ctx_get() || e->dead)
		return -1;
	struct handle *h = calloc(1, sizeof(*h));
	if (!h)
		return -1;
	kp_lock(&tls_lock);
	const char *why = handle_find(ssl) ? "the SSL is already in use" : mismatch(e, ssl);
	/* (a connection made by resuming a session of the program's own) */
	if (!why && !e->full.known)
		why = "what a full handshake would have negotiated is not known";
	/* the session the program reads is a copy that looks new (kp_tls_session):
	 * its timeout is the context's, and a new id can stand for a ticket's
	 * (the client's to choose) but not for an id the server gave */
	if (!why && kp_ssl.SSL_CTX_get_timeout(session_ctx(ssl)) != e->sess_timeout)
		why = "the session timeout differs";
	if (!why && kp_ssl.SSL_version(e->ssl) < TLS1_3_VERSION &&
	    !(kp_ssl.SSL_get_session(e->ssl) && kp_ssl.SSL_SESSION_has_ticket(kp_ssl.SSL_get_session(e->ssl))))
		why = "the connection's session id is the server's";
	/* its first owner still holds its SSL (closed the socket first, frees
	 * the SSL later: Ruby at GC): that SSL keeps its ex_data, context and
	 * callbacks until it is freed (docs/tls.md "The first owner's SSL") */
	if (!why && !e->own_bio && handle_find(e->ssl))
		why = "the connection's first SSL still exists";
	kp_unlock(&tls_lock);
	if (!why && ssl_bio_imported())
		why = "the program can see past a hand-out (BIO_f_ssl, the BIO counters)";
	if (!why && e->key_known && closer_looked(&e->key))
		why = "how the server ends is not known and a program looked: a fresh connection teaches";
	long result = 0;
	STACK_OF(X509) *chain = NULL;
	char *peername = NULL;
	if (!why) {
		/* the program's verify callback runs here, as in a handshake: no
		 * lock of ours held.  Its errors stay off the program's queue. */
		kp_ssl.ERR_set_mark();
		int ok = verify_as(ssl, kp_ssl.SSL_get0_peer_certificate(e->ssl),
				   kp_ssl.SSL_get_peer_cert_chain(e->ssl), &result, &chain, &peername, NULL);
		kp_ssl.ERR_pop_to_mark();
		/* OpenSSL aborts a failed verification for any mode but
		 * SSL_VERIFY_NONE (tls_post_process_server_certificate), not
		 * only with SSL_VERIFY_PEER */
		if (ok <= 0 && kp_ssl.SSL_get_verify_mode(ssl) != SSL_VERIFY_NONE) {
			why = "the program's verification fails on it";
			kp_debug("fd %d: verification error %ld", fd, result);
		} else if (result != kp_ssl.SSL_get_verify_result(e->ssl)) {
			/* the connection's session carries its first owner's
			 * result: the program's SSL_get_session (and a later
			 * resumption of it) would read another than its own */
			why = "the program's verification result differs from the connection's";
			kp_debug("fd %d: verification result %ld, the connection's %ld", fd, result,
				 kp_ssl.SSL_get_verify_result(e->ssl));
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
	kp_lock(&tls_lock);
	/* its first owner's SSL, left whole while parked, serves another now */
	if (!e->dead && detach_program(e, fd, true) < 0)
		e->dead = true;
	bool dead = e->dead;
	kp_unlock(&tls_lock);
	if (dead) {
		free(peername);
		if (chain)
			kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)chain, (void (*)(void *))kp_ssl.X509_free);
		free(h);
		kp_debug("fd %d: pooled TLS connection not handed out: cannot detach it", fd);
		return -1;
	}
	/* the engine does the program's I/O now: the program's modes and the
	 * options that act after the handshake apply (the others are equal);
	 * renegotiation stays refused (docs/tls.md "Renegotiation") */
	uint64_t opts = kp_ssl.SSL_get_options(ssl);
	kp_ssl.SSL_clear_options(e->ssl, CARRIED_OPTIONS);
	kp_ssl.SSL_set_options(e->ssl, (opts & CARRIED_OPTIONS) | SSL_OP_NO_RENEGOTIATION);
	long mode = kp_ssl.SSL_ctrl(ssl, SSL_CTRL_MODE, 0, NULL);
	kp_ssl.SSL_ctrl(e->ssl, SSL_CTRL_CLEAR_MODE, ~0L, NULL);
	kp_ssl.SSL_ctrl(e->ssl, SSL_CTRL_MODE, mode | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER, NULL);
	kp_ssl.BIO_int_ctrl(kp_ssl.SSL_get_rbio(e->ssl), BIO_C_SET_FD, BIO_NOCLOSE, fd);
	bool resumed = resumed_as(e, ssl);
	kp_lock(&tls_lock);
	e->fd = fd;
	e->refs++;
	h->ssl = ssl;
	h->e = e;
	h->fd = fd;
	h->verified = true;
	h->resumed = resumed;
	h->verify_result = result;
	h->vchain = chain;
	h->peername = peername;
	h->handed_at = (long)time(NULL);
	HASH_ADD_PTR(handles, ssl, h);
	/* the handshake its own would have made, counted where libssl
	 * counts it (docs/tls.md "Callbacks that watch") */
	stat_add(ssl, STAT_CONNECT, 1);
	stat_add(ssl, STAT_GOOD, 1);
	if (resumed)
		stat_add(ssl, STAT_HIT, 1);
	/* its own session offered, which the server would not resume: libssl
	 * counts a miss where the offer had an id (tls_process_server_hello) */
	unsigned id_len = 0;
	SSL_SESSION *own = resuming(ssl);
	if (own && !resumed && kp_ssl.SSL_SESSION_get_id(own, &id_len) && id_len)
		stat_add(ssl, STAT_MISS, 1);
	kp_unlock(&tls_lock);
	kp_count(tls_reused);
	return 0;
}

/* ------------------------------------------------------------ resumption */

static void ticket_free(struct ticket *t)
{
	full_free(&t->full);
	kp_ssl.SSL_SESSION_free(t->sess);
	if (t->leaf)
		kp_ssl.X509_free(t->leaf);
	if (t->chain)
		kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)t->chain, (void (*)(void *))kp_ssl.X509_free);
	if (t->cert)
		kp_ssl.X509_free(t->cert);
	if (t->cchain)
		kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)t->cchain, (void (*)(void *))kp_ssl.X509_free);
	free(t->sni);
	conf_free(&t->conf);
	cfg_free(&t->cfg);
	free(t);
}

/* Keep e's session for key, replacing the one of the same destination and
 * SNI.  Only a session whose handshake verified its peer (X509_V_OK):
 * resumed, it tells the program "verified", so it is offered only where
 * the program's own verification also says so. */
/* Put t in the cache, the newest for its destination and SNI.  Caller
 * holds tls_lock; the tickets it drops are left in *drop, to free after. */
static void ticket_insert(struct ticket *t, struct ticket **drop)
{
	unsigned n = 0;
	for (struct ticket **pp = &tickets; *pp;) {
		struct ticket *o = *pp;
		if ((!memcmp(&o->key, &t->key, sizeof(t->key)) && same_str(o->sni, t->sni)) ||
		    ++n >= MAX_TICKETS) {
			*pp = o->next;
			o->next = *drop;
			*drop = o;
			continue;
		}
		pp = &o->next;
	}
	t->next = tickets;
	tickets = t;
}

/* The peer chain of the cached ticket for key and sni whose leaf is
 * leaf, or NULL.  A session resumed from one that came from another
 * process carries no chain (i2d_SSL_SESSION keeps the peer's certificate
 * only): the chain its first handshake verified is the one it came
 * with.  Caller holds tls_lock. */
static STACK_OF(X509) *ticket_chain_of(const struct pool_key *key, const char *sni, X509 *leaf)
{
	for (struct ticket *t = tickets; t; t = t->next)
		if (!memcmp(&t->key, key, sizeof(*key)) && same_str(t->sni, sni) && t->leaf && t->chain &&
		    !kp_ssl.X509_cmp(t->leaf, leaf))
			return kp_ssl.X509_chain_up_ref(t->chain);
	return NULL;
}

/* ------------------------------------------------------------ across processes */

/* A ticket as bytes for the broker (docs/tls-across.md): what its
 * handshake was made under (SNI, the recorded settings, the configuration
 * read by the getters, the client certificate and chain, the security
 * level), the session (i2d_SSL_SESSION: it holds the resumption secret)
 * and the peer chain the handshake verified.  The receiving process
 * rebuilds the ticket and offers it under the very rule a ticket of its
 * own follows (kp_tls_offer_session): nothing in the bytes is trusted
 * beyond what that rule checks again. */
#define ACROSS_MAGIC 0x6b707332u /* "kps2" */
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
	/* the full handshake's values, its key-exchange key (which a
	 * resumption below TLS 1.3 does not show) as a public key */
	w_u32(&b, t->full.known);
	w_u32(&b, (uint32_t)t->full.sig_ok << 1 | t->full.type_ok);
	w_u32(&b, (uint32_t)t->full.sig_nid);
	w_u32(&b, (uint32_t)t->full.type_nid);
	unsigned char *key = NULL;
	int n_key = t->full.tmp ? kp_ssl.i2d_PUBKEY(t->full.tmp, &key) : 0;
	w_u32(&b, n_key > 0 ? (uint32_t)n_key : 0);
	if (n_key > 0)
		w_bytes(&b, key, (size_t)n_key);
	kp_ssl.CRYPTO_free(key, __FILE__, __LINE__);
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
	t->full.known = r_u32(&b);
	uint32_t oks = r_u32(&b);
	t->full.sig_ok = oks >> 1 & 1;
	t->full.type_ok = oks & 1;
	t->full.sig_nid = (int)r_u32(&b);
	t->full.type_nid = (int)r_u32(&b);
	uint32_t n_key = r_u32(&b);
	const unsigned char *pub = n_key ? r_bytes(&b, n_key) : NULL;
	bool had_tmp = n_key != 0;
	if (pub && !(t->full.tmp = kp_ssl.d2i_PUBKEY(NULL, &pub, (long)n_key)))
		b.bad = true;
	t->sess_timeout = (long)r_u64(&b);
	uint32_t n = r_u32(&b);
	const unsigned char *q = r_bytes(&b, n), *end = q ? q + n : NULL;
	if (q && n && !b.bad)
		t->sess = kp_ssl.d2i_SSL_SESSION(NULL, &q, (long)n);
	if (had_tmp && !t->full.tmp)
		t->full.known = false;
	if (b.bad || b.at != len || !t->sess || q != end || !t->leaf ||
	    !kp_ssl.SSL_SESSION_is_resumable(t->sess)) {
		ticket_free(t); /* SSL_SESSION_free(NULL) does nothing */
		return NULL;
	}
	return t;
}

/* A ticket from the broker for ssl's handshake to key: asked under the
 * name ssl's own settings make, rebuilt, NULL when there is none. */
static struct ticket *across_fetch(SSL *ssl, const struct pool_key *key)
{
	if (!kp_broker_enabled())
		return NULL;
	struct cfg now;
	cfg_read(ssl, &now);
	uint8_t name[32];
	kp_lock(&tls_lock);
	/* a program no session may be offered to (curl's session cache,
	 * Ruby's info callback) does not cost the broker a question */
	const struct conf *conf = conf_of(ssl);
	if (never_for(ssl, conf) || watcher(ssl, conf)) {
		kp_unlock(&tls_lock);
		cfg_free(&now);
		return NULL;
	}
	int r = shape_name(kp_ssl.SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name), conf_of(ssl), &now,
			   kp_ssl.SSL_get_certificate(ssl), name);
	kp_unlock(&tls_lock);
	cfg_free(&now);
	if (r < 0)
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
	SSL_SESSION *sess = kp_ssl.SSL_get1_session(e->ssl);
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

void kp_tls_offer_session(void *ssl_, const struct pool_key *key)
{
	SSL *ssl = ssl_;
	/* a TLS connection made here: it cannot move to another process
	 * (docs/tls-across.md), whatever becomes of its session */
	kp_count(tls_not_shared);
	if (!kp_ssl_bind() || !shim_ctx_get() ||
	    resuming(ssl) || /* the program resumes one of its own */
	    (kp_ssl.SSL_get_options(ssl) & SSL_OP_NO_TICKET)) /* or wants none */
		return;
	SSL_SESSION *sess = NULL;
	X509 *leaf = NULL;
	STACK_OF(X509) *untrusted = NULL;
	const char *why = "none kept";
	bool found = false;
	/* one from another process (the broker) only where this process
	 * keeps none for the destination and name */
	struct ticket *imported = NULL;
	struct full full = { 0 };
	kp_lock(&tls_lock);
	const char *sni = kp_ssl.SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	for (struct ticket *t = __atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE) ? tickets : NULL; t;
	     t = t->next) {
		if (memcmp(&t->key, key, sizeof(*key)) || !same_str(t->sni, sni))
			continue;
		found = true;
		struct shape sh = { t->sni, &t->conf, &t->cfg, t->cert, t->cchain, t->seclevel,
				    kp_ssl.SSL_SESSION_get_protocol_version(t->sess),
				    kp_ssl.SSL_SESSION_get0_cipher(t->sess) };
		why = shape_mismatch(&sh, ssl);
		if (!why && !t->full.known)
			why = "what its full handshake negotiated is not known";
		/* resumed, the session keeps its timeout, which its first
		 * owner's context (or the server's ticket) gave */
		if (!why && t->sess_timeout != kp_ssl.SSL_CTX_get_timeout(session_ctx(ssl)))
			why = "the session timeout differs";
		if (!why && kp_ssl.SSL_SESSION_get_protocol_version(t->sess) < TLS1_3_VERSION &&
		    !kp_ssl.SSL_SESSION_has_ticket(t->sess))
			why = "its session id is the server's (a full handshake shows a new one)";
		if (!why && kp_ssl.SSL_SESSION_up_ref(t->sess) && kp_ssl.X509_up_ref(t->leaf)) {
			sess = t->sess;
			leaf = t->leaf;
			untrusted = t->chain ? kp_ssl.X509_chain_up_ref(t->chain) : NULL;
			full_copy(&full, &t->full);
		}
		break;
	}
	kp_unlock(&tls_lock);
	if (!found && (imported = across_fetch(ssl, key))) {
		/* the same rule as a ticket of this process's own: the
		 * recorded configuration equal, then the program's own
		 * verification of the peer chain (below) */
		struct ticket *t = imported;
		struct shape sh = { t->sni, &t->conf, &t->cfg, t->cert, t->cchain, t->seclevel,
				    kp_ssl.SSL_SESSION_get_protocol_version(t->sess),
				    kp_ssl.SSL_SESSION_get0_cipher(t->sess) };
		kp_lock(&tls_lock);
		why = same_str(t->sni, sni) ? shape_mismatch(&sh, ssl) : "SNI";
		if (!why && !t->full.known)
			why = "what its full handshake negotiated is not carried";
		/* resumed, the session keeps its timeout, which its first
		 * owner's context (or the server's ticket) gave */
		if (!why && t->sess_timeout != kp_ssl.SSL_CTX_get_timeout(session_ctx(ssl)))
			why = "the session timeout differs";
		if (!why && kp_ssl.SSL_SESSION_get_protocol_version(t->sess) < TLS1_3_VERSION &&
		    !kp_ssl.SSL_SESSION_has_ticket(t->sess))
			why = "its session id is the server's (a full handshake shows a new one)";
		kp_unlock(&tls_lock);
		if (!why && kp_ssl.SSL_SESSION_up_ref(t->sess) && kp_ssl.X509_up_ref(t->leaf)) {
			sess = t->sess;
			leaf = t->leaf;
			untrusted = t->chain ? kp_ssl.X509_chain_up_ref(t->chain) : NULL;
			full_copy(&full, &t->full);
		}
		if (why)
			kp_debug("a session from the broker not offered: %s", why);
	}
	if (sess) {
		long result;
		STACK_OF(X509) *chain;
		char *peername;
		X509_VERIFY_PARAM *named = NULL;
		kp_ssl.ERR_set_mark();
		int ok = verify_as(ssl, leaf, untrusted, &result, &chain, &peername, &named);
		kp_ssl.ERR_pop_to_mark();
		free(peername);
		/* a copy of the program's own, with a new id (a ticket's is the
		 * client's): resumed, it is the program's session, not one
		 * another program read (docs/tls.md "Sessions") */
		SSL_SESSION *mine = ok > 0 && result == X509_V_OK ? session_anew(sess, 0) : NULL;
		if (mine && kp_ssl.SSL_set_session(ssl, mine)) {
			kp_count(tls_resumed);
			why = NULL;
			/* resumed, the program's SSL says what its own full
			 * handshake would have: not reused, this chain verified
			 * (kp_tls_session_reused, kp_tls_verify_result) */
			kp_lock(&tls_lock);
			struct record *r = record_get(ssl, true);
			if (r) {
				if (r->offered_chain)
					kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)r->offered_chain,
								   (void (*)(void *))kp_ssl.X509_free);
				r->offered = true;
				r->offered_across = imported != NULL;
				r->offered_result = result;
				r->offered_chain = chain;
				chain = NULL;
				if (r->offered_named)
					kp_ssl.X509_VERIFY_PARAM_free(r->offered_named);
				r->offered_named = named;
				named = NULL;
				full_copy(&r->offered_full, &full);
			}
			kp_unlock(&tls_lock);
		} else {
			why = "the program's verification fails on its chain";
		}
		if (chain)
			kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)chain, (void (*)(void *))kp_ssl.X509_free);
		if (named)
			kp_ssl.X509_VERIFY_PARAM_free(named);
		if (mine)
			kp_ssl.SSL_SESSION_free(mine); /* (SSL_set_session took its own) */
		kp_ssl.SSL_SESSION_free(sess);
		kp_ssl.X509_free(leaf);
		if (untrusted)
			kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)untrusted, (void (*)(void *))kp_ssl.X509_free);
	}
	if (imported && !why) {
		/* kept here as a ticket of our own: its chain serves the
		 * session this handshake makes (ticket_chain_of) */
		struct ticket *drop = NULL;
		kp_lock(&tls_lock);
		ticket_insert(imported, &drop);
		kp_unlock(&tls_lock);
		while (drop) {
			struct ticket *o = drop;
			drop = o->next;
			ticket_free(o);
		}
	} else if (imported) {
		/* not offered: never sent, still unused (a single-use ticket
		 * too): back to the broker for the next process */
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
	full_free(&full);
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
		r = KP_OUTSIDE(kp_ssl.SSL_connect(ssl));
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
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	if (h && e) {
		free_old = engine_unref(h->e); /* the handle's reference */
		e->ssl = ssl;
		e->fd = fd;
		e->refs = 2;
		e->seclevel = kp_ssl.SSL_get_security_level(ssl);
		e->sess_ctx = session_ctx(ssl);
		e->sess_timeout = kp_ssl.SSL_CTX_get_timeout(e->sess_ctx);
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
		h->verified = h->resumed = false;
		if (h->vchain)
			kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)h->vchain,
						   (void (*)(void *))kp_ssl.X509_free);
		h->vchain = NULL;
		free(h->peername);
		h->peername = NULL;
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
		r = KP_OUTSIDE(kp_ssl.SSL_write_ex(e->ssl, buf + off, len - off, &w));
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
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	SSL *e = h ? h->e->ssl : (SSL *)ssl;
	/* its connection went to the pool (maybe to another owner by now):
	 * it may still be asked what it was, but not act on it */
	if (h && h->closed && mutates)
		e = NULL;
	kp_unlock(&tls_lock);
	return e;
}

long kp_tls_ctrl(SSL *ssl, int cmd, long larg, void *parg)
{
	long full_ret;
	if ((cmd == SSL_CTRL_GET_PEER_SIGNATURE_NID || cmd == SSL_CTRL_GET_PEER_TMP_KEY) && parg &&
	    kp_tls_peer_full(ssl, cmd, parg, &full_ret))
		return full_ret;
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
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	bool own = h && h->verified;
	if (own)
		*name = h->peername;
	kp_unlock(&tls_lock);
	return own;
}

/* a copy of sess as a handshake at time at would have made it: that
 * time, and a new id where the id is the client's (a ticket's: libssl
 * names a ticket session by a hash of the ticket, and a server resuming
 * a ticket echoes whatever id the client sent) */
static SSL_SESSION *session_anew(SSL_SESSION *sess, long at)
{
	SSL_SESSION *d = sess ? kp_ssl.SSL_SESSION_dup(sess) : NULL;
	if (!d)
		return NULL;
	unsigned char id[SSL_MAX_SSL_SESSION_ID_LENGTH];
	unsigned len = 0;
	kp_ssl.SSL_SESSION_get_id(d, &len);
	if (len && kp_ssl.SSL_SESSION_has_ticket(d) && kp_ssl.RAND_bytes(id, (int)len) == 1)
		kp_ssl.SSL_SESSION_set1_id(d, id, len);
	if (kp_ssl.SSL_SESSION_get_time(d) < at)
		kp_ssl.SSL_SESSION_set_time(d, at);
	return d;
}

bool kp_tls_session(const SSL *ssl, SSL_SESSION **out)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return false;
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	/* (a resumption of its own session: the engine's is that one) */
	bool ours = h && h->verified && !h->resumed;
	SSL_SESSION *src = ours ? kp_ssl.SSL_get_session(h->e->ssl) : NULL;
	long at = ours ? h->handed_at : 0;
	if (ours && src == h->sess_src) {
		*out = h->sess;
		kp_unlock(&tls_lock);
		return true;
	}
	if (src && !kp_ssl.SSL_SESSION_up_ref(src))
		src = NULL;
	kp_unlock(&tls_lock);
	if (!ours)
		return false;
	/* the copy made outside our lock (the program's session ex_data dup
	 * callbacks run in it) */
	SSL_SESSION *d = session_anew(src, at), *old = NULL;
	kp_lock(&tls_lock);
	h = handle_find(ssl);
	if (h && h->verified && !h->resumed) {
		/* first asked, or the engine's session changed (a ticket
		 * came): so would the program's, and its old one go */
		old = h->sess;
		h->sess = d;
		h->sess_src = kp_ssl.SSL_get_session(h->e->ssl) == src ? src : NULL;
		d = NULL;
	}
	*out = h ? h->sess : NULL;
	kp_unlock(&tls_lock);
	if (old)
		kp_ssl.SSL_SESSION_free(old);
	if (d)
		kp_ssl.SSL_SESSION_free(d);
	if (src)
		kp_ssl.SSL_SESSION_free(src);
	return true;
}

bool kp_tls_peer_full(const SSL *ssl, int cmd, void *parg, long *ret)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return false;
	/* (real calls, outside our lock) */
	bool reused = kp_ssl.SSL_session_reused(ssl);
	bool tls13 = kp_ssl.SSL_version(ssl) >= TLS1_3_VERSION;
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	struct record *r = h && h->verified ? NULL : record_get(ssl, false);
	struct full none = { .known = true }, *f = NULL;
	if (h && h->verified) {
		/* handed out: a full handshake, or the resumption of its own
		 * session (which shows no signature, and below TLS 1.3 no
		 * key exchange) */
		f = h->resumed ? &none : &h->e->full;
		tls13 = kp_ssl.SSL_version(h->e->ssl) >= TLS1_3_VERSION;
	} else if (r && r->offered && reused) {
		f = &r->offered_full; /* a session of ours resumed */
	}
	bool ours = f && f->known && !(cmd == SSL_CTRL_GET_PEER_TMP_KEY && tls13);
	if (ours) {
		*ret = 0;
		if (cmd == KP_PEER_SIG_TYPE && f->type_ok) {
			*(int *)parg = f->type_nid;
			*ret = 1;
		} else if (cmd == SSL_CTRL_GET_PEER_SIGNATURE_NID && f->sig_ok) {
			*(int *)parg = f->sig_nid;
			*ret = 1;
		} else if (cmd == SSL_CTRL_GET_PEER_TMP_KEY && f->tmp && kp_ssl.EVP_PKEY_up_ref(f->tmp)) {
			*(EVP_PKEY **)parg = f->tmp;
			*ret = 1;
		}
	}
	kp_unlock(&tls_lock);
	return ours;
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
	kp_lock(&tls_lock);
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
	kp_unlock(&tls_lock);
	return h != NULL;
}

static void synth(struct io *io, int err)
{
	kp_lock(&tls_lock);
	struct handle *h = handle_find(io->h->ssl);
	if (h) {
		h->synth_err = err;
		if (err == SSL_ERROR_ZERO_RETURN)
			h->shut |= SSL_RECEIVED_SHUTDOWN;
	}
	kp_unlock(&tls_lock);
}

/* a closed handle's I/O: what the program would have got from its fd */
static int refused(struct io *io)
{
	synth(io, SSL_ERROR_SYSCALL);
	errno = EBADF;
	return -1;
}

/* The kind of session ssl's handshake offered (-1: none): set at its first
 * call (first), read (and forgotten) when it ends. */
static int note_offer(SSL *ssl, int kind, bool first)
{
	kp_lock(&tls_lock);
	struct record *r = record_get(ssl, first);
	int was = r ? r->offer_kind - 1 : -1;
	if (r)
		r->offer_kind = first ? kind + 1 : 0;
	kp_unlock(&tls_lock);
	return was;
}

/* SSL_set_accept_state was called on ssl: it is a server, even on a
 * socket it connected */
static bool told_to_accept(SSL *ssl)
{
	kp_lock(&tls_lock);
	bool accept = conf_of(ssl)->never & (1u << NEVER_ACCEPT);
	kp_unlock(&tls_lock);
	return accept;
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
		if (fd >= 0 && kp_fd_conn(fd)) {
			/* what SSL_connect does first (a TLS_method() SSL says
			 * "server" until then): the re-verification runs as a
			 * client's, as the program's verify callback expects */
			if (real == kp_ssl.SSL_connect && kp_ssl.SSL_in_before(ssl) &&
			    kp_ssl.SSL_is_server(ssl) && !told_to_accept(ssl))
				kp_ssl.SSL_set_connect_state(ssl);
			if (kp_conn_tls_start(fd, ssl) == KP_TLS_HANDED)
				return 1;
		}
	}
	/* its own handshake; a BIO of the program's own shows us the fd when
	 * the first record goes out (kp_send_intercept).  The session it
	 * offers, noted at its first call (the record's offer_kind). */
	if (kp_ssl.SSL_in_before(ssl)) {
		SSL_SESSION *offer = resuming(ssl);
		note_offer(ssl, offer ? resumption_kind(ssl, offer) : -1, true);
	}
	void *prev = kp_tls_handshaking;
	kp_tls_handshaking = ssl;
	/* what a resumption adds to its context's hits (see below) */
	kp_lock(&tls_lock);
	SSL_CTX *hctx = session_ctx(ssl); /* libssl counts there */
	kp_unlock(&tls_lock);
	long hits = kp_ssl.SSL_CTX_ctrl(hctx, SSL_CTRL_SESS_HIT, 0, NULL);
	long misses = kp_ssl.SSL_CTX_ctrl(hctx, SSL_CTRL_SESS_MISSES, 0, NULL);
	int r;
	r = KP_OUTSIDE(real(ssl));
	kp_tls_handshaking = prev;
	int offer_kind = r == 1 ? note_offer(ssl, -1, false) : -1;
	if (io_get(ssl, &io) && io.e != ssl) {
		/* handed out at that first write, which never went out */
		kp_ssl.ERR_clear_error();
		return 1;
	}
	if (r == 1 && kp_ssl.SSL_session_reused(ssl)) {
		/* a session of ours resumed: the program reads a full
		 * handshake (kp_tls_session_reused), its context no hit */
		long more = kp_ssl.SSL_CTX_ctrl(hctx, SSL_CTRL_SESS_HIT, 0, NULL) - hits;
		kp_lock(&tls_lock);
		struct record *rec = record_get(ssl, false), *cr;
		/* once: SSL_connect's SSL_do_handshake comes here too */
		if (rec && rec->offered && !rec->hit_unmade && more > 0 && (cr = record_get(hctx, true))) {
			cr->stat_adj[STAT_HIT] -= 1;
			rec->hit_unmade = true;
		}
		bool across = rec && rec->offered_across && !rec->across_counted;
		if (across)
			rec->across_counted = true;
		/* the name our check matched, where its own full handshake's
		 * verification would have left it (SSL_clear at its start
		 * cleared it) */
		/* the session it reads is its copy (kp_tls_offer_session): made
		 * now, as its full handshake's would be */
		if (rec && rec->offered && !rec->hit_unmade_time) {
			SSL_SESSION *mine = kp_ssl.SSL_get_session(ssl);
			if (mine)
				kp_ssl.SSL_SESSION_set_time(mine, (long)time(NULL));
			rec->hit_unmade_time = true;
		}
		if (rec && rec->offered && rec->offered_named) {
			kp_ssl.X509_VERIFY_PARAM_move_peername(kp_ssl.SSL_get0_param(ssl), rec->offered_named);
			kp_ssl.X509_VERIFY_PARAM_free(rec->offered_named);
			rec->offered_named = NULL;
		}
		kp_unlock(&tls_lock);
		if (across)
			kp_count(tls_resumed_across);
	}
	if (r == 1 && !kp_ssl.SSL_session_reused(ssl)) {
		/* a session of ours the server refused: libssl counted a miss
		 * its program, which offered none, would not have */
		long more = kp_ssl.SSL_CTX_ctrl(hctx, SSL_CTRL_SESS_MISSES, 0, NULL) - misses;
		kp_lock(&tls_lock);
		struct record *rec = record_get(ssl, false), *cr;
		if (rec && rec->offered && more > 0 && (cr = record_get(hctx, true))) {
			cr->stat_adj[STAT_MISS] -= 1;
			rec->offered = false; /* its own full handshake now */
		}
		kp_unlock(&tls_lock);
	}
	if (r == 1 && offer_kind >= 0 && io_get(ssl, &io) && io.c && io.e == ssl) {
		/* what the server did with the session offered */
		bool resumes = kp_ssl.SSL_session_reused(ssl);
		kp_lock(&tls_lock);
		struct resumer *seen = resumer(&io.c->key, offer_kind);
		if (!seen)
			seen = &resumers[n_resumers++ % MAX_RESUMERS];
		*seen = (struct resumer){ io.c->key, offer_kind, resumes };
		kp_unlock(&tls_lock);
		kp_debug("the server %s a session offered (kind %d)", resumes ? "resumed" : "did not resume",
			 offer_kind);
	}
	if (r == 1 && io_get(ssl, &io) && io.e == ssl) {
		/* what its full handshake negotiated, for whoever is handed
		 * the connection: its own, or a session of ours's */
		kp_lock(&tls_lock);
		struct handle *hh = handle_find(ssl);
		struct kp_tls *e = hh ? hh->e : NULL;
		if (e && e->ssl == ssl && !e->full.known) {
			struct record *rec = record_get(ssl, false);
			if (!kp_ssl.SSL_session_reused(ssl))
				full_read(ssl, &e->full);
			else if (rec && rec->offered && rec->offered_full.known)
				full_copy(&e->full, &rec->offered_full);
		}
		kp_unlock(&tls_lock);
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
		r = KP_OUTSIDE(kp_ssl.SSL_read(ssl, buf, (int)n));
		break;
	case KP_TLS_READ_EX:
		r = KP_OUTSIDE(kp_ssl.SSL_read_ex(ssl, buf, n, done));
		break;
	case KP_TLS_PEEK:
		r = KP_OUTSIDE(kp_ssl.SSL_peek(ssl, buf, (int)n));
		break;
	case KP_TLS_PEEK_EX:
		r = KP_OUTSIDE(kp_ssl.SSL_peek_ex(ssl, buf, n, done));
		break;
	case KP_TLS_WRITE:
		r = KP_OUTSIDE(kp_ssl.SSL_write(ssl, buf, (int)n));
		break;
	case KP_TLS_WRITE_EX:
		r = KP_OUTSIDE(kp_ssl.SSL_write_ex(ssl, buf, n, done));
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
			/* a write after the owed EOF: as after the server's
			 * close_notify (docs/replay.md, "Nothing added") */
			synth(&io, __atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE) ? SSL_ERROR_ZERO_RETURN
										  : SSL_ERROR_SYSCALL);
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
		/* a close line's bytes left from the last read come first */
		size_t extra = n ? kp_recv_extra(c, io.fd, buf, n > INT_MAX ? INT_MAX : n, peek) : 0;
		if (extra) {
			if (done)
				*done = extra;
			return ex ? 1 : (int)extra;
		}
		pending = kp_ssl.SSL_has_pending(io.e);
		if (kp_conn_tls_eof(c, io.fd, pending)) {
			closer_told(&c->key); /* the program reads our EOF */
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
		if (got == 0 && kp_conn_tls_server_closing(c, io.fd))
			closer_learn(io.e, r, &c->key);
		ssize_t shown = got;
		bool again = kp_conn_tls_recv_done(c, io.fd, buf, n, &shown, peek ? MSG_PEEK : 0);
		errno = saved;
		if (!again && got > 0 && shown != got) {
			/* a close line shown, or the read ended before an idle 408 */
			if (done)
				*done = (size_t)shown;
			return ex ? 1 : (int)shown;
		}
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
		kp_lock(&tls_lock);
		struct handle *h = handle_find(ssl);
		int synth_err = h ? h->synth_err : 0;
		SSL *e = h ? h->e->ssl : (SSL *)ssl;
		kp_unlock(&tls_lock);
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
		r = KP_OUTSIDE(kp_ssl.SSL_shutdown(ssl));
		return r;
	}
	if (io.closed)
		return refused(&io);
	if (io.c && kp_conn_tls_at_end(io.c, io.fd)) {
		/* no close_notify: the connection may be parked.  As OpenSSL's
		 * SSL_shutdown: the first call "sends" ours and returns 1 if the
		 * server's came (the program read our EOF), else 0; a later one
		 * waits for the server's, which a server that was asked to close
		 * sends (the EOF we owe): 1.  Quiet shutdown: 1 at once. */
		bool quiet = kp_ssl.SSL_get_quiet_shutdown(ssl);
		bool owed = __atomic_load_n(&io.c->eof_owed, __ATOMIC_ACQUIRE);
		if (owed && !quiet)
			closer_told(&io.c->key); /* its sequence shows the end */
		kp_lock(&tls_lock);
		if (quiet || (owed && (io.h->shut & SSL_SENT_SHUTDOWN)))
			io.h->shut |= SSL_RECEIVED_SHUTDOWN;
		io.h->shut |= SSL_SENT_SHUTDOWN;
		r = io.h->shut & SSL_RECEIVED_SHUTDOWN ? 1 : 0;
		io.h->synth_err = r ? 0 : SSL_ERROR_SYSCALL;
		kp_unlock(&tls_lock);
		return r;
	}
	if (io.c)
		kp_conn_tls_spoil(io.c, io.fd, "SSL_shutdown mid-exchange");
	r = KP_OUTSIDE(kp_ssl.SSL_shutdown(io.e));
	return r;
}

int kp_tls_get_shutdown(const SSL *ssl)
{
	int shut = 0, r;
	if (__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE)) {
		kp_lock(&tls_lock);
		struct handle *h = handle_find(ssl);
		if (h) {
			shut = h->shut;
			ssl = h->e->ssl;
		}
		kp_unlock(&tls_lock);
	}
	r = kp_ssl.SSL_get_shutdown(ssl);
	return r | shut;
}

int kp_tls_pending(const SSL *ssl, bool has)
{
	struct io io;
	int r;
	if (io_get((SSL *)ssl, &io)) {
		if (io.closed)
			return 0;
		int extra = io.c ? __atomic_load_n(&io.c->rx_extra_len, __ATOMIC_ACQUIRE) : 0;
		if (extra)
			return has ? 1 : extra;
		if (io.c && __atomic_load_n(&io.c->eof_owed, __ATOMIC_ACQUIRE))
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
	/* (a real call, outside our lock) */
	bool resumed = kp_ssl.SSL_session_reused(ssl);
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	bool own = h && h->verified;
	if (own && h->resumed) {
		/* what a resumption says: the session's result, no chain */
		*result = kp_ssl.SSL_get_verify_result(h->e->ssl);
		*chain = NULL;
	} else if (own) {
		*result = h->verify_result;
		*chain = h->vchain;
	} else if (resumed) {
		/* our session resumed: no chain verified in the handshake, the
		 * one we verified for it before offering it */
		struct record *r = record_get(ssl, false);
		if ((own = r && r->offered)) {
			*result = r->offered_result;
			*chain = r->offered_chain;
		}
	}
	kp_unlock(&tls_lock);
	return own;
}

long kp_tls_ctx_stat(const SSL_CTX *ctx, int cmd, long r)
{
	int which = cmd == SSL_CTRL_SESS_CONNECT	    ? STAT_CONNECT
		    : cmd == SSL_CTRL_SESS_CONNECT_GOOD ? STAT_GOOD
		    : cmd == SSL_CTRL_SESS_HIT	    ? STAT_HIT
		    : cmd == SSL_CTRL_SESS_MISSES	    ? STAT_MISS
						    : -1;
	if (which < 0 || !__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return r;
	kp_lock(&tls_lock);
	struct record *rec = record_get(ctx, false);
	if (rec)
		r += rec->stat_adj[which];
	kp_unlock(&tls_lock);
	return r;
}

bool kp_tls_session_reused(const SSL *ssl, int *reused)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return false;
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	struct record *r = record_get(ssl, false);
	/* handed a pooled connection (the program offered no session: see
	 * shape_mismatch), or resuming a session we offered: its own
	 * handshake would have been a full one */
	bool ours = (h && h->verified) || (r && r->offered);
	if (ours)
		*reused = h && h->verified && h->resumed;
	kp_unlock(&tls_lock);
	return ours;
}

void kp_tls_free(SSL *ssl)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE)) {
		kp_ssl.SSL_free(ssl);
		return;
	}
	shim_ctx_get(); /* detach_program's, not to be made under the lock */
	kp_lock(&tls_lock);
	record_drop(ssl);
	struct handle *h = handle_find(ssl);
	struct kp_tls *e = h ? h->e : NULL;
	bool last = false, own = e && e->ssl == ssl;
	if (h) {
		HASH_DEL(handles, h);
		if (own && e->refs > 1 && !e->dead && detach_program(e, e->fd, false) < 0)
			e->dead = true; /* kept for the socket, but never parked */
		if (own && e->saved) {
			/* nothing to give back to a freed SSL; its BIOs go now,
			 * while their methods (curl's) still exist */
			saved_free(e->saved);
			e->saved = NULL;
		}
		last = engine_unref(e);
	}
	kp_unlock(&tls_lock);
	if (h)
		handle_free(h);
	if (!own)
		kp_ssl.SSL_free(ssl);
	if (last)
		engine_free(e);
}

enum kp_tls_reset_do kp_tls_reset(SSL *ssl, bool clear)
{
	struct io io;
	if (!io_get(ssl, &io))
		return KP_RESET_PASS;
	bool own = io.e == ssl;
	/* curl, before SSL_free: the engine stays whole; a handle handed a
	 * pooled one is a shell anyway */
	if (!clear && (io.closed || (io.c && kp_conn_tls_at_end(io.c, io.fd))))
		return own ? KP_RESET_SKIP : KP_RESET_PASS;
	if (io.c)
		kp_conn_tls_spoil(io.c, io.fd, clear ? "SSL_clear" : "SSL_set_connect_state");
	if (!clear)
		return KP_RESET_PASS;
	/* a new connection on this object: we follow it no more */
	enum kp_tls_reset_do r = KP_RESET_PASS;
	bool last = false;
	kp_lock(&tls_lock);
	/* the session it keeps is its own now: resumed, it says so */
	struct record *rec = record_get(ssl, false);
	if (rec)
		rec->offered = false;
	struct handle *h = handle_find(ssl);
	struct kp_tls *e = h ? h->e : NULL;
	if (e && own && h->closed) {
		struct handle *user = NULL;
		for (struct handle *x = handles; x && !user; x = x->hh.next)
			if (x->e == e && x != h && !x->closed)
				user = x;
		if (user) {
			/* it serves another SSL of the program's: resetting it
			 * would cut that one's connection */
			r = KP_RESET_REFUSE;
			h = NULL;
		} else {
			/* parked, or in the pool's hands: dropped from it (dead),
			 * and the program gets its SSL back as it had it, with
			 * the close_notify it asked for "sent" first (else
			 * libssl takes its session for a bad one and makes it
			 * unresumable, at SSL_clear or a SSL_set_session) */
			kp_ssl.SSL_set_shutdown(ssl, kp_ssl.SSL_get_shutdown(ssl) | h->shut);
			restore_program(e);
		}
	}
	if (h) {
		HASH_DEL(handles, h);
		if (own)
			e->dead = e->foreign = true;
		last = engine_unref(e);
	}
	kp_unlock(&tls_lock);
	if (h) {
		if (last)
			engine_free(e);
		handle_free(h);
	}
	if (r == KP_RESET_REFUSE) {
		kp_ssl.ERR_new();
		kp_ssl.ERR_set_error(ERR_LIB_SSL, ERR_R_SHOULD_NOT_HAVE_BEEN_CALLED,
				     "libkeepalive: this SSL's connection serves another SSL");
		kp_debug("SSL_clear refused: the SSL's connection serves another SSL now");
	}
	return r;
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
	/* the learners' sockets are the parent's: the child's copies go */
	for (unsigned i = 0; i < n_learners; i++) {
		kp_fd_swap(learners[i].fd, NULL);
		KP_REAL(close)(learners[i].fd);
		if (engine_unref(learners[i].e))
			engine_free(learners[i].e);
	}
	n_learners = 0;
}
