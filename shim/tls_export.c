/* tls_export.c - a whole TLS connection's state as bytes (tls_export.h;
 * docs/tls-across.md "The export message").  Big-endian numbers, fixed
 * fields first, then the blobs, each [u32 length][bytes]; one canonical
 * encoding: decode then encode gives the same bytes. */
#include "tls_export.h"

#include <string.h>

#include "tls_crypto.h"


struct out {
	uint8_t *p;
	size_t len, cap;
};

static void put(struct out *o, const void *d, size_t n)
{
	if (o->p && n && n <= o->cap - o->len && o->len <= o->cap)
		memcpy(o->p + o->len, d, n);
	o->len += n;
}

static void put_u8(struct out *o, uint8_t v)
{
	put(o, &v, 1);
}

static void put_u16(struct out *o, uint16_t v)
{
	uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
	put(o, b, 2);
}

static void put_u32(struct out *o, uint32_t v)
{
	uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
	put(o, b, 4);
}

static void put_dir(struct out *o, const struct kp_tls_dir *d)
{
	put(o, d->key, sizeof(d->key));
	put(o, d->iv, sizeof(d->iv));
	put(o, d->rec_seq, sizeof(d->rec_seq));
	put(o, d->traffic_secret, sizeof(d->traffic_secret));
}

static void put_blob(struct out *o, const struct tlsx_blob *b)
{
	put_u32(o, b->len);
	put(o, b->p, b->len);
}

/* the whole message through o (o->p NULL: only its length) */
static void put_state(struct out *o, const struct tlsx_state *s)
{
	put_u32(o, TLSX_MAGIC);
	put_u16(o, s->version);
	put_u16(o, s->cipher);
	put_u8(o, s->flags);
	put_u16(o, s->group);
	put_u16(o, s->peer_sigalg);
	put_u16(o, s->suite);
	put_dir(o, &s->tx);
	put_dir(o, &s->rx);
	put_u8(o, s->exporter_len);
	put(o, s->exporter, s->exporter_len);
	put(o, s->client_random, 32);
	put(o, s->server_random, 32);
	put_u8(o, s->finished_len);
	put(o, s->finished, s->finished_len);
	put_u8(o, s->peer_finished_len);
	put(o, s->peer_finished, s->peer_finished_len);
	put_blob(o, &s->alpn);
	put_blob(o, &s->sni);
	put_blob(o, &s->session);
	put_blob(o, &s->chain);
	put_blob(o, &s->conf);
}

size_t tlsx_encoded_len(const struct tlsx_state *s)
{
	struct out o = {NULL, 0, 0};
	put_state(&o, s);
	return o.len;
}

/* ------------------------------------------------------------ decoding */

struct in {
	const uint8_t *p;
	size_t len, off;
	const char *why;
};

static const uint8_t *take(struct in *r, size_t n, const char *what)
{
	if (r->why)
		return NULL;
	if (n > r->len - r->off) {
		r->why = what;
		return NULL;
	}
	const uint8_t *q = r->p + r->off;
	r->off += n;
	return q;
}

static uint32_t get_n(struct in *r, size_t n, const char *what)
{
	const uint8_t *q = take(r, n, what);
	uint32_t v = 0;
	for (size_t i = 0; q && i < n; i++)
		v = v << 8 | q[i];
	return v;
}

static void get(struct in *r, void *d, size_t n, const char *what)
{
	const uint8_t *q = take(r, n, what);
	if (q)
		memcpy(d, q, n);
	else
		memset(d, 0, n);
}

static void get_dir(struct in *r, struct kp_tls_dir *d, uint16_t version, uint16_t cipher)
{
	memset(d, 0, sizeof(*d));
	d->version = version;
	d->cipher = cipher;
	get(r, d->key, sizeof(d->key), "a direction");
	get(r, d->iv, sizeof(d->iv), "a direction");
	get(r, d->rec_seq, sizeof(d->rec_seq), "a direction");
	get(r, d->traffic_secret, sizeof(d->traffic_secret), "a direction");
}

static void get_blob(struct in *r, struct tlsx_blob *b, uint32_t max, const char *what)
{
	b->len = get_n(r, 4, what);
	if (!r->why && b->len > max)
		r->why = what;
	b->p = b->len && !r->why ? take(r, b->len, what) : NULL;
	if (!b->p)
		b->len = 0;
}

static bool zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* a direction's bytes the version and cipher do not use are zero (one
 * encoding per state) */
static bool dir_canonical(const struct kp_tls_dir *d)
{
	size_t klen = tlsrec_key_len(d->cipher), hlen = tlsrec_hash_len(d->cipher);
	size_t ivlen = d->version == TLSREC_V12 && d->cipher != TLSREC_CHACHA20_POLY1305 ? 4 : 12;
	size_t slen = d->version == TLSREC_V13 ? hlen : 0;
	return zero(d->key + klen, sizeof(d->key) - klen) && zero(d->iv + ivlen, sizeof(d->iv) - ivlen) &&
	       zero(d->traffic_secret + slen, sizeof(d->traffic_secret) - slen);
}

/* the chain: 1 to TLSX_MAX_CHAIN certificates, none empty, nothing
 * after the last; their count, or -1 */
static int chain_count(const struct tlsx_blob *b)
{
	size_t off = 0;
	int n = 0;
	while (off < b->len) {
		if (b->len - off < 4 || n == TLSX_MAX_CHAIN)
			return -1;
		uint32_t clen = (uint32_t)b->p[off] << 24 | (uint32_t)b->p[off + 1] << 16 |
				(uint32_t)b->p[off + 2] << 8 | b->p[off + 3];
		off += 4;
		if (clen == 0 || clen > b->len - off)
			return -1;
		off += clen;
		n++;
	}
	return n ? n : -1;
}

/* the groups libssl names (RFC 8446 4.2.7, RFC 8422, RFC 7919, RFC
 * 8734), by IANA number, and their NIDs (openssl/obj_mac.h) */
static const struct {
	uint16_t iana;
	int nid;
} groups[] = {
	{19, 711 /* NID_X9_62_prime192v1 */}, {21, 713 /* NID_secp224r1 */},
	{23, 415 /* NID_X9_62_prime256v1 */}, {24, 715 /* NID_secp384r1 */},
	{25, 716 /* NID_secp521r1 */},	      {26, 927 /* NID_brainpoolP256r1 */},
	{27, 931 /* NID_brainpoolP384r1 */},  {28, 933 /* NID_brainpoolP512r1 */},
	{29, 1034 /* NID_X25519 */},	      {30, 1035 /* NID_X448 */},
	{31, 927 /* brainpoolP256r1tls13 */}, {32, 931 /* brainpoolP384r1tls13 */},
	{33, 933 /* brainpoolP512r1tls13 */}, {256, 1126 /* NID_ffdhe2048 */},
	{257, 1127 /* NID_ffdhe3072 */},      {258, 1128 /* NID_ffdhe4096 */},
	{259, 1129 /* NID_ffdhe6144 */},      {260, 1130 /* NID_ffdhe8192 */},
};

int tlsx_group_nid(uint16_t group)
{
	if (!group)
		return 0;
	for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++)
		if (groups[i].iana == group)
			return groups[i].nid;
	return TLSX_NID_UNKNOWN | group;
}

uint16_t tlsx_group_iana(int nid)
{
	if ((nid & ~0xffff) == TLSX_NID_UNKNOWN)
		return (uint16_t)nid;
	/* (a NID two numbers share, the brainpool curves: TLS 1.2's number,
	 * which gives the same NID back: the answer) */
	for (size_t i = 0; nid && i < sizeof(groups) / sizeof(groups[0]); i++)
		if (groups[i].nid == nid)
			return groups[i].iana;
	return 0;
}

/* what the fixed fields must say, once read */
static const char *check_fields(const struct tlsx_state *s)
{
	bool v13 = s->version == TLSREC_V13;
	size_t hlen = tlsrec_hash_len(s->cipher);

	if (s->version != TLSREC_V12 && !v13)
		return "version";
	if (!tlsrec_key_len(s->cipher) || !hlen)
		return "cipher";
	if (tlsrec_cipher_of(s->version, s->suite) != (int)s->cipher)
		return "suite";
	if (s->flags & ~(v13 ? TLSX_RX_UPDATE_PENDING : TLSX_EXTMS | TLSX_RI))
		return "flags";
	if (!dir_canonical(&s->tx) || !dir_canonical(&s->rx))
		return "a direction's unused bytes";
	if (s->exporter_len != (v13 ? hlen : 48))
		return "exporter";
	size_t flen = v13 ? hlen : 12;
	if (s->finished_len != flen || s->peer_finished_len != flen)
		return "finished";
	return NULL;
}

int tlsx_decode(const uint8_t *p, size_t len, struct tlsx_state *s, const char **why)
{
	struct in r = {p, len, 0, NULL};

	memset(s, 0, sizeof(*s));
	*why = NULL;
	if (len > TLSX_MAX) {
		*why = "too long";
		return -1;
	}
	if (get_n(&r, 4, "magic") != TLSX_MAGIC && !r.why)
		r.why = "magic";
	s->version = (uint16_t)get_n(&r, 2, "version");
	s->cipher = (uint16_t)get_n(&r, 2, "cipher");
	s->flags = (uint8_t)get_n(&r, 1, "flags");
	s->group = (uint16_t)get_n(&r, 2, "group");
	s->peer_sigalg = (uint16_t)get_n(&r, 2, "signature algorithm");
	s->suite = (uint16_t)get_n(&r, 2, "suite");
	get_dir(&r, &s->tx, s->version, s->cipher);
	get_dir(&r, &s->rx, s->version, s->cipher);
	s->exporter_len = (uint8_t)get_n(&r, 1, "exporter");
	if (!r.why && s->exporter_len > sizeof(s->exporter))
		r.why = "exporter";
	get(&r, s->exporter, r.why ? 0 : s->exporter_len, "exporter");
	get(&r, s->client_random, 32, "randoms");
	get(&r, s->server_random, 32, "randoms");
	s->finished_len = (uint8_t)get_n(&r, 1, "finished");
	if (!r.why && s->finished_len > sizeof(s->finished))
		r.why = "finished";
	get(&r, s->finished, r.why ? 0 : s->finished_len, "finished");
	s->peer_finished_len = (uint8_t)get_n(&r, 1, "finished");
	if (!r.why && s->peer_finished_len > sizeof(s->peer_finished))
		r.why = "finished";
	get(&r, s->peer_finished, r.why ? 0 : s->peer_finished_len, "finished");
	get_blob(&r, &s->alpn, 255, "alpn");
	get_blob(&r, &s->sni, 255, "sni");
	get_blob(&r, &s->session, TLSX_MAX, "session");
	get_blob(&r, &s->chain, TLSX_MAX, "chain");
	get_blob(&r, &s->conf, TLSX_MAX, "configuration");
	if (!r.why && r.off != len)
		r.why = "bytes left over";
	if (!r.why)
		r.why = check_fields(s);
	if (!r.why && (!s->sni.len ? false : memchr(s->sni.p, 0, s->sni.len) != NULL))
		r.why = "sni";
	int n = r.why ? -1 : chain_count(&s->chain);
	if (!r.why && n < 0)
		r.why = "chain";
	if (!r.why && !s->session.len)
		r.why = "session";
	if (r.why) {
		*why = r.why;
		tlsx_wipe(s);
		return -1;
	}
	s->chain_count = (uint32_t)n;
	return 0;
}

int tlsx_encode(const struct tlsx_state *s, uint8_t *out, size_t cap, const char **why)
{
	size_t n = tlsx_encoded_len(s);
	struct tlsx_state again;

	*why = n > TLSX_MAX ? "too long" : n > cap ? "no room" : NULL;
	if (*why)
		return -1;
	struct out o = {out, 0, cap};
	put_state(&o, s);
	/* what does not decode is not sent */
	if (tlsx_decode(out, n, &again, why) != 0) {
		OPENSSL_cleanse(out, n);
		return -1;
	}
	tlsx_wipe(&again);
	return (int)n;
}

int tlsx_chain_cert(const struct tlsx_state *s, uint32_t i, const uint8_t **der, uint32_t *len)
{
	size_t off = 0;
	for (uint32_t k = 0; k < s->chain_count; k++) {
		uint32_t clen = (uint32_t)s->chain.p[off] << 24 | (uint32_t)s->chain.p[off + 1] << 16 |
				(uint32_t)s->chain.p[off + 2] << 8 | s->chain.p[off + 3];
		if (k == i) {
			*der = s->chain.p + off + 4;
			*len = clen;
			return 0;
		}
		off += 4 + (size_t)clen;
	}
	return -1;
}

void tlsx_wipe(struct tlsx_state *s)
{
	tlsrec_wipe(&s->tx);
	tlsrec_wipe(&s->rx);
	OPENSSL_cleanse(s->exporter, sizeof(s->exporter));
}
