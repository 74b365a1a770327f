/*
 * fuzz_rewrite.c - libFuzzer harness for frm_req_rewrite_head (also: the
 * rewrite from the Connection lines frm_req_parse_head recorded equals the
 * one that reads the whole head again).
 *
 * Input: bytes that may start with a request head (no control header).
 * When frm_req_parse_head finds a head, it is rewritten (from a buffer of
 * exactly head_len bytes), and abort() unless:
 * - the result is never -1 with room to spare; it is 0 (no change) exactly
 *   when the program does not expect the server to close, or the head is
 *   an upgrade or doubtful, or the rewritten head would be too long for
 *   frm_req_parse_head (FRM_MAX_HEAD);
 * - every byte outside Connection header lines is kept: with the
 *   Connection lines taken out of input and output, they are equal;
 * - the output re-parses, whole, as a head with app_close false, not
 *   doubtful, and the same method, version and body framing; rewriting it
 *   again changes nothing;
 * - one byte less room gives -1, exactly enough gives the same bytes.
 */
#include "framer.h"
#include "fuzz.h"

/* s[0..n) without its Connection field lines (the first line, the request
 * line, always kept), into out; returns the length. */
static size_t strip_connection(const char *s, size_t n, char *out)
{
	size_t i = 0, o = 0, e;
	bool first = true;

	while (i < n) {
		const char *lf = memchr(s + i, '\n', n - i);

		e = lf ? (size_t)(lf - s) + 1 : n;
		if (first || !fz_iprefix(s + i, e - i, "connection:")) {
			memcpy(out + o, s + i, e - i);
			o += e - i;
		}
		first = false;
		i = e;
	}
	return o;
}

/* how many times "close" occurs in s[0..n), any case */
static size_t closes(const char *s, size_t n)
{
	size_t i, k = 0;

	for (i = 0; i + 5 <= n; i++)
		k += fz_iprefix(s + i, 5, "close");
	return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
	struct frm_req_head h, h2;
	char *head, *out, *out2, *a, *b;
	size_t cap, la, lb;
	long rc, r, r2;

	rc = frm_req_parse_head((const char *)in, size, &h);
	if (rc <= 0)
		return 0;
	/* only the head: a rewrite must not look past it */
	head = fz_copy(in, (size_t)rc);
	/* each "close" grows by 5, HTTP/1.0 gains at most 24 bytes */
	cap = 2 * (size_t)rc + 64;
	out = malloc(cap);
	r = frm_req_rewrite_head(head, &h, out, cap);
	INVARIANT(r >= 0, "rewrite failed with %zu bytes of room for %ld", cap, rc);
	/* no change exactly when none is asked for, or when the result could
	 * reach FRM_MAX_HEAD (it grows by at most 24 bytes and 5 a close) */
	INVARIANT((r == 0) == (!h.app_close || h.upgrade || h.doubt) ||
		  (r == 0 && (size_t)rc + 24 + 5 * closes(head, (size_t)rc) >= FRM_MAX_HEAD),
		  "rewrite %ld for app_close %d upgrade %d doubt %d", r, h.app_close,
		  h.upgrade, h.doubt);
	/* the rewrite from the Connection lines the parser recorded equals
	 * the one that reads the whole head again (framer.c, docs/cost.md) */
	h2 = h;
	h2.conn_lines = UINT8_MAX;
	out2 = malloc(cap);
	r2 = frm_req_rewrite_head(head, &h2, out2, cap);
	INVARIANT(r2 == r && (r == 0 || memcmp(out, out2, (size_t)r) == 0),
		  "rewrite from the recorded lines differs from a full reading: %ld vs %ld", r, r2);
	free(out2);
	if (r == 0)
		goto out;

	/* nothing but Connection lines changed */
	a = malloc((size_t)rc);
	b = malloc((size_t)r);
	la = strip_connection(head, (size_t)rc, a);
	lb = strip_connection(out, (size_t)r, b);
	INVARIANT(la == lb && memcmp(a, b, la) == 0,
		  "bytes outside Connection lines changed");
	free(a);
	free(b);

	/* a head that keeps the connection, framed as before */
	out2 = fz_copy(out, (size_t)r);
	r2 = frm_req_parse_head(out2, (size_t)r, &h2);
	INVARIANT(r2 == r, "rewritten head re-parses to %ld, not %ld", r2, r);
	INVARIANT(!h2.app_close && !h2.doubt && !h2.upgrade, "rewritten head: close %d doubt %d",
		  h2.app_close, h2.doubt);
	INVARIANT(h2.method == h.method && h2.version_minor == h.version_minor &&
		  h2.body_kind == h.body_kind && h2.body_len == h.body_len,
		  "rewritten head framed differently");
	INVARIANT(h2.idempotency_key == h.idempotency_key &&
		  h2.expect_continue == h.expect_continue, "rewritten head lost a fact");
	INVARIANT(frm_req_rewrite_head(out2, &h2, out, cap) == 0, "rewriting twice changes it");
	free(out2);

	/* room: one byte short fails, exactly enough works */
	r = frm_req_rewrite_head(head, &h, out, cap);
	out2 = malloc((size_t)r);
	INVARIANT(frm_req_rewrite_head(head, &h, out2, (size_t)r - 1) == -1, "cap r-1");
	INVARIANT(frm_req_rewrite_head(head, &h, out2, (size_t)r) == r &&
		  memcmp(out, out2, (size_t)r) == 0, "cap r");
	free(out2);
out:
	free(out);
	free(head);
	return 0;
}
