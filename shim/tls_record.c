/* tls_record.c - the TLS record layer of an established connection
 * (tls_record.h; docs/tls-across.md "Step 2: the record layer, built").
 * Pure: libcrypto's AEAD and KDFs, no system call. */
#include "tls_record.h"

#include <string.h>

#include "tls_crypto.h"


/* handshake message types (RFC 8446 4) */
#define HS_HELLO_REQUEST 0
#define HS_NEW_SESSION_TICKET 4
#define HS_KEY_UPDATE 24
#define HS_HEADER 4

/* OpenSSL's MAX_WARN_ALERT_COUNT: the fifth warning alert in a row is
 * fatal (unexpected_message, "too many warn alerts") */
#define MAX_WARNINGS 5
/* OpenSSL's MAX_EMPTY_RECORDS: more empty records in a row are
 * unexpected_message ("record too small") */
#define MAX_EMPTY 32

/* libcrypto, filled by whoever links us (tls_crypto.h) */
struct tlsrec_crypto_table tlsrec_crypto;

static void put16(uint8_t *p, size_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static size_t get16(const uint8_t *p)
{
	return (size_t)p[0] << 8 | p[1];
}

static size_t get24(const uint8_t *p)
{
	return (size_t)p[0] << 16 | (size_t)p[1] << 8 | p[2];
}

int tlsrec_cipher_of(uint16_t version, uint16_t suite)
{
	if (version == TLSREC_V13) {
		switch (suite) {
		case 0x1301: return TLSREC_AES_GCM_128;       /* TLS_AES_128_GCM_SHA256 */
		case 0x1302: return TLSREC_AES_GCM_256;       /* TLS_AES_256_GCM_SHA384 */
		case 0x1303: return TLSREC_CHACHA20_POLY1305; /* TLS_CHACHA20_POLY1305_SHA256 */
		}
	} else if (version == TLSREC_V12) {
		switch (suite) {
		case 0xC02B: /* ECDHE-ECDSA-AES128-GCM-SHA256 */
		case 0xC02F: /* ECDHE-RSA-AES128-GCM-SHA256 */
			return TLSREC_AES_GCM_128;
		case 0xC02C: /* ECDHE-ECDSA-AES256-GCM-SHA384 */
		case 0xC030: /* ECDHE-RSA-AES256-GCM-SHA384 */
			return TLSREC_AES_GCM_256;
		case 0xCCA8: /* ECDHE-RSA-CHACHA20-POLY1305 */
		case 0xCCA9: /* ECDHE-ECDSA-CHACHA20-POLY1305 */
			return TLSREC_CHACHA20_POLY1305;
		}
	}
	return TLSREC_E_UNSUPPORTED;
}

size_t tlsrec_key_len(uint16_t cipher)
{
	switch (cipher) {
	case TLSREC_AES_GCM_128: return 16;
	case TLSREC_AES_GCM_256:
	case TLSREC_CHACHA20_POLY1305: return 32;
	}
	return 0;
}

size_t tlsrec_hash_len(uint16_t cipher)
{
	switch (cipher) {
	case TLSREC_AES_GCM_128:
	case TLSREC_CHACHA20_POLY1305: return 32;
	case TLSREC_AES_GCM_256: return 48;
	}
	return 0;
}

static const EVP_MD *hash_of(uint16_t cipher)
{
	return tlsrec_hash_len(cipher) == 48 ? EVP_sha384() : EVP_sha256();
}

static const EVP_CIPHER *aead_of(uint16_t cipher)
{
	switch (cipher) {
	case TLSREC_AES_GCM_128: return EVP_aes_128_gcm();
	case TLSREC_AES_GCM_256: return EVP_aes_256_gcm();
	case TLSREC_CHACHA20_POLY1305: return EVP_chacha20_poly1305();
	}
	return NULL;
}

uint64_t tlsrec_seq(const struct kp_tls_dir *d)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | d->rec_seq[i];
	return v;
}

void tlsrec_set_seq(struct kp_tls_dir *d, uint64_t seq)
{
	for (int i = 7; i >= 0; i--, seq >>= 8)
		d->rec_seq[i] = (uint8_t)seq;
}

/* ------------------------------------------------------------ key schedules */

/* HKDF-Expand-Label(secret, label, "", out_len) (RFC 8446 7.1): HKDF in
 * expand mode with the HkdfLabel built here, the suite's hash. */
static int expand_label(uint16_t cipher, const uint8_t *secret, size_t secret_len, const char *label,
			uint8_t *out, size_t out_len)
{
	uint8_t info[2 + 1 + 6 + 12 + 1];
	size_t llen = strlen(label), n = 0;
	int ok;

	put16(info, out_len);
	info[2] = (uint8_t)(6 + llen);
	memcpy(info + 3, "tls13 ", 6);
	memcpy(info + 9, label, llen);
	n = 9 + llen;
	info[n++] = 0; /* an empty context */

	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	EVP_KDF_CTX *kctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
	int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY;
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode),
		OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST,
						 (char *)EVP_MD_get0_name(hash_of(cipher)), 0),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)secret, secret_len),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, n),
		OSSL_PARAM_construct_end(),
	};
	ok = kctx && EVP_KDF_derive(kctx, out, out_len, params) > 0;
	EVP_KDF_CTX_free(kctx);
	EVP_KDF_free(kdf);
	OPENSSL_cleanse(info, sizeof(info));
	return ok ? 0 : TLSREC_E_CRYPTO;
}

/* key and IV of a TLS 1.3 direction from its traffic secret (RFC 8446 7.3) */
static int derive13(struct kp_tls_dir *d)
{
	size_t hlen = tlsrec_hash_len(d->cipher);

	memset(d->key, 0, sizeof(d->key));
	if (expand_label(d->cipher, d->traffic_secret, hlen, "key", d->key, tlsrec_key_len(d->cipher)) ||
	    expand_label(d->cipher, d->traffic_secret, hlen, "iv", d->iv, sizeof(d->iv)))
		return TLSREC_E_CRYPTO;
	return 0;
}

int tlsrec_init13(struct kp_tls_dir *d, uint16_t cipher, const uint8_t *secret, size_t secret_len,
		  uint64_t seq)
{
	memset(d, 0, sizeof(*d));
	if (!tlsrec_key_len(cipher))
		return TLSREC_E_UNSUPPORTED;
	if (secret_len != tlsrec_hash_len(cipher))
		return TLSREC_E_UNSUPPORTED;
	d->version = TLSREC_V13;
	d->cipher = cipher;
	memcpy(d->traffic_secret, secret, secret_len);
	tlsrec_set_seq(d, seq);
	int rc = derive13(d);
	if (rc)
		tlsrec_wipe(d);
	return rc;
}

int tlsrec_key_update(struct kp_tls_dir *d)
{
	uint8_t next[48];
	size_t hlen = tlsrec_hash_len(d->cipher);

	if (d->version != TLSREC_V13 || !hlen)
		return TLSREC_E_UNSUPPORTED;
	if (expand_label(d->cipher, d->traffic_secret, hlen, "traffic upd", next, hlen))
		return TLSREC_E_CRYPTO;
	memcpy(d->traffic_secret, next, hlen);
	OPENSSL_cleanse(next, sizeof(next));
	tlsrec_set_seq(d, 0);
	return derive13(d);
}

/* TLS 1.2's PRF (RFC 5246 5) with the suite's hash: libcrypto's TLS1-PRF */
static int prf12(uint16_t cipher, const uint8_t *master, size_t master_len, const uint8_t *seed,
		 size_t seed_len, uint8_t *out, size_t out_len)
{
	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "TLS1-PRF", NULL);
	EVP_KDF_CTX *kctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST,
						 (char *)EVP_MD_get0_name(hash_of(cipher)), 0),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SECRET, (void *)master, master_len),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SEED, (void *)seed, seed_len),
		OSSL_PARAM_construct_end(),
	};
	int ok = kctx && EVP_KDF_derive(kctx, out, out_len, params) > 0;

	EVP_KDF_CTX_free(kctx);
	EVP_KDF_free(kdf);
	return ok ? 0 : TLSREC_E_CRYPTO;
}

int tlsrec_init12(struct kp_tls_dir *client, struct kp_tls_dir *server, uint16_t cipher,
		  const uint8_t *master, size_t master_len, const uint8_t client_random[32],
		  const uint8_t server_random[32], uint64_t seq)
{
	static const char label[] = "key expansion";
	uint8_t seed[sizeof(label) - 1 + 64], block[2 * 32 + 2 * 12];
	size_t klen = tlsrec_key_len(cipher);
	/* AEAD suites have no MAC key; GCM's implicit IV is 4 bytes (RFC
	 * 5288 3), ChaCha20-Poly1305's 12 (RFC 7905 2) */
	size_t ivlen = cipher == TLSREC_CHACHA20_POLY1305 ? 12 : 4;

	memset(client, 0, sizeof(*client));
	memset(server, 0, sizeof(*server));
	if (!klen || master_len != 48)
		return TLSREC_E_UNSUPPORTED;
	/* RFC 5246 6.3: server_random first */
	memcpy(seed, label, sizeof(label) - 1);
	memcpy(seed + sizeof(label) - 1, server_random, 32);
	memcpy(seed + sizeof(label) - 1 + 32, client_random, 32);
	int rc = prf12(cipher, master, master_len, seed, sizeof(seed), block, 2 * klen + 2 * ivlen);
	if (rc == 0) {
		client->version = server->version = TLSREC_V12;
		client->cipher = server->cipher = cipher;
		memcpy(client->key, block, klen);
		memcpy(server->key, block + klen, klen);
		memcpy(client->iv, block + 2 * klen, ivlen);
		memcpy(server->iv, block + 2 * klen + ivlen, ivlen);
		tlsrec_set_seq(client, seq);
		tlsrec_set_seq(server, seq);
	}
	OPENSSL_cleanse(block, sizeof(block));
	return rc;
}

/* ------------------------------------------------------------ records */

/* The nonce of the direction's current record: TLS 1.3 and 1.2
 * ChaCha20-Poly1305 the IV xor the padded sequence number (RFC 8446 5.3,
 * RFC 7905 2); 1.2 GCM the salt and the explicit part (RFC 5288 3). */
static void nonce_of(const struct kp_tls_dir *d, const uint8_t *explicit_part, uint8_t nonce[12])
{
	if (d->version == TLSREC_V12 && d->cipher != TLSREC_CHACHA20_POLY1305) {
		memcpy(nonce, d->iv, 4);
		memcpy(nonce + 4, explicit_part, 8);
		return;
	}
	memcpy(nonce, d->iv, 12);
	for (int i = 0; i < 8; i++)
		nonce[4 + i] ^= d->rec_seq[i];
}

static bool explicit_nonce(const struct kp_tls_dir *d)
{
	return d->version == TLSREC_V12 && d->cipher != TLSREC_CHACHA20_POLY1305;
}

/* TLS 1.2's additional data: seq_num, type, version, the plaintext's
 * length (RFC 5246 6.2.3.3) */
static void aad12(const struct kp_tls_dir *d, uint8_t type, size_t plain_len, uint8_t aad[13])
{
	memcpy(aad, d->rec_seq, 8);
	aad[8] = type;
	put16(aad + 9, TLSREC_V12);
	put16(aad + 11, plain_len);
}

static int bump_seq(struct kp_tls_dir *d)
{
	uint64_t s = tlsrec_seq(d);

	/* RFC 8446 5.3: a sequence number must not wrap */
	if (s == UINT64_MAX)
		return TLSREC_E_SEQ;
	tlsrec_set_seq(d, s + 1);
	return 0;
}

/* One AEAD pass: in[0..len) then, when extra is not NULL, one more byte
 * (TLS 1.3's inner type), into out; the tag sealed into or checked from
 * tag.  0, or -1 when the tag does not match or libcrypto fails. */
static int aead(const struct kp_tls_dir *d, bool enc, const uint8_t nonce[12], const uint8_t *aad,
		size_t aad_len, const uint8_t *in, size_t len, const uint8_t *extra, uint8_t *out,
		uint8_t *tag)
{
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int n, ok = c && EVP_CipherInit_ex(c, aead_of(d->cipher), NULL, d->key, nonce, enc) > 0;

	ok = ok && EVP_CipherUpdate(c, NULL, &n, aad, (int)aad_len) > 0;
	ok = ok && (len == 0 || EVP_CipherUpdate(c, out, &n, in, (int)len) > 0);
	ok = ok && (!extra || EVP_CipherUpdate(c, out + len, &n, extra, 1) > 0);
	if (!enc)
		ok = ok && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_SET_TAG, TLSREC_TAG, tag) > 0;
	ok = ok && EVP_CipherFinal_ex(c, out + len + (extra ? 1 : 0), &n) > 0;
	if (enc)
		ok = ok && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, TLSREC_TAG, tag) > 0;
	EVP_CIPHER_CTX_free(c);
	return ok ? 0 : -1;
}

int tlsrec_seal(struct kp_tls_dir *d, uint8_t type, const uint8_t *in, size_t len, uint8_t *out,
		size_t cap)
{
	bool v13 = d->version == TLSREC_V13;
	size_t xn = explicit_nonce(d) ? 8 : 0;
	size_t body = xn + len + (v13 ? 1 : 0) + TLSREC_TAG;
	uint8_t nonce[12], aad[13];

	if (!aead_of(d->cipher) || (!v13 && d->version != TLSREC_V12))
		return TLSREC_E_UNSUPPORTED;
	if (len > TLSREC_MAX_PLAIN)
		return TLSREC_E_TOO_LONG;
	if (cap < TLSREC_HEADER + body)
		return TLSREC_E_SPACE;
	if (tlsrec_seq(d) == UINT64_MAX)
		return TLSREC_E_SEQ;
	/* TLS 1.3 hides the type inside: the outer one is always
	 * application_data (RFC 8446 5.2) */
	out[0] = v13 ? TLSREC_CT_DATA : type;
	put16(out + 1, TLSREC_V12);
	put16(out + 3, body);
	/* 1.2 GCM's explicit part: the sequence number, unique per record
	 * under a key as RFC 5288 3 asks (kTLS does the same) */
	uint8_t *ct = out + TLSREC_HEADER + xn;
	if (xn)
		memcpy(out + TLSREC_HEADER, d->rec_seq, 8);
	nonce_of(d, d->rec_seq, nonce);
	if (v13)
		memcpy(aad, out, TLSREC_HEADER); /* RFC 8446 5.2: the header */
	else
		aad12(d, type, len, aad);
	if (aead(d, true, nonce, aad, v13 ? TLSREC_HEADER : 13, in, len, v13 ? &type : NULL, ct,
		 ct + len + (v13 ? 1 : 0)))
		return TLSREC_E_CRYPTO;
	bump_seq(d);
	return (int)(TLSREC_HEADER + body);
}

/* tlsrec_frame, and OpenSSL's reason for a refusal into *why (ssl3_get_record
 * of libssl 3.0: the checks and their order as measured against it,
 * docs/tls-across.md "The reader's errors") */
static int frame(uint16_t version, const uint8_t *buf, size_t len, size_t *need, int *why)
{
	bool v13 = version == TLSREC_V13;

	*need = TLSREC_HEADER;
	if (len < TLSREC_HEADER)
		return 0;
	size_t rec_version = get16(buf + 1), body = get16(buf + 3);
	*why = TLSREC_R_WRONG_VERSION_NUMBER;
	if (v13 ? buf[1] != 3 : rec_version != TLSREC_V12)
		return -TLSREC_AD_PROTOCOL_VERSION; /* (plain text: "HTTP/1.1") */
	/* TLS 1.3 after the handshake: every record is protected, its
	 * outer type application_data (RFC 8446 5: a change_cipher_spec
	 * after the peer's Finished is unexpected) */
	if (v13 && buf[0] != TLSREC_CT_DATA) {
		*why = TLSREC_R_BAD_RECORD_TYPE;
		return -TLSREC_AD_UNEXPECTED_MESSAGE;
	}
	if (v13 && rec_version != TLSREC_V12)
		return -TLSREC_AD_DECODE_ERROR;
	*why = body > TLSREC_MAX_PACKET_BODY ? TLSREC_R_PACKET_LENGTH_TOO_LONG : TLSREC_R_ENCRYPTED_LENGTH_TOO_LONG;
	if (body > (v13 ? TLSREC_MAX_BODY_13 : TLSREC_MAX_BODY_12))
		return -TLSREC_AD_RECORD_OVERFLOW;
	*why = 0;
	*need = TLSREC_HEADER + body;
	return len >= *need ? (int)*need : 0;
}

int tlsrec_frame(uint16_t version, const uint8_t *buf, size_t len, size_t *need)
{
	int why;
	return frame(version, buf, len, need, &why);
}

/* TLS 1.3: the content's length before the zero padding and the inner
 * type (RFC 8446 5.4); all zeros is unexpected_message */
static int unpad13(const uint8_t *plain, size_t n, uint8_t *type)
{
	while (n > 0 && plain[n - 1] == 0)
		n--;
	if (n == 0)
		return -TLSREC_AD_UNEXPECTED_MESSAGE;
	*type = plain[n - 1];
	return (int)(n - 1);
}

/* tlsrec_open, and OpenSSL's reason for a refusal into *why (0 where we
 * claim none) */
static int open_record(struct kp_tls_dir *d, const uint8_t *rec, size_t rec_len, uint8_t *out, size_t cap,
		       uint8_t *type, int *why)
{
	bool v13 = d->version == TLSREC_V13;
	size_t xn = explicit_nonce(d) ? 8 : 0, need;
	uint8_t nonce[12], aad[13];

	*why = 0;
	if (!aead_of(d->cipher) || (!v13 && d->version != TLSREC_V12))
		return TLSREC_E_UNSUPPORTED;
	int f = frame(d->version, rec, rec_len, &need, why);
	if (f < 0)
		return f;
	if (f == 0 || (size_t)f != rec_len)
		return -TLSREC_AD_DECODE_ERROR;
	size_t body = rec_len - TLSREC_HEADER;
	if (body < xn + TLSREC_TAG) {
		/* TLS 1.2: libssl's cipher fails (measured) */
		*why = v13 ? TLSREC_R_BAD_RECORD_MAC : TLSREC_R_INTERNAL_ERROR;
		return v13 ? -TLSREC_AD_BAD_RECORD_MAC : -TLSREC_AD_INTERNAL_ERROR;
	}
	size_t clen = body - xn - TLSREC_TAG;
	if (cap < clen)
		return TLSREC_E_SPACE;
	if (tlsrec_seq(d) == UINT64_MAX)
		return TLSREC_E_SEQ;
	nonce_of(d, rec + TLSREC_HEADER, nonce);
	if (v13)
		memcpy(aad, rec, TLSREC_HEADER);
	else
		aad12(d, rec[0], clen, aad);
	/* the tag is checked before any byte is used: a record that fails
	 * leaves out garbage that nobody reads */
	uint8_t tag[TLSREC_TAG];
	memcpy(tag, rec + TLSREC_HEADER + xn + clen, TLSREC_TAG);
	if (aead(d, false, nonce, aad, v13 ? TLSREC_HEADER : 13, rec + TLSREC_HEADER + xn, clen, NULL,
		 out, tag)) {
		*why = TLSREC_R_BAD_RECORD_MAC;
		return -TLSREC_AD_BAD_RECORD_MAC;
	}
	int n = (int)clen;
	if (v13) {
		n = unpad13(out, clen, type);
		/* as OpenSSL: the content after the padding at most 2^14
		 * (its check; RFC 8446 5.4's 2^14 + 1 for the whole inner
		 * plaintext is stricter about padding) */
		if (n >= 0 && (size_t)n > TLSREC_MAX_PLAIN)
			n = -TLSREC_AD_RECORD_OVERFLOW;
		if (n < 0)
			return n;
	} else {
		/* TLS 1.2: over 2^14 bytes of plaintext is an overflow
		 * (RFC 5246 6.2.3); a content type that is none of alert,
		 * handshake, application data is unexpected (a
		 * ChangeCipherSpec too, after the handshake) */
		if (clen > TLSREC_MAX_PLAIN)
			return -TLSREC_AD_RECORD_OVERFLOW;
		if (rec[0] < TLSREC_CT_ALERT || rec[0] > TLSREC_CT_DATA)
			return -TLSREC_AD_UNEXPECTED_MESSAGE;
		*type = rec[0];
	}
	bump_seq(d);
	return n;
}

int tlsrec_open(struct kp_tls_dir *d, const uint8_t *rec, size_t rec_len, uint8_t *out, size_t cap,
		uint8_t *type)
{
	int why;
	return open_record(d, rec, rec_len, out, cap, type, &why);
}

/* ------------------------------------------------------------ the reader */

void tlsrec_reader_init(struct tlsrec_reader *r, struct kp_tls_dir *rx, uint8_t *hs, size_t hs_cap)
{
	memset(r, 0, sizeof(*r));
	r->rx = rx;
	r->hs = hs;
	r->hs_cap = hs_cap;
}

/* The next whole handshake message in the reader's buffer, as an event;
 * 0 when there is none (yet). */
static int next_message(struct tlsrec_reader *r, struct tlsrec_ev *ev)
{
	size_t left = r->hs_len - r->hs_done;
	const uint8_t *m = r->hs + r->hs_done;

	if (left < HS_HEADER)
		return 0;
	size_t mlen = HS_HEADER + get24(m + 1);
	if (left < mlen)
		return 0;
	r->hs_done += mlen;
	bool v13 = r->rx->version == TLSREC_V13;
	/* TLS 1.3 has tickets and KeyUpdate after the handshake, no
	 * HelloRequest (RFC 8446 4); TLS 1.2 only HelloRequest */
	uint8_t mtype = m[0];
	if (v13 ? mtype == HS_HELLO_REQUEST : mtype != HS_HELLO_REQUEST)
		mtype = 255;
	switch (mtype) {
	case HS_NEW_SESSION_TICKET:
		ev->what = TLSREC_EV_TICKET;
		ev->data = m;
		ev->len = mlen;
		return 1;
	case HS_KEY_UPDATE:
		if (mlen != HS_HEADER + 1)
			return -TLSREC_AD_DECODE_ERROR;
		if (m[4] > 1) /* RFC 8446 4.6.3 */
			return -TLSREC_AD_ILLEGAL_PARAMETER;
		/* RFC 8446 5.1: a key change must come at a record's end
		 * (handshake bytes come in whole records, the messages of
		 * one given out before the next is read: the end of the
		 * buffer is the end of a record) */
		if (r->hs_done != r->hs_len)
			return -TLSREC_AD_UNEXPECTED_MESSAGE;
		if (tlsrec_key_update(r->rx))
			return -TLSREC_AD_INTERNAL_ERROR;
		ev->what = TLSREC_EV_KEY_UPDATE;
		ev->update_requested = m[4] == 1;
		return 1;
	case HS_HELLO_REQUEST:
		if (mlen != HS_HEADER)
			return -TLSREC_AD_DECODE_ERROR;
		ev->what = TLSREC_EV_RENEGOTIATE;
		return 1;
	}
	/* a post-handshake CertificateRequest (never offered) or anything
	 * else a server may not send now */
	return -TLSREC_AD_UNEXPECTED_MESSAGE;
}

/* An alert record (RFC 8446 6, OpenSSL's rules for what is fatal). */
static int on_alert(struct tlsrec_reader *r, const uint8_t *p, int n, struct tlsrec_ev *ev)
{
	bool v13 = r->rx->version == TLSREC_V13;

	/* one whole alert per record (RFC 8446 5.1) */
	if (n != 2)
		return -TLSREC_AD_DECODE_ERROR;
	uint8_t level = p[0], desc = p[1];
	if (level == 1 || (v13 && desc == TLSREC_AD_USER_CANCELED)) {
		if (++r->warnings == MAX_WARNINGS)
			return -TLSREC_AD_UNEXPECTED_MESSAGE;
	}
	if (v13 && desc == TLSREC_AD_USER_CANCELED) {
		ev->what = TLSREC_EV_NONE;
	} else if (desc == TLSREC_AD_CLOSE_NOTIFY && (v13 || level == 1)) {
		ev->what = TLSREC_EV_CLOSE;
	} else if (level == 2 || v13) {
		ev->what = TLSREC_EV_ALERT;
		ev->alert = desc;
	} else if (desc == TLSREC_AD_NO_RENEGOTIATION) {
		return -TLSREC_AD_HANDSHAKE_FAILURE;
	} else if (level == 1) {
		ev->what = TLSREC_EV_NONE; /* TLS 1.2: other warnings ignored */
	} else {
		return -TLSREC_AD_ILLEGAL_PARAMETER;
	}
	return 0;
}

/* A handshake record's content joins the partial message; RFC 8446 5.1:
 * no empty fragment. */
static int on_handshake(struct tlsrec_reader *r, const uint8_t *p, int n)
{
	if (n == 0)
		return -TLSREC_AD_UNEXPECTED_MESSAGE;
	if (r->hs_done) {
		memmove(r->hs, r->hs + r->hs_done, r->hs_len - r->hs_done);
		r->hs_len -= r->hs_done;
		r->hs_done = 0;
	}
	if ((size_t)n > r->hs_cap - r->hs_len)
		return -TLSREC_AD_INTERNAL_ERROR;
	memcpy(r->hs + r->hs_len, p, (size_t)n);
	r->hs_len += (size_t)n;
	/* a message its header says will not fit: refused now, not when
	 * its bytes have come */
	if (r->hs_len >= HS_HEADER && HS_HEADER + get24(r->hs + 1) > r->hs_cap)
		return -TLSREC_AD_INTERNAL_ERROR;
	return 0;
}

int tlsrec_read(struct tlsrec_reader *r, const uint8_t *buf, size_t len, size_t *used,
		struct tlsrec_ev *ev)
{
	uint8_t type;
	size_t need;

	memset(ev, 0, sizeof(*ev));
	*used = 0;
	r->reason = 0;
	/* the messages of a record first, one per call */
	int rc = next_message(r, ev);
	if (rc)
		return rc < 0 ? rc : 0;
	int f = frame(r->rx->version, buf, len, &need, &r->reason);
	if (f <= 0) {
		ev->need = need;
		return f;
	}
	int n = open_record(r->rx, buf, (size_t)f, r->plain, sizeof(r->plain), &type, &r->reason);
	if (n < 0)
		return n;
	*used = (size_t)f;
	if (n > 0)
		r->empty = 0;
	else if (++r->empty > MAX_EMPTY)
		return -TLSREC_AD_UNEXPECTED_MESSAGE;
	/* RFC 8446 5.1: a handshake message may not be interleaved with
	 * other records */
	if (type != TLSREC_CT_HANDSHAKE && r->hs_len != r->hs_done)
		return -TLSREC_AD_UNEXPECTED_MESSAGE;
	switch (type) {
	case TLSREC_CT_DATA:
		r->warnings = 0;
		ev->what = TLSREC_EV_DATA;
		ev->data = r->plain;
		ev->len = (size_t)n;
		return 0;
	case TLSREC_CT_ALERT:
		return on_alert(r, r->plain, n, ev);
	case TLSREC_CT_HANDSHAKE:
		rc = on_handshake(r, r->plain, n);
		if (rc)
			return rc;
		rc = next_message(r, ev);
		if (rc == 0)
			ev->what = TLSREC_EV_NONE;
		return rc < 0 ? rc : 0;
	}
	return -TLSREC_AD_UNEXPECTED_MESSAGE;
}

int tlsrec_seal_key_update(struct kp_tls_dir *tx, bool update_requested, uint8_t *out, size_t cap)
{
	const uint8_t msg[5] = {HS_KEY_UPDATE, 0, 0, 1, update_requested ? 1 : 0};

	if (tx->version != TLSREC_V13)
		return TLSREC_E_UNSUPPORTED;
	int n = tlsrec_seal(tx, TLSREC_CT_HANDSHAKE, msg, sizeof(msg), out, cap);
	if (n < 0)
		return n;
	int rc = tlsrec_key_update(tx);
	return rc ? rc : n;
}

int tlsrec_seal_close_notify(struct kp_tls_dir *tx, uint8_t *out, size_t cap)
{
	const uint8_t msg[2] = {1, TLSREC_AD_CLOSE_NOTIFY}; /* warning level */

	return tlsrec_seal(tx, TLSREC_CT_ALERT, msg, sizeof(msg), out, cap);
}

void tlsrec_wipe(struct kp_tls_dir *d)
{
	OPENSSL_cleanse(d, sizeof(*d));
}

void tlsrec_reader_wipe(struct tlsrec_reader *r)
{
	OPENSSL_cleanse(r->plain, sizeof(r->plain));
	if (r->hs)
		OPENSSL_cleanse(r->hs, r->hs_cap);
	r->hs_len = r->hs_done = 0;
}

/* ------------------------------------------------------------ counting */

void tlsrec_count(struct tlsrec_counter *c, const uint8_t *buf, size_t len)
{
	while (len > 0 && !c->bad) {
		if (c->hdr_have < TLSREC_HEADER) {
			c->hdr[c->hdr_have++] = *buf++;
			len--;
			if (c->hdr_have < TLSREC_HEADER)
				continue;
			size_t need;
			/* (a content type that is none of the four: not a TLS
			 * stream we can count) */
			if (c->hdr[0] < TLSREC_CT_CCS || c->hdr[0] > TLSREC_CT_DATA ||
			    tlsrec_frame(TLSREC_V12, c->hdr, TLSREC_HEADER, &need) < 0) {
				c->bad = true;
				return;
			}
			c->body_left = (uint32_t)(need - TLSREC_HEADER);
		} else {
			size_t take = len < c->body_left ? len : c->body_left;
			buf += take;
			len -= take;
			c->body_left -= (uint32_t)take;
		}
		if (c->body_left == 0) {
			c->records++;
			c->hdr_have = 0;
		}
	}
}

bool tlsrec_count_at_boundary(const struct tlsrec_counter *c)
{
	return !c->bad && c->hdr_have == 0;
}
