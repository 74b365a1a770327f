/* tls_peer.c - the peer's certificate and chain a hand-out or a
 * resumption of a session of ours shows, as objects of its own SSL's
 * (docs/tls.md "The program's own objects"), in its session too. */
#include "tls_internal.h"

/* Copies of the peer's certificate and chain for a hand-out: X509_dup
 * (through DER: no ex_data, no cached state of the first owner's), the
 * chain's leaf the same object as the certificate, as libssl's
 * (tls_process_server_certificate). */
void peer_copies(X509 *leaf, STACK_OF(X509) *chain, X509 **peer, STACK_OF(X509) **peer_chain)
{
	*peer = leaf ? kp_ssl.X509_dup(leaf) : NULL;
	*peer_chain = NULL;
	OPENSSL_STACK *sk = chain && *peer ? kp_ssl.OPENSSL_sk_new_null() : NULL;
	for (int i = 0; sk && i < kp_ssl.OPENSSL_sk_num((OPENSSL_STACK *)chain); i++) {
		X509 *c = kp_ssl.OPENSSL_sk_value((OPENSSL_STACK *)chain, i);
		X509 *d = !i && !kp_ssl.X509_cmp(c, leaf) && kp_ssl.X509_up_ref(*peer) ? *peer : kp_ssl.X509_dup(c);
		if (!d || !kp_ssl.OPENSSL_sk_push(sk, d)) {
			if (d)
				kp_ssl.X509_free(d);
			kp_ssl.OPENSSL_sk_pop_free(sk, (void (*)(void *))kp_ssl.X509_free);
			sk = NULL;
		}
	}
	*peer_chain = (STACK_OF(X509) *)sk;
	if (chain && !sk && *peer) {
		kp_ssl.X509_free(*peer);
		*peer = NULL;
	}
}

/*
 * A session's peer and chain.  libssl has no setter for them, and
 * ssl_session_dup (SSL_SESSION_dup, and libssl's own copy for a TLS 1.3
 * ticket) shares both with the session copied: the first owner's
 * objects.  Its DER keeps the certificate but not the chain, which a
 * resumption of the session reads (SSL_get_peer_cert_chain reads
 * s->session->peer_chain).  So the copy's two fields are replaced where
 * they are: OpenSSL 3's struct ssl_session_st keeps `X509 *peer` and
 * `STACK_OF(X509) *peer_chain` side by side (696 bytes in, in 3.0).  The
 * place is found, not assumed: in a session whose peer and chain an SSL
 * answers (the engine's, at park and at hand-out: both known, the
 * pointers found side by side once only in its first PEER_SCAN bytes),
 * or, for a session with no chain (one from the broker, made from DER),
 * the peer followed by NULL, once only; each write checks the place
 * against libssl's getter first.  Not found: no hand-out is made
 * (handout_why), no session is kept (ticket_keep) nor offered.
 */
#define PEER_SCAN 768 /* (the struct is larger: its ext, flags and lock follow) */

static long peer_word = -1; /* the index of the peer's pointer, in words */

static long peer_find(const SSL_SESSION *s, const void *peer, const void *chain)
{
	const void *const *w = (const void *const *)s;
	long found = -1;
	for (long i = 0; peer && (size_t)(i + 2) * sizeof(void *) <= PEER_SCAN; i++) {
		if (w[i] != peer || w[i + 1] != chain)
			continue;
		if (found >= 0)
			return -1;
		found = i;
	}
	return found;
}

static void peer_learn(long i)
{
	long none = -1;
	if (i >= 0 && __atomic_compare_exchange_n(&peer_word, &none, i, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		kp_debug("a session keeps its peer certificate %zu bytes in", (size_t)i * sizeof(void *));
}

static void **peer_slot(SSL_SESSION *s);

bool session_peer_known(SSL *ssl)
{
	if (__atomic_load_n(&peer_word, __ATOMIC_ACQUIRE) >= 0)
		return true;
	SSL_SESSION *s = kp_ssl.SSL_get_session(ssl);
	STACK_OF(X509) *chain = kp_ssl.SSL_get_peer_cert_chain(ssl);
	if (s && chain)
		peer_learn(peer_find(s, kp_ssl.SSL_SESSION_get0_peer(s), chain));
	return peer_slot(s) != NULL;
}

/* the place of s's peer (checked against libssl's getter), or NULL */
static void **peer_slot(SSL_SESSION *s)
{
	X509 *peer = s ? kp_ssl.SSL_SESSION_get0_peer(s) : NULL;
	if (peer && __atomic_load_n(&peer_word, __ATOMIC_ACQUIRE) < 0)
		peer_learn(peer_find(s, peer, NULL));
	long i = __atomic_load_n(&peer_word, __ATOMIC_ACQUIRE);
	void **w = (void **)s;
	return i >= 0 && peer && w[i] == peer ? &w[i] : NULL;
}

STACK_OF(X509) *session_peer_chain(SSL_SESSION *s)
{
	void **slot = peer_slot(s);
	return slot ? slot[1] : NULL;
}

bool session_peer_give(SSL_SESSION *d, X509 *peer, STACK_OF(X509) *chain)
{
	void **slot = peer_slot(d);
	if (!slot || !peer || !kp_ssl.X509_up_ref(peer))
		return false;
	STACK_OF(X509) *c = chain ? kp_ssl.X509_chain_up_ref(chain) : NULL;
	if (chain && !c) {
		kp_ssl.X509_free(peer);
		return false;
	}
	kp_ssl.X509_free(slot[0]);
	if (slot[1])
		kp_ssl.OPENSSL_sk_pop_free(slot[1], (void (*)(void *))kp_ssl.X509_free);
	slot[0] = peer;
	slot[1] = c;
	return true;
}

/* The leaf and chain an offer of a session of ours is verified on and
 * resumed with, replaced by copies of its own (the ticket's are its
 * first owner's objects); false: they could not be copied. */
bool offer_peer_own(X509 **leaf, STACK_OF(X509) **chain)
{
	X509 *l;
	STACK_OF(X509) *c;
	peer_copies(*leaf, *chain, &l, &c);
	if (!l)
		return false;
	kp_ssl.X509_free(*leaf);
	if (*chain)
		kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)*chain, (void (*)(void *))kp_ssl.X509_free);
	*leaf = l;
	*chain = c;
	return true;
}

/* What a resumption of s answers for the peer chain of its full handshake
 * (f->chain, where it was shown): s's own chain. */
void full_chain_own(struct full *f, SSL_SESSION *s)
{
	STACK_OF(X509) *c = session_peer_chain(s);
	if (!f->chain || !c || !(c = kp_ssl.X509_chain_up_ref(c)))
		return;
	kp_ssl.OPENSSL_sk_pop_free((OPENSSL_STACK *)f->chain, (void (*)(void *))kp_ssl.X509_free);
	f->chain = c;
}
