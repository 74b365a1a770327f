/* tls_conf.c - a TLS configuration as a record: what the setters set
 * that no getter tells (struct conf), what the getters tell (struct cfg),
 * where two differ, and the per-object records (tls_internal.h). */
/* a table that cannot grow costs the record, never the host (uthash's
 * default on a failed allocation is exit(-1)) */
#define HASH_NONFATAL_OOM 1
#include "tls_internal.h"

kp_mutex_t tls_lock = KP_MUTEX_INITIALIZER; /* every table of the tls_*.c files */
static struct record *records;

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
	[NEVER_LOOKUP] = "a certificate lookup method of its own in its store",
	[NEVER_DEBUG_CB] = "a TLS extension debug callback",
	[NEVER_SERVERNAME_CB] = "a servername callback",
	[NEVER_SECRET_CB] = "a session secret callback",
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
	[CONF_SID_CTX] = "session id context",
};

void conf_free(struct conf *c)
{
	for (int i = 0; i < CONF_LISTS; i++)
		free(c->list[i]);
	memset(c, 0, sizeof(*c));
}

/* list i of c becomes a copy of p (n bytes); an empty one is the default */
void conf_set(struct conf *c, int i, const void *p, size_t n)
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

void conf_copy(struct conf *dst, const struct conf *src)
{
	conf_free(dst);
	dst->never = src->never;
	dst->msg_cb = src->msg_cb;
	dst->msg_arg = src->msg_arg;
	memcpy(dst->val, src->val, sizeof(dst->val));
	for (int i = 0; i < CONF_LISTS; i++)
		conf_set(dst, i, src->list[i], src->len[i]);
}

/* What a handshake with settings b would offer differently from one with
 * settings a: compared as set, so an equal list written another way
 * declines (a fresh handshake is always correct). */
const char *conf_mismatch(const struct conf *a, const struct conf *b)
{
	for (int i = 0; i < CONF_LISTS; i++)
		if (a->len[i] != b->len[i] || (a->len[i] && memcmp(a->list[i], b->list[i], a->len[i])))
			return list_what[i];
	for (int i = 0; i < CONF_VALS; i++)
		if (a->val[i] != b->val[i])
			return val_what[i];
	return NULL;
}

const char *never_reason(unsigned never)
{
	for (unsigned i = 0; i < sizeof(never_why) / sizeof(never_why[0]); i++)
		if (never & (1u << i))
			return never_why[i];
	return NULL;
}

/* The real SSL_CTX_new applies openssl.cnf's system default section
 * (Groups, SignatureAlgorithms, ClientSignatureAlgorithms, RecordPadding,
 * ...) through the setters we note, before it returns the context: what
 * is noted while it runs is the new context's, and stays in its record
 * (kp_tls_note_new keeps it). An older record at that address (an object
 * freed behind our back) is dropped when the first setting is noted.
 * (docs/tls.md "The record") */
static __thread int ctx_new_running; /* SSL_CTX_new calls SSL_CTX_new_ex */
static __thread const void *ctx_new_noted;

void kp_tls_ctx_new(bool running)
{
	if (running && !ctx_new_running++)
		ctx_new_noted = NULL;
	else if (!running)
		ctx_new_running--;
}

/* obj is the context made by the SSL_CTX_new that just returned, and
 * what was noted while it ran is obj's */
bool ctx_new_made(const void *obj)
{
	return obj && obj == ctx_new_noted;
}

struct record *record_get(const void *obj, bool create)
{
	struct record *r;
	if (ctx_new_running && create && !ctx_new_noted) {
		record_drop(obj);
		ctx_new_noted = obj;
	}
	HASH_FIND_PTR(records, &obj, r);
	if (!r && create && (r = calloc(1, sizeof(*r)))) {
		r->obj = obj;
		HASH_ADD_PTR(records, obj, r);
		if (!r->hh.tbl) {
			free(r);
			r = NULL;
		}
	}
	return r;
}

void record_drop(const void *obj)
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
		if (r->cleared_chain)
			kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)r->cleared_chain,
						   (void (*)(void *))kp_ssl.X509_free);
		full_free(&r->offered_full);
		own_free(&r->own);
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
	/* an SSL's (a context's reaches its SSLs at SSL_new only): it
	 * replaced ours, which counted the records */
	kp_tls_capture_lost(obj);
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
 * (docs/tls.md "`SSL_ctrl` and callbacks").  Anything not listed is CTRL_UNKNOWN:
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
	if (cmd == SSL_CTRL_SET_MSG_CALLBACK_ARG) {
		/* for a watcher set after the hand-out (docs/tls.md
		 * "Callbacks that watch") */
		kp_lock(&tls_lock);
		struct record *r = record_get(obj, true);
		if (r)
			r->conf.msg_arg = (void *)parg;
		kp_unlock(&tls_lock);
		return;
	}
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
	case SSL_CTRL_SET_MSG_CALLBACK: /* a watcher: conf.msg_cb */
	case SSL_CTRL_SET_TLSEXT_TICKET_KEY_CB:  /* a server's */
	case SSL_CTRL_SET_TMP_DH_CB:             /* a server's */
	case SSL_CTRL_SET_NOT_RESUMABLE_SESS_CB: /* a server's */
		return;
	case SSL_CTRL_SET_TLSEXT_STATUS_REQ_CB:
		kp_tls_note_never(obj, NEVER_STATUS_CB, set);
		return;
	/* it is told of every extension its handshake sends and reads: a
	 * handed-out connection's none (docs/tls.md "Callbacks that watch") */
	case SSL_CTRL_SET_TLSEXT_DEBUG_CB:
		kp_tls_note_never(obj, NEVER_DEBUG_CB, set);
		return;
	/* not only a server's: a client's handshake calls it too, once, as
	 * it reads the server's extensions (final_server_name), and its
	 * SSL_TLSEXT_ERR_ALERT_FATAL fails that handshake; a handed-out
	 * connection would call it never (docs/tls.md "Callbacks that
	 * watch"). Read from the context at the handshake, not copied. */
	case SSL_CTRL_SET_TLSEXT_SERVERNAME_CB:
		kp_tls_note_never(obj, NEVER_SERVERNAME_CB, set);
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
		/* the session id context follows the new context's if it was
		 * the old one's (SSL_set_SSL_CTX), else it stays the SSL's */
		struct record *br = before ? record_get(before, false) : NULL;
		const struct conf *bc = br ? &br->conf : NULL;
		size_t n = r->conf.len[CONF_SID_CTX];
		if (n == (bc ? bc->len[CONF_SID_CTX] : 0) && (!n || !memcmp(r->conf.list[CONF_SID_CTX], bc->list[CONF_SID_CTX], n)))
			conf_set(&r->conf, CONF_SID_CTX, cr ? cr->conf.list[CONF_SID_CTX] : NULL,
				 cr ? cr->conf.len[CONF_SID_CTX] : 0);
		unsigned bit = 1u << NEVER_CERT_CB;
		r->conf.never = (r->conf.never & ~bit) | (cr ? cr->conf.never & bit : 0);
	}
	kp_unlock(&tls_lock);
}

void kp_tls_note_copy_session(const void *t, const void *f)
{
	kp_lock(&tls_lock);
	struct record *r = record_get(t, true), *fr = record_get(f, false);
	if (r) {
		static const enum kp_conf_list copied[] = { CONF_SIGALGS, CONF_CLIENT_SIGALGS, CONF_SID_CTX };
		for (unsigned k = 0; k < sizeof(copied) / sizeof(copied[0]); k++) {
			enum kp_conf_list i = copied[k];
			conf_set(&r->conf, i, fr ? fr->conf.list[i] : NULL, fr ? fr->conf.len[i] : 0);
		}
		unsigned bit = 1u << NEVER_CERT_CB;
		r->conf.never = (r->conf.never & ~bit) | (fr ? fr->conf.never & bit : 0);
	}
	kp_unlock(&tls_lock);
}

bool kp_tls_across_on(void)
{
#ifdef KP_TEST_ACROSS_VERIFY
	return false; /* (the test build's modes: tls_across.c hand_mode) */
#else
	return kp_cfg.tls_across && kp_broker_enabled();
#endif
}

bool kp_tls_fd_hidden(void *ssl)
{
	return kp_ssl.SSL_get_fd(ssl) < 0;
}

void kp_tls_defer(void *ssl, int fd)
{
	kp_lock(&tls_lock);
	struct record *r = record_get(ssl, true);
	if (r)
		r->defer_fd = fd + 1;
	kp_unlock(&tls_lock);
}

int deferred_fd(SSL *ssl)
{
	kp_lock(&tls_lock);
	struct record *r = record_get(ssl, false);
	int fd = r ? r->defer_fd - 1 : -1;
	if (r)
		r->defer_fd = 0;
	kp_unlock(&tls_lock);
	return fd;
}

/* ------------------------------------------------------------ the record */

/* Option bits libssl 3.0 defines (bit 5 is unused); any other bit set
 * declines: we do not know what it changes. */
#define KNOWN_OPTIONS ((uint64_t)0xffffffff & ~SSL_OP_BIT(5))
#define KNOWN_MODES                                                                              \
	(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_AUTO_RETRY | \
	 SSL_MODE_NO_AUTO_CHAIN | SSL_MODE_RELEASE_BUFFERS | SSL_MODE_SEND_CLIENTHELLO_TIME |        \
	 SSL_MODE_SEND_SERVERHELLO_TIME | SSL_MODE_SEND_FALLBACK_SCSV | SSL_MODE_ASYNC |             \
	 SSL_MODE_DTLS_SCTP_LABEL_LENGTH_BUG)

void cfg_free(struct cfg *c)
{
	free(c->ciphers);
	memset(c, 0, sizeof(*c));
}

/* Read ssl's configuration with the real getters (no wrapper, no lock
 * needed).  c->read stays false when it cannot (out of memory): such a
 * record equals nothing. */
void cfg_read(SSL *ssl, struct cfg *c)
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

void cfg_copy(struct cfg *dst, const struct cfg *src)
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
const char *cfg_mismatch(const struct cfg *was, const struct cfg *now)
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

void full_free(struct full *f)
{
	if (f->tmp)
		kp_ssl.EVP_PKEY_free(f->tmp);
	if (f->chain)
		kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)f->chain, (void (*)(void *))kp_ssl.X509_free);
	names_free(f->ca_names);
	memset(f, 0, sizeof(*f));
}

void full_copy(struct full *dst, const struct full *src)
{
	full_free(dst);
	*dst = *src;
	bool ok = true;
	if (dst->tmp && !kp_ssl.EVP_PKEY_up_ref(dst->tmp)) {
		dst->tmp = NULL;
		ok = false;
	}
	if (dst->chain && !(dst->chain = kp_ssl.X509_chain_up_ref(dst->chain)))
		ok = false;
	dst->ca_names = names_dup(src->ca_names, &ok);
	if (!ok)
		full_free(dst); /* not known */
}

/* idx's entries of the peer's (shared false) or the shared (true)
 * signature algorithms (SSL_get_shared_sigalgs answers 0 for -1) */
static int sigalgs_read(SSL *ssl, bool shared, struct sigalg *out)
{
	int n = 0;
	for (int i = 0; i < FULL_MAX_SIGALGS; i++) {
		struct sigalg *a = &out[i];
		int r = shared ? kp_ssl.SSL_get_shared_sigalgs(ssl, i, &a->sign, &a->hash, &a->signhash, &a->rsig,
							       &a->rhash)
			       : kp_ssl.SSL_get_sigalgs(ssl, i, &a->sign, &a->hash, &a->signhash, &a->rsig, &a->rhash);
		if (r <= i)
			break;
		n = r;
	}
	return n > FULL_MAX_SIGALGS ? -1 : n;
}

/* what ssl's (full) handshake negotiated and showed; not known when a
 * value does not fit (more signature algorithms or certificate types than
 * kept) */
void full_read(SSL *ssl, struct full *f)
{
	full_free(f);
	f->type_ok = kp_ssl.SSL_get_peer_signature_type_nid(ssl, &f->type_nid) > 0;
	f->sig_ok = kp_ssl.SSL_ctrl(ssl, SSL_CTRL_GET_PEER_SIGNATURE_NID, 0, &f->sig_nid) > 0;
	if (kp_ssl.SSL_ctrl(ssl, SSL_CTRL_GET_PEER_TMP_KEY, 0, &f->tmp) <= 0)
		f->tmp = NULL;
	bool ok = true;
	STACK_OF(X509) *chain = kp_ssl.SSL_get_peer_cert_chain(ssl);
	if (chain && !(f->chain = kp_ssl.X509_chain_up_ref(chain)))
		ok = false;
	const STACK_OF(X509_NAME) *ca = kp_ssl.SSL_get0_peer_CA_list(ssl);
	f->ca_names = names_dup(ca, &ok);
	f->client_ca = ca && kp_ssl.SSL_get_client_CA_list(ssl) == ca;
	f->n_sigalgs = sigalgs_read(ssl, false, f->sigalgs);
	f->n_shared = sigalgs_read(ssl, true, f->shared);
	/* libssl writes the types' address only after a CertificateRequest
	 * (TLS 1.3's has none: NULL, 0) */
	const unsigned char *unset = (const unsigned char *)f, *ct = unset;
	long n_ct = kp_ssl.SSL_ctrl(ssl, SSL_CTRL_GET_CLIENT_CERT_TYPES, 0, &ct);
	f->cert_req = ct != unset;
	/* the server's point formats: a TLS 1.2 resumption's ServerHello
	 * may carry none (alone, a full handshake's read 3) */
	const unsigned char *pf = NULL;
	long n_pf = kp_ssl.SSL_ctrl(ssl, SSL_CTRL_GET_EC_POINT_FORMATS, 0, &pf);
	f->pf_sent = pf != NULL;
	if (n_ct > FULL_MAX_CTYPES || n_pf > FULL_MAX_PFORMATS || f->n_sigalgs < 0 || f->n_shared < 0)
		ok = false;
	else if (n_ct > 0 && ct)
		memcpy(f->ctypes, ct, (size_t)(f->n_ctypes = (int)n_ct));
	if (ok && n_pf > 0 && pf)
		memcpy(f->pformats, pf, (size_t)(f->n_pformats = (int)n_pf));
	f->own_type_ok = kp_ssl.SSL_get_signature_type_nid(ssl, &f->own_type_nid) > 0;
	f->own_sig_ok = kp_ssl.SSL_ctrl(ssl, SSL_CTRL_GET_SIGNATURE_NID, 0, &f->own_sig_nid) > 0;
	if (!ok) {
		full_free(f);
		return;
	}
	f->shown = true;
	f->known = true;
}

