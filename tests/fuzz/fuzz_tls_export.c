/*
 * fuzz_tls_export.c - libFuzzer harness for the export message's decoder
 * (shim/tls_export.c, tlsx_decode): what a hostile or broken peer could
 * send as a whole TLS connection's state through the broker.
 *
 * Input: the message itself.
 *
 * abort() unless: the decoder reads only the bytes given (the message is
 * in a buffer of its own size: ASan); a refused message always says why;
 * an accepted one points only into its bytes, encodes back to exactly
 * them (one encoding per state), has a chain of chain_count certificates
 * that tlsx_chain_cert walks inside the chain, and directions that seal a
 * record their copy opens (the state is usable as decoded).
 */
#include "fuzz.h"
#include "tls_export.h"

static int inside(const uint8_t *base, size_t len, const uint8_t *p, size_t n)
{
	return n == 0 || (p >= base && n <= len && (size_t)(p - base) <= len - n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *p = (uint8_t *)fz_copy(data, size);
	struct tlsx_state s;
	const char *why;

	if (tlsx_decode(p, size, &s, &why) != 0) {
		INVARIANT(why && *why, "refused without a reason");
		free(p);
		return 0;
	}
	INVARIANT(inside(p, size, s.alpn.p, s.alpn.len) && inside(p, size, s.sni.p, s.sni.len) &&
			  inside(p, size, s.session.p, s.session.len) && inside(p, size, s.chain.p, s.chain.len) &&
			  inside(p, size, s.conf.p, s.conf.len),
		  "a blob outside the message");
	INVARIANT(s.chain_count >= 1 && s.chain_count <= TLSX_MAX_CHAIN && s.session.len > 0, "chain, session");
	uint32_t i;
	for (i = 0;; i++) {
		const uint8_t *der;
		uint32_t n;
		if (tlsx_chain_cert(&s, i, &der, &n) != 0)
			break;
		INVARIANT(n > 0 && inside(s.chain.p, s.chain.len, der, n), "certificate %u", i);
	}
	INVARIANT(i == s.chain_count, "%u certificates of %u", i, s.chain_count);

	uint8_t *again = malloc(size ? size : 1);
	if (!again)
		abort();
	INVARIANT(tlsx_encode(&s, again, size, &why) == (int)size && !memcmp(again, p, size), "not the same bytes");
	free(again);

	uint8_t rec[64], plain[TLSREC_OPEN_ROOM], type;
	struct kp_tls_dir peer = s.tx;
	int n = tlsrec_seal(&s.tx, TLSREC_CT_DATA, (const uint8_t *)"x", 1, rec, sizeof(rec));
	if (tlsrec_seq(&peer) != UINT64_MAX) {
		INVARIANT(n > 0, "seal %d", n);
		INVARIANT(tlsrec_open(&peer, rec, (size_t)n, plain, sizeof(plain), &type) == 1 && plain[0] == 'x',
			  "open");
	}
	tlsx_wipe(&s);
	free(p);
	return 0;
}
