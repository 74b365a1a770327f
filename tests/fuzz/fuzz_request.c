/*
 * fuzz_request.c - libFuzzer harness for the request side of the framer
 * (frm_req_parse_head, frm_body_init, frm_body_feed).
 *
 * Input: a 4-byte control header, then a stream of requests.
 *   [0..1]  a prefix length (16-bit little-endian, mod the head's length+1)
 *   [2..3]  a body split point (16-bit little-endian, mod the body's
 *           length+1)
 *
 * For each request of the stream (up to 8; each head and body in a buffer
 * of its own size), abort() unless:
 * - frm_req_parse_head: the head length never exceeds the bytes given; a
 *   longer buffer never changes a positive result (nor the facts) or turns
 *   -1 into 0: a prefix that is complete gives the same result, a prefix
 *   that is refused means the whole is refused, the prefix one byte short
 *   of the head needs more; 0 never comes from FRM_MAX_HEAD bytes or more;
 * - the facts are consistent (a body length only for LENGTH, version 0/1);
 * - frm_body_feed: never consumes more than given; fed whole, in two at the
 *   split point, and byte by byte (small bodies), the same bytes belong to
 *   the body, with the same done/doubt/error; after done it takes nothing.
 */
#include "framer.h"
#include "fuzz.h"

#define HDR 4

static long parse(const char *data, size_t len, struct frm_req_head *h)
{
	char *p = fz_copy(data, len);
	long rc = frm_req_parse_head(p, len, h);

	free(p);
	INVARIANT(rc >= -1 && (rc <= 0 || (size_t)rc <= len), "head_len %ld of %zu", rc, len);
	if (rc == 0)
		INVARIANT(len < FRM_MAX_HEAD, "0 (need more) for %zu bytes", len);
	return rc;
}

static bool same_facts(const struct frm_req_head *a, const struct frm_req_head *b)
{
	return a->head_len == b->head_len && a->method == b->method &&
	       a->version_minor == b->version_minor && a->body_kind == b->body_kind &&
	       a->body_len == b->body_len && a->app_close == b->app_close &&
	       a->has_conn_header == b->has_conn_header &&
	       a->keepalive_token == b->keepalive_token && a->upgrade == b->upgrade &&
	       a->idempotency_key == b->idempotency_key &&
	       a->expect_continue == b->expect_continue && a->doubt == b->doubt;
}

struct body_result {
	long used; /* bytes of the body, -1 on error */
	bool done, doubt;
};

/* Feed data[0..len) to a fresh body in the pieces cut at cuts[0..ncut). */
static struct body_result body_run(const struct frm_req_head *h, const char *data,
				   size_t len, const size_t *cuts, size_t ncut)
{
	struct frm_body b;
	struct body_result r = { 0, false, false };
	size_t k, from = 0;

	frm_body_init(&b, h->body_kind, h->body_len);
	for (k = 0; k <= ncut; k++) {
		size_t to = k < ncut ? cuts[k] : len, plen = to - from;
		char *p = fz_copy(data + from, plen);
		long used = frm_body_feed(&b, p, plen);

		free(p);
		INVARIANT(used >= -1 && (used < 0 || (size_t)used <= plen),
			  "body used %ld of %zu", used, plen);
		if (used < 0) {
			r.used = -1;
			break;
		}
		r.used += used;
		if (b.done) {
			INVARIANT((size_t)used <= plen, "done past the piece");
			/* after done: nothing more */
			p = fz_copy(data, len);
			INVARIANT(frm_body_feed(&b, p, len) == 0, "fed after done");
			free(p);
			break;
		}
		INVARIANT((size_t)used == plen, "not done but %ld of %zu used", used, plen);
		from = to;
	}
	r.done = b.done;
	r.doubt = b.doubt;
	return r;
}

static bool same_body(struct body_result a, struct body_result b)
{
	return a.used == b.used && a.done == b.done && (a.used < 0 || a.doubt == b.doubt);
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
	const char *data = (const char *)in + HDR;
	size_t n, off = 0, cut;
	unsigned pref, split;
	int req;

	if (size < HDR)
		return 0;
	pref = in[0] | in[1] << 8;
	split = in[2] | in[3] << 8;
	n = size - HDR;

	for (req = 0; req < 8 && off < n; req++) {
		struct frm_req_head h, hp;
		size_t len = n - off, p;
		long rc = parse(data + off, len, &h), rcp;
		struct body_result whole, two, bytes;

		/* a prefix of the bytes: never a different answer */
		p = rc > 0 ? pref % ((size_t)rc + 1) : pref % (len + 1);
		rcp = parse(data + off, p, &hp);
		if (rcp > 0)
			INVARIANT(rc == rcp && same_facts(&h, &hp),
				  "prefix %zu: %ld, whole: %ld", p, rcp, rc);
		if (rcp < 0)
			INVARIANT(rc < 0, "prefix %zu refused, whole %ld", p, rc);
		if (rc <= 0)
			break;
		rcp = parse(data + off, (size_t)rc, &hp);
		INVARIANT(rcp == rc && same_facts(&h, &hp), "the head alone: %ld, not %ld", rcp, rc);
		rcp = parse(data + off, (size_t)rc - 1, &hp);
		INVARIANT(rcp == 0, "one byte short of the head: %ld", rcp);

		INVARIANT(h.head_len == (size_t)rc, "head_len %zu, rc %ld", h.head_len, rc);
		INVARIANT(h.version_minor <= 1, "version 1.%u", h.version_minor);
		INVARIANT(h.body_kind == FRM_BODY_NONE || h.body_kind == FRM_BODY_LENGTH ||
			  h.body_kind == FRM_BODY_CHUNKED, "request body kind %d", h.body_kind);
		INVARIANT(h.body_kind == FRM_BODY_LENGTH || h.body_len == 0, "stray body_len");
		INVARIANT(!h.keepalive_token || h.has_conn_header, "keep-alive without Connection");
		off += (size_t)rc;

		/* the body, fed whole, in two, byte by byte */
		len = n - off;
		whole = body_run(&h, data + off, len, NULL, 0);
		cut = split % (len + 1);
		two = body_run(&h, data + off, len, &cut, 1);
		INVARIANT(same_body(whole, two), "split at %zu: %ld/%d vs %ld/%d", cut,
			  two.used, two.done, whole.used, whole.done);
		if (len <= 256) {
			size_t cuts[256], k;

			for (k = 0; k + 1 < len; k++)
				cuts[k] = k + 1;
			bytes = body_run(&h, data + off, len, cuts, len ? len - 1 : 0);
			INVARIANT(same_body(whole, bytes), "bytewise: %ld/%d vs %ld/%d",
				  bytes.used, bytes.done, whole.used, whole.done);
		}
		if (whole.used < 0 || !whole.done)
			break;
		off += (size_t)whole.used;
	}
	return 0;
}
