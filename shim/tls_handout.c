/* tls_handout.c - a parked connection or a session handed to a program's
 * SSL only where its own handshake would have accepted it (the rule in
 * tls_internal.h), and the tickets kept for resumption. */
#include "tls_internal.h"

#include "der.h"
#include "elf_scan.h"

/* ------------------------------------------------------------ hand-out */

bool same_str(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* What a handshake of ssl's own would have asked differently, or under
 * stricter rules than the handshake that made sh.  Caller holds tls_lock. */
const char *shape_mismatch(const struct shape *sh, SSL *ssl)
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
	/* without AUTO_RETRY a read that meets a record with no data answers
	 * WANT_READ: its own full TLS 1.3 handshake shows the server's
	 * tickets so at its first reads (nginx: two), where a handed-out
	 * connection shows none (its first owner read them) and a session of
	 * ours resumed one (docs/tls.md "Found by the second HTTPS review") */
	if (sh->version >= TLS1_3_VERSION && !(kp_ssl.SSL_ctrl(ssl, SSL_CTRL_MODE, 0, NULL) & SSL_MODE_AUTO_RETRY))
		return "the program reads without AUTO_RETRY (TLS 1.3: the tickets show)";
	return NULL;
}

/* ... and for a pooled engine, also what the server chose.  Caller holds
 * tls_lock. */
/* The session ssl's handshake offers for resumption: set by the program
 * (SSL_set_session, or kept by SSL_clear), or NULL.  A handshake under
 * way (curl's deferred one) holds a new empty session of libssl's: not
 * resumable, it offers nothing. */
SSL_SESSION *resuming(SSL *ssl)
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
	/* it offers a session of its own (SSL_set_session, or the one
	 * SSL_clear kept): its own handshake, whatever the server does with
	 * the offer (docs/tls.md "Sessions": a hand-out as that resumption
	 * reads what the session read, not what the server's answer to the
	 * offer makes, the new ticket's session after a TLS 1.3 one) */
	if (resuming(ssl))
		return "the program offers a session of its own";
	if (alpn_not_http11(e->ssl))
		return "ALPN selected";
	return NULL;
}

/* ssl's own verification of a peer chain (leaf, untrusted), as OpenSSL's
 * handshake runs it (ssl/statem: ssl_verify_cert_chain).  Returns the
 * verify callback's (or X509_verify_cert's) verdict, > 0 for good, with
 * the error, the verified chain and the name matched. */
int verify_as(SSL *ssl, X509 *leaf, STACK_OF(X509) *untrusted, long *result,
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
enum { SEES_PAST = 1, SHOWS_SESSION = 2 };
struct imports {
	bool cpython_ssl; /* the object is CPython's _ssl module */
	int *found;       /* SEES_PAST | SHOWS_SESSION */
};

static bool sees_past(const char *name, const void *arg)
{
	const struct imports *im = arg;
	/* i2d_SSL_SESSION: CPython's _ssl imports it to copy a session
	 * (_ssl_session_dup, for SSLSocket.session =) and shows no byte of
	 * it; any other importer may write the bytes out (docs/tls.md "What
	 * a session shows") */
	bool i2d = name[0] == 'i' && kp_dl_shows_session(name);
	if (i2d && im->cpython_ssl)
		return false;
	if (kp_dl_shows_session(name))
		*im->found |= SHOWS_SESSION;
	if (kp_dl_sees_past(name))
		*im->found |= SEES_PAST;
	return *im->found == (SEES_PAST | SHOWS_SESSION); /* (nothing more to learn) */
}

/* CPython's _ssl extension module, by its file name (_ssl.cpython-311-
 * x86_64-linux-gnu.so, _ssl.so in a debug or older build) */
static bool is_cpython_ssl(const char *path)
{
	const char *base = path ? strrchr(path, '/') : NULL;
	base = base ? base + 1 : path;
	size_t n = base ? strlen(base) : 0;
	return n > 8 && !strncmp(base, "_ssl.", 5) && !strcmp(base + n - 3, ".so");
}

static int ssl_bio_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct imports im = { is_cpython_ssl(info->dlpi_name), arg };
	kp_elf_imports(info, sees_past, &im);
	return *im.found == (SEES_PAST | SHOWS_SESSION);
}

/* What the objects of the process import, looked up again when objects
 * were loaded: SEES_PAST | SHOWS_SESSION */
static int imported(void)
{
	static unsigned long long seen_adds = ~0ull;
	static int found;
	unsigned long long adds = kp_elf_adds();
	if (adds != __atomic_load_n(&seen_adds, __ATOMIC_ACQUIRE)) {
		int f = 0;
		dl_iterate_phdr(ssl_bio_object, &f);
		__atomic_store_n(&found, f, __ATOMIC_RELAXED);
		__atomic_store_n(&seen_adds, adds, __ATOMIC_RELEASE);
	}
	return __atomic_load_n(&found, __ATOMIC_RELAXED);
}

/* An object of the process can reach an SSL from inside libssl (BIO_f_ssl)
 * or count its BIO's bytes, or read what a fresh handshake makes new:
 * past every wrapper of ours. */
bool ssl_bio_imported(void)
{
	if (kp_dl_ssl_bio_named()) /* found by dlsym (shim/dl_real.c) */
		return true;
	return imported() & SEES_PAST;
}

/* An object of the process can show a session's ticket, master key or
 * bytes: a session of ours resumed would show the ones of the session it
 * came from (docs/tls.md "What a session shows") */
bool session_shown_imported(void)
{
	return kp_dl_session_named() || (imported() & SHOWS_SESSION);
}

/* Why ssl must not be handed e (before the program's verification runs),
 * or NULL. */
static const char *handout_why(struct kp_tls *e, SSL *ssl)
{
	kp_lock(&tls_lock);
	const char *why = handle_find(ssl) ? "the SSL is already in use" : mismatch(e, ssl);
	/* (followed under the hand-out across processes, handed nothing of
	 * this process's: never_for) */
	if (!why)
		why = sessions_told(ssl);
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
	if (!why)
		why = engine_snap(e);
	/* its session's peer is made its own (tls_peer.c) */
	if (!why && !session_peer_known(e->ssl))
		why = "where a session keeps its peer certificate is not known";
	if (!why)
		why = bio_watcher(ssl);
	/* its own handshake would run under today's providers and defaults:
	 * one that fails now (fips=yes) must not get a connection made
	 * before (docs/tls.md "Process-wide state") */
	if (!why && e->crypto_gen != __atomic_load_n(&kp_tls_crypto_gen, __ATOMIC_ACQUIRE))
		why = "the process-wide crypto state changed since the connection's handshake";
	kp_unlock(&tls_lock);
	if (!why && ssl_bio_imported())
		why = "the program can see past a hand-out (BIO_f_ssl, the BIO counters)";
	if (!why && e->key_known && closer_looked(&e->key))
		why = "how the server ends is not known and a program looked: a fresh connection teaches";
	return why;
}

/* The engine does the program's I/O now, on fd: the program's modes and
 * the options that act after the handshake apply (the others are equal);
 * renegotiation stays refused (docs/tls.md "Renegotiation"). */
void engine_take_options(SSL *e, SSL *ssl)
{
	uint64_t opts = kp_ssl.SSL_get_options(ssl);
	kp_ssl.SSL_clear_options(e, CARRIED_OPTIONS);
	kp_ssl.SSL_set_options(e, (opts & CARRIED_OPTIONS) | SSL_OP_NO_RENEGOTIATION);
}

static void engine_session_own(struct kp_tls *e);

static void engine_takes_program(struct kp_tls *e, SSL *ssl, int fd)
{
	engine_take_options(e->ssl, ssl);
	long mode = kp_ssl.SSL_ctrl(ssl, SSL_CTRL_MODE, 0, NULL);
	kp_ssl.SSL_ctrl(e->ssl, SSL_CTRL_CLEAR_MODE, ~0L, NULL);
	kp_ssl.SSL_ctrl(e->ssl, SSL_CTRL_MODE, mode | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER, NULL);
	kp_ssl.BIO_int_ctrl(kp_ssl.SSL_get_rbio(e->ssl), BIO_C_SET_FD, BIO_NOCLOSE, fd);
}

int kp_tls_handout(struct kp_tls *e, void *ssl_, int fd)
{
	SSL *ssl = ssl_;
	if (!kp_ssl_bind() || !shim_ctx_get() || e->dead)
		return -1;
	struct handle *h = calloc(1, sizeof(*h));
	if (!h)
		return -1;
	const char *why = handout_why(e, ssl);
	long result = 0;
	STACK_OF(X509) *chain = NULL;
	char *peername = NULL;
	if (!why) {
		/* the program's verify callback runs here, as in a handshake: no
		 * lock of ours held.  Its errors stay off the program's queue. */
		kp_ssl.ERR_set_mark();
		/* (the chain its full handshake read: an engine made by
		 * resuming a session from the broker has none of its own) */
		STACK_OF(X509) *peer_chain = e->full.shown && e->full.chain ? e->full.chain
									   : kp_ssl.SSL_get_peer_cert_chain(e->ssl);
		X509 *leaf = kp_ssl.SSL_get0_peer_certificate(e->ssl);
		/* (a full handshake of its own parses objects of its own: no
		 * ex_data of the first owner's on them, docs/tls.md "The
		 * program's own objects") */
		peer_copies(leaf, peer_chain, &h->peer, &h->peer_chain);
		leaf = h->peer;
		peer_chain = h->peer_chain;
		int ok = verify_as(ssl, leaf, peer_chain, &result, &chain, &peername, NULL);
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
		handle_free(h);
		kp_count(tls_declined);
		kp_debug("fd %d: pooled TLS connection not handed out: %s", fd, why);
		return -1;
	}
	engine_session_own(e);
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
		handle_free(h);
		kp_debug("fd %d: pooled TLS connection not handed out: cannot detach it", fd);
		return -1;
	}
	engine_takes_program(e, ssl, fd);
	kp_lock(&tls_lock);
	e->fd = fd;
	e->refs++;
	e->notify_owed = false; /* (its new owner's close decides) */
	h->ssl = ssl;
	h->e = e;
	h->fd = fd;
	h->verified = true;
	h->verify_result = result;
	h->vchain = chain;
	h->peername = peername;
	h->handed_at = (long)time(NULL);
	HASH_ADD_PTR(handles, ssl, h);
	/* the handshake its own would have made, counted where libssl
	 * counts it (docs/tls.md "Callbacks that watch") */
	stat_add(ssl, STAT_CONNECT, 1);
	stat_add(ssl, STAT_GOOD, 1);
	kp_unlock(&tls_lock);
	kp_count(tls_reused);
	return 0;
}

/* ------------------------------------------------------------ what the peer shows */

/* a nid getter's answer: 1 and *parg, or 0 (parg untouched) */
static void nid_answer(void *parg, bool ok, int nid, long *ret)
{
	if (ok) {
		*(int *)parg = nid;
		*ret = 1;
	}
}

/* The answer of full f to cmd (kp_tls_peer_full); false: libssl's.
 * Caller holds tls_lock. */
static bool full_answer(const struct full *f, int cmd, void *parg, long *ret)
{
	*ret = 0;
	switch (cmd) {
	case KP_PEER_SIG_TYPE:
		nid_answer(parg, f->type_ok, f->type_nid, ret);
		return true;
	case SSL_CTRL_GET_PEER_SIGNATURE_NID:
		nid_answer(parg, f->sig_ok, f->sig_nid, ret);
		return true;
	case SSL_CTRL_GET_PEER_TMP_KEY:
		if (f->tmp && kp_ssl.EVP_PKEY_up_ref(f->tmp)) {
			*(EVP_PKEY **)parg = f->tmp;
			*ret = 1;
		}
		return true;
	}
	if (!f->shown)
		return false; /* (a record that did not read them) */
	switch (cmd) {
	case KP_PEER_CHAIN:
		*(STACK_OF(X509) **)parg = f->chain;
		return true;
	case KP_PEER_CA:
	case KP_CLIENT_CA:
		*(STACK_OF(X509_NAME) **)parg = cmd == KP_PEER_CA || f->client_ca ? f->ca_names : NULL;
		return true;
	case KP_SIGALGS:
	case KP_SHARED_SIGALGS: {
		struct kp_sigalg_query *q = parg;
		const struct sigalg *all = cmd == KP_SIGALGS ? f->sigalgs : f->shared;
		int n = cmd == KP_SIGALGS ? f->n_sigalgs : f->n_shared;
		/* as libssl: -1 counts the peer's, not the shared ones */
		if ((q->idx < 0 && cmd == KP_SHARED_SIGALGS) || q->idx >= n)
			return true;
		if (q->idx >= 0) {
			const struct sigalg *a = &all[q->idx];
			if (q->sign)
				*q->sign = a->sign;
			if (q->hash)
				*q->hash = a->hash;
			if (q->signhash)
				*q->signhash = a->signhash;
			if (q->rsig)
				*q->rsig = a->rsig;
			if (q->rhash)
				*q->rhash = a->rhash;
		}
		*ret = n;
		return true;
	}
	case SSL_CTRL_GET_CLIENT_CERT_TYPES:
		if (!f->cert_req)
			return true;
		if (parg)
			*(const unsigned char **)parg = f->n_ctypes ? f->ctypes : NULL;
		*ret = f->n_ctypes;
		return true;
	case SSL_CTRL_GET_EC_POINT_FORMATS:
		/* (as libssl: 0, the pointer untouched, where none was sent) */
		if (!f->pf_sent)
			return true;
		*(const unsigned char **)parg = f->n_pformats ? f->pformats : NULL;
		*ret = f->n_pformats;
		return true;
	case KP_OWN_SIG_TYPE:
		nid_answer(parg, f->own_type_ok, f->own_type_nid, ret);
		return true;
	case SSL_CTRL_GET_SIGNATURE_NID:
		nid_answer(parg, f->own_sig_ok, f->own_sig_nid, ret);
		return true;
	}
	return false;
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
	struct full *f = NULL;
	if (h && h->verified) {
		/* handed out: a full handshake (a program that offers a session
		 * of its own is handed none) */
		f = &h->e->full;
		tls13 = engine_version(h->e) >= TLS1_3_VERSION;
	} else if (r && r->offered && reused) {
		f = &r->offered_full; /* a session of ours resumed */
	}
	/* (TLS 1.3: the peer's key is the engine's own SSL's, but for a
	 * connection from another process, whose placeholder made no
	 * handshake: the record's, that connection's handshake's) */
	void *before = cmd == SSL_CTRL_GET_PEER_TMP_KEY && parg ? *(void **)parg : NULL;
	bool ours = f && f->known && !(cmd == SSL_CTRL_GET_PEER_TMP_KEY && tls13 && !(h && h->e->im)) &&
		    full_answer(f, cmd, parg, ret);
	/* what the program may change, up_ref or tag: its SSL's own copy,
	 * never the kept full's (tls_own.c) */
	if (ours)
		own_answer(h && h->verified ? &h->own : &r->own, cmd, parg, before, ret);
	/* a full handshake not kept (full_read): the engine's list, copied */
	if (!ours && (cmd == KP_PEER_CA || cmd == KP_CLIENT_CA) && h && h->verified && h->e->ssl != ssl) {
		*(const STACK_OF(X509_NAME) **)parg = cmd == KP_PEER_CA ? kp_ssl.SSL_get0_peer_CA_list(h->e->ssl)
									 : kp_ssl.SSL_get_client_CA_list(h->e->ssl);
		own_answer(&h->own, cmd, parg, NULL, ret);
		ours = true;
	}
	/* handed out as a full handshake: the chain as its own objects */
	if (ours && cmd == KP_PEER_CHAIN && h && h->verified && h->peer_chain)
		*(STACK_OF(X509) **)parg = h->peer_chain;
	kp_unlock(&tls_lock);
	return ours;
}

/* The peer certificate of a handed-out SSL: its own object, as its own handshake parses one
 * (docs/tls.md "The program's own objects"); false: libssl's (routed). */
bool kp_tls_peer_own(const SSL *ssl, X509 **out)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return false;
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	bool own = h && (h->verified || h->peer_kept) && h->peer;
	if (own)
		*out = h->peer;
	kp_unlock(&tls_lock);
	return own;
}


/* A private copy of e's session, taken when it is first handed out (its
 * first owner's object may change after: a reference it kept past
 * SSL_free), or why its session cannot be what a hand-out's is made
 * from.  Caller holds tls_lock. */
const char *engine_snap(struct kp_tls *e)
{
	SSL_SESSION *src = kp_ssl.SSL_get_session(e->ssl);
	if (!src || src == e->snap_src)
		return NULL;
	if (session_changed(src))
		return "the connection's first owner changed its session";
	SSL_SESSION *d = kp_ssl.SSL_SESSION_dup(src);
	if (!d || !kp_ssl.SSL_SESSION_up_ref(src)) {
		if (d)
			kp_ssl.SSL_SESSION_free(d);
		return "its session could not be copied";
	}
	if (e->snap)
		kp_ssl.SSL_SESSION_free(e->snap);
	if (e->snap_src)
		kp_ssl.SSL_SESSION_free(e->snap_src);
	e->snap = d;
	e->snap_src = src;
	return NULL;
}

/* The program frees ssl (h, own: e is its own SSL, kept as the engine),
 * its shutdown word shut: alone, libssl's SSL_free marks the session a
 * finished handshake left not resumable unless its close_notify was sent
 * (ssl_clear_bad_session: SSL_CTX_remove_session), so that a program that
 * kept it (SSL_get1_session) makes a full handshake when it offers it.
 * The session the program may hold, with a reference and *ctx where
 * libssl would remove it, for the caller to mark after the lock (the
 * program's remove callback may run); NULL when none.  A handed-out SSL's
 * is its copy (kp_tls_session) or the session it set.  Its own SSL whose
 * connection is kept (parked, or to be) never reaches libssl's SSL_free:
 * its session is the engine's, marked here, and later hand-outs' copies
 * and the kept ticket come from a private copy taken first (engine_snap;
 * session_spoilt tells this mark from a failure's).  docs/tls.md "Found
 * by the HTTPS review at 4183573", item 3.  Caller holds tls_lock. */
SSL_SESSION *session_freed(struct handle *h, SSL *ssl, bool own, int shut, SSL_CTX **ctx)
{
	struct kp_tls *e = h->e;
	SSL_SESSION *s = NULL;
	/* (a foreign engine's own session is the placeholder's, which the
	 * program never holds: only its copy is marked, below) */
	if ((shut & SSL_SENT_SHUTDOWN) || (own && e->im) || e->dead)
		return NULL;
	if (own && e->refs > 1 && !kp_ssl.SSL_in_init(ssl) && !kp_ssl.SSL_in_before(ssl) &&
	    !engine_snap(e) && e->snap_src == kp_ssl.SSL_get_session(ssl)) {
		s = e->snap_src;
		e->sess_marked = true;
	} else if (!own) {
		s = h->sess_set ? kp_ssl.SSL_get_session(ssl) : h->sess;
	}
	*ctx = own ? e->sess_ctx : session_ctx(ssl);
	return s && *ctx && kp_ssl.SSL_SESSION_up_ref(s) ? s : NULL;
}

/* e's session src is not resumable for a failure on the connection (a
 * fatal alert sent or read marks it: libssl's remove_session), not for
 * the mark of its first owner's SSL_free (session_freed): the failure
 * leaves the SSL in its error state (SSL_in_init).  Caller holds
 * tls_lock. */
bool session_spoilt(struct kp_tls *e, SSL_SESSION *src)
{
	return !kp_ssl.SSL_SESSION_is_resumable(src) &&
	       (!e->sess_marked || src != e->snap_src || kp_ssl.SSL_in_init(e->ssl));
}

/* What a hand-out's session is copied from, with a reference of the
 * caller's: e's private copy for src; src itself where it came since (a
 * ticket read for a hand-out, which no first owner held), but for one
 * libssl made from a session the program changed after the copy (the
 * mark travels): the private copy then.  Caller holds tls_lock. */
SSL_SESSION *session_base(struct kp_tls *e, SSL_SESSION *src)
{
	SSL_SESSION *b = e->snap && (src == e->snap_src || session_changed(src)) ? e->snap : src;
	return b && kp_ssl.SSL_SESSION_up_ref(b) ? b : NULL;
}

/* One context per method a finished handshake moved an SSL to
 * (tlsv1_3_client_method and the like, which libssl does not export):
 * engine_session_own's SSL_set_session resets an SSL whose method is not
 * its context's (libssl 3.0 and 3.1: SSL_set_ssl_method frees the
 * connection's state), so the engine wears one for the call.  Made
 * outside tls_lock (a context reads the system's configuration, which
 * reaches our SSL_CTX_ctrl wrapper), kept for the process. */
static struct {
	const SSL_METHOD *m;
	SSL_CTX *ctx;
} method_ctxs[4];
static kp_mutex_t method_ctxs_lock = KP_MUTEX_INITIALIZER;

static SSL_CTX *method_ctx_get(const SSL_METHOD *m)
{
	SSL_CTX *ctx = NULL;
	kp_lock(&method_ctxs_lock);
	unsigned i = 0;
	for (; i < 4 && method_ctxs[i].m; i++)
		if (method_ctxs[i].m == m)
			ctx = method_ctxs[i].ctx;
	kp_unlock(&method_ctxs_lock);
	if (ctx || i == 4 || !m)
		return ctx;
	SSL_CTX *made = kp_ssl.SSL_CTX_new(m);
	kp_lock(&method_ctxs_lock);
	for (i = 0; i < 4 && method_ctxs[i].m && method_ctxs[i].m != m; i++)
		;
	if (i < 4 && !method_ctxs[i].m && made) {
		method_ctxs[i].m = m;
		method_ctxs[i].ctx = made;
		made = NULL;
	}
	ctx = i < 4 ? method_ctxs[i].ctx : NULL;
	kp_unlock(&method_ctxs_lock);
	if (made) /* (another thread's came first) */
		kp_ssl.SSL_CTX_free(made);
	return ctx;
}

/* e is handed to another SSL and its first owner's SSL is gone: its
 * session becomes a private copy of what hand-outs copy from.  Alone, a
 * failure on the next program's connection (a fatal alert sent or read:
 * libssl's remove_session marks s->session not resumable) marks that
 * program's session only; on the engine it would mark the object the
 * first owner may still hold (SSL_get1_session), which then makes a full
 * handshake where alone it resumes (docs/tls.md "The first owner's
 * session").  SSL_set_session on a connected SSL would itself mark the
 * session it replaces (ssl_clear_bad_session): the SENT_SHUTDOWN bit is
 * set for the call and put back.  Once per engine; nobody else holds e
 * (taken from the pool by the caller). */
static void engine_session_own(struct kp_tls *e)
{
	/* libssl 3.2 on resets to the SSL's first method, whatever its
	 * context's: left as it was there */
	unsigned long v = kp_ssl.OpenSSL_version_num();
	if (e->sess_own || e->im || e->dead || v < 0x30000000UL || v >= 0x30200000UL)
		return;
	kp_lock(&tls_lock);
	/* (while the first owner's SSL is alive, its session is its own) */
	bool first_gone = !handle_find(e->ssl);
	SSL_SESSION *src = first_gone ? kp_ssl.SSL_get_session(e->ssl) : NULL;
	SSL_SESSION *base = src ? session_base(e, src) : NULL;
	if (first_gone)
		e->sess_own = true;
	kp_unlock(&tls_lock);
	if (!first_gone)
		return;
	const SSL_METHOD *m = kp_ssl.SSL_get_ssl_method(e->ssl);
	SSL_CTX *mctx = method_ctx_get(m);
	/* (the copy made outside our lock: the program's session ex_data
	 * dup callbacks run in it) */
	SSL_SESSION *d = base && mctx ? kp_ssl.SSL_SESSION_dup(base) : NULL;
	if (base)
		kp_ssl.SSL_SESSION_free(base);
	if (!d)
		return;
	/* (a reference of ours to its context across the change) */
	SSL_CTX *was = kp_ssl.SSL_get_SSL_CTX(e->ssl);
	if (was && !kp_ssl.SSL_CTX_up_ref(was))
		was = NULL;
	if (was && kp_ssl.SSL_set_SSL_CTX(e->ssl, mctx) == mctx) {
		int shut = kp_ssl.SSL_get_shutdown(e->ssl);
		kp_ssl.SSL_set_shutdown(e->ssl, shut | SSL_SENT_SHUTDOWN);
		kp_ssl.SSL_set_session(e->ssl, d);
		kp_ssl.SSL_set_shutdown(e->ssl, shut);
		kp_ssl.SSL_set_SSL_CTX(e->ssl, was);
	}
	if (was)
		kp_ssl.SSL_CTX_free(was);
	kp_ssl.SSL_SESSION_free(d);
	if (kp_ssl.SSL_get_ssl_method(e->ssl) != m) {
		kp_lock(&tls_lock);
		e->dead = true; /* (never: the state libssl reset goes nowhere) */
		kp_unlock(&tls_lock);
	}
}

/* ------------------------------------------------------------ the session a handed-out SSL reads
 * (moved from tls_calls.c: its size) */

/* The session ssl reads is a copy of ours (kp_tls_session): handed out
 * (a program that offers a session of its own is handed none), or, before its first read,
 * its own TLS 1.3 handshake that resumed a session of ours (its full
 * handshake's would have no ticket yet).  *early: the copy is the one
 * before the server's tickets.  Caller holds tls_lock. */
static bool session_copied(const struct handle *h, const SSL *ssl, bool *early)
{
	/* A TLS 1.3 server's tickets come after its Finished, and the
	 * program's own SSL takes them at its first read: until then its
	 * session has no id and is not resumable */
	*early = h && !h->read_once && engine_version(h->e) >= TLS1_3_VERSION;
	if (h && h->verified)
		return true;
	struct record *r = h && h->e->ssl == ssl && *early ? record_get(ssl, false) : NULL;
	return r && r->offered && kp_ssl.SSL_session_reused(ssl);
}

/* ssl resumed a session of ours and read our copy of it before the
 * server's TLS 1.3 tickets; libssl answers its own session since (a
 * ticket's, which alone would be copied from the one it read): that one
 * given what it set on ours, which goes as libssl frees the one it
 * replaces.  The copy to free after, or NULL.  Caller holds tls_lock. */
static SSL_SESSION *early_gone(struct handle *h, const SSL *ssl)
{
	SSL_SESSION *real = h && h->sess && h->sess_early && h->e->ssl == ssl ? kp_ssl.SSL_get_session(ssl) : NULL;
	if (!real || real == h->sess_src)
		return NULL;
	SSL_SESSION *gone = h->sess;
	session_ex_carry(gone, real);
	h->sess = h->sess_src = NULL;
	h->sess_early = false;
	return gone;
}

bool kp_tls_session(const SSL *ssl, SSL_SESSION **out)
{
	if (!__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return false;
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	if (h && h->sess_set) {
		/* it set a session of its own since (SSL_set_session): that
		 * one, as libssl would answer */
		*out = kp_ssl.SSL_get_session(ssl);
		kp_unlock(&tls_lock);
		return true;
	}
	bool early;
	bool ours = session_copied(h, ssl, &early);
	SSL_SESSION *src = ours ? kp_ssl.SSL_get_session(h->e->ssl) : NULL;
	/* (a session of ours resumed took its handshake's time then) */
	long at = ours && h->verified ? h->handed_at : 0;
	if (ours && src == h->sess_src && early == h->sess_early) {
		*out = h->sess;
		/* a fatal error on the connection since made the engine's
		 * session not resumable: so it would have made the program's
		 * (libssl's remove_session marks the copy, found in no cache) */
		SSL_SESSION *spoilt = src && *out && session_spoilt(h->e, src) &&
					      kp_ssl.SSL_SESSION_is_resumable(*out) && kp_ssl.SSL_SESSION_up_ref(*out)
				      ? *out
				      : NULL;
		kp_unlock(&tls_lock);
		if (spoilt) {
			kp_ssl.SSL_CTX_remove_session(kp_ssl.SSL_get_SSL_CTX(ssl), spoilt);
			kp_ssl.SSL_SESSION_free(spoilt);
		}
		return true;
	}
	if (src && !kp_ssl.SSL_SESSION_up_ref(src))
		src = NULL;
	/* (made from our private copy: tls_handout.c engine_snap) */
	SSL_SESSION *base = src ? session_base(h->e, src) : NULL;
	SSL_SESSION *gone = ours ? NULL : early_gone(h, ssl);
	kp_unlock(&tls_lock);
	if (gone)
		kp_ssl.SSL_SESSION_free(gone);
	if (!ours)
		return false;
	/* the copy made outside our lock (the program's session ex_data dup
	 * callbacks run in it) */
	SSL_SESSION *d = early ? session_unticketed(base) : session_anew(base, at), *old = NULL;
	if (base)
		kp_ssl.SSL_SESSION_free(base);
	if (d && early && kp_ssl.SSL_SESSION_get_time(d) < at)
		kp_ssl.SSL_SESSION_set_time(d, at);
	kp_lock(&tls_lock);
	h = handle_find(ssl);
	bool still_early;
	if (session_copied(h, ssl, &still_early) && still_early == early) {
		/* first asked, or the engine's session changed (a ticket
		 * came): so would the program's, and its old one go */
		old = h->sess;
		/* its peer's objects its own: the hand-out's copies, or the
		 * resumed session's of its own (docs/tls.md "The program's
		 * own objects") */
		X509 *peer = h->verified ? h->peer : src ? kp_ssl.SSL_SESSION_get0_peer(src) : NULL;
		STACK_OF(X509) *chain = h->verified ? h->peer_chain : session_peer_chain(src);
		if (d && peer && !session_peer_give(d, peer, chain))
			kp_debug("a session copy keeps its first owner's peer certificate");
		/* what the program set on the one it read, as libssl's copy
		 * for a ticket carries it */
		if (d && old)
			session_ex_carry(old, d);
		h->sess = d;
		h->sess_src = kp_ssl.SSL_get_session(h->e->ssl) == src ? src : NULL;
		h->sess_early = early;
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

/* ------------------------------------------------------------ resumption */

void ticket_free(struct ticket *t)
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
void ticket_insert(struct ticket *t, struct ticket **drop)
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
STACK_OF(X509) *ticket_chain_of(const struct pool_key *key, const char *sni, X509 *leaf)
{
	for (struct ticket *t = tickets; t; t = t->next)
		if (!memcmp(&t->key, key, sizeof(*key)) && same_str(t->sni, sni) && t->leaf && t->chain &&
		    !kp_ssl.X509_cmp(t->leaf, leaf))
			return kp_ssl.X509_chain_up_ref(t->chain);
	return NULL;
}

/* a copy of sess as a handshake at time at would have made it: that
 * time, and a new id where the id is the client's (a ticket's: libssl
 * names a ticket session by a hash of the ticket, and a server resuming
 * a ticket echoes whatever id the client sent) */
SSL_SESSION *session_anew(SSL_SESSION *sess, long at)
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

/* A copy of sess (session_anew) whose peer and chain are peer and chain,
 * or NULL: where libssl keeps them is not known. */
SSL_SESSION *session_anew_own(SSL_SESSION *sess, X509 *peer, STACK_OF(X509) *chain)
{
	SSL_SESSION *d = session_anew(sess, 0);
	if (d && !session_peer_give(d, peer, chain)) {
		kp_ssl.SSL_SESSION_free(d);
		d = NULL;
	}
	return d;
}

/* (libssl has no setter that takes a ticket away: the session goes
 * through its DER, which keeps the peer's certificate, not its chain,
 * nor ex_data: neither did the handshake's session carry the latter) */
SSL_SESSION *session_unticketed(SSL_SESSION *sess)
{
	int n = sess ? kp_ssl.i2d_SSL_SESSION(sess, NULL) : 0;
	if (n <= 0)
		return NULL;
	unsigned char *der = malloc((size_t)n), *out = malloc((size_t)n + 4), *p = der;
	SSL_SESSION *d = NULL;
	size_t m;
	if (der && out && kp_ssl.i2d_SSL_SESSION(sess, &p) == n && (m = kp_der_unticketed(der, (size_t)n, out))) {
		const unsigned char *q = out;
		d = kp_ssl.d2i_SSL_SESSION(NULL, &q, (long)m);
	}
	free(der);
	free(out);
	return d;
}

/* What a program reads of its SSL_CTX's counts and of its SSL's reuse, as
 * its own handshakes would have made them (moved from tls_calls.c: its
 * size). */
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

bool kp_tls_session_ours(const SSL *ssl)
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
	kp_unlock(&tls_lock);
	return ours;
}

/* SSL_get_tmp_key of an SSL a foreign engine answers, after its first
 * read or write (before it the program's own handshake is made first:
 * kp_tls_foreign_early).  The state does not carry the program's key
 * share, on purpose (with the server's public key it gives the
 * handshake's secret, from which every earlier owner's traffic keys
 * follow): a fresh key pair of the negotiated group, made at the first
 * ask and the same object after, as libssl's (docs/tls-across.md "The
 * hand-out in the library").  True: such an SSL, *k a reference or NULL
 * (no key of that group could be made: answered as with none). */
static bool foreign_own_key(SSL *ssl, EVP_PKEY **k)
{
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	bool foreign = h && h->e->im;
	if (foreign && !h->own.key[1]) {
		int nid = tlsx_group_nid(h->e->im->f.st.group);
		const char *sn = kp_ssl.OBJ_nid2sn(nid);
		kp_ssl.ERR_set_mark();
		if (sn && (nid == NID_X25519 || nid == NID_X448))
			h->own.key[1] = kp_ssl.EVP_PKEY_Q_keygen(NULL, NULL, sn);
		else if (sn) /* (an FFDHE group: none made, answered as with none) */
			h->own.key[1] = kp_ssl.EVP_PKEY_Q_keygen(NULL, NULL, "EC", sn);
		kp_ssl.ERR_pop_to_mark();
	}
	*k = foreign ? h->own.key[1] : NULL;
	if (*k && !kp_ssl.EVP_PKEY_up_ref(*k))
		*k = NULL;
	kp_unlock(&tls_lock);
	return foreign;
}

/* SSL_get_peer_tmp_key, SSL_get_tmp_key of an SSL whose engine e answers
 * (routed, kp_tls_ctrl): e's key, as the program's SSL's own copy (e's
 * object is the engine's, whatever handshake made it). */
long kp_tls_own_key(SSL *ssl, SSL *e, int cmd, long larg, void *parg)
{
	if (!parg)
		return kp_ssl.SSL_ctrl(e, cmd, larg, parg);
	EVP_PKEY *fresh = NULL;
	if (cmd == SSL_CTRL_GET_TMP_KEY && foreign_own_key(ssl, &fresh)) {
		if (!fresh)
			return 0;
		*(EVP_PKEY **)parg = fresh;
		return 1;
	}
	EVP_PKEY *before = *(EVP_PKEY **)parg;
	long ret = kp_ssl.SSL_ctrl(e, cmd, larg, parg);
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	if (h)
		own_answer(&h->own, cmd, parg, before, &ret);
	kp_unlock(&tls_lock);
	return ret;
}

/* The full handshake of a session of ours offered to record r's SSL, with
 * its peer chain the session mine's: copies made for the one before are
 * not this one's. */
void offered_full_set(struct record *r, const struct full *f, SSL_SESSION *mine)
{
	own_free(&r->own);
	full_copy(&r->offered_full, f);
	full_chain_own(&r->offered_full, mine);
}

/* ------------------------------------------------------------ new sessions */

/*
 * libssl tells a new session to the context an SSL was made with (its
 * session_ctx, which SSL_set_SSL_CTX does not move): an engine's is its
 * first owner's, whatever SSL it answers for now, so a callback switched
 * on after a hand-out was told of another SSL's ticket with the engine's
 * SSL (its first owner's, freed by the program), and a first owner's
 * context of another context's connection.  So ours stands in every
 * context whose program sets one, the program's behind it: called with a
 * handed-out engine, it tells the SSL the engine answers for, as alone,
 * where that SSL's own context tells sessions; with an engine no SSL of
 * the program's uses now, nobody (alone nobody's connection read the
 * ticket); with any other SSL, the program's callback as libssl would.
 * (docs/tls.md "Callbacks that watch")
 */
static int new_session_told(SSL *s, SSL_SESSION *sess)
{
	kp_lock(&tls_lock);
	struct handle *h = handle_find(s);
	struct kp_tls *e = h ? h->e : NULL;
	SSL *to = s;
	for (struct handle *x = handles; x; x = x->hh.next)
		if (x->e->ssl == s && x->ssl != s) {
			e = x->e;
			to = x->ssl;
			break;
		}
	if (to == s && e && e->ssl == s && e->own_bio)
		to = NULL; /* its first owner's SSL freed, nobody's since */
	SSL_CTX *ctx = to ? session_ctx(to) : NULL;
	bool other = ctx && ctx != session_ctx(s);
	kp_new_session_cb cb = prog_new_cb(ctx);
	kp_unlock(&tls_lock);
	long mode = ctx ? kp_ssl.SSL_CTX_ctrl(ctx, SSL_CTRL_GET_SESS_CACHE_MODE, 0, NULL) : 0;
	if (!(mode & SSL_SESS_CACHE_CLIENT))
		return 0;
	/* (the engine's own context's store took it already: libssl's) */
	if (other && !(mode & SSL_SESS_CACHE_NO_INTERNAL_STORE))
		KP_OUTSIDE(kp_ssl.SSL_CTX_add_session(ctx, sess));
	return cb ? cb(to, sess) : 0;
}

bool kp_tls_new_cb_set(SSL_CTX *ctx, kp_new_session_cb cb)
{
	kp_lock(&tls_lock);
	struct record *r = record_get(ctx, true);
	if (r)
		r->new_cb = cb;
	kp_unlock(&tls_lock);
	if (!r)
		return false;
	__atomic_store_n(&new_cb_stand_in, new_session_told, __ATOMIC_RELEASE);
	kp_ssl.SSL_CTX_sess_set_new_cb(ctx, cb ? new_session_told : NULL);
	return true;
}

kp_new_session_cb kp_tls_new_cb_of(SSL_CTX *ctx)
{
	kp_lock(&tls_lock);
	kp_new_session_cb cb = prog_new_cb(ctx);
	kp_unlock(&tls_lock);
	return cb;
}
