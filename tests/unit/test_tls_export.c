/*
 * test_tls_export.c - the export message of a whole TLS connection
 * (shim/tls_export.c): every field goes and comes back, for each version x
 * cipher; the decoded keys carry the connection on (what the decoded
 * sending direction seals the original's peer opens); every truncation,
 * an extra byte and every field out of its rule are refused with a reason;
 * every one-byte change is refused or decodes to exactly what it says
 * (one encoding per state); each message is decoded from right before a
 * PROT_NONE guard page, so an over-read crashes.
 */
#include <stdio.h>
#include <string.h>

#include <openssl/obj_mac.h>

#define GUARD_AREA 65536
#include "guard.h"
#include "tls_export.h"

#include "check.h"

static const uint8_t session[] = "an i2d_SSL_SESSION of 40 bytes or so...";
static const uint8_t chain2[] = {0, 0, 0, 3, 0x30, 1, 2, 0, 0, 0, 2, 0x30, 9};
static const uint8_t conf[] = "the configuration record";

/* the suite of version and cipher (TLS 1.2: the ECDSA one) */
static uint16_t suite_of(uint16_t version, uint16_t cipher)
{
	bool v13 = version == TLSREC_V13;
	switch (cipher) {
	case TLSREC_AES_GCM_128: return v13 ? 0x1301 : 0xc02b;
	case TLSREC_AES_GCM_256: return v13 ? 0x1302 : 0xc02c;
	}
	return v13 ? 0x1303 : 0xcca9;
}

static void make_state(struct tlsx_state *s, uint16_t version, uint16_t cipher)
{
	uint8_t secret[48], cr[32], sr[32];
	memset(s, 0, sizeof(*s));
	for (int i = 0; i < 48; i++)
		secret[i] = (uint8_t)(i + 1);
	memset(cr, 0xc1, 32);
	memset(sr, 0x5e, 32);
	size_t hlen = tlsrec_hash_len(cipher);
	s->version = version;
	s->cipher = cipher;
	s->group = 29;           /* x25519 */
	s->peer_sigalg = 0x0403; /* ecdsa_secp256r1_sha256 */
	s->suite = suite_of(version, cipher);
	if (version == TLSREC_V13) {
		CHECK(tlsrec_init13(&s->tx, cipher, secret, hlen, 3) == 0);
		secret[0] ^= 0xff;
		CHECK(tlsrec_init13(&s->rx, cipher, secret, hlen, 7) == 0);
		s->exporter_len = (uint8_t)hlen;
		s->finished_len = s->peer_finished_len = (uint8_t)hlen;
		s->flags = TLSX_RX_UPDATE_PENDING;
	} else {
		CHECK(tlsrec_init12(&s->tx, &s->rx, cipher, secret, 48, cr, sr, 1) == 0);
		s->exporter_len = 48;
		s->finished_len = s->peer_finished_len = 12;
		/* (round-trip: SSL_get_extms_support's and
		 * SSL_get_secure_renegotiation_support's answers) */
		s->flags = TLSX_EXTMS | TLSX_RI;
	}
	memset(s->exporter, 0xee, s->exporter_len);
	memcpy(s->client_random, cr, 32);
	memcpy(s->server_random, sr, 32);
	memset(s->finished, 0xf1, s->finished_len);
	memset(s->peer_finished, 0xf2, s->peer_finished_len);
	s->alpn = (struct tlsx_blob){(const uint8_t *)"http/1.1", 8};
	s->sni = (struct tlsx_blob){(const uint8_t *)"localhost", 9};
	s->session = (struct tlsx_blob){session, sizeof(session)};
	s->chain = (struct tlsx_blob){chain2, sizeof(chain2)};
	s->conf = (struct tlsx_blob){conf, sizeof(conf)};
}

static bool blob_eq(struct tlsx_blob a, struct tlsx_blob b)
{
	return a.len == b.len && (a.len == 0 || !memcmp(a.p, b.p, a.len));
}

static bool same(const struct tlsx_state *a, const struct tlsx_state *b)
{
	return a->version == b->version && a->cipher == b->cipher && a->flags == b->flags &&
	       a->group == b->group && a->peer_sigalg == b->peer_sigalg && a->suite == b->suite &&
	       !memcmp(&a->tx, &b->tx, sizeof(a->tx)) && !memcmp(&a->rx, &b->rx, sizeof(a->rx)) &&
	       a->exporter_len == b->exporter_len && !memcmp(a->exporter, b->exporter, a->exporter_len) &&
	       !memcmp(a->client_random, b->client_random, 32) && !memcmp(a->server_random, b->server_random, 32) &&
	       a->finished_len == b->finished_len && !memcmp(a->finished, b->finished, a->finished_len) &&
	       a->peer_finished_len == b->peer_finished_len &&
	       !memcmp(a->peer_finished, b->peer_finished, a->peer_finished_len) && blob_eq(a->alpn, b->alpn) &&
	       blob_eq(a->sni, b->sni) && blob_eq(a->session, b->session) && blob_eq(a->chain, b->chain) &&
	       blob_eq(a->conf, b->conf);
}

static int decode_guarded(const uint8_t *p, size_t n, struct tlsx_state *s, const char **why)
{
	const uint8_t *g = (const uint8_t *)guarded((const char *)p, n);
	int rc = tlsx_decode(g, n, s, why);
	CHECK(rc == 0 ? *why == NULL : *why != NULL && **why);
	return rc;
}

/* s, changed by one field, is refused (tlsx_encode decodes what it
 * makes) with a reason naming it */
static void refused(const struct tlsx_state *s, const char *want)
{
	static uint8_t buf[TLSX_MAX];
	const char *why = NULL;
	int n = tlsx_encode(s, buf, sizeof(buf), &why);
	CHECK(n == -1 && why && !strcmp(why, want));
	if (n != -1 || !why || strcmp(why, want))
		fprintf(stderr, "  wanted a refusal for %s, got %d (%s)\n", want, n, why ? why : "-");
}

static void one(uint16_t version, uint16_t cipher)
{
	static uint8_t buf[TLSX_MAX], flipped[TLSX_MAX];
	struct tlsx_state s, d, e;
	const char *why;

	make_state(&s, version, cipher);
	int n = tlsx_encode(&s, buf, sizeof(buf), &why);
	CHECK(n > 0 && (size_t)n == tlsx_encoded_len(&s));
	if (n <= 0)
		return;
	CHECK(tlsx_encode(&s, buf, (size_t)n - 1, &why) == -1);
	CHECK(tlsx_encode(&s, buf, sizeof(buf), &why) == n);
	CHECK(decode_guarded(buf, (size_t)n, &d, &why) == 0 && same(&s, &d));
	CHECK(d.chain_count == 2);
	const uint8_t *der;
	uint32_t dlen;
	CHECK(tlsx_chain_cert(&d, 0, &der, &dlen) == 0 && dlen == 3 && der[0] == 0x30 && der[2] == 2);
	CHECK(tlsx_chain_cert(&d, 1, &der, &dlen) == 0 && dlen == 2 && der[1] == 9);
	CHECK(tlsx_chain_cert(&d, 2, &der, &dlen) == -1);

	/* the decoded keys carry the connection on: what its sending side
	 * seals, the original's (the peer's receiving copy) opens, and the
	 * other way */
	uint8_t rec[64], plain[TLSREC_OPEN_ROOM], type;
	struct kp_tls_dir peer_rx = s.tx, peer_tx = s.rx;
	int r = tlsrec_seal(&d.tx, TLSREC_CT_DATA, (const uint8_t *)"moved", 5, rec, sizeof(rec));
	CHECK(r > 0 && tlsrec_open(&peer_rx, rec, (size_t)r, plain, sizeof(plain), &type) == 5 &&
	      !memcmp(plain, "moved", 5));
	r = tlsrec_seal(&peer_tx, TLSREC_CT_DATA, (const uint8_t *)"back", 4, rec, sizeof(rec));
	CHECK(r > 0 && tlsrec_open(&d.rx, rec, (size_t)r, plain, sizeof(plain), &type) == 4);

	/* every truncation, one byte more */
	for (size_t k = 0; k < (size_t)n; k++)
		CHECK(decode_guarded(buf, k, &e, &why) == -1);
	buf[n] = 0;
	CHECK(decode_guarded(buf, (size_t)n + 1, &e, &why) == -1 && !strcmp(why, "bytes left over"));

	/* every one-byte change: refused, or exactly what it says */
	for (size_t k = 0; k < (size_t)n; k++) {
		memcpy(flipped, buf, (size_t)n);
		flipped[k] ^= (uint8_t)(1u << (k % 8));
		if (decode_guarded(flipped, (size_t)n, &e, &why) != 0)
			continue;
		static uint8_t again[TLSX_MAX];
		CHECK(tlsx_encode(&e, again, sizeof(again), &why) == n && !memcmp(again, flipped, (size_t)n));
	}

	/* the magic; each field out of its rule */
	memcpy(flipped, buf, (size_t)n);
	flipped[0] ^= 1;
	CHECK(decode_guarded(flipped, (size_t)n, &e, &why) == -1 && !strcmp(why, "magic"));
	e = s;
	e.version = 0x0302;
	refused(&e, "version");
	e = s;
	e.cipher = 53;
	refused(&e, "cipher");
	e = s;
	e.flags = 8;
	refused(&e, "flags");
	e = s;
	e.flags = version == TLSREC_V12 ? TLSX_RX_UPDATE_PENDING : TLSX_EXTMS;
	refused(&e, "flags");
	if (version == TLSREC_V13) {
		e = s;
		e.flags = TLSX_RI; /* (TLS 1.3's ServerHello carries none) */
		refused(&e, "flags");
	}
	/* the suite: the cipher's, the version's; TLS 1.2's RSA one taken */
	e = s;
	e.suite = suite_of(version, cipher == TLSREC_AES_GCM_128 ? TLSREC_AES_GCM_256 : TLSREC_AES_GCM_128);
	refused(&e, "suite");
	e = s;
	e.suite = suite_of(version == TLSREC_V13 ? TLSREC_V12 : TLSREC_V13, cipher);
	refused(&e, "suite");
	e = s;
	e.suite = 0;
	refused(&e, "suite");
	if (version == TLSREC_V12) {
		static uint8_t rsa[TLSX_MAX];
		e = s;
		e.suite = cipher == TLSREC_AES_GCM_128 ? 0xc02f : cipher == TLSREC_AES_GCM_256 ? 0xc030 : 0xcca8;
		int m = tlsx_encode(&e, rsa, sizeof(rsa), &why);
		CHECK(m == n && decode_guarded(rsa, (size_t)m, &d, &why) == 0 && d.suite == e.suite);
	}
	e = s;
	e.tx.key[31] = 1;
	if (cipher == TLSREC_AES_GCM_128)
		refused(&e, "a direction's unused bytes");
	e = s;
	e.rx.traffic_secret[47] = 1;
	if (!(version == TLSREC_V13 && tlsrec_hash_len(cipher) == 48))
		refused(&e, "a direction's unused bytes");
	e = s;
	e.exporter_len--;
	refused(&e, "exporter");
	e = s;
	e.peer_finished_len = 0;
	refused(&e, "finished");
	e = s;
	e.session.len = 0;
	refused(&e, "session");
	e = s;
	e.chain.len = 0;
	refused(&e, "chain");
	e = s;
	e.chain.len = 5; /* a certificate cut short */
	refused(&e, "chain");
	e = s;
	e.sni = (struct tlsx_blob){(const uint8_t *)"a\0b", 3};
	refused(&e, "sni");
	static uint8_t many[17 * 5];
	for (int i = 0; i < 17; i++)
		memcpy(many + 5 * i, "\0\0\0\1\x30", 5);
	e = s;
	e.chain = (struct tlsx_blob){many, 16 * 5};
	CHECK(tlsx_encode(&e, flipped, sizeof(flipped), &why) > 0);
	e.chain = (struct tlsx_blob){many, 17 * 5};
	refused(&e, "chain");
	e = s;
	static uint8_t huge[TLSX_MAX];
	e.conf = (struct tlsx_blob){huge, TLSX_MAX - 100};
	refused(&e, "too long");

	/* the wipe */
	tlsx_wipe(&d);
	CHECK(tlsrec_seq(&d.tx) == 0 && tlsrec_key_len(d.tx.cipher) == 0 && d.exporter[0] == 0);
}

/* the group's number and NID, both ways */
static void groups(void)
{
	static const struct {
		uint16_t iana;
		int nid;
	} known[] = {{23, NID_X9_62_prime256v1}, {24, NID_secp384r1}, {25, NID_secp521r1}, {29, NID_X25519},
		     {30, NID_X448},		 {26, NID_brainpoolP256r1}, {256, NID_ffdhe2048}, {260, NID_ffdhe8192}};
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		CHECK(tlsx_group_nid(known[i].iana) == known[i].nid);
		CHECK(tlsx_group_iana(known[i].nid) == known[i].iana);
	}
	/* TLS 1.3's brainpool numbers: the same NIDs (TLS 1.2's numbers back) */
	CHECK(tlsx_group_nid(31) == NID_brainpoolP256r1 && tlsx_group_iana(NID_brainpoolP256r1) == 26);
	/* a number libssl does not know: its NID as libssl makes it */
	CHECK(tlsx_group_nid(0x6399) == (TLSX_NID_UNKNOWN | 0x6399));
	CHECK(tlsx_group_iana(TLSX_NID_UNKNOWN | 0x6399) == 0x6399);
	CHECK(tlsx_group_nid(0) == 0 && tlsx_group_iana(0) == 0);
	CHECK(tlsx_group_iana(NID_sha256) == 0);
	CHECK(tlsx_group_iana(TLSX_NID_UNKNOWN | 0x10000) == 0);
}

int main(void)
{
	guard_init();
	groups();
	for (uint16_t c = TLSREC_AES_GCM_128; c <= TLSREC_CHACHA20_POLY1305; c++) {
		if (c == 53)
			continue;
		one(TLSREC_V13, c);
		one(TLSREC_V12, c);
	}
	printf("test_tls_export: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
