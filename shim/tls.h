/*
 * tls.h - whole TLS connections in the pool (docs/design.md §5).
 *
 * The program's SSL object is a "handle".  The TLS connection itself is an
 * "engine" (struct kp_tls): at first the program's own SSL object, which we
 * keep alive when the program frees it while its socket can still be
 * parked, and later handed to another handle whose every SSL_* call is then
 * answered by the engine.  Engines travel with their socket: c->tls while
 * a program's fd holds it, the parked map (by hidden fd) while in the pool.
 *
 * Locks: callers may hold a connection's lock when calling in here; this
 * module never takes one itself.
 */
#ifndef KEEPALIVE_TLS_H
#define KEEPALIVE_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <openssl/ssl.h>

#include "tls_real.h" /* kp_msg_cb, the libssl callback types */

struct kp_conn;
struct kp_tls;
struct pool_key;
struct pool_meta;

/* The program's SSL whose real handshake runs on this thread (SSL_connect
 * or SSL_do_handshake): the socket writes it makes tell us its fd, also
 * through a BIO of the program's own (curl). */
extern __thread void *kp_tls_handshaking;
/* Set once the first engine exists: until then every wrapper passes through. */
extern bool kp_tls_used;

/* --- for conn.c and conn_replay.c (the connection's lock held) --- */

/* The program's ssl starts a handshake on a fresh connection at fd: a new
 * engine (its ssl), with a reference for the connection; NULL if none. */
struct kp_tls *kp_tls_bind(void *ssl, int fd);

/* Hand pooled engine e, now behind fd, to the program's ssl (before its
 * handshake), if everything that would make a handshake differ matches
 * and the program's own verification passes on e's peer chain.  0: from
 * now on ssl speaks through e; -1: declined (nothing changed). */
int kp_tls_handout(struct kp_tls *e, void *ssl, int fd);

/* Park e at hidden fd (its BIO moved there, the program's callbacks and
 * BIO detached); the connection's reference moves to the parked map.
 * user: the program's handle that used it last (its I/O is refused from
 * now on).  False when e's TLS state forbids it (nothing changed). */
bool kp_tls_park(struct kp_tls *e, int hidden, void *user, const struct pool_key *key,
		 const struct pool_meta *meta);

/* No pooled connection for ssl's handshake to key: offer it the session of
 * an earlier one (resumption), if its handshake would ask for the same
 * and its own verification passes on that session's peer chain. */
void kp_tls_offer_session(void *ssl, const struct pool_key *key);

/* the lines of a hand-out across processes: debug, warnings in the test
 * build (its tests count them at the default level) */
#ifdef KP_TEST_ACROSS_VERIFY
#define kp_across_note kp_warn
#else
#define kp_across_note kp_debug
#endif
/* A whole TLS connection from another process for ssl's handshake on fd
 * (docs/tls-across.md "The hand-out in another process"): asked of the
 * broker under the name ssl's settings make, passed through the gate
 * (the decline list, the configuration record, the program's own
 * verification), imported into a foreign engine that answers ssl from now
 * on.  The engine (a reference for the connection, one for ssl's handle)
 * and in *sock the socket it runs on, with its record in *meta: the
 * caller puts the socket in fd's place, or gives the engine back
 * (kp_tls_across_drop).  NULL: none, or refused (the program's own
 * handshake goes on). */
struct kp_tls *kp_tls_across_take(void *ssl, const struct pool_key *key, int fd, int *sock,
				  struct pool_meta *meta);
void kp_tls_across_drop(struct kp_tls *e, void *ssl);
/* The gate and the import of the state msg (len bytes, malloc'd: taken,
 * wiped on every path) made under name, for ssl's handshake on fd, whose
 * socket already carries it (docs/tls-across.md "The hand-out at
 * connect()"): the name ssl's settings make must be name, then the gate
 * of kp_tls_across_take in full.  The engine as kp_tls_across_take's, or
 * NULL with *why (the caller still holds the socket). */
struct kp_tls *kp_tls_across_claim(void *ssl, const struct pool_key *key, int fd, const uint8_t name[32],
				   unsigned char *msg, size_t len, const char **why);
/* The program made an SSL context of its own (SSL_CTX_new): its
 * connect()s may be HTTPS. */
extern bool kp_tls_ctx_seen;
/* ... or links libssl (curl makes its context after its connect()),
 * under KEEPALIVE_TLS_ACROSS: libssl bound at start, from the library's
 * constructor (kp_tls_start), where binding may allocate, so that
 * connect() may ask the broker without binding (docs/tls-across.md "The
 * hand-out at connect()") */
extern bool kp_tls_linked;
void kp_tls_start(void);
/* connect() may take a TLS connection from the broker: KEEPALIVE_TLS_ACROSS
 * under a broker (the library that ships), a program that made an SSL
 * context (a program without TLS never asks). */
bool kp_tls_across_at_connect(void);
/* Connections are handed between processes here (KEEPALIVE_TLS_ACROSS
 * under a broker, outside the test build's own modes). */
bool kp_tls_across_on(void);
/* Seconds the session inside export message msg has left (0: none). */
long kp_tls_across_left(const unsigned char *msg, size_t len);
/* The parked connection on hidden, which the pool will not keep (its caps,
 * the exit): under KEEPALIVE_TLS_ACROSS its TLS 1.3 state to the broker.
 * True: its engine taken and freed, the caller closes hidden. */
bool kp_tls_across_leave(int hidden, const struct pool_key *key, const struct pool_meta *meta);

/* Forget every kept session (the process's credentials changed). */
void kp_tls_forget_sessions(void);

/* The engine parked at hidden fd, taken out of the parked map (its
 * reference to the caller), or NULL. */
/* e can never serve again (its SSL went back to the program): drop it */
bool kp_tls_dead(struct kp_tls *e);
struct kp_tls *kp_tls_unpark(int hidden);

/* Is a TLS connection parked at hidden?  (It then cannot leave the
 * process: its TLS state lives here.) */
bool kp_tls_is_parked(int hidden);

/* Drop one reference (the last frees the engine's SSL). */
void kp_tls_put(struct kp_tls *e);
/* e, on fd, is ended by the library (parked, and taken out of the parked
 * ones), or the program shows it ends (its FIN, its exit): the
 * close_notify its last owner's SSL_shutdown was told it sent goes out now
 * (tls_goodbye.c).  Before kp_tls_put.  True when it went. */
bool kp_tls_goodbye(struct kp_tls *e, int fd);
/* e holds a close_notify owed (kp_tls_goodbye would send one). */
bool kp_tls_notify_owed(struct kp_tls *e);
/* e's end owes the server a close_notify from now on (the close its
 * program asked for, which the library took away). */
void kp_tls_owe_notify(struct kp_tls *e);
/* SSL_CTX_sess_set_new_cb: the program's callback kept behind ours (false:
 * not followed, the real call is the caller's); SSL_CTX_sess_get_new_cb's
 * answer (tls_handout.c) */
bool kp_tls_new_cb_set(SSL_CTX *ctx, kp_new_session_cb cb);
kp_new_session_cb kp_tls_new_cb_of(SSL_CTX *ctx);
/* The exit handler that ends this process's TLS connections (hidden.c),
 * registered once: at a TLS park, and where a close_notify is owed. */
void kp_tls_exit_arm(void);

/* fd now holds a fresh TCP connection in place of the reused one whose
 * engine the program's ssl was using (*slot, the connection's: put by
 * this call, if any): the program's ssl becomes its own engine and makes
 * its own handshake (with its own verification), bounded in time.  Sets
 * *slot (NULL while it works, so that nobody uses the old engine).  0
 * done, 1 still under way when the time was up (kp_tls_replay_step goes
 * on with it), -1 failed. */
int kp_tls_rehandshake(struct kp_tls **slot, int fd, void *ssl);

/* A replay whose fresh handshake (or copy) did not end within the
 * program's call goes on at its next call on that SSL, never waiting:
 * the handshake, then buf from *off (advanced) through e.  1 all sent, 0
 * the socket is wanted (the program's SSL says WANT_READ or WANT_WRITE,
 * as for its own handshake under way), -1 failed (its SSL says why). */
int kp_tls_replay_step(struct kp_tls *e, const char *buf, size_t len, size_t *off);
/* What e's handshake under way waits for: SSL_ERROR_WANT_WRITE or
 * SSL_ERROR_WANT_READ (the program's SSL_get_error while it waits). */
int kp_tls_want(const struct kp_tls *e);

/* Does e's socket fd, whose server's FIN is in, hold the end of the
 * connection before any answer: whole records waiting (avail bytes, at
 * most 4 KiB) that e decrypts to a close_notify and nothing before it?
 * Read through e without waiting (SSL_peek: what it takes stays e's,
 * for the program's read), errors left as they were.  false: an answer,
 * or anything less sure (a record cut short, a foreign engine); where
 * those records begin with data, up to cap bytes of it are in peek
 * (*peeked: how many; 0 otherwise), for the caller to tell a server's
 * idle 408 from an answer. */
bool kp_tls_ends_unanswered(struct kp_tls *e, int fd, int avail, char *peek, size_t cap, size_t *peeked);

/* The deadline (kp_now_ms) of the call a replay happens in, 0: none
 * (docs/replay.md "The program's bounds"): kp_tls_rehandshake and
 * kp_tls_xmit wait no longer than that on this thread. */
extern __attribute__((visibility("hidden"))) __thread uint64_t kp_tls_wait_end_ms;
/* The last kp_tls_rehandshake on this thread ended its wait at a signal
 * that ends the program's call (kp_call_restarts): under way, and the
 * call is to say so at once (docs/hold.md "Signals during the library's
 * waits"). */
extern __attribute__((visibility("hidden"))) __thread bool kp_tls_wait_cut;

/* Send all of iov through e (TLS records on fd), waiting for the socket
 * (bounded: 30 s, or kp_tls_wait_end_ms) when it is full.  Returns the
 * bytes or -1 with errno. */
ssize_t kp_tls_xmit(struct kp_tls *e, int fd, const struct iovec *iov, int iovcnt);

/* One SSL_write_ex of buf through e, never waiting (docs/hold.md
 * "HTTPS"): 1 with *w (a partial-write engine may take less than len);
 * 0 when none was taken now, errno EAGAIN or EINTR for WANT_WRITE or
 * WANT_READ (the engine keeps what it began, and must be called again
 * with the same buf and len before anything else), else the error's
 * errno.  The program's call on this thread then reports that SSL error. */
int kp_tls_push(struct kp_tls *e, const void *buf, size_t len, size_t *w);
/* Whether this thread's last kp_tls_push put any byte on the socket (a
 * failed one too: the records before the failure went). */
extern __thread bool kp_tls_push_wire;
/* The program's write on this thread fails with this SSL error (a retry
 * that does not offer the bytes a record begun stands for). */
void kp_tls_push_fail(int ssl_err);

/* ssl's handshake tried to write on fd, which holds a pooled TLS
 * connection: decide at its next handshake call (kp_tls_handshake). */
void kp_tls_defer(void *ssl, int fd);
/* false: ssl's BIO declines a hand-out anyway, decide at once */
bool kp_tls_defer_may_hand(void *ssl);
/* ssl's BIO hides its socket (a method of the program's own: curl's):
 * SSL_connect could not tell the fd, its first write does */
bool kp_tls_fd_hidden(void *ssl);

/* The program closed the connection of engine e (the connection's
 * reference, passed on; its socket kept at hidden, marked pooled) before
 * reading the end its server was asked to send, where it is not known how
 * that server ends: read on, never waiting, to learn it (docs/tls.md
 * "Ragged closes").  True: e and hidden are taken (closed when done);
 * false: nothing changed. */
bool kp_tls_learn(struct kp_tls *e, int hidden, const struct pool_key *key, uint32_t kind);
/* The same connection's session is kept for resumption, as a parked
 * one's is (docs/tls.md "Sessions"): the first connection to a
 * destination, whose close teaches, is not parked.  False: not (e gone
 * back to the program, or not a whole handshake). */
bool kp_tls_keep_session(struct kp_tls *e, const struct pool_key *key);
/* A seccomp install (docs/owner.md "A sandbox"): the EOF we owe on e's
 * connection becomes the engine's own state (a close_notify "received"),
 * answered with no call of ours. */
void kp_tls_sandbox_eof(struct kp_tls *e);
/* ... and on one whose rewritten request's answer is still to come: e
 * sends our close_notify now (the caller the FIN). */
void kp_tls_sandbox_close(struct kp_tls *e);
/* how many such sockets are kept, and which */
unsigned kp_tls_learners(void);
size_t kp_tls_learner_fds(int *fds, size_t cap);
/* the program closes (or the kernel is about to close) hidden fd, a
 * learner's: forgotten, the caller closes it.  True when it was one. */
bool kp_tls_learner_forget(int fd);
/* out of fds: one last look each, then all closed; how many */
unsigned kp_tls_learners_drain(void);

/* --- for the SSL_* wrappers (hooks_tls.c) --- */

enum kp_tls_op { KP_TLS_READ, KP_TLS_READ_EX, KP_TLS_PEEK, KP_TLS_PEEK_EX, KP_TLS_WRITE, KP_TLS_WRITE_EX };

/* SSL_CTX_sess_connect, _connect_good, _hits (SSL_CTX_ctrl's result r):
 * as the program's own handshakes would have counted */
long kp_tls_ctx_stat(const SSL_CTX *ctx, int cmd, long r);

/* The SSL that answers for ssl: its engine when ssl is a handle we hand
 * a pooled connection to, else ssl.  NULL for a call that acts on the
 * connection (mutates) from an SSL whose connection went to the pool. */
SSL *kp_tls_route(const SSL *ssl, bool mutates);
/* A connection taken from another process (docs/tls-across.md "The
 * hand-out in another process"): the getters answered from its state by
 * the foreign engine, as the program's own SSL would answer them after
 * its handshake.  False: not such an SSL (ask as before). */
enum kp_fq {
	KP_FQ_VERSION, KP_FQ_VERSION_STR, KP_FQ_CLIENT_VERSION, KP_FQ_INIT_FINISHED, KP_FQ_IN_INIT,
	KP_FQ_IN_BEFORE, KP_FQ_STATE, KP_FQ_STATE_STR, KP_FQ_STATE_STR_LONG, KP_FQ_SERVERNAME,
	KP_FQ_SERVERNAME_TYPE, KP_FQ_FINISHED, KP_FQ_PEER_FINISHED, KP_FQ_CLIENT_RANDOM, KP_FQ_SERVER_RANDOM,
	KP_FQ_ALPN, KP_FQ_EKM, KP_FQ_WANT, KP_FQ_PENDING_CIPHER, KP_FQ_EXTMS, KP_FQ_RI, KP_FQ_GROUP,
	KP_FQ_REFUSE_RENEGOTIATE, KP_FQ_REFUSE_PHA, /* r->i: the reason libssl refuses it with */
	KP_FQ_KEY_UPDATE,      /* SSL_key_update(a->type): the engine's (tlsf_key_update) */
	KP_FQ_KEY_UPDATE_TYPE, /* SSL_get_key_update_type */
};
/* SSL_do_handshake (SSL_connect) on an SSL a foreign engine answers: the
 * KeyUpdate its SSL_key_update owes sent (tlsf_do_handshake), 1 or -1 with
 * the reason raised */
struct tlsf;
int kp_tls_foreign_handshake(struct tlsf *f);
struct kp_fq_args {
	void *buf;
	size_t n;
	int type;
	const unsigned char **data;
	unsigned *len;
	const char *label;
	size_t llen;
	const unsigned char *ctx;
	size_t clen;
	int use_ctx;
};
union kp_fq_ret {
	long i;
	size_t z;
	const char *s;
	const void *p;
};
/* set once a connection from another process was handed out here */
extern bool kp_tls_foreign_ever;
bool kp_tls_foreign(const SSL *ssl, enum kp_fq q, const struct kp_fq_args *a, union kp_fq_ret *r);

/* SSL_ctrl: connection getters to the engine, settings to ssl */
long kp_tls_ctrl(SSL *ssl, int cmd, long larg, void *parg);
/* SSL_get0_peername of an SSL handed a pooled connection */
bool kp_tls_peername(SSL *ssl, const char **name);
/* SSL_get_peer_signature_type_nid (cmd KP_PEER_SIG_TYPE), or the
 * SSL_CTRL_GET_PEER_SIGNATURE_NID / _GET_PEER_TMP_KEY ctrl, for an SSL
 * handed a pooled connection or resuming a session of ours: what its own
 * handshake would have negotiated.  False: ask libssl. */
/* SSL_get_session for an SSL handed a pooled connection: a session of
 * its own that looks as its handshake's would (docs/tls.md "Sessions").
 * False: ask libssl. */
bool kp_tls_session(const SSL *ssl, SSL_SESSION **out);
/* the program made an SSL ex_data index with a free or dup callback
 * (CRYPTO_get_ex_new_index): its SSLs are not followed */
extern bool kp_tls_ssl_ex_funcs;
/* the highest session ex_data index the program made (-1: none): what a
 * session copy of ours carries into the next (kp_tls_session) */
void kp_tls_session_index(int idx);
/* Bumped by every wrapped setter of process-wide crypto state (providers,
 * default properties, RAND and engine defaults, configuration loaded): a
 * connection made under another generation is not handed out
 * (docs/tls.md "Process-wide state") */
extern unsigned long kp_tls_crypto_gen;
/* ... by those of them not made by libcrypto's own load of its default
 * configuration (OPENSSL_init_crypto with no settings: the file
 * OPENSSL_CONF names, or the built-in one): a process with any other
 * change never takes a connection from another process, whose state it
 * cannot compare (docs/tls-across.md "The gate") */
extern unsigned long kp_tls_crypto_odd;
/* ... and what another process can compare of the rest, in order: the
 * names of the calls of that load, and of each ENGINE_register_all_complete
 * made outside it (libssh2's start-up, under curl) with the ids of the
 * engines it registered: equal traces, the same calls on the same state
 * (docs/tls-across.md "Programs that keep sessions") */
extern uint64_t kp_tls_crypto_trace;
#define KP_PEER_SIG_TYPE (-1)
/* and what the messages a resumption skips showed (docs/tls.md "What a
 * full handshake shows"): SSL_get_signature_type_nid, the peer's chain
 * (STACK_OF(X509) **), CA names (STACK_OF(X509_NAME) **, through
 * SSL_get0_peer_CA_list or SSL_get_client_CA_list), signature algorithms
 * (struct kp_sigalg_query *); the SSL_CTRL_GET_CLIENT_CERT_TYPES and
 * SSL_CTRL_GET_SIGNATURE_NID ctrls */
#define KP_OWN_SIG_TYPE (-2)
#define KP_PEER_CHAIN (-3)
#define KP_PEER_CA (-4)
#define KP_CLIENT_CA (-5)
#define KP_SIGALGS (-6)
#define KP_SHARED_SIGALGS (-7)
struct kp_sigalg_query {
	int idx;
	int *sign, *hash, *signhash;
	unsigned char *rsig, *rhash;
};
bool kp_tls_peer_full(const SSL *ssl, int cmd, void *parg, long *ret);
/* a handed-out SSL's own copy of its peer's certificate (docs/tls.md
 * "The program's own objects"); false: libssl's */
bool kp_tls_peer_own(const SSL *ssl, X509 **out);
/* the program is about to change sess (SSL_SESSION_set*): no hand-out's
 * or resumption's session is made from it */
void kp_tls_session_changes(SSL_SESSION *sess);
/* SSL_connect/SSL_do_handshake (real: the one the program called) */
int kp_tls_handshake(SSL *ssl, int (*real)(SSL *));
/* the read/peek/write family, framed; done for the _ex forms */
int kp_tls_io(SSL *ssl, enum kp_tls_op op, void *buf, size_t n, size_t *done);
/* The destination was last seen to end a TLS connection it was asked to
 * end with close_notify: an EOF owed there may be shown as one
 * (docs/tls.md "Ragged closes") */
bool kp_tls_closes_clean(const struct pool_key *key, uint32_t kind);
int kp_tls_get_error(const SSL *ssl, int ret);
int kp_tls_shutdown(SSL *ssl);
int kp_tls_get_shutdown(const SSL *ssl);
int kp_tls_pending(const SSL *ssl, bool has);
/* true when ssl was handed a pooled connection: the verification that
 * counts is the one we ran for it */
bool kp_tls_verify_result(const SSL *ssl, long *result, STACK_OF(X509) **chain);
/* the program set what a getter of ours answers (docs/tls.md "Found by the
 * second HTTPS review"): SSL_set_verify_result, SSL_set_session on a
 * handed-out SSL; true: done here (not to be set on ssl again) */
void kp_tls_set_verify_result(SSL *ssl, long result);
void kp_tls_set_session(SSL *ssl);
/* SSL_set_shutdown: true when ssl is ours and its engine took the bits */
bool kp_tls_set_shutdown(SSL *ssl, int mode);
/* a setting that acts after the handshake changed on ssl (options, quiet
 * shutdown, read ahead, record sizes, a key update): the engine that does
 * its I/O takes it (set, a real setter applied to the engine), and what
 * the connection's record no longer tells keeps it out of the pool */
enum kp_tls_after { KP_AFTER_OPTIONS, KP_AFTER_OTHER };
SSL *kp_tls_after_set(SSL *ssl, enum kp_tls_after what, const char *why);
/* ssl's BIOs changed (SSL_set_fd, _rfd, _wfd, _bio, set0_rbio, _wbio):
 * after its handshake, the engine that does its I/O takes the program's
 * BIOs, the connection is never parked and no longer framed (docs/tls.md
 * "After the hand-out: the program's BIO") */
void kp_tls_bio_moved(SSL *ssl);
void kp_tls_free(SSL *ssl);
/* SSL_clear (clear) or SSL_set_connect_state: what to do with the call */
enum kp_tls_reset_do {
	KP_RESET_PASS,   /* make the real call */
	KP_RESET_SKIP,   /* not at all: it would reset the pooled connection the SSL is */
	KP_RESET_REFUSE, /* fail it: the SSL serves another SSL of the program's */
};
enum kp_tls_reset_do kp_tls_reset(SSL *ssl, bool clear);
/* A call that resets an established SSL (SSL_set_session, _set_ssl_method,
 * _set_connect_state, _set_accept_state, SSL_stateless) made on a handed-out
 * one, live: the engine that carries its connection, for the call to break
 * it as alone (the connection never parked after it); else NULL (docs/tls.md
 * "Calls that reset an established SSL") */
SSL *kp_tls_reset_live(SSL *ssl, const char *why);
/* What no getter tells, recorded from the setters on a context or an SSL
 * (docs/tls.md: everything a getter tells is read at hand-out instead).
 * Lists (exact bytes as set: a handshake is handed a pooled connection
 * only if its lists equal the connection's): */
enum kp_conf_list {
	CONF_ALPN, CONF_GROUPS, CONF_SIGALGS, CONF_CLIENT_SIGALGS,
	CONF_PHA, /* "1": post-handshake authentication offered */
	CONF_SID_CTX, /* the session id context (no getter) */
	CONF_LISTS
};
/* ... numbers (0: libssl's default) ... */
enum kp_conf_val {
	VAL_MAX_SEND_FRAGMENT, VAL_SPLIT_SEND_FRAGMENT, VAL_MAX_PIPELINES, VAL_BLOCK_PADDING,
	VAL_MAX_FRAG_LEN,
	CONF_VALS
};
/* ... and settings that decide things during the handshake in code of
 * the program's, or that we do not know: such a handshake is never
 * handed a pooled connection or session, nor its connection pooled. */
enum kp_never {
	NEVER_APP_VERIFY, NEVER_DANE, NEVER_CERT_CB, NEVER_NPN, NEVER_ENGINE, NEVER_TMP_ECDH,
	NEVER_CUSTOM_EXT, NEVER_PSK, NEVER_ACCEPT, NEVER_LIBCTX, NEVER_UNKNOWN,
	NEVER_UNKNOWN_CTRL, NEVER_UNKNOWN_CB, NEVER_SRP, NEVER_STATUS_CB, NEVER_PADDING_CB,
	NEVER_TICKET_EXT, NEVER_LOOKUP, NEVER_DEBUG_CB, NEVER_SERVERNAME_CB, NEVER_SECRET_CB,
};
struct conf {
	unsigned char *list[CONF_LISTS];
	size_t len[CONF_LISTS];
	long val[CONF_VALS];
	unsigned never;    /* 1 << enum kp_never */
	kp_msg_cb msg_cb;  /* not compared: given back by SSL_clear */
	void *msg_arg;     /* its argument (SSL_set_msg_callback_arg) */
};
void kp_tls_note_list(const void *obj, enum kp_conf_list i, const void *p, size_t n);
void kp_tls_note_val(const void *obj, enum kp_conf_val i, long v);
void kp_tls_note_never(const void *obj, enum kp_never why, bool on);
/* SSL_ctrl / SSL_CTX_ctrl (ret: what the real call returned): the
 * setters of what no getter tells are recorded, a command not in the
 * table (docs/tls.md) makes obj's handshakes never pooled */
void kp_tls_note_ctrl(const void *obj, int cmd, long larg, const void *parg, long ret);
/* SSL_callback_ctrl / SSL_CTX_callback_ctrl: set (cb != NULL) or cleared */
void kp_tls_note_callback_ctrl(const void *obj, int cmd, bool set);
void kp_tls_note_new(const void *obj, const void *ctx);
/* around the real SSL_CTX_new: what is noted while it runs (openssl.cnf)
 * is the new context's */
void kp_tls_ctx_new(bool running);
/* SSL_set_SSL_CTX(ssl, ctx): ssl's certificate settings are ctx's now */
void kp_tls_note_set_ctx(const void *ssl, const void *ctx, const void *before);
/* SSL_copy_session_id(t, f): t's certificate settings and session id
 * context are f's now */
void kp_tls_note_copy_session(const void *t, const void *f);
void kp_tls_note_msg_cb(const void *obj, kp_msg_cb cb);
/* an info or message callback set on obj (an SSL, or a context: is_ctx)
 * after an SSL was handed a pooled connection (docs/tls.md "Callbacks
 * that watch") */
void kp_tls_watched(const void *obj, bool is_ctx);
/* A call the foreign engine cannot answer, before the handed SSL's first
 * read or write: its own handshake on a fresh connection first. */
void kp_tls_foreign_early(SSL *ssl);
/* ssl was handed a pooled connection, or resumed a session we offered:
 * its own handshake would have been a full one (SSL_session_reused 0) */
bool kp_tls_session_ours(const SSL *ssl);

/* fork(): the registries' lock is held across; the child starts with a
 * fresh one. */
void kp_tls_before_fork(void);
void kp_tls_after_fork_parent(void);
void kp_tls_after_fork_child(void);

/* The program asked what ssl's peer is (its certificate, chain, verify
 * result, session): a fresh handshake in place of a handed-out connection
 * must then show the same peer (docs/tls.md "A fresh handshake in place
 * of a handed-out one"). */
void kp_tls_peer_seen(const SSL *ssl);
/* ... read a Finished message (SSL_get_finished, SSL_get_peer_finished: a
 * channel binding): a fresh handshake in its place is refused */
void kp_tls_finished_seen(const SSL *ssl);

#endif
