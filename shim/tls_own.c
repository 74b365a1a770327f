/* tls_own.c - the objects a getter answers from kept state (a full
 * handshake's, the engine's SSL's) that the program may change, up_ref or
 * tag with ex_data: copies of its own SSL's, made at its first ask and
 * freed with its handle (or record), as libssl's are its SSL's own
 * (docs/tls.md "The program's own objects").  The values stay the first
 * handshake's ("After the handshake"); the objects are never the ones
 * another hand-out, the first owner or the broker ticket hold.  And the
 * session ex_data of the program's: the sessions it changed, and its tags
 * carried to the copies it reads. */
#include "tls_internal.h"

void names_free(STACK_OF(X509_NAME) *names)
{
	if (names)
		kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)names, (void (*)(void *))kp_ssl.X509_NAME_free);
}

/* a copy of names (NULL: none, or no memory: *ok false) */
STACK_OF(X509_NAME) *names_dup(const STACK_OF(X509_NAME) *names, bool *ok)
{
	if (!names)
		return NULL;
	OPENSSL_STACK *d = kp_ssl.OPENSSL_sk_new_null();
	int n = kp_ssl.OPENSSL_sk_num((const OPENSSL_STACK *)names);
	for (int i = 0; d && i < n; i++) {
		X509_NAME *x = kp_ssl.X509_NAME_dup(kp_ssl.OPENSSL_sk_value((const OPENSSL_STACK *)names, i));
		if (!x || !kp_ssl.OPENSSL_sk_push(d, x)) {
			if (x)
				kp_ssl.X509_NAME_free(x);
			names_free((STACK_OF(X509_NAME) *)d);
			d = NULL;
		}
	}
	if (!d)
		*ok = false;
	return (STACK_OF(X509_NAME) *)d;
}

void own_free(struct own *o)
{
	names_free(o->ca);
	for (int i = 0; i < 2; i++)
		if (o->key[i])
			kp_ssl.EVP_PKEY_free(o->key[i]);
	memset(o, 0, sizeof(*o));
}

/* A copy of k through DER (EVP_PKEY_dup would carry its ex_data, the
 * first owner's tags): the public key (the peer's), or the key pair (the
 * own, priv).  NULL: none could be made. */
static EVP_PKEY *key_copy(EVP_PKEY *k, bool priv)
{
	unsigned char *der = NULL;
	int n = priv ? kp_ssl.i2d_PrivateKey(k, &der) : kp_ssl.i2d_PUBKEY(k, &der);
	if (n <= 0)
		return NULL;
	const unsigned char *p = der;
	EVP_PKEY *c = priv ? kp_ssl.d2i_AutoPrivateKey(NULL, &p, n) : kp_ssl.d2i_PUBKEY(NULL, &p, n);
	kp_ssl.CRYPTO_free(der, __FILE__, __LINE__);
	return c;
}

/* The SSL's own copy of key k (which = 0: the peer's, 1: its own), a
 * reference for the caller; NULL: none could be made (the program's SSL
 * then answers as with none: never the kept object).  Caller holds
 * tls_lock. */
static EVP_PKEY *own_key(struct own *o, int which, EVP_PKEY *k)
{
	if (!o->key[which])
		o->key[which] = key_copy(k, which == 1);
	EVP_PKEY *c = o->key[which];
	return c && kp_ssl.EVP_PKEY_up_ref(c) ? c : NULL;
}

void own_answer(struct own *o, int cmd, void *parg, void *before, long *ret)
{
	switch (cmd) {
	case KP_PEER_CA:
	case KP_CLIENT_CA: {
		STACK_OF(X509_NAME) **out = parg;
		if (!*out)
			return;
		if (!o->ca_made) {
			bool ok = true;
			o->ca = names_dup(*out, &ok);
			o->ca_made = ok;
		}
		*out = o->ca_made ? o->ca : NULL;
		return;
	}
	case SSL_CTRL_GET_PEER_TMP_KEY:
	case SSL_CTRL_GET_TMP_KEY: {
		EVP_PKEY **out = parg;
		if (*ret <= 0 || !*out)
			return;
		EVP_PKEY *k = *out, *c = own_key(o, cmd == SSL_CTRL_GET_TMP_KEY, k);
		kp_ssl.EVP_PKEY_free(k);
		*out = c ? c : before;
		*ret = c ? 1 : 0;
		return;
	}
	}
}

/* ------------------------------------------------------------ sessions the program changed */

/*
 * A session the program changed (SSL_SESSION_set*, wrapped: hooks_tls.c)
 * is not what its own handshake made: a hand-out's session or a
 * resumption's made from it would show the change (docs/tls.md "The
 * program's own objects").  The mark is ex_data of ours on the session, at an
 * index made at the program's first change (a program that changes no
 * session makes its indexes as alone); libssl's own copies of a session
 * (a TLS 1.3 ticket's is made from the one before, ssl_session_dup) carry
 * the mark as they carry the change.  No index: every session counts as
 * changed.
 */
static int changed_idx = -1;
static bool changed_unmarked;
static kp_mutex_t changed_lock = KP_MUTEX_INITIALIZER;

void kp_tls_session_changes(SSL_SESSION *sess)
{
	if (!sess || !kp_ssl_bind())
		return;
	int idx = __atomic_load_n(&changed_idx, __ATOMIC_ACQUIRE);
	if (idx < 0) {
		kp_lock(&changed_lock);
		idx = changed_idx;
		if (idx < 0 && !changed_unmarked) {
			idx = kp_ssl.CRYPTO_get_ex_new_index(CRYPTO_EX_INDEX_SSL_SESSION, 0, NULL, NULL, NULL, NULL);
			__atomic_store_n(&changed_idx, idx, __ATOMIC_RELEASE);
		}
		kp_unlock(&changed_lock);
	}
	if (idx < 0 || !kp_ssl.SSL_SESSION_set_ex_data(sess, idx, &changed_idx))
		__atomic_store_n(&changed_unmarked, true, __ATOMIC_RELEASE);
	kp_debug("the program changes a session: not one a hand-out's or a resumption's is made from");
}

/* The session ex_data of the program's (and our mark) on from, set on to
 * (a copy of ours made for the same SSL, not yet shown): libssl's own
 * copy of a session (a TLS 1.3 ticket's, made from the one the program
 * read before) carries them (CRYPTO_dup_ex_data: the pointers, where no
 * dup callback was given; a program that gave one is not followed,
 * kp_tls_ssl_ex_funcs).  Index 0 is SSL_SESSION_set_app_data's. */
static int sess_ex_top = -1;

void kp_tls_session_index(int idx)
{
	int top = __atomic_load_n(&sess_ex_top, __ATOMIC_ACQUIRE);
	while (idx > top && !__atomic_compare_exchange_n(&sess_ex_top, &top, idx, false, __ATOMIC_ACQ_REL,
							 __ATOMIC_ACQUIRE))
		;
}

void session_ex_carry(const SSL_SESSION *from, SSL_SESSION *to)
{
	int top = __atomic_load_n(&sess_ex_top, __ATOMIC_ACQUIRE);
	int mark = __atomic_load_n(&changed_idx, __ATOMIC_ACQUIRE);
	if (mark > top)
		top = mark;
	for (int i = 0; from && to && i <= top; i++) {
		void *v = kp_ssl.SSL_SESSION_get_ex_data(from, i);
		if (v)
			kp_ssl.SSL_SESSION_set_ex_data(to, i, v);
	}
}

bool session_changed(const SSL_SESSION *sess)
{
	if (__atomic_load_n(&changed_unmarked, __ATOMIC_ACQUIRE))
		return true;
	int idx = __atomic_load_n(&changed_idx, __ATOMIC_ACQUIRE);
	return sess && idx >= 0 && kp_ssl.SSL_SESSION_get_ex_data(sess, idx);
}
