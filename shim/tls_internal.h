/*
 * tls_internal.h - what the tls_*.c files share; the rest of the library
 * sees tls.h only.  Whole TLS connections in the pool: engines and handles.
 *
 * The files, each calling only those before it (docs/structure.md):
 *   tls_conf.c     the record of a configuration (settings no getter
 *                  tells, the getters' view) and the comparison of two;
 *   tls_engine.c   engines (the SSL that carries a pooled connection),
 *                  handles (the program's SSL -> its engine), detaching
 *                  the program, parking, how servers end, xmit;
 *   tls_handout.c  handing a parked engine or a session to a program's
 *                  SSL, the verification it runs as its own, the tickets;
 *   tls_across.c   sessions through the broker (docs/tls-across.md) and
 *                  parking (which keeps the session here and there); the
 *                  gate and (test build) the hand-out of a connection
 *                  from another process, its foreign engine's getters;
 *   tls_calls.c    the wrappers' logic (hooks_tls.c): the program's SSL
 *                  calls answered, the only file that calls conn.h.
 *
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
#ifndef KP_TLS_INTERNAL_H
#define KP_TLS_INTERNAL_H

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
#include "dl_real.h"
#include "fdtable.h"
#include "real.h"
#include "tls_real.h"
#include "tls_capture.h"
#include "tls_import.h"

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
/* One of the peer's signature algorithms as SSL_get_sigalgs (and
 * SSL_get_shared_sigalgs) answer an index. */
struct sigalg {
	int sign, hash, signhash;
	unsigned char rsig, rhash;
};
#define FULL_MAX_SIGALGS 64
#define FULL_MAX_CTYPES 32
#define FULL_MAX_PFORMATS 8
struct full {
	bool known;
	bool sig_ok, type_ok;
	int sig_nid, type_nid;
	EVP_PKEY *tmp; /* a reference of ours, or NULL: none */
	/* What the messages a resumption skips showed (the server's
	 * Certificate and CertificateRequest; the client's own
	 * CertificateVerify), answered by the getters that read them
	 * (docs/tls.md "What a full handshake shows").  shown false: not
	 * read (an older record): the getters ask libssl. */
	bool shown;
	STACK_OF(X509) *chain;         /* SSL_get_peer_cert_chain */
	STACK_OF(X509_NAME) *ca_names; /* SSL_get0_peer_CA_list (NULL: none) */
	bool client_ca;                /* SSL_get_client_CA_list answered them */
	int n_sigalgs, n_shared;       /* SSL_get_sigalgs, _shared_sigalgs */
	struct sigalg sigalgs[FULL_MAX_SIGALGS], shared[FULL_MAX_SIGALGS];
	bool cert_req;                 /* SSL_get0_certificate_types answers */
	int n_ctypes;
	unsigned char ctypes[FULL_MAX_CTYPES];
	bool pf_sent;                  /* SSL_get0_ec_point_formats answers */
	int n_pformats;                /* (the server's ServerHello, TLS 1.2) */
	unsigned char pformats[FULL_MAX_PFORMATS];
	bool own_sig_ok, own_type_ok;  /* SSL_get_signature_nid, _type_nid */
	int own_sig_nid, own_type_nid;
};

/* Objects a getter hands the program that it may change, up_ref or tag
 * with ex_data, answered from kept state: copies of its own SSL's, made
 * at its first ask and freed with its handle or record (tls_own.c;
 * docs/tls.md "The program's own objects") */
struct own {
	bool ca_made;
	STACK_OF(X509_NAME) *ca;       /* SSL_get0_peer_CA_list, _client_CA_list */
	EVP_PKEY *key[2];              /* SSL_get_peer_tmp_key, SSL_get_tmp_key */
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
	unsigned parks;      /* times parked (the test build's proof: tls_across.c) */
	/* a private copy (snap) of its session snap_src (a reference of ours,
	 * so that the address names no other), taken when first handed out:
	 * what hand-outs' sessions are made from, whatever the first owner
	 * does to its own object after (engine_snap) */
	SSL_SESSION *snap, *snap_src;
	bool sess_marked;    /* snap_src marked not resumable by its first
				owner's SSL_free without a shutdown
				(session_freed) */
	bool sess_own;       /* its session is a private copy now, or was
				left (engine_session_own) */
	bool notify_owed;    /* its last owner's SSL_shutdown was answered
				without our close_notify going out: it goes
				when the connection ends (kp_tls_goodbye) */
	/* a connection taken from another process (docs/tls-across.md "The
	 * hand-out in another process"): the foreign engine answers the
	 * program's calls, and ssl is a placeholder of ours that never made
	 * a handshake (any call not routed to the import meets a fresh SSL,
	 * never freed memory) */
	struct kp_import *im;
	/* kp_tls_crypto_gen when its handshake started: the process-wide
	 * crypto state (providers, default properties, RAND and engine
	 * defaults) it was made under (docs/tls.md "Process-wide state") */
	unsigned long crypto_gen;
	SSL_CTX *hs_ctx;     /* a reference of ours to the context it had when
				detached: what its handshake negotiated points
				into it (the peer's signature algorithm, in
				the context's sigalg table: docs/tls.md
				"After the handshake") */
	/* made by kp_tls_rehandshake in place of a handed-out connection:
	 * what the program was shown of that one, which this handshake must
	 * show too before any byte of the program's goes (shown_gate:
	 * docs/tls.md "A fresh handshake in place of a handed-out one") */
	struct shown {
		bool pending;
		bool refused; /* it did not: no write goes on it */
		bool peer;    /* the program looked at its peer: the same one */
		bool finished; /* it read a Finished: refused */
		bool result_known; /* not set by the program itself */
		long result;
		X509 *leaf;
		int version;
		uint32_t cipher;
		unsigned alpn_len;
		unsigned char alpn[256];
		SSL_SESSION *sess; /* the session it read: its ex_data goes on */
	} shown;
	UT_hash_handle hh;   /* in parked, by fd */
};

/* a program's SSL that we follow */
enum { REMAKE_WATCHED = 1, REMAKE_AUTORETRY = 2, REMAKE_CALL = 4, REMAKE_TOLD = 8 };
struct handle {
	SSL *ssl;
	struct kp_tls *e;    /* answers for it (e->ssl == ssl: its own) */
	int fd;
	bool closed;         /* its fd was closed and its engine parked */
	int synth_err;       /* SSL_get_error() for a result we made up */
	int shut;            /* SSL_get_shutdown() bits we made up */
	bool close_made;     /* kept_own: its real SSL given our close_notify "received" */
	bool alert_owed;     /* closed: its close_notify's write failed (closed_shutdown) */
	bool verified;       /* handed out: verify_result/vchain are its own */
	long verify_result;
	bool verify_set;     /* ... set by the program (SSL_set_verify_result) */
	bool peer_seen;      /* it asked what its peer is (kp_tls_peer_seen) */
	bool finished_seen;  /* it read a Finished (kp_tls_finished_seen) */
	bool sess_set;       /* the program set its own session since (SSL_set_session) */
	STACK_OF(X509) *vchain;
	char *peername;      /* the name our verification matched */
	/* handed out as a full handshake: its peer's certificate and chain,
	 * copies of its own (peer_copies), vchain made from them */
	X509 *peer;
	STACK_OF(X509) *peer_chain;
	/* handed out: the session it reads (kp_tls_session), a copy of the
	 * engine's session src made to look as its own handshake's would */
	SSL_SESSION *sess, *sess_src;
	bool sess_early;     /* sess is the copy before the server's tickets */
	bool read_once;      /* handed out, then read: its own SSL would
				have taken a TLS 1.3 server's tickets by now */
	bool io_once;        /* handed out, then read or written */
	unsigned remake;     /* handed out, then watched (REMAKE_WATCHED:
				kp_tls_watched) or its AUTO_RETRY cleared
				(REMAKE_AUTORETRY) before its first I/O */
	bool watched_late;   /* a watcher set after it read or wrote (or
				after its own handshake): told the engine's
				events, its connection stepped aside
				(kp_tls_watched) */
	bool moved;          /* its BIO changed after the handshake (the engine
				does its I/O on the program's BIO), or a call
				reset it (kp_tls_reset_live): unframed */
	long handed_at;      /* time() of the hand-out: its "handshake" */
	struct own own;      /* handed out: its own copies (tls_own.c) */
	/* what a handed-out SSL was shown before a fresh connection took the
	 * engine's place (kp_tls_rehandshake): libssl keeps what its getters
	 * return until SSL_free, and the program may hold those pointers
	 * (the verified chain, the peer's name, our copies, the engine's SSL
	 * behind ALPN and the server name); freed with the handle */
	struct kp_tls *kept_engine;
	bool peer_kept;      /* ... and the peer certificate it looked at (peer):
				still its answer, the same object (shown_gate
				proved the fresh one's the same) */
	STACK_OF(X509) *kept_vchain;
	char *kept_peername;
	struct own kept_own;
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
	bool offered;
	bool offered_across; /* ... a session from the broker (another process's) */
	bool across_counted; /* its resumption counted (tls_resumed_across) */
	bool hit_unmade;     /* its resumption taken off its context's hits */
	bool hit_unmade_time; /* ... and its session's time made its own */
	long offered_result;
	STACK_OF(X509) *offered_chain;
	X509_VERIFY_PARAM *offered_named; /* the name that check matched */
	struct full offered_full; /* the full handshake the session came from */
	struct own own;           /* its own copies of offered_full's (tls_own.c) */
	/* the chain verified for a connection it was handed, kept through
	 * SSL_clear as libssl 3.0 keeps its own verified chain there (until
	 * its next full handshake verifies one) */
	STACK_OF(X509) *cleared_chain;
	/* the context an SSL was made with, where SSL_set_SSL_CTX changed it
	 * since: libssl's session_ctx, which keeps its new-session callback
	 * and cache (docs/tls.md "Callbacks that watch") */
	const void *sess_ctx;
	/* a context's new-session callback, the program's: ours stands in
	 * the context (kp_tls_new_cb_set) */
	kp_new_session_cb new_cb;
	/* a context's: what its SSL_CTX_sess_connect, _connect_good and
	 * _hits answer beyond libssl's count (handshakes it did not make,
	 * or made as a resumption we answer as full), and _misses (a session
	 * of ours the server refused: the program offered none) */
	long stat_adj[4];
	UT_hash_handle hh;
};

enum { STAT_CONNECT, STAT_GOOD, STAT_HIT, STAT_MISS };

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
#define MAX_TICKETS 64

/* How each destination ended the last TLS connection it was asked to end
 * (a request's close that reached it, or its own Connection: close), as
 * a followed read met it: close_notify first, or the TCP FIN alone; or,
 * not known yet, that a program of this process would tell the
 * difference (it read an EOF we owed, or called SSL_shutdown again after
 * it).  An EOF the library owes is shown as a close_notify, so a request
 * that asks to close is rewritten only where that is what the server
 * sends (docs/tls.md "Ragged closes"; a connection closed before its end
 * was read is read on by the library to learn it, tls_engine.c
 * kp_tls_learn).  A small ring. */
enum { CL_RAGGED = 0, CL_NOTIFY = 1, CL_TELLS = 2 };
/* 0: a destination not known owes no EOF at all (strict default deny;
 * with learning at close it costs one connection per destination,
 * docs/tls.md "Ragged closes"); 1: the middle rule before (rewrite until
 * a program looked) */
#define CLOSER_UNKNOWN_OWES 0
#define MAX_CLOSERS 16
#define CLOSER_KEEP_S 3600
/* Options that may differ (docs/tls.md "allow-list"): they act only after
 * the handshake, and the engine takes the program's at hand-out
 * (SSL_OP_NO_RENEGOTIATION: the engine refuses renegotiation whatever
 * the program's says, docs/tls.md "Renegotiation"). */
#define CARRIED_OPTIONS (SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION)
/* modes of the I/O calls only: the engine takes the program's */
#define CARRIED_MODES                                                                            \
	(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_AUTO_RETRY | \
	 SSL_MODE_RELEASE_BUFFERS)

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

/* shared among the tls_*.c files */
extern __thread void *kp_tls_handshaking;
extern bool kp_tls_used;
void stat_add(SSL *ssl, int which, long n);
void full_free(struct full *f);
void names_free(STACK_OF(X509_NAME) *names);
STACK_OF(X509_NAME) *names_dup(const STACK_OF(X509_NAME) *names, bool *ok);
/* tls_own.c: the program's own copies of what a getter answers from kept
 * state (struct own); own_answer: *parg, *ret of full_answer's made the
 * SSL's own (caller holds tls_lock).  tls_handout.c: the key exchange
 * keys routed to an engine, copied; a record's offered full handshake set */
void own_free(struct own *o);
void own_answer(struct own *o, int cmd, void *parg, void *before, long *ret);
long kp_tls_own_key(SSL *ssl, SSL *e, int cmd, long larg, void *parg);
void offered_full_set(struct record *r, const struct full *f, SSL_SESSION *mine);
void full_copy(struct full *dst, const struct full *src);
void full_read(SSL *ssl, struct full *f);
extern kp_mutex_t tls_lock;

/* tls_goodbye.c: the close_notify e's last owner was told it sent (the
 * note cleared), sealed into rec from the state of an export message of
 * e (len bytes) without moving it: its length, or 0 when none is owed;
 * and such a record sent on fd, never waiting, never a signal. */
size_t goodbye_seal(struct kp_tls *e, const unsigned char *msg, size_t len, uint8_t rec[BK_TAIL_MAX]);
void goodbye_send(int fd, const uint8_t *rec, size_t n);
/* our KeyUpdate written on fd under the state of an export message (len
 * bytes, TLS 1.3), the message re-made past it (tls_goodbye.c) */
unsigned char *state_key_update(unsigned char *msg, size_t *len, int fd);
extern struct ticket *tickets;
extern struct handle *handles;
bool closer_looked(const struct pool_key *key);
void closer_told(const struct pool_key *key, uint32_t kind);
void closer_learn(SSL *e, int r, const struct pool_key *key, uint32_t kind);
SSL_CTX *shim_ctx_get(void);
void conf_free(struct conf *c);
void conf_set(struct conf *c, int i, const void *p, size_t n);
void conf_copy(struct conf *dst, const struct conf *src);
const char *conf_mismatch(const struct conf *a, const struct conf *b);
const char *never_reason(unsigned never);
struct record *record_get(const void *obj, bool create);
void record_drop(const void *obj);
bool ctx_new_made(const void *obj);
int deferred_fd(SSL *ssl);
void cfg_free(struct cfg *c);
void cfg_read(SSL *ssl, struct cfg *c);
void cfg_copy(struct cfg *dst, const struct cfg *src);
const char *cfg_mismatch(const struct cfg *was, const struct cfg *now);
struct handle *handle_find(const SSL *ssl);
void saved_free(struct saved *sv);
void engine_free(struct kp_tls *e);
/* SSL_version of the connection e carries (a foreign engine's too) */
int engine_version(const struct kp_tls *e);
bool engine_unref(struct kp_tls *e);
void handle_free(struct handle *h);
SSL_CTX *session_ctx(SSL *ssl);
bool tells_sessions(SSL_CTX *ctx);
/* ctx's new-session callback as the program set it (ours, new_cb_stand_in,
 * stands in the context: tls_handout.c).  Caller holds tls_lock. */
kp_new_session_cb prog_new_cb(SSL_CTX *ctx);
extern kp_new_session_cb new_cb_stand_in;
const char *sessions_told(SSL *ssl);
/* its own handshake starts: captured for an export (tls_across.c) */
void kp_tls_capture_own(SSL *ssl);
const char *watcher(SSL *ssl, const struct conf *conf);
const char *bio_watcher(SSL *ssl);
const char *never_for(SSL *ssl, const struct conf *conf);
void tickets_taken(SSL *e);
const struct conf *conf_of(const SSL *ssl);
bool chain_equal(X509 *cert, SSL *ssl, STACK_OF(X509) *want);
/* 1: e's SSL may carry the program's bytes; 0: its handshake is under way
 * (*hs: SSL_do_handshake's return, for SSL_get_error); -1: it showed
 * another peer than the program was shown: its socket shut, nothing may
 * be sent (the write fails as on a reset: ECONNRESET, no SIGPIPE) */
int shown_gate(struct kp_tls *e, int *hs);
/* set once a fresh handshake replaced a handed-out connection in this
 * process: before, no SSL has a gate to look up (one load) */
extern bool kp_tls_shown_ever;
int detach_program(struct kp_tls *e, int fd, bool prog_alive);
void restore_program(struct kp_tls *e);
bool same_str(const char *a, const char *b);
const char *shape_mismatch(const struct shape *sh, SSL *ssl);
SSL_SESSION *resuming(SSL *ssl);
/* the options that act after the handshake, the program ssl's, on the engine e */
void engine_take_options(SSL *e, SSL *ssl);
int verify_as(SSL *ssl, X509 *leaf, STACK_OF(X509) *untrusted, long *result, STACK_OF(X509) **chain, char **peername, X509_VERIFY_PARAM **keep);
void ticket_free(struct ticket *t);
void ticket_insert(struct ticket *t, struct ticket **drop);
STACK_OF(X509) *ticket_chain_of(const struct pool_key *key, const char *sni, X509 *leaf);
SSL_SESSION *session_anew(SSL_SESSION *sess, long at);
SSL_SESSION *session_freed(struct handle *h, SSL *ssl, bool own, int shut, SSL_CTX **ctx);
bool session_spoilt(struct kp_tls *e, SSL_SESSION *src);
/* a copy of sess as a TLS 1.3 handshake leaves it, before the server's
 * tickets: no id, no ticket (docs/tls.md "Sessions"), or NULL */
SSL_SESSION *session_unticketed(SSL_SESSION *sess);
bool session_changed(const SSL_SESSION *sess);
/* from's session ex_data (the program's, our mark) set on to, as libssl's
 * own copy carries them */
void session_ex_carry(const SSL_SESSION *from, SSL_SESSION *to);
const char *engine_snap(struct kp_tls *e);
SSL_SESSION *session_base(struct kp_tls *e, SSL_SESSION *src);
/* tls_peer.c: copies of a peer's certificate and chain (the chain's leaf
 * the certificate); whether ssl's session shows where libssl keeps a
 * session's peer (learnt from it once); a session's chain; d (a copy
 * of ours not yet shown) given peer and chain (references of its own),
 * false where it cannot be */
void peer_copies(X509 *leaf, STACK_OF(X509) *chain, X509 **peer, STACK_OF(X509) **peer_chain);
bool session_peer_known(SSL *ssl);
STACK_OF(X509) *session_peer_chain(SSL_SESSION *s);
bool session_peer_give(SSL_SESSION *d, X509 *peer, STACK_OF(X509) *chain);
bool offer_peer_own(X509 **leaf, STACK_OF(X509) **chain);
SSL_SESSION *session_anew_own(SSL_SESSION *sess, X509 *peer, STACK_OF(X509) *chain);
void full_chain_own(struct full *f, SSL_SESSION *s);
extern struct kp_tls *parked;
/* the SSL error of this thread's last failed kp_tls_push (tls_engine.c) */
extern __thread int kp_tls_push_err;
int prog_socket_bio(SSL *ssl, int *close_flag);
/* whether the program's write BIO raises SIGPIPE at a write the server
 * refused: 1 (socket, descriptor, connect BIOs: write()), 0 (curl's:
 * send with MSG_NOSIGNAL), -1 (not known) */
int prog_bio_sigpipe(SSL *ssl);
void note_cert(struct kp_tls *e);
bool alpn_not_http11(SSL *ssl);
bool ssl_bio_imported(void);
bool session_shown_imported(void);

#endif
