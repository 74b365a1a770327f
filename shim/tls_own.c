/* tls_own.c - the objects a getter answers from kept state (a full
 * handshake's, the engine's SSL's) that the program may change, up_ref or
 * tag with ex_data: copies of its own SSL's, made at its first ask and
 * freed with its handle (or record), as libssl's are its SSL's own
 * (docs/tls.md "The program's own objects").  The values stay the first
 * handshake's ("After the handshake"); the objects are never the ones
 * another hand-out, the first owner or the broker ticket hold. */
#include "tls_internal.h"

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

/* SSL_get_peer_tmp_key, SSL_get_tmp_key of an SSL whose engine e answers
 * (routed, kp_tls_ctrl): e's key, as the handed-out SSL's own copy. */
long kp_tls_own_key(SSL *ssl, SSL *e, int cmd, long larg, void *parg)
{
	if (!parg)
		return kp_ssl.SSL_ctrl(e, cmd, larg, parg);
	EVP_PKEY *before = *(EVP_PKEY **)parg;
	long ret = kp_ssl.SSL_ctrl(e, cmd, larg, parg);
	kp_lock(&tls_lock);
	struct handle *h = handle_find(ssl);
	if (h && h->verified)
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
