/* tls_capture.c - a followed TLS connection's secrets and record counts
 * (tls_capture.h; docs/tls-across.md "The integration"). */
#include "tls_capture.h"

#include <stdlib.h>
#include <string.h>
#include <openssl/tls1.h>
#include <uthash.h>

#include "config.h"
#include "kp_lock.h"
#include "tls_record.h"

struct capture {
	const SSL *ssl;
	bool lost;           /* something we could not follow: never exported */
	bool done;           /* its handshake returned: counting application records */
	uint16_t version;
	/* TLS 1.3, from the keylog lines: the traffic secrets _0 and the
	 * exporter master secret (the hash's length each) */
	uint8_t client_random[32];
	uint8_t secret[3][48];
	uint8_t secret_len[3];
	/* records read and written under the current keys, and the
	 * KeyUpdates each way since the secrets _0 */
	uint64_t rx, tx;
	unsigned rx_updates, tx_updates;
	UT_hash_handle hh;
};
enum { SEC_CLIENT, SEC_SERVER, SEC_EXPORTER };

/* a context whose keylog callback is ours: the program's, called after
 * ours.  Kept for the process (a few bytes a context; a context freed and
 * its address reused finds its entry rewritten when ours is installed) */
struct chained {
	const SSL_CTX *ctx;
	kp_keylog_cb prog;
	UT_hash_handle hh;
};

static kp_mutex_t cap_lock = KP_MUTEX_INITIALIZER;
static struct capture *captures;
static struct chained *chains;

static void capture_wipe(struct capture *c)
{
	kp_ssl.OPENSSL_cleanse(c, sizeof(*c));
}

static int hex_val(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* hex digits up to a space or the end into out: the byte count, -1 when
 * not hex or longer than cap */
static int hex_read(const char *s, uint8_t *out, size_t cap, const char **end)
{
	size_t n = 0;
	while (*s && *s != ' ') {
		int hi = hex_val(s[0]), lo = s[1] ? hex_val(s[1]) : -1;
		if (hi < 0 || lo < 0 || n == cap)
			return -1;
		out[n++] = (uint8_t)(hi << 4 | lo);
		s += 2;
	}
	*end = s;
	return (int)n;
}

/* One keylog line: "LABEL <client random> <secret>" (NSS key log format). */
static void keylog_take(struct capture *c, const char *line)
{
	static const char *const labels[3] = { "CLIENT_TRAFFIC_SECRET_0 ", "SERVER_TRAFFIC_SECRET_0 ",
					       "EXPORTER_SECRET " };
	for (int i = 0; i < 3; i++) {
		size_t n = strlen(labels[i]);
		if (strncmp(line, labels[i], n))
			continue;
		uint8_t random[32], secret[48];
		const char *p = line + n;
		int rn = hex_read(p, random, sizeof(random), &p);
		int sn = rn == 32 && *p == ' ' ? hex_read(p + 1, secret, sizeof(secret), &p) : -1;
		if (sn < 32 || *p || (c->secret_len[SEC_CLIENT] && memcmp(c->client_random, random, 32))) {
			c->lost = true;
		} else {
			memcpy(c->client_random, random, 32);
			memcpy(c->secret[i], secret, (size_t)sn);
			c->secret_len[i] = (uint8_t)sn;
		}
		kp_ssl.OPENSSL_cleanse(secret, sizeof(secret));
		return;
	}
}

/* Ours on a followed context: the secrets taken, then the program's own
 * callback (if any) with the very line, as without the library. */
static void capture_keylog(const SSL *ssl, const char *line)
{
	kp_lock(&cap_lock);
	struct capture *c;
	HASH_FIND_PTR(captures, &ssl, c);
	if (c && !c->done)
		keylog_take(c, line);
	const SSL_CTX *ctx = kp_ssl.SSL_get_SSL_CTX(ssl);
	struct chained *ch;
	HASH_FIND_PTR(chains, &ctx, ch);
	kp_keylog_cb prog = ch ? ch->prog : NULL;
	kp_unlock(&cap_lock);
	if (prog)
		prog(ssl, line);
}

/* Ours on a followed SSL: every record header read or written (after the
 * handshake, the records under the traffic keys), every handshake message
 * (a KeyUpdate starts a direction's count again under its next keys). */
static void capture_msg(int write_p, int version, int type, const void *buf, size_t len, SSL *ssl, void *arg)
{
	(void)version, (void)arg;
	kp_lock(&cap_lock);
	struct capture *c;
	const SSL *key = ssl;
	HASH_FIND_PTR(captures, &key, c);
	if (c && c->done && !c->lost) {
		const uint8_t *m = buf;
		if (type == SSL3_RT_HEADER) {
			if (write_p)
				c->tx++;
			else
				c->rx++;
		} else if (type == SSL3_RT_HANDSHAKE && len >= 1) {
			if (m[0] == SSL3_MT_NEWSESSION_TICKET && c->version == TLS1_3_VERSION) {
				/* kept by the program's SSL; the counts go on */
			} else if (m[0] == SSL3_MT_KEY_UPDATE && c->version == TLS1_3_VERSION) {
				if (write_p) {
					c->tx_updates++;
					c->tx = 0;
				} else {
					c->rx_updates++;
					c->rx = 0;
				}
			} else {
				c->lost = true; /* a renegotiation, a post-handshake request */
			}
		}
	}
	kp_unlock(&cap_lock);
}

void kp_tls_capture_begin(SSL *ssl, bool prog_msg_cb)
{
	if (!kp_cfg.tls_across)
		return;
	struct capture *c = calloc(1, sizeof(*c));
	if (!c)
		return;
	c->ssl = ssl;
	c->lost = prog_msg_cb;
	SSL_CTX *ctx = kp_ssl.SSL_get_SSL_CTX(ssl);
	kp_lock(&cap_lock);
	struct capture *old;
	HASH_FIND_PTR(captures, &c->ssl, old);
	if (old) {
		HASH_DEL(captures, old);
		capture_wipe(old);
		free(old);
	}
	HASH_ADD_PTR(captures, ssl, c);
	kp_keylog_cb cur = kp_ssl.SSL_CTX_get_keylog_callback(ctx);
	if (cur != capture_keylog) {
		struct chained *ch;
		HASH_FIND_PTR(chains, &ctx, ch);
		if (!ch && (ch = calloc(1, sizeof(*ch)))) {
			ch->ctx = ctx;
			HASH_ADD_PTR(chains, ctx, ch);
		}
		if (ch) {
			ch->prog = cur;
			kp_ssl.SSL_CTX_set_keylog_callback(ctx, capture_keylog);
		} else {
			c->lost = true;
		}
	}
	kp_unlock(&cap_lock);
	if (!prog_msg_cb)
		kp_ssl.SSL_set_msg_callback(ssl, capture_msg);
}

void kp_tls_capture_done(SSL *ssl)
{
	if (!kp_cfg.tls_across)
		return;
	int version = kp_ssl.SSL_version(ssl);
	kp_lock(&cap_lock);
	struct capture *c;
	const SSL *key = ssl;
	HASH_FIND_PTR(captures, &key, c);
	if (c && !c->done) {
		c->done = true;
		c->version = (uint16_t)version;
		/* TLS 1.2: the Finished each way was record 0 under the keys */
		c->rx = c->tx = version == TLS1_2_VERSION ? 1 : 0;
		if (version == TLS1_3_VERSION &&
		    (!c->secret_len[SEC_CLIENT] || c->secret_len[SEC_CLIENT] != c->secret_len[SEC_SERVER] ||
		     c->secret_len[SEC_EXPORTER] != c->secret_len[SEC_CLIENT]))
			c->lost = true;
		if (version != TLS1_3_VERSION && version != TLS1_2_VERSION)
			c->lost = true;
	}
	kp_unlock(&cap_lock);
}

void kp_tls_capture_lost(const SSL *ssl)
{
	kp_lock(&cap_lock);
	struct capture *c;
	HASH_FIND_PTR(captures, &ssl, c);
	if (c)
		c->lost = true;
	kp_unlock(&cap_lock);
}

kp_msg_cb kp_tls_capture_msg_cb(const SSL *ssl)
{
	kp_lock(&cap_lock);
	struct capture *c;
	HASH_FIND_PTR(captures, &ssl, c);
	bool on = c && !c->lost;
	kp_unlock(&cap_lock);
	return on ? capture_msg : NULL;
}

void kp_tls_capture_forget(const SSL *ssl)
{
	if (!kp_cfg.tls_across) /* (set once, at start) */
		return;
	kp_lock(&cap_lock);
	struct capture *c;
	HASH_FIND_PTR(captures, &ssl, c);
	if (c)
		HASH_DEL(captures, c);
	kp_unlock(&cap_lock);
	if (c) {
		capture_wipe(c);
		free(c);
	}
}

kp_keylog_cb kp_tls_keylog_of(const SSL_CTX *ctx)
{
	kp_keylog_cb cur = kp_ssl.SSL_CTX_get_keylog_callback(ctx);
	if (cur != capture_keylog)
		return cur;
	kp_lock(&cap_lock);
	struct chained *ch;
	HASH_FIND_PTR(chains, &ctx, ch);
	kp_keylog_cb prog = ch ? ch->prog : NULL;
	kp_unlock(&cap_lock);
	return prog;
}

bool kp_tls_keylog_set(SSL_CTX *ctx, kp_keylog_cb cb)
{
	/* ours is installed only by kp_tls_capture_begin, with its entry:
	 * a context freed and its address reused has the program's own */
	if (kp_ssl.SSL_CTX_get_keylog_callback(ctx) != capture_keylog)
		return false;
	kp_lock(&cap_lock);
	const SSL_CTX *key = ctx;
	struct chained *ch;
	HASH_FIND_PTR(chains, &key, ch);
	if (ch)
		ch->prog = cb;
	kp_unlock(&cap_lock);
	return ch != NULL;
}

/* ------------------------------------------------------------ export */

/* The traffic keys each way and the exporter secret, as counted now. */
static const char *state_keys(SSL *ssl, const struct capture *c, struct tlsx_state *st)
{
	const SSL_CIPHER *suite = kp_ssl.SSL_get_current_cipher(ssl);
	int cipher = suite ? tlsrec_cipher_of(c->version, kp_ssl.SSL_CIPHER_get_protocol_id(suite)) : -1;
	if (cipher < 0)
		return "a cipher the record layer does not carry";
	st->version = c->version;
	st->cipher = (uint16_t)cipher;
	st->suite = kp_ssl.SSL_CIPHER_get_protocol_id(suite);
	/* what the getters of the taking process answer from the state */
	st->group = tlsx_group_iana((int)kp_ssl.SSL_ctrl(ssl, SSL_CTRL_GET_NEGOTIATED_GROUP, 0, NULL));
	if (c->version < TLS1_3_VERSION && kp_ssl.SSL_ctrl(ssl, SSL_CTRL_GET_EXTMS_SUPPORT, 0, NULL) == 1)
		st->flags |= TLSX_EXTMS;
	if (c->version < TLS1_3_VERSION && kp_ssl.SSL_ctrl(ssl, SSL_CTRL_GET_RI_SUPPORT, 0, NULL) == 1)
		st->flags |= TLSX_RI;
	kp_ssl.SSL_get_client_random(ssl, st->client_random, 32);
	kp_ssl.SSL_get_server_random(ssl, st->server_random, 32);
	if (c->version == TLS1_3_VERSION) {
		size_t hlen = tlsrec_hash_len(st->cipher);
		if (c->secret_len[SEC_CLIENT] != hlen || memcmp(c->client_random, st->client_random, 32))
			return "the keylog lines are not this handshake's";
		if (tlsrec_init13(&st->tx, st->cipher, c->secret[SEC_CLIENT], hlen, 0) < 0 ||
		    tlsrec_init13(&st->rx, st->cipher, c->secret[SEC_SERVER], hlen, 0) < 0)
			return "the key schedule failed";
		for (unsigned i = 0; i < c->tx_updates; i++)
			if (tlsrec_key_update(&st->tx) < 0)
				return "the key schedule failed";
		for (unsigned i = 0; i < c->rx_updates; i++)
			if (tlsrec_key_update(&st->rx) < 0)
				return "the key schedule failed";
		memcpy(st->exporter, c->secret[SEC_EXPORTER], hlen);
		st->exporter_len = (uint8_t)hlen;
	} else {
		SSL_SESSION *sess = kp_ssl.SSL_get_session(ssl);
		uint8_t master[48];
		size_t mlen = sess ? kp_ssl.SSL_SESSION_get_master_key(sess, master, sizeof(master)) : 0;
		int r = mlen == 48 ? tlsrec_init12(&st->tx, &st->rx, st->cipher, master, mlen, st->client_random,
						   st->server_random, 1)
				   : -1;
		memcpy(st->exporter, master, sizeof(master));
		st->exporter_len = 48;
		kp_ssl.OPENSSL_cleanse(master, sizeof(master));
		if (r < 0)
			return "no master secret";
	}
	tlsrec_set_seq(&st->tx, c->tx);
	tlsrec_set_seq(&st->rx, c->rx);
	return NULL;
}

/* The peer chain as the message carries it: [u32 length][DER] each. */
static unsigned char *chain_bytes(STACK_OF(X509) *chain, uint32_t *len)
{
	int n = chain ? kp_ssl.OPENSSL_sk_num((OPENSSL_STACK *)chain) : 0;
	size_t total = 0;
	for (int i = 0; i < n; i++) {
		int l = kp_ssl.i2d_X509(kp_ssl.OPENSSL_sk_value((OPENSSL_STACK *)chain, i), NULL);
		if (l <= 0)
			return NULL;
		total += 4 + (size_t)l;
	}
	unsigned char *p = n ? malloc(total) : NULL, *q = p;
	for (int i = 0; p && i < n; i++) {
		unsigned char *der = q + 4;
		int l = kp_ssl.i2d_X509(kp_ssl.OPENSSL_sk_value((OPENSSL_STACK *)chain, i), &der);
		q[0] = (unsigned char)(l >> 24), q[1] = (unsigned char)(l >> 16);
		q[2] = (unsigned char)(l >> 8), q[3] = (unsigned char)l;
		q = der;
	}
	*len = (uint32_t)total;
	return p;
}

/* What the getters tell, the session and the peer chain (malloc'd into
 * *sess, *chain, freed by the caller). */
static const char *state_rest(SSL *ssl, STACK_OF(X509) *peer, struct tlsx_state *st, unsigned char **sess,
			      unsigned char **chain)
{
	st->finished_len = (uint8_t)kp_ssl.SSL_get_finished(ssl, st->finished, sizeof(st->finished));
	st->peer_finished_len =
		(uint8_t)kp_ssl.SSL_get_peer_finished(ssl, st->peer_finished, sizeof(st->peer_finished));
	const unsigned char *alpn = NULL;
	unsigned alpn_len = 0;
	kp_ssl.SSL_get0_alpn_selected(ssl, &alpn, &alpn_len);
	st->alpn = (struct tlsx_blob){ alpn_len ? alpn : NULL, alpn_len };
	const char *sni = kp_ssl.SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	st->sni = (struct tlsx_blob){ sni && *sni ? (const uint8_t *)sni : NULL, sni ? (uint32_t)strlen(sni) : 0 };
	SSL_SESSION *s = kp_ssl.SSL_get_session(ssl);
	int slen = s ? kp_ssl.i2d_SSL_SESSION(s, NULL) : 0;
	if (slen <= 0 || !(*sess = malloc((size_t)slen)))
		return "no session";
	unsigned char *q = *sess;
	kp_ssl.i2d_SSL_SESSION(s, &q);
	st->session = (struct tlsx_blob){ *sess, (uint32_t)slen };
	uint32_t clen = 0;
	if (!peer)
		peer = kp_ssl.SSL_get_peer_cert_chain(ssl);
	if (!(*chain = chain_bytes(peer, &clen)))
		return "no peer chain";
	st->chain = (struct tlsx_blob){ *chain, clen };
	return NULL;
}

long kp_tls_capture_export(SSL *ssl, const unsigned char *conf, size_t conf_len, STACK_OF(X509) *peer,
			   unsigned char **out, const char **why)
{
	struct capture c;
	kp_lock(&cap_lock);
	struct capture *found;
	const SSL *key = ssl;
	HASH_FIND_PTR(captures, &key, found);
	if (found)
		c = *found;
	kp_unlock(&cap_lock);
	*out = NULL;
	if (!found || !c.done || c.lost) {
		*why = !found ? "its handshake was not followed" : !c.done ? "its handshake did not end" :
								   "its records were not all counted";
		if (found)
			capture_wipe(&c);
		return -1;
	}
	/* a KeyUpdate the peer asked for, not sent yet: the state does not
	 * say it is owed */
	if (kp_ssl.SSL_get_read_ahead(ssl) || kp_ssl.SSL_get_key_update_type(ssl) != SSL_KEY_UPDATE_NONE) {
		*why = kp_ssl.SSL_get_read_ahead(ssl) ? "read-ahead" : "a KeyUpdate owed";
		capture_wipe(&c);
		return -1;
	}
	struct tlsx_state st;
	memset(&st, 0, sizeof(st));
	unsigned char *sess = NULL, *chain = NULL;
	long len = -1;
	uint32_t sess_len = 0;
	*why = state_keys(ssl, &c, &st);
	if (!*why)
		*why = state_rest(ssl, peer, &st, &sess, &chain);
	st.conf = (struct tlsx_blob){ conf_len ? conf : NULL, (uint32_t)conf_len };
	sess_len = st.session.len;
	size_t cap = *why ? 0 : tlsx_encoded_len(&st);
	if (!*why && cap <= TLSX_MAX && (*out = malloc(cap)))
		len = tlsx_encode(&st, *out, cap, why);
	else if (!*why)
		*why = cap > TLSX_MAX ? "too long" : "no memory";
	if (len < 0 && *out) {
		kp_ssl.OPENSSL_cleanse(*out, cap);
		free(*out);
		*out = NULL;
	}
	tlsx_wipe(&st);
	capture_wipe(&c);
	if (sess)
		kp_ssl.OPENSSL_cleanse(sess, sess_len);
	free(sess);
	free(chain);
	return len;
}
