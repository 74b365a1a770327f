/*
 * test_der.c - der.h: a session's DER without what the server's ticket put
 * in it, every other element kept byte for byte; anything else refused,
 * and no read past the input (it ends at a guard page).
 */
#include <stdio.h>
#include <string.h>

#include "der.h"

#include "check.h"
#define GUARD_AREA 8192
#include "guard.h"

/* append tag, length, value */
static size_t put(unsigned char *p, unsigned char tag, const unsigned char *v, size_t n)
{
	size_t h = 0;
	p[h++] = tag;
	if (n < 0x80) {
		p[h++] = (unsigned char)n;
	} else if (n < 0x100) {
		p[h++] = 0x81;
		p[h++] = (unsigned char)n;
	} else {
		p[h++] = 0x82;
		p[h++] = (unsigned char)(n >> 8);
		p[h++] = (unsigned char)n;
	}
	memcpy(p + h, v, n);
	return h + n;
}

/* an explicit [k] around an INTEGER or OCTET STRING of n bytes of fill */
static size_t tagged(unsigned char *p, unsigned k, unsigned char inner, size_t n, unsigned char fill)
{
	unsigned char v[600], w[610];
	memset(v, fill, n);
	size_t in = put(w, inner, v, n);
	return put(p, (unsigned char)(0xa0 | k), w, in);
}

/* a session: version, ssl_version, cipher, id (id_len), master key,
 * [1] time, [2] timeout, [3]-like peer blob, then ticket fields when
 * ticket_len, and [16] ALPN.  Returns its DER's length in der. */
static size_t session(unsigned char *der, size_t id_len, size_t ticket_len, size_t peer_len)
{
	unsigned char body[4096], v[64];
	size_t b = 0;
	memset(v, 1, sizeof v);
	b += put(body + b, 0x02, (const unsigned char *)"\x01", 1);
	b += put(body + b, 0x02, (const unsigned char *)"\x03\x04", 2);
	b += put(body + b, 0x04, (const unsigned char *)"\x13\x01", 2);
	b += put(body + b, 0x04, v, id_len);
	b += put(body + b, 0x04, v, 48);
	b += tagged(body + b, 1, 0x02, 4, 7);
	b += tagged(body + b, 2, 0x02, 2, 8);
	b += tagged(body + b, 3, 0x04, peer_len, 9);
	if (ticket_len) {
		b += tagged(body + b, 9, 0x02, 3, 10);
		b += tagged(body + b, 10, 0x04, ticket_len, 11);
		b += tagged(body + b, 14, 0x02, 4, 12);
		b += tagged(body + b, 15, 0x02, 1, 13);
	}
	b += tagged(body + b, 16, 0x04, 8, 14);
	return put(der, 0x30, body, b);
}

static void strips(void)
{
	for (size_t peer = 0; peer < 600; peer += 97) {
		unsigned char with[4096], without[4096], out[4096 + 4];
		size_t n = session(with, 32, 200, peer), m = session(without, 0, 0, peer);
		const unsigned char *g = (const unsigned char *)guarded((const char *)with, n);
		size_t got = kp_der_unticketed(g, n, out);
		CHECK(got == m);
		CHECK(got == m && !memcmp(out, without, m));
		/* a session without a ticket loses only its id */
		n = session(with, 32, 0, peer);
		g = (const unsigned char *)guarded((const char *)with, n);
		got = kp_der_unticketed(g, n, out);
		CHECK(got == m && !memcmp(out, without, m));
		/* idempotent */
		g = (const unsigned char *)guarded((const char *)without, m);
		got = kp_der_unticketed(g, m, out);
		CHECK(got == m && !memcmp(out, without, m));
	}
}

static void refuses(void)
{
	unsigned char der[4096], out[4096 + 4];
	size_t n = session(der, 32, 200, 300);
	/* every truncation: refused, never read past its end */
	for (size_t i = 0; i < n; i++) {
		const unsigned char *g = (const unsigned char *)guarded((const char *)der, i);
		CHECK(kp_der_unticketed(g, i, out) == 0);
	}
	/* not a SEQUENCE; trailing bytes; the id not an OCTET STRING */
	unsigned char bad[4096];
	memcpy(bad, der, n);
	bad[0] = 0x31;
	CHECK(kp_der_unticketed(bad, n, out) == 0);
	memcpy(bad, der, n);
	bad[n] = 0;
	CHECK(kp_der_unticketed(bad, n + 1, out) == 0);
	unsigned char v[4] = { 1, 2, 3, 4 }, body[64], seq[80];
	size_t b = 0;
	for (int k = 0; k < 4; k++)
		b += put(body + b, 0x02, v, 1);
	size_t s = put(seq, 0x30, body, b);
	CHECK(kp_der_unticketed(seq, s, out) == 0);
	/* fewer than four elements */
	s = put(seq, 0x30, body, 6);
	CHECK(kp_der_unticketed(seq, s, out) == 0);
	/* an indefinite or a 4-byte length */
	unsigned char indef[] = { 0x30, 0x80, 0, 0 }, four[] = { 0x30, 0x84, 0, 0, 0, 0 };
	CHECK(kp_der_unticketed(indef, sizeof indef, out) == 0);
	CHECK(kp_der_unticketed(four, sizeof four, out) == 0);
}

int main(void)
{
	guard_init();
	strips();
	refuses();
	printf("test_der: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
