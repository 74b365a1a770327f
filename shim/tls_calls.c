/* tls_calls.c - the logic of the libssl wrappers (hooks_tls.c): the
 * program's SSL calls answered by its engine and framed by the connection
 * (conn.h); the one tls file above the connection core. */
#include <pthread.h>
#include <signal.h>

#include "tls_internal.h"

#include "conn.h"

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
	if (h && h->closed && mutates) {
		if (h->e->ssl == ssl && !h->e->own_bio)
			h->e->dead = true; /* as kept_own */
		else
			e = NULL;
	}
	kp_unlock(&tls_lock);
	return e;
}

/* SSL_MODE_AUTO_RETRY cleared on a handed-out SSL: its own TLS 1.3
 * connection would show the server's tickets to its first reads as
 * WANT_READ, which the engine's first owner took.  Before its first read
 * or write it makes its own handshake on a fresh connection, as for a
 * callback that watches (remake_watched; docs/tls.md "Found by the second
 * HTTPS review", F1); after its first read the tickets are gone alone
 * too (taken under AUTO_RETRY), nothing differs.  TLS 1.2 has no record
 * after the handshake but a renegotiation, refused either way. */
static void autoretry_cleared(SSL *ssl)
{
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	if (h && h->e->ssl != ssl && h->verified && !h->io_once && !h->closed &&
	    engine_version(h->e) >= TLS1_3_VERSION)
		h->remake |= REMAKE_AUTORETRY;
	kp_unlock(&tls_lock);
}

/* A mode set or cleared on an SSL a foreign engine answers: the program's
 * SSL takes it, the engine its I/O modes (docs/tls-across.md "The
 * hand-out in another process").  False: not such an SSL. */
static bool foreign_modes(SSL *ssl, int cmd, long larg, void *parg, long *ret)
{
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	struct tlsf *f = h && h->e->im ? &h->e->im->f : NULL;
	kp_unlock(&tls_lock);
	if (!f)
		return false;
	*ret = kp_ssl.SSL_ctrl(ssl, cmd, larg, parg);
	tlsf_set_mode(f, (uint32_t)kp_ssl.SSL_ctrl(ssl, SSL_CTRL_MODE, 0, NULL));
	return true;
}

long kp_tls_ctrl(SSL *ssl, int cmd, long larg, void *parg)
{
	long full_ret;
	/* the key exchange's keys: the own one is not in the state, and the
	 * peer's (in it) must then be the same handshake's */
	if (cmd == SSL_CTRL_GET_TMP_KEY || cmd == SSL_CTRL_GET_PEER_TMP_KEY)
		kp_tls_foreign_early(ssl);
	if ((((cmd == SSL_CTRL_GET_PEER_SIGNATURE_NID || cmd == SSL_CTRL_GET_PEER_TMP_KEY ||
	       cmd == SSL_CTRL_GET_SIGNATURE_NID || cmd == SSL_CTRL_GET_EC_POINT_FORMATS) &&
	      parg) ||
	     cmd == SSL_CTRL_GET_CLIENT_CERT_TYPES) &&
	    kp_tls_peer_full(ssl, cmd, parg, &full_ret))
		return full_ret;
	union kp_fq_ret fr;
	if (cmd == SSL_CTRL_GET_EXTMS_SUPPORT && kp_tls_foreign(ssl, KP_FQ_EXTMS, NULL, &fr))
		return fr.i;
	if (cmd == SSL_CTRL_GET_RI_SUPPORT && kp_tls_foreign(ssl, KP_FQ_RI, NULL, &fr))
		return fr.i;
	if (cmd == SSL_CTRL_GET_NEGOTIATED_GROUP && kp_tls_foreign(ssl, KP_FQ_GROUP, NULL, &fr))
		return fr.i;
	switch (cmd) {
	case SSL_CTRL_SET_MAX_SEND_FRAGMENT:
	case SSL_CTRL_SET_SPLIT_SEND_FRAGMENT:
	case SSL_CTRL_SET_MAX_PIPELINES:
	case SSL_CTRL_SET_READ_AHEAD: {
		/* record settings, compared at hand-out: changed after it,
		 * the engine takes them (docs/tls.md "Found by the second
		 * HTTPS review") */
		SSL *eng = kp_tls_after_set(ssl, KP_AFTER_OTHER, "a record setting changed after the handshake");
		if (eng)
			kp_ssl.SSL_ctrl(eng, cmd, larg, parg);
		return kp_ssl.SSL_ctrl(ssl, cmd, larg, parg);
	}
	}
	SSL *e = kp_tls_route(ssl, false);
	if (e == ssl)
		return kp_ssl.SSL_ctrl(ssl, cmd, larg, parg);
	if (cmd == SSL_CTRL_GET_PEER_TMP_KEY || cmd == SSL_CTRL_GET_TMP_KEY)
		return kp_tls_own_key(ssl, e, cmd, larg, parg); /* copies of its own */
	switch (cmd) {
	case SSL_CTRL_MODE:
	case SSL_CTRL_CLEAR_MODE:
		if (!kp_tls_route(ssl, true))
			break;
		if (foreign_modes(ssl, cmd, larg, parg, &full_ret)) {
			if (cmd == SSL_CTRL_CLEAR_MODE && (larg & SSL_MODE_AUTO_RETRY))
				autoretry_cleared(ssl);
			return full_ret;
		}
		kp_ssl.SSL_ctrl(e, cmd, larg, parg); /* the engine does its I/O */
		if (cmd == SSL_CTRL_CLEAR_MODE && (larg & SSL_MODE_AUTO_RETRY))
			autoretry_cleared(ssl);
		break;
	case SSL_CTRL_GET_CLIENT_CERT_REQUEST:
	case SSL_CTRL_GET_NUM_RENEGOTIATIONS:
	case SSL_CTRL_GET_TOTAL_RENEGOTIATIONS:
	case SSL_CTRL_GET_FLAGS:
	case SSL_CTRL_GET_RI_SUPPORT:
	case SSL_CTRL_GET_PEER_SIGNATURE_NID:
	case SSL_CTRL_GET_SIGNATURE_NID:
	case SSL_CTRL_GET_RAW_CIPHERLIST:
	case SSL_CTRL_GET_EC_POINT_FORMATS:
	case SSL_CTRL_GET_SHARED_GROUP:
	case SSL_CTRL_GET_NEGOTIATED_GROUP:
	case SSL_CTRL_GET_EXTMS_SUPPORT:
	case SSL_CTRL_GET_TLSEXT_STATUS_REQ_OCSP_RESP:
		return kp_ssl.SSL_ctrl(e, cmd, larg, parg);
	}
	/* (the rest: the program's own settings, its OCSP request's ids
	 * and extensions too, on its own SSL) */
	return kp_ssl.SSL_ctrl(ssl, cmd, larg, parg);
}

/* The handle of ssl with what it needs for I/O, or NULL: not ours. */
struct io {
	struct handle *h;
	SSL *e;
	struct kp_conn *c; /* the connection that frames it, or NULL */
	struct tlsf *f;    /* a connection taken from another process: its engine */
	int fd;
	bool closed;
	int shut; /* the shutdown bits our answers made up (h->shut) */
};

/* (a call that is not I/O, a setter, keeps the error made up for the
 * last I/O call: SSL_get_error may follow it: new_call false) */
static bool io_look(SSL *ssl, struct io *io, bool new_call)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return false;
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	if (h) {
		if (new_call)
			h->synth_err = 0;
		io->h = h;
		io->e = h->e->ssl;
		io->f = h->e->im ? &h->e->im->f : NULL;
		io->fd = h->fd;
		io->closed = h->closed;
		io->shut = h->shut;
		struct kp_conn *c = kp_fd_conn(h->fd);
		io->c = c && c != KP_POOLED && __atomic_load_n(&c->tls, __ATOMIC_ACQUIRE) == h->e &&
				c->tls_ssl == ssl && !h->moved
			? c
			: NULL;
	}
	kp_unlock(&tls_lock);
	return h != NULL;
}

static bool io_get(SSL *ssl, struct io *io)
{
	return io_look(ssl, io, true);
}

/* ssl is the program's own SSL, kept after it closed its socket, whose
 * connection is parked under it with the SSL whole (docs/tls.md "The
 * first owner's SSL"): a call that acts on it goes to it as without the
 * library (its BIO still names the closed descriptor: EBADF, or whatever
 * the number names now), and its state is then no longer the parked
 * connection's: never handed out (dead). */
static bool kept_own(SSL *ssl)
{
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	bool kept = h && h->closed && h->e->ssl == ssl && !h->e->own_bio;
	if (kept) {
		h->e->dead = true;
		/* the shutdown it was answered (an EOF we owed read as a
		 * close_notify) is its real SSL's from now on */
		int real = kp_ssl.SSL_get_shutdown(ssl);
		if ((h->shut & SSL_RECEIVED_SHUTDOWN) && !(real & SSL_RECEIVED_SHUTDOWN))
			h->close_made = true;
		kp_ssl.SSL_set_shutdown(ssl, real | h->shut);
	}
	kp_unlock(&tls_lock);
	return kept;
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

/* SSL_set_accept_state was called on ssl: it is a server, even on a
 * socket it connected */
static bool told_to_accept(SSL *ssl)
{
	kp_lock(&tls_lock);
	bool accept = conf_of(ssl)->never & (1u << NEVER_ACCEPT);
	kp_unlock(&tls_lock);
	return accept;
}

/* A session of ours resumed: the program reads a full handshake
 * (kp_tls_session_ours), its context no hit. */
static void handshake_resumed(SSL *ssl, SSL_CTX *hctx, long hits)
{
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
	bool push = rec && rec->offered && !rec->hit_unmade_time && kp_ssl.SSL_version(ssl) < TLS1_3_VERSION;
	/* the session it reads is its copy (kp_tls_offer_session): made
	 * now, as its full handshake's would be */
	if (rec && rec->offered && !rec->hit_unmade_time) {
		SSL_SESSION *mine = kp_ssl.SSL_get_session(ssl);
		if (mine)
			kp_ssl.SSL_SESSION_set_time(mine, (long)time(NULL));
		rec->hit_unmade_time = true;
	}
	/* the name our check matched, where its own full handshake's check
	 * would have left it (SSL_clear at its start cleared it) */
	if (rec && rec->offered && rec->offered_named) {
		kp_ssl.X509_VERIFY_PARAM_move_peername(kp_ssl.SSL_get0_param(ssl), rec->offered_named);
		kp_ssl.X509_VERIFY_PARAM_free(rec->offered_named);
		rec->offered_named = NULL;
	}
	kp_unlock(&tls_lock);
	if (push)
		kp_conn_tls_resumed(kp_ssl.SSL_get_fd(ssl));
	if (across)
		kp_count(tls_resumed_across);
}

/* A session of ours the server refused: libssl counted a miss its
 * program, which offered none, would not have. */
static void handshake_refused(SSL *ssl, SSL_CTX *hctx, long misses)
{
	long more = kp_ssl.SSL_CTX_ctrl(hctx, SSL_CTRL_SESS_MISSES, 0, NULL) - misses;
	kp_lock(&tls_lock);
	struct record *rec = record_get(ssl, false), *cr;
	if (rec && rec->offered && more > 0 && (cr = record_get(hctx, true))) {
		cr->stat_adj[STAT_MISS] -= 1;
		rec->offered = false; /* its own full handshake now */
	}
	kp_unlock(&tls_lock);
}

/* What its full handshake negotiated, for whoever is handed the
 * connection: its own, or a session of ours's. */
static void handshake_full(SSL *ssl)
{
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

/* A foreign engine's records go through the program's own BIOs (curl's,
 * a method of its own: not a socket's) for the span of its call on ssl,
 * as its own SSL's would: curl reads the errors of its SSL_read and
 * SSL_write from the state its BIO kept of the last I/O (the deferred
 * first write's EAGAIN, else: docs/tls-across.md "Programs that keep
 * sessions"). */
static void through_own_bio(struct tlsf *f, SSL *ssl, bool on)
{
	BIO *r = on ? kp_ssl.SSL_get_rbio(ssl) : NULL, *w = on ? kp_ssl.SSL_get_wbio(ssl) : NULL;
	if (!r || !w || kp_ssl.BIO_method_type(r) != BIO_TYPE_MEM || kp_ssl.BIO_method_type(w) != BIO_TYPE_MEM)
		r = w = NULL;
	kp_tls_import_through(f, r, w);
	/* the reads its BIO makes meanwhile (curl's recv) are the engine's,
	 * not the program's own past its SSL (kp_lock.h kp_outside) */
	if (on)
		kp_outside++;
	else
		kp_outside--;
}

/* A protocol other than HTTP/1.1 chosen by ALPN: not ours to frame. */
static void handshake_alpn(SSL *ssl, const struct io *io)
{
	if (alpn_not_http11(ssl))
		kp_conn_tls_spoil(io->c, io->fd, "ALPN chose a protocol other than HTTP/1.1");
}

static void info_muted(const SSL *s, int where, int ret)
{
	(void)s, (void)where, (void)ret;
}

/* A watcher (watcher) on the program's own connection from its handshake
 * on would be told what the library makes up (no close_notify alert at a
 * parked connection's SSL_shutdown), and a keylog's secrets would travel
 * with the connection or its session: it steps aside as one set later
 * does (kp_tls_watched; docs/tls.md "Callbacks that watch"). */
static void watched_from_start(SSL *ssl)
{
	if (kp_ssl.SSL_get_info_callback(ssl) == info_muted)
		return; /* remake_watched's handshake: its watchers handled there */
	kp_lock(&tls_lock);
	const char *why = watcher(ssl, conf_of(ssl));
	kp_unlock(&tls_lock);
	if (!why)
		return;
	kp_debug("%s on the program's own connection: it steps aside", why);
	kp_tls_watched(ssl, false);
}

int kp_tls_handshake(SSL *ssl, int (*real)(SSL *))
{
	struct io io;
	if (!kp_ssl_bind())
		return real(ssl);
	if (io_get(ssl, &io)) {
		if (io.closed)
			return kept_own(ssl) ? KP_OUTSIDE(real(ssl)) : refused(&io);
		if (io.e != ssl && !io.f) /* handed out: the connection is established */
			return 1;
		if (io.e != ssl) {
			through_own_bio(io.f, ssl, true);
			int r = kp_tls_foreign_handshake(io.f);
			through_own_bio(io.f, ssl, false);
			return r;
		}
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
			if (kp_conn_tls_start(fd, ssl) == KP_TLS_HANDED) {
				/* what the handshake's state machine does first,
				 * alone: an error the program left on the queue
				 * would make its next SSL_get_error say SSL
				 * (docs/tls.md "The handshake's clean slate") */
				kp_ssl.ERR_clear_error();
				errno = 0;
				return 1;
			}
		}
	}
	/* its own handshake; a BIO of the program's own shows us the fd when
	 * the first record goes out (kp_send_intercept) */
	if (kp_ssl.SSL_in_before(ssl))
		kp_tls_capture_own(ssl);
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
	if (io_get(ssl, &io) && io.e != ssl) {
		/* handed out at that first write, which never went out */
		kp_ssl.ERR_clear_error();
		errno = 0;
		return 1;
	}
	if (r == 1) {
		if (kp_ssl.SSL_session_reused(ssl))
			handshake_resumed(ssl, hctx, hits);
		else
			handshake_refused(ssl, hctx, misses);
		if (io_get(ssl, &io) && io.e == ssl) {
			handshake_full(ssl);
			kp_tls_capture_done(ssl);
			watched_from_start(ssl);
		}
		if (io_get(ssl, &io) && io.c)
			handshake_alpn(ssl, &io);
	}
	return r;
}

/* A write past the connection's framing, on an SSL whose fresh handshake
 * replaced a handed-out connection: 1 when it may go (shown_gate), else
 * the handshake's return while it is under way, or -1 where it showed
 * another peer (the error a reset gives: SSL_ERROR_SYSCALL, ECONNRESET). */
static int write_gate(SSL *ssl)
{
	if (!__atomic_load_n(&kp_tls_shown_ever, __ATOMIC_RELAXED))
		return 1;
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	struct kp_tls *e = h && h->e->ssl == ssl && (h->e->shown.pending || h->e->shown.refused) ? h->e : NULL;
	kp_unlock(&tls_lock);
	int hs = 1, g = e ? shown_gate(e, &hs) : 1;
	if (g >= 0)
		return g ? 1 : hs;
	kp_lock(&tls_lock);
	if ((h = handle_find(ssl)))
		h->synth_err = SSL_ERROR_SYSCALL;
	kp_unlock(&tls_lock);
	errno = ECONNRESET;
	return -1;
}

static int io_real(SSL *ssl, enum kp_tls_op op, void *buf, size_t n, size_t *done)
{
	int r = -1;
	if (op == KP_TLS_WRITE || op == KP_TLS_WRITE_EX) {
		int hs = write_gate(ssl);
		if (hs != 1) {
			if (done)
				*done = 0;
			return op == KP_TLS_WRITE_EX ? 0 : hs;
		}
	}
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

/* ------------------------------------------------------------ the foreign engine */

/* A connection taken from another process (docs/tls-across.md "The
 * hand-out in another process") is answered by the foreign engine: the
 * same calls as the engine's SSL, OpenSSL's numbers, the reason of an SSL
 * error raised on the program's queue as its own SSL would have raised it. */
static int foreign_io(struct tlsf *f, enum kp_tls_op op, void *buf, size_t n, size_t *done)
{
	int r = -1;
	bool failed;
	switch (op) {
	case KP_TLS_READ:
		r = tlsf_read(f, buf, n > INT_MAX ? INT_MAX : (int)n);
		break;
	case KP_TLS_READ_EX:
		r = tlsf_read_ex(f, buf, n, done);
		break;
	case KP_TLS_PEEK:
		r = tlsf_peek(f, buf, n > INT_MAX ? INT_MAX : (int)n);
		break;
	case KP_TLS_PEEK_EX:
		r = tlsf_peek_ex(f, buf, n, done);
		break;
	case KP_TLS_WRITE:
		r = tlsf_write(f, buf, n > INT_MAX ? INT_MAX : (int)n);
		break;
	case KP_TLS_WRITE_EX:
		r = tlsf_write_ex(f, buf, n, done);
		break;
	}
	failed = op == KP_TLS_READ_EX || op == KP_TLS_PEEK_EX || op == KP_TLS_WRITE_EX ? r != 1 : r <= 0;
	int reason = tlsf_last_reason(f), saved = errno;
	if (failed && reason >= 0 && tlsf_get_error(f, r) == SSL_ERROR_SSL) {
		kp_ssl.ERR_new();
		kp_ssl.ERR_set_error(ERR_LIB_SSL, reason, NULL);
	}
	errno = saved;
	return r;
}

/* The engine made the program's I/O through its own socket BIO on the
 * program's fd: the program's socket BIO shows what its own I/O would have
 * left there (BIO_should_retry and BIO_should_read after a WANT_*,
 * BIO_eof after the server's FIN), for code that asks its BIO rather than
 * SSL_get_error.  A BIO of another kind (the program's own method, a
 * memory BIO) is never touched. */
#define BIO_SHOWN (BIO_FLAGS_RWS | BIO_FLAGS_SHOULD_RETRY | BIO_FLAGS_IN_EOF)
static void bio_shown(SSL *ssl, SSL *e, bool write)
{
	BIO *mine = write ? kp_ssl.SSL_get_wbio(e) : kp_ssl.SSL_get_rbio(e);
	BIO *theirs = write ? kp_ssl.SSL_get_wbio(ssl) : kp_ssl.SSL_get_rbio(ssl);
	if (!mine || !theirs || mine == theirs || kp_ssl.BIO_method_type(theirs) != BIO_TYPE_SOCKET)
		return;
	int flags = kp_ssl.BIO_test_flags(mine, BIO_SHOWN);
	kp_ssl.BIO_clear_flags(theirs, BIO_SHOWN & ~flags);
	kp_ssl.BIO_set_flags(theirs, flags);
}

static int io_engine(SSL *ssl, const struct io *io, enum kp_tls_op op, void *buf, size_t n, size_t *done)
{
	if (!io->f) {
		int r = io_real(io->e, op, buf, n, done), saved = errno;
		if (io->e != ssl)
			bio_shown(ssl, io->e, op == KP_TLS_WRITE || op == KP_TLS_WRITE_EX);
		errno = saved;
		return r;
	}
	through_own_bio(io->f, ssl, true);
	int r = foreign_io(io->f, op, buf, n, done);
	through_own_bio(io->f, ssl, false);
	return r;
}

/* io_error for the engine io names */
static ssize_t io_error_of(const struct io *io, int r)
{
	if (!io->f)
		return io_error(io->e, r);
	int saved = errno;
	switch (tlsf_get_error(io->f, r)) {
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
	default:
		if (tlsf_last_reason(io->f) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
			return 0;
		errno = EPROTO;
		return -1;
	}
}

static int eng_get_shutdown(const struct io *io)
{
	return io->f ? tlsf_get_shutdown(io->f) : kp_ssl.SSL_get_shutdown(io->e);
}

static void eng_set_shutdown(const struct io *io, int mode)
{
	if (io->f)
		tlsf_set_shutdown(io->f, mode);
	else
		kp_ssl.SSL_set_shutdown(io->e, mode);
}

static int eng_shutdown(const struct io *io)
{
	if (!io->f)
		return KP_OUTSIDE(kp_ssl.SSL_shutdown(io->e));
	int r = tlsf_shutdown(io->f), reason = tlsf_last_reason(io->f), saved = errno;
	if (r < 0 && reason >= 0 && tlsf_get_error(io->f, r) == SSL_ERROR_SSL) {
		kp_ssl.ERR_new();
		kp_ssl.ERR_set_error(ERR_LIB_SSL, reason, NULL);
	}
	errno = saved;
	return r;
}

static bool eng_in_init(const struct io *io)
{
	return !io->f && kp_ssl.SSL_in_init(io->e);
}

/* The first read of an SSL handed a connection from another process,
 * whose context is told of sessions (curl's cache): there its own TLS 1.3
 * handshake would have taken the server's tickets, each told as libssl's
 * ssl_update_cache tells one (the context's internal store, then its
 * new-session callback).  Told once, of the session the SSL reads (the
 * connection's, made to look as its own handshake's: kp_tls_session)
 * (docs/tls-across.md "Programs that keep sessions"). */
static void session_told(SSL *ssl)
{
	SSL_SESSION *sess = NULL;
	if (!kp_tls_session(ssl, &sess) || !sess || !kp_ssl.SSL_SESSION_is_resumable(sess))
		return;
	kp_lock(&tls_lock);
	SSL_CTX *ctx = session_ctx(ssl);
	kp_new_session_cb told = prog_new_cb(ctx);
	kp_unlock(&tls_lock);
	long mode = kp_ssl.SSL_CTX_ctrl(ctx, SSL_CTRL_GET_SESS_CACHE_MODE, 0, NULL);
	if (!(mode & SSL_SESS_CACHE_NO_INTERNAL_STORE))
		KP_OUTSIDE(kp_ssl.SSL_CTX_add_session(ctx, sess));
	if (told && kp_ssl.SSL_SESSION_up_ref(sess) && !KP_OUTSIDE(told(ssl, sess)))
		kp_ssl.SSL_SESSION_free(sess);
}

/* A handed-out SSL reads (or writes): its own would have taken a TLS 1.3
 * server's tickets (kp_tls_session, session_told).  True when a
 * watcher set since its hand-out asks for its own handshake first. */
static unsigned io_noted(SSL *ssl, bool read)
{
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	unsigned remake = h && !h->io_once ? h->remake : 0;
	/* a context told of sessions since the hand-out (one told at the
	 * hand-out declines it): its own TLS 1.3 connection's tickets reach
	 * it at the first read, the engine's went to its first owner.  A
	 * TLS 1.2 session came at the handshake, before it was told: alone
	 * it hears nothing either */
	if (h && !h->io_once && h->verified && !h->e->im && h->e->ssl != ssl &&
	    engine_version(h->e) >= TLS1_3_VERSION && sessions_told(ssl))
		remake |= REMAKE_TOLD;
	SSL *first_read = h && read && !h->read_once && !h->e->im && h->e->ssl != ssl ? h->e->ssl : NULL;
	bool tell = h && read && !h->read_once && h->e->im && sessions_told(ssl);
	if (first_read) /* (an SSL of this process's: never told) */
		tickets_taken(first_read);
	if (h) {
		h->remake = 0;
		h->read_once |= read;
		h->io_once = true;
	}
	kp_unlock(&tls_lock);
	if (tell)
		session_told(ssl);
	return remake;
}

/* The program's SSL that a handed-out engine e does the I/O of, watched
 * late, and what its message callback is told with.  Caller holds
 * tls_lock. */
static SSL *watcher_of(const SSL *e)
{
	for (struct handle *h = handles; h; h = h->hh.next)
		if (h->e->ssl == e && h->ssl != e && !h->closed && h->watched_late)
			return h->ssl;
	return NULL;
}

/* The engine's events, told to the program's callbacks with its own SSL,
 * as its own SSL would have told them on that connection. */
static void info_told(const SSL *e, int where, int ret)
{
	kp_lock(&tls_lock);
	SSL *ssl = watcher_of(e);
	kp_unlock(&tls_lock);
	kp_info_cb cb = ssl ? kp_ssl.SSL_get_info_callback(ssl) : NULL;
	if (ssl && !cb)
		cb = kp_ssl.SSL_CTX_get_info_callback(kp_ssl.SSL_get_SSL_CTX(ssl));
	if (cb)
		cb(ssl, where, ret);
}

static void msg_told(int write_p, int version, int type, const void *buf, size_t len, SSL *e, void *arg)
{
	(void)arg;
	kp_lock(&tls_lock);
	SSL *ssl = watcher_of(e);
	kp_msg_cb cb = ssl ? conf_of(ssl)->msg_cb : NULL;
	void *ssl_arg = ssl ? conf_of(ssl)->msg_arg : NULL;
	kp_unlock(&tls_lock);
	if (cb)
		cb(write_p, version, type, buf, len, ssl, ssl_arg);
}

/* A watcher set on obj after the handshake.  A handed-out SSL that has not
 * read or written makes its own handshake first (remake_watched).  One
 * that has (its connection carried its bytes), or the connection's own
 * SSL, cannot: the engine tells it the events from now on (info_told,
 * msg_told: its own SSL tells them itself), and its connection steps
 * aside from what we make up (kp_conn_tls_watched: no later close
 * rewritten; its SSL_shutdown libssl's own, kp_tls_shutdown), so its
 * callbacks see the server's end and its own as alone (docs/tls.md
 * "Callbacks that watch"). */
void kp_tls_watched(const void *obj, bool is_ctx)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return;
	enum { MAX_LATE = 32 };
	int late_fd[MAX_LATE], n_late = 0;
	kp_lock(&tls_lock);
	for (struct handle *h = handles; h; h = h->hh.next) {
		if (h->closed ||
		    !(is_ctx ? (const void *)kp_ssl.SSL_get_SSL_CTX(h->ssl) == obj : (const void *)h->ssl == obj))
			continue;
		bool handed = h->e->ssl != h->ssl;
		if (handed && h->verified && !h->io_once) {
			h->remake |= REMAKE_WATCHED;
			continue;
		}
		h->watched_late = true;
		if (handed) {
			kp_ssl.SSL_set_info_callback(h->e->ssl, info_told);
			kp_ssl.SSL_set_msg_callback(h->e->ssl, msg_told);
		}
		if (n_late < MAX_LATE)
			late_fd[n_late++] = h->fd;
		else
			h->e->dead = true; /* (never parked, at least) */
	}
	kp_unlock(&tls_lock);
	for (int i = 0; i < n_late; i++)
		kp_conn_tls_watched(late_fd[i]);
}

/* ssl was handed a pooled connection, then given an info or message
 * callback (or its context an info callback), or its AUTO_RETRY cleared
 * (autoretry_cleared: then its fresh connection may be pooled), before
 * it read or wrote:
 * its own connection would raise events from then on that the engine's
 * cannot (a TLS 1.3 server's tickets at the first read, the alerts at
 * the end).  It makes its own handshake on a fresh connection now, with
 * those callbacks muted (set after its handshake, they saw none of it),
 * as a replay makes one (kp_tls_rehandshake).  Where that handshake would
 * be seen anyway (a keylog callback on its context, a context told of
 * sessions) it stays on the pooled connection (docs/tls.md "Callbacks
 * that watch"). */
static void remake_watched(SSL *ssl, int fd, unsigned why)
{
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	bool go = h && ((why & REMAKE_TOLD) || !tells_sessions(session_ctx(ssl)));
	kp_msg_cb msg = conf_of(ssl)->msg_cb;
	kp_unlock(&tls_lock);
	if (!go || kp_tls_keylog_of(kp_ssl.SSL_get_SSL_CTX(ssl)))
		return;
	/* (what the hand-out counted is taken back by kp_tls_rehandshake:
	 * the handshake about to be made counts itself) */
	kp_info_cb info = kp_ssl.SSL_get_info_callback(ssl);
	kp_ssl.SSL_set_info_callback(ssl, info_muted);
	kp_ssl.SSL_set_msg_callback(ssl, NULL);
	int r = kp_conn_tls_remake(fd, ssl, why & REMAKE_WATCHED);
	kp_ssl.SSL_set_info_callback(ssl, info);
	/* (none of its own: the capture's, which counts the fresh
	 * connection's records for its export) */
	kp_ssl.SSL_set_msg_callback(ssl, msg ? msg : kp_tls_capture_msg_cb(ssl));
	kp_debug("fd %d: %s after the hand-out: %s", fd,
		 why & REMAKE_CALL	 ? "a call the foreign engine cannot answer"
		 : why & REMAKE_TOLD	 ? "its context told of sessions"
		 : why & REMAKE_WATCHED ? "a callback that watches set"
					: "AUTO_RETRY cleared",
		 r == 0 ? "its own handshake on a fresh connection" : "no fresh connection, left on the pooled one");
}

/* A call the foreign engine cannot answer from the state (the own
 * ephemeral key, SSL_key_update, SSL_renegotiate,
 * SSL_verify_client_post_handshake: docs/tls-across.md "What keeps it in
 * the test build"), made on an SSL handed a connection from another
 * process before its first read or write: the program's own handshake on
 * a fresh connection first, as for a watcher (remake_watched), so that
 * its own SSL answers the call.  After its first read or write (the
 * connection carried its bytes) the call goes where it went. */
void kp_tls_foreign_early(SSL *ssl)
{
	struct io io;
	if (!__atomic_load_n(&kp_tls_foreign_ever, __ATOMIC_ACQUIRE) || !io_look(ssl, &io, false) || io.closed ||
	    !io.f || !io.c)
		return;
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	unsigned why = h && h->verified && !h->io_once ? REMAKE_CALL | h->remake : 0;
	if (why)
		h->remake = 0;
	kp_unlock(&tls_lock);
	if (why)
		remake_watched(ssl, io.fd, why);
}

/* ------------------------------------------------------------ after the program's SSL_shutdown */

/* At a request boundary the program's SSL_shutdown is answered without its
 * close_notify going out (kp_tls_shutdown: the connection may be parked);
 * what libssl alone does after it is done here (docs/tls.md "The
 * program's SSL_shutdown"). */

/* A write after it: refused as libssl refuses one after its close_notify
 * was sent ("protocol is shutdown", SSL_ERROR_SSL), nothing sent. */
static int shut_write_refused(struct io *io)
{
	kp_ssl.ERR_new();
	kp_ssl.ERR_set_error(ERR_LIB_SSL, SSL_R_PROTOCOL_IS_SHUTDOWN, NULL);
	synth(io, SSL_ERROR_SSL);
	return -1;
}

/* A SENT bit the program set itself (SSL_set_shutdown), not one our
 * SSL_shutdown answered: alone nothing went out for it, and libssl only
 * waits for the server's then.  The engine takes the bit; true when so. */
static bool set_sent_only(struct io *io)
{
	kp_lock(&tls_lock);
	bool only = !io->h->e->notify_owed && (io->shut & SSL_SENT_SHUTDOWN);
	kp_unlock(&tls_lock);
	if (only)
		eng_set_shutdown(io, eng_get_shutdown(io) | SSL_SENT_SHUTDOWN);
	return only;
}

/* The program waits for the server's close_notify after it (a read, a
 * second SSL_shutdown): alone its own went out and the server answered it
 * (nginx and Python's ssl at once), where a server never asked to close
 * answers nothing.  Our close_notify goes out now, and the connection is
 * never parked: the engine's real SSL_shutdown. */
static int shut_made_real(struct io *io, const char *why)
{
	kp_conn_tls_spoil(io->c, io->fd, why);
	set_sent_only(io);
	return eng_shutdown(io);
}

/* A read after it that would wait for the server (its close_notify not
 * read, no EOF owed): the close made real first. */
static void shut_read(struct io *io)
{
	if ((io->shut & (SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN)) != SSL_SENT_SHUTDOWN ||
	    __atomic_load_n(&io->c->eof_owed, __ATOMIC_ACQUIRE) || !kp_conn_tls_at_end(io->c, io->fd))
		return;
	int saved = errno;
	if (set_sent_only(io)) /* (the read itself waits, as alone) */
		kp_conn_tls_spoil(io->c, io->fd, "a read after SSL_set_shutdown");
	else if (shut_made_real(io, "a read after SSL_shutdown") >= 0)
		kp_ssl.ERR_clear_error();
	errno = saved;
}

/* Plaintext I/O through the handle's engine, framed. */
/* A replay whose copy waits for the fresh TLS handshake (docs/replay.md
 * "The program's bounds") goes on before the program's read or write:
 * false while it waits (the program's SSL says WANT_READ or WANT_WRITE,
 * or why it failed); true to go on, io read again when it moved. */
static bool replay_stepped(SSL *ssl, struct io *io)
{
	if (!io->c || !__atomic_load_n(&io->c->replay_async, __ATOMIC_ACQUIRE))
		return true;
	if (kp_conn_replay_cut()) {
		errno = EINTR; /* (the program's SSL: the handshake's WANT_*) */
		return false;
	}
	if (kp_conn_tls_replay_step(io->c, io->fd) <= 0)
		return false;
	if (!io_get(ssl, io)) {
		io->c = NULL;
		io->e = ssl;
	}
	return true;
}

/* A zero-length write's answer r: after the EOF we owe (a close_notify
 * shown), its error ZERO_RETURN, as libssl's once the peer's came */
static int zero_write_end(struct io *io, struct kp_conn *c, int r)
{
	if (r <= 0 && __atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE)) {
		int saved = errno;
		synth(io, SSL_ERROR_ZERO_RETURN);
		errno = saved;
	}
	return r;
}

static int tls_io(SSL *ssl, const struct io *first, enum kp_tls_op op, void *buf, size_t n, size_t *done)
{
	struct io io = *first;
	bool ex = op == KP_TLS_READ_EX || op == KP_TLS_PEEK_EX || op == KP_TLS_WRITE_EX;
	bool write = op == KP_TLS_WRITE || op == KP_TLS_WRITE_EX;
	bool peek = op == KP_TLS_PEEK || op == KP_TLS_PEEK_EX;
	unsigned remake = io.closed ? 0 : io_noted(ssl, !write);
	if (remake && io.e != ssl && io.c) {
		remake_watched(ssl, io.fd, remake);
		if (!io_get(ssl, &io))
			return io_real(ssl, op, buf, n, done);
	}
	if (io.closed) {
		if (kept_own(ssl))
			return io_real(ssl, op, buf, n, done);
		int r = refused(&io);
		return ex ? 0 : r;
	}
	if (write && (io.shut & SSL_SENT_SHUTDOWN)) {
		int r = shut_write_refused(&io);
		return ex ? 0 : r;
	}
	struct kp_conn *c = io.c;
	/* after libssl's own close_notify, its refusal: nothing held or sent */
	if (!c || (write && (eng_get_shutdown(&io) & SSL_SENT_SHUTDOWN)))
		return io_engine(ssl, &io, op, buf, n, done);
	if (!write)
		shut_read(&io);
	if (write) {
		if (!replay_stepped(ssl, &io))
			return ex ? 0 : -1;
		if (!(c = io.c))
			return io_engine(ssl, &io, op, buf, n, done);
		ssize_t ret;
		int saved = errno;
		kp_tls_push_err = 0;
		if (n && kp_conn_tls_send(c, io.fd, buf, n, &ret)) {
			if (ret >= 0) {
				if (done)
					*done = (size_t)ret;
				errno = 0; /* as the socket BIO's write() left it */
				return ex ? 1 : (int)ret;
			}
			/* the engine's record begun and not finished (WANT_WRITE:
			 * the program calls again with the same bytes, docs/hold.md
			 * "HTTPS"), or a retry it could not take; else a write after
			 * the owed EOF: as after the server's close_notify
			 * (docs/replay.md, "Nothing added"); so too where the
			 * server's own close_notify was read (a close not
			 * rewritten: OpenSSL's SSL_get_error says ZERO_RETURN once
			 * it came) */
			int err = kp_tls_push_err;
			if (!err) {
				bool notified = eng_get_shutdown(&io) & SSL_RECEIVED_SHUTDOWN;
				err = __atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE) || notified ? SSL_ERROR_ZERO_RETURN
												   : SSL_ERROR_SYSCALL;
			}
			saved = errno;
			synth(&io, err);
			errno = saved;
			return ex ? 0 : -1;
		}
		io_get(ssl, &io); /* a fresh connection may have been made */
		int r = io_engine(ssl, &io, op, buf, n, done);
		/* a zero-length write sends nothing: no failure of the connection */
		if (!n)
			return zero_write_end(&io, c, r);
		ssize_t got = ex ? (r == 1 ? (ssize_t)*done : -1) : r;
		saved = errno;
		if (got <= 0)
			got = io_error_of(&io, r);
		kp_conn_tls_send_done(c, io.fd, buf, n, got);
		errno = saved;
		return r;
	}
	for (;;) {
		int pending;
		if (!replay_stepped(ssl, &io))
			return ex ? 0 : -1;
		if (!(c = io.c))
			return io_engine(ssl, &io, op, buf, n, done);
		/* a close line's bytes left from the last read come first */
		size_t extra = n ? kp_recv_extra(c, io.fd, buf, n > INT_MAX ? INT_MAX : n, peek) : 0;
		if (extra) {
			if (done)
				*done = extra;
			return ex ? 1 : (int)extra;
		}
		pending = io.f ? tlsf_has_pending(io.f) : kp_ssl.SSL_has_pending(io.e);
		if (kp_conn_tls_eof(c, io.fd, pending)) {
			closer_told(&c->key, __atomic_load_n(&c->close_kind, __ATOMIC_ACQUIRE)); /* the program reads our EOF */
			synth(&io, SSL_ERROR_ZERO_RETURN);
			return 0; /* (*done as the caller left it: libssl sets it on success only) */
		}
		int r = io_engine(ssl, &io, op, buf, n, done);
		int saved = errno;
		ssize_t got = ex ? (r == 1 ? (ssize_t)*done : -1) : r;
		if (got <= 0) /* as the socket calls would say it (recv_done) */
			got = io_error_of(&io, r);
		if (got == 0 && !io.f && kp_conn_tls_server_closing(c, io.fd))
			closer_learn(io.e, r, &c->key, __atomic_load_n(&c->close_kind, __ATOMIC_ACQUIRE));
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

/* The program's SSL call on a connection of ours, with the SIGPIPE its
 * own BIO gives (docs/replay.md "The program's signals"): the engine's
 * writes inside it are sent without the signal (conn.h kp_tls_quiet), and
 * a call that fails with EPIPE from the socket (or from our answer that
 * stands for it) raises it on this thread, as the kernel's write() of a
 * socket, descriptor or connect BIO does; curl's BIO sends with
 * MSG_NOSIGNAL, and a BIO of the program's own is left as it was.
 * quiet_begin: -1 (nothing set), else whether ssl's BIO raises. */
static int quiet_begin(SSL *ssl)
{
	/* a fresh connection that showed another peer than the program was
	 * shown is shut by us (shown_gate): its EPIPE is ours, no signal */
	bool ours = false;
	if (__atomic_load_n(&kp_tls_shown_ever, __ATOMIC_RELAXED)) {
		kp_lock(&tls_lock);
		struct handle *h = handle_find(ssl);
		ours = h && h->e->shown.refused;
		kp_unlock(&tls_lock);
	}
	int raises = ours ? 0 : prog_bio_sigpipe(ssl);
	if (raises < 0 || kp_tls_quiet) /* (set: a handler's call inside ours) */
		return -1;
	kp_tls_quiet = true;
	kp_tls_epipe = false;
	return raises;
}

/* failed: the program's call failed, as a socket's EPIPE fails it */
static void quiet_end(int raises, bool failed)
{
	if (raises < 0)
		return;
	int err = errno;
	if (raises && kp_tls_epipe && failed)
		pthread_kill(pthread_self(), SIGPIPE);
	kp_tls_quiet = false;
	kp_tls_epipe = false;
	errno = err;
}

/* An SSL_write of a forked child's copy after its parent's close request
 * (conn_child.c kp_fin_owed_tls_write): taken whole, the SSL never sees it */
static bool child_taken(const struct io *io, bool write, size_t n, size_t *done)
{
	if (io->c || io->closed || !write || !n || ((io->shut | eng_get_shutdown(io)) & SSL_SENT_SHUTDOWN) ||
	    !kp_fin_owed_tls_write(io->fd))
		return false;
	if (done)
		*done = n;
	return true;
}

int kp_tls_io(SSL *ssl, enum kp_tls_op op, void *buf, size_t n, size_t *done)
{
	struct io io;
	if (!io_get(ssl, &io))
		return io_real(ssl, op, buf, n, done);
	if (child_taken(&io, op == KP_TLS_WRITE || op == KP_TLS_WRITE_EX, n, done))
		return op == KP_TLS_WRITE_EX ? 1 : (int)n;
	int raises = quiet_begin(ssl);
	int r = tls_io(ssl, &io, op, buf, n, done);
	bool ex = op == KP_TLS_READ_EX || op == KP_TLS_PEEK_EX || op == KP_TLS_WRITE_EX;
	/* the foreign engine's socket writes go without the signal: its
	 * EPIPE is the socket's, as a socket BIO's write() meets it (after
	 * a seccomp install its write() raised it: tls_import.c sock_send) */
	if (io.f && errno == EPIPE && !__atomic_load_n(&kp_fdtab_aside, __ATOMIC_ACQUIRE))
		kp_tls_epipe = true;
	/* (errno: a call a replay answered may have met EPIPE first) */
	quiet_end(raises, (ex ? r != 1 : r <= 0) && errno == EPIPE);
	return r;
}

int kp_tls_get_error(const SSL *ssl, int ret)
{
	if (__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE)) {
		kp_lock(&tls_lock);
		struct handle *h = handle_find(ssl);
		int synth_err = h ? h->synth_err : 0;
		SSL *e = h ? h->e->ssl : (SSL *)ssl;
		/* (the import lives as long as the handle's engine: the
		 * program's own SSL is not freed while it asks) */
		struct tlsf *f = h && h->e->im ? &h->e->im->f : NULL;
		bool close_made = h && h->close_made;
		kp_unlock(&tls_lock);
		/* as libssl's: a success first, then the error queue, then
		 * what our answer made up */
		if (synth_err && ret > 0)
			return SSL_ERROR_NONE;
		unsigned long queued = synth_err ? kp_ssl.ERR_peek_error() : 0;
		if (queued)
			return ERR_GET_LIB(queued) == ERR_LIB_SYS ? SSL_ERROR_SYSCALL : SSL_ERROR_SSL;
		if (synth_err)
			return synth_err;
		if (f)
			return tlsf_get_error(f, ret);
		ssl = e;
		/* a kept SSL given our "received" close_notify (kept_own):
		 * libssl's last answer is ZERO_RETURN when the close_notify
		 * alert was read, which its real SSL never saw */
		if (close_made && kp_ssl.SSL_get_error(ssl, ret) == SSL_ERROR_SYSCALL &&
		    !kp_ssl.ERR_peek_error() && (kp_ssl.SSL_get_shutdown(ssl) & SSL_RECEIVED_SHUTDOWN))
			return SSL_ERROR_ZERO_RETURN;
	}
	int r;
	r = kp_ssl.SSL_get_error(ssl, ret);
	return r;
}

static int tls_shutdown(SSL *ssl, struct io io);

int kp_tls_shutdown(SSL *ssl)
{
	struct io io;
	if (!io_get(ssl, &io))
		return KP_OUTSIDE(kp_ssl.SSL_shutdown(ssl));
	int raises = quiet_begin(ssl);
	int r = tls_shutdown(ssl, io);
	if (io.f && r < 0 && errno == EPIPE && !__atomic_load_n(&kp_fdtab_aside, __ATOMIC_ACQUIRE))
		kp_tls_epipe = true; /* (the foreign engine's send: MSG_NOSIGNAL) */
	quiet_end(raises, r < 0); /* its close_notify met the socket's EPIPE */
	return r;
}

/* SSL_shutdown on an SSL of ours whose socket the program closed: libssl's
 * ssl3_shutdown on its closed descriptor (docs/tls.md "After the
 * handshake").  Quiet: both bits, 1.  Its close_notify not sent yet, or
 * its write failed before: the bit set, the write fails (EBADF), -1.  The
 * server's not read: the read fails, -1.  Both done: 1.  SSL_get_error
 * then: ZERO_RETURN once the server's close_notify was read, else
 * SYSCALL (nothing queued, no retry wanted). */
static int closed_shutdown(SSL *ssl, struct io *io)
{
	int shut = kp_tls_get_shutdown(ssl), r = -1;
	bool quiet = kp_ssl.SSL_get_quiet_shutdown(ssl);
	kp_lock(&tls_lock);
	struct handle *h = handle_find(io->h->ssl);
	if (h && quiet) {
		h->shut |= SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN;
		r = 1;
	} else if (h && (!(shut & SSL_SENT_SHUTDOWN) || h->alert_owed)) {
		h->shut |= SSL_SENT_SHUTDOWN;
		h->alert_owed = true;
	} else if (h && (shut & SSL_RECEIVED_SHUTDOWN)) {
		r = 1;
	}
	if (h)
		h->synth_err = r == 1 ? 0 : shut & SSL_RECEIVED_SHUTDOWN ? SSL_ERROR_ZERO_RETURN : SSL_ERROR_SYSCALL;
	kp_unlock(&tls_lock);
	if (r < 0)
		errno = EBADF;
	return r;
}

static int tls_shutdown(SSL *ssl, struct io io)
{
	int r;
	if (io.closed)
		return kept_own(ssl) ? KP_OUTSIDE(kp_ssl.SSL_shutdown(ssl)) : closed_shutdown(ssl, &io);
	int real_shut = eng_get_shutdown(&io);
	kp_lock(&tls_lock);
	bool late = io.h->watched_late;
	kp_unlock(&tls_lock);
	if (late && io.c && !__atomic_load_n(&io.c->eof_owed, __ATOMIC_ACQUIRE)) {
		/* a watcher set late is told the close_notify its own
		 * SSL_shutdown sends (kp_tls_watched): libssl's own */
		kp_conn_tls_spoil(io.c, io.fd, "SSL_shutdown watched");
		eng_set_shutdown(&io, real_shut | io.shut);
		return eng_shutdown(&io);
	}
	if (io.c && ((real_shut & SSL_SENT_SHUTDOWN) || eng_in_init(&io))) {
		/* shutdown or handshake state set outside our answers
		 * (SSL_set_shutdown, SSL_key_update, SSL_renegotiate): libssl's
		 * own answer, from the engine that holds it */
		kp_conn_tls_spoil(io.c, io.fd, "SSL_shutdown after a state set outside it");
		eng_set_shutdown(&io, real_shut | io.shut);
		return eng_shutdown(&io);
	}
	if (io.c && kp_conn_tls_at_end(io.c, io.fd)) {
		/* no close_notify: the connection may be parked.  As OpenSSL's
		 * SSL_shutdown: the first call "sends" ours and returns 1 if the
		 * server's came (the program read our EOF), else 0; a later one
		 * waits for the server's, which a server that was asked to close
		 * sends (the EOF we owe): 1.  Quiet shutdown: 1 at once. */
		if ((io.shut & (SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN)) ==
		    (SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN))
			return 1; /* both ways done (SSL_set_shutdown): libssl sends nothing */
		bool quiet = kp_ssl.SSL_get_quiet_shutdown(ssl);
		bool owed = __atomic_load_n(&io.c->eof_owed, __ATOMIC_ACQUIRE);
		bool sent = io.shut & SSL_SENT_SHUTDOWN;
		if (!quiet && !owed && sent) {
			/* a second call waits for the server's close_notify */
			r = shut_made_real(&io, "SSL_shutdown called again");
			return r == 0 ? eng_shutdown(&io) : r;
		}
		if (!quiet && !owed && ssl_bio_imported())
			/* BIO_f_ssl writes the program's SSL from inside libssl,
			 * where no refusal of ours can stand for libssl's: its
			 * close is real (such a process is handed no connection
			 * anyway, tls_handout.c) */
			return shut_made_real(&io, "SSL_shutdown where BIO_f_ssl can write");
		if (owed && !quiet)
			closer_told(&io.c->key, __atomic_load_n(&io.c->close_kind, __ATOMIC_ACQUIRE)); /* its sequence shows the end */
		kp_lock(&tls_lock);
		if (quiet || (owed && (io.h->shut & SSL_SENT_SHUTDOWN)) || (real_shut & SSL_RECEIVED_SHUTDOWN))
			io.h->shut |= SSL_RECEIVED_SHUTDOWN;
		/* its close_notify, told sent, goes out when the connection
		 * ends (kp_tls_goodbye) */
		if (!quiet)
			io.h->e->notify_owed = true;
		io.h->shut |= SSL_SENT_SHUTDOWN;
		r = io.h->shut & SSL_RECEIVED_SHUTDOWN ? 1 : 0;
		io.h->synth_err = r ? 0 : SSL_ERROR_SYSCALL;
		kp_unlock(&tls_lock);
		/* (a process that exits with the connection still its own sends it then) */
		if (!quiet)
			kp_tls_exit_arm();
		/* libssl's would have written its close_notify (or read the
		 * server's) through the socket BIO, which clears errno */
		if (!quiet)
			errno = 0;
		return r;
	}
	if (io.c)
		kp_conn_tls_spoil(io.c, io.fd, "SSL_shutdown mid-exchange");
	r = eng_shutdown(&io);
	return r;
}

int kp_tls_get_shutdown(const SSL *ssl)
{
	int shut = 0, r;
	if (__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE)) {
		kp_lock(&tls_lock);
		struct handle *h = handle_find(ssl);
		struct tlsf *f = h && h->e->im ? &h->e->im->f : NULL;
		if (h) {
			shut = h->shut;
			ssl = h->e->ssl;
		}
		kp_unlock(&tls_lock);
		if (f)
			return tlsf_get_shutdown(f) | shut;
	}
	r = kp_ssl.SSL_get_shutdown(ssl);
	return r | shut;
}

int kp_tls_pending(const SSL *ssl, bool has)
{
	struct io io;
	int r;
	/* not I/O: SSL_get_error after it answers for the last I/O call (our
	 * EOF's ZERO_RETURN stays) */
	if (io_look((SSL *)ssl, &io, false)) {
		if (io.closed)
			return 0;
		int extra = io.c ? __atomic_load_n(&io.c->rx_extra_len, __ATOMIC_ACQUIRE) : 0;
		if (extra)
			return has ? 1 : extra;
		if (io.c && __atomic_load_n(&io.c->eof_owed, __ATOMIC_ACQUIRE))
			return 0;
		if (io.f)
			return has ? tlsf_has_pending(io.f) : tlsf_pending(io.f);
		ssl = io.e;
	}
	r = has ? kp_ssl.SSL_has_pending(ssl) : kp_ssl.SSL_pending(ssl);
	return r;
}

void kp_tls_set_session(SSL *ssl)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return;
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	if (h)
		h->sess_set = true;
	kp_unlock(&tls_lock);
}

bool kp_tls_set_shutdown(SSL *ssl, int mode)
{
	struct io io;
	if (!io_look(ssl, &io, false))
		return false;
	if (io.closed) {
		if (kept_own(ssl))
			return false;
		kp_lock(&tls_lock);
		struct handle *h = handle_find(ssl);
		if (h)
			h->shut = mode;
		kp_unlock(&tls_lock);
		return true;
	}
	/* at a request boundary, the bits are what our SSL_shutdown answers
	 * from (the common "no close_notify" before SSL_free: the
	 * connection stays parkable, nothing is sent, as alone) */
	if (io.c && !eng_get_shutdown(&io) && !eng_in_init(&io) && kp_conn_tls_at_end(io.c, io.fd)) {
		kp_lock(&tls_lock);
		struct handle *h = handle_find(ssl);
		if (h)
			h->shut = mode;
		kp_unlock(&tls_lock);
		return true;
	}
	/* else a state our answers do not model: the engine takes it, its
	 * SSL_shutdown is libssl's from now on, and the connection is never
	 * parked (docs/tls.md "Found by the second HTTPS review") */
	if (io.c)
		kp_conn_tls_spoil(io.c, io.fd, "SSL_set_shutdown");
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	if (h)
		h->shut = 0;
	kp_unlock(&tls_lock);
	eng_set_shutdown(&io, mode);
	return true;
}

/* From now on ssl's calls go to its engine unframed, as libssl's own: never
 * parked, never replayed; our made-up answers (an owed EOF, a shutdown
 * without close_notify) stand no more.  False: not found. */
static bool unframe(SSL *ssl, const struct io *io, const char *why)
{
	if (io->c)
		kp_conn_tls_spoil(io->c, io->fd, why);
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	if (h) {
		h->moved = true;
		h->e->dead = true; /* not the parked socket's connection any more */
		/* the shutdown bits we answered are its real SSL's from now on */
		kp_ssl.SSL_set_shutdown(h->e->ssl, kp_ssl.SSL_get_shutdown(h->e->ssl) | h->shut);
		h->shut = 0;
	}
	kp_unlock(&tls_lock);
	return h != NULL;
}

void kp_tls_bio_moved(SSL *ssl)
{
	struct io io;
	if (!io_look(ssl, &io, false) || io.closed)
		return;
	/* its I/O goes where the program put it, with the connection's keys,
	 * as libssl alone moves it: the engine takes the program's BIOs (a
	 * reference each).  Our framing stands for the old socket only */
	if (!unframe(ssl, &io, "the SSL's BIO changed after the handshake") || io.e == ssl)
		return; /* its own SSL: the real call moved it already */
	BIO *rb = kp_ssl.SSL_get_rbio(ssl), *wb = kp_ssl.SSL_get_wbio(ssl);
	if (rb)
		kp_ssl.BIO_up_ref(rb);
	if (wb)
		kp_ssl.BIO_up_ref(wb);
	kp_ssl.SSL_set0_rbio(io.e, rb);
	kp_ssl.SSL_set0_wbio(io.e, wb);
	kp_debug("fd %d: the SSL's BIO changed after the hand-out: the engine does its I/O there", io.fd);
}

SSL *kp_tls_after_set(SSL *ssl, enum kp_tls_after what, const char *why)
{
	struct io io;
	if (!io_look(ssl, &io, false) || io.closed)
		return NULL;
	if (what == KP_AFTER_OPTIONS) {
		/* the options that act after the handshake, as at hand-out
		 * (reset at the next one: the connection stays parkable) */
		if (io.f)
			tlsf_set_options(io.f, kp_ssl.SSL_get_options(ssl));
		else if (io.e != ssl)
			engine_take_options(io.e, ssl);
		return NULL;
	}
	/* the engine now differs from what its record says: never parked */
	if (io.c)
		kp_conn_tls_spoil(io.c, io.fd, why);
	return io.e == ssl ? NULL : io.e;
}

void kp_tls_free(SSL *ssl)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE)) {
		kp_ssl.SSL_free(ssl);
		return;
	}
	shim_ctx_get(); /* detach_program's, not to be made under the lock */
	int shut = kp_tls_get_shutdown(ssl);
	SSL_CTX *bad_ctx = NULL;
	SSL_SESSION *bad = NULL;
	kp_lock(&tls_lock);
	record_drop(ssl);
	struct handle *h = handle_find(ssl);
	struct kp_tls *e = h ? h->e : NULL;
	bool last = false, own = e && e->ssl == ssl;
	if (h) {
		bad = session_freed(h, ssl, own, shut, &bad_ctx);
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
	if (bad) { /* as libssl's SSL_free alone: not resumable */
		kp_ssl.SSL_CTX_remove_session(bad_ctx, bad);
		kp_ssl.SSL_SESSION_free(bad);
	}
	if (h)
		handle_free(h);
	if (!own) {
		kp_tls_capture_forget(ssl);
		kp_ssl.SSL_free(ssl);
	}
	if (last)
		engine_free(e);
}

/* SSL_clear on ssl (h: its handle, if any; resumed: its last handshake
 * did), a new connection on it to come.  The chain it reads as verified
 * stays readable, as libssl 3.0 keeps its verified chain through SSL_clear
 * (a resumption verifies none) until a full handshake of its own verifies
 * one (docs/tls.md "Sessions"): the chain of a pooled connection it was
 * handed as a full handshake, or the one our run verified for a session
 * of ours its handshake resumed.  The session it keeps is its own now:
 * resumed, it says so.  Caller holds tls_lock. */
static void clear_keeps(SSL *ssl, struct handle *h, bool resumed)
{
	struct record *rec = record_get(ssl, false);
	STACK_OF(X509) **from = NULL;
	if (h && h->e->ssl != ssl && h->verified)
		from = &h->vchain;
	else if (rec && rec->offered && resumed)
		from = &rec->offered_chain;
	if (rec)
		rec->offered = false;
	if (!from || !*from || (!rec && !(rec = record_get(ssl, true))))
		return;
	if (rec->cleared_chain)
		kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)rec->cleared_chain, (void (*)(void *))kp_ssl.X509_free);
	rec->cleared_chain = *from;
	*from = NULL;
}

SSL *kp_tls_reset_live(SSL *ssl, const char *why)
{
	struct io io;
	/* (a connection from another process: its own handshake first,
	 * kp_tls_foreign_early; after its first read or write not made the
	 * foreign engine's) */
	if (!io_look(ssl, &io, false))
		return NULL;
	if (io.e == ssl) {
		/* the connection's own SSL: the real call resets the
		 * connection itself, never parked after it (parked already:
		 * never handed out, as kept_own) */
		if (io.closed) {
			(void)kp_tls_route(ssl, true);
			return NULL;
		}
		if (io.c)
			kp_conn_tls_spoil(io.c, io.fd, why);
		/* the close_notify its SSL_shutdown was told it sent goes out
		 * first: alone it did, before the reset */
		kp_tls_goodbye(io.h->e, io.fd);
		return NULL;
	}
	/* (after its SSL_shutdown, or the server's close, the program is done
	 * with it: curl sets the connect state before SSL_free) */
	if (io.closed || io.f || (io.shut & SSL_SENT_SHUTDOWN) ||
	    (io.c && __atomic_load_n(&io.c->eof_owed, __ATOMIC_ACQUIRE)))
		return NULL;
	/* (its failure then is the program's, as alone: no fresh connection
	 * takes its request) */
	return unframe(ssl, &io, why) ? io.e : NULL;
}

/* The connection's own SSL cleared: the connection ends with it (dead),
 * and the close_notify its SSL_shutdown was told it sent goes out first,
 * as alone before the SSL_clear (parked: on the socket the pool holds). */
static void cleared_goodbye(const struct io *io)
{
	kp_lock(&tls_lock);
	struct kp_tls *e = io->h->e;
	int fd = io->closed ? e->fd : io->fd;
	kp_unlock(&tls_lock);
	kp_tls_goodbye(e, fd);
}

enum kp_tls_reset_do kp_tls_reset(SSL *ssl, bool clear)
{
	struct io io;
	if (clear) /* a new connection on this object, if any: counted anew */
		kp_tls_capture_forget(ssl);
	/* (a real call, outside our lock) */
	bool resumed = clear && __atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE) && kp_ssl.SSL_session_reused(ssl);
	if (!io_get(ssl, &io)) {
		if (clear && __atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE)) {
			/* its own connection, which may have resumed a session of ours */
			kp_lock(&tls_lock);
			clear_keeps(ssl, NULL, resumed);
			kp_unlock(&tls_lock);
		}
		return KP_RESET_PASS;
	}
	bool own = io.e == ssl;
	SSL *live = clear || own ? NULL : kp_tls_reset_live(ssl, "SSL_set_connect_state after the handshake");
	if (live) {
		kp_ssl.SSL_set_connect_state(live); /* (its connection's, as alone) */
		return KP_RESET_PASS;
	}
	/* curl, after its SSL_shutdown and before SSL_free: the engine stays
	 * whole; a handle handed a pooled one is a shell anyway.  An own SSL
	 * not shut down may write again after it, which alone fails: the
	 * real call, and the connection is never parked */
	bool done = io.closed || (io.shut & SSL_SENT_SHUTDOWN) ||
		    (io.c && __atomic_load_n(&io.c->eof_owed, __ATOMIC_ACQUIRE));
	if (!clear && (io.closed || (io.c && kp_conn_tls_at_end(io.c, io.fd))) && (done || !own))
		return own ? KP_RESET_SKIP : KP_RESET_PASS;
	if (io.c)
		kp_conn_tls_spoil(io.c, io.fd, clear ? "SSL_clear" : "SSL_set_connect_state");
	if (!clear)
		return KP_RESET_PASS;
	/* a live connection handed out: alone the SSL cleared keeps the
	 * handshake its SSL_connect set, and its next write sends a
	 * ClientHello on that connection, which fails; the program's own SSL
	 * made none (its shutdown bits kept: they decide its session) */
	if (!own && !io.closed && !io.f && !kp_ssl.SSL_is_server(ssl)) {
		int shut = kp_ssl.SSL_get_shutdown(ssl);
		kp_ssl.SSL_set_connect_state(ssl);
		kp_ssl.SSL_set_shutdown(ssl, shut);
	}
	/* handed a pooled connection: the session its own handshake would
	 * have made stays with it (libssl's SSL_clear keeps a session whose
	 * close_notify was sent, and drops it otherwise), and its next
	 * handshake offers it: a resumption where the server resumes
	 * (docs/tls.md "Sessions").  Without it, it offered nothing and was
	 * handed a pooled connection again (reused 0). */
	SSL_SESSION *keep = NULL;
	if (!own && kp_tls_session(ssl, &keep) && keep &&
	    (kp_tls_get_shutdown(ssl) & SSL_SENT_SHUTDOWN) && kp_ssl.SSL_SESSION_is_resumable(keep) &&
	    kp_ssl.SSL_SESSION_up_ref(keep))
		;
	else
		keep = NULL;
	if (own)
		cleared_goodbye(&io);
	/* a new connection on this object: we follow it no more */
	enum kp_tls_reset_do r = KP_RESET_PASS;
	bool last = false;
	kp_lock(&tls_lock);
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
	if (r == KP_RESET_PASS)
		clear_keeps(ssl, h, resumed);
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
	if (keep) {
		/* its own again: set as its handshake would have left it, with
		 * the close_notify sent (so that the real SSL_clear keeps it) */
		if (r == KP_RESET_PASS) {
			kp_ssl.SSL_set_session(ssl, keep);
			kp_ssl.SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN);
		}
		kp_ssl.SSL_SESSION_free(keep);
	}
	if (r == KP_RESET_REFUSE) {
		kp_ssl.ERR_new();
		kp_ssl.ERR_set_error(ERR_LIB_SSL, ERR_R_SHOULD_NOT_HAVE_BEEN_CALLED,
				     "libkeepalive: this SSL's connection serves another SSL");
		kp_debug("SSL_clear refused: the SSL's connection serves another SSL now");
	}
	return r;
}
