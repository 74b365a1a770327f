/*
 * fuzz_split.c - libFuzzer harness: the response framer's two machines
 * agree (docs/cost.md).  A head whole in one buffer takes the fast path
 * (framer.c resp_head_fast); a head split across feeds is read by the
 * byte machine.  Feeding the same bytes whole, split in two at every
 * offset, and a byte at a time, must give the same events at the same
 * offsets with the same facts, and the program the same bytes (the
 * keep-alive mask).  The request parser, which reads a head whole, must
 * answer every prefix of a head consistently: 0 (more) until the head is
 * complete, then the same head, and once -1 always -1.
 *
 * Input: a control byte, then a stream of responses (at most MAX_IN bytes
 * are used: every offset is tried, so the work is quadratic).
 *   bits 0-2   method of the 1st, 3rd... response, bits 3-5 of the 2nd,
 *              4th... (GET HEAD POST CONNECT OPTIONS PUT DELETE OTHER)
 *   bit 6      rewrite_ka_to_close (and insert_close)
 *   bit 7      also parse the stream as a request head, prefix by prefix
 */
#include "framer.h"
#include "fuzz.h"

#define MAX_IN 1024
#define MAX_EVENTS 256

static const enum frm_method methods[8] = {
	FRM_M_GET,     FRM_M_HEAD, FRM_M_POST,   FRM_M_CONNECT,
	FRM_M_OPTIONS, FRM_M_PUT,  FRM_M_DELETE, FRM_M_OTHER,
};

struct event {
	int ev;
	size_t off;
	unsigned status, version;
	int kind, body_done, head_done, reusable, server_close, doubt, conn_bound;
	uint64_t body_left;
	int32_t ka_timeout, ka_max;
};

struct run {
	struct event e[MAX_EVENTS];
	size_t n;
	char out[MAX_IN]; /* the bytes as the program sees them */
};

static enum frm_method method_for(uint8_t ctl, size_t i)
{
	return methods[(i % 2 ? ctl >> 3 : ctl) & 7];
}

static void record(struct run *r, int ev, size_t off, const struct frm_resp *f)
{
	struct event *e;

	INVARIANT(r->n < MAX_EVENTS, "too many events");
	e = &r->e[r->n++];
	memset(e, 0, sizeof(*e));
	e->ev = ev;
	e->off = off;
	e->status = f->status;
	e->version = f->version_minor;
	e->kind = f->body.kind;
	e->body_done = f->body.done;
	e->body_left = f->body.left;
	e->head_done = f->head_done;
	e->reusable = frm_resp_reusable(f);
	e->server_close = f->server_close;
	e->doubt = f->doubt;
	e->conn_bound = f->conn_bound;
	e->ka_timeout = f->ka_timeout;
	e->ka_max = f->ka_max;
}

/* Feed data[0..n) in pieces of at most step bytes, the first one of
 * first bytes (0: step); each piece in a buffer of its own size. */
static void feed(const char *data, size_t n, uint8_t ctl, size_t first,
		 size_t step, struct run *r)
{
	bool rw = ctl & 0x40, stop = false;
	struct frm_resp f;
	enum frm_resp_event ev = FRM_EV_NONE;
	size_t at = 0, nresp = 0;

	r->n = 0;
	frm_resp_begin(&f, method_for(ctl, 0), rw);
	f.insert_close = rw;
	while (at < n) {
		size_t plen = at == 0 && first ? first : step, off = 0, k;
		char *p;

		if (plen > n - at)
			plen = n - at;
		p = fz_copy(data + at, plen);
		while (off < plen && !stop) {
			k = frm_resp_feed(&f, p + off, plen - off, &ev);
			INVARIANT(k <= plen - off, "consumed %zu of %zu", k, plen - off);
			off += k;
			if (ev == FRM_EV_NONE) {
				INVARIANT(off == plen, "NONE with %zu bytes left", plen - off);
				break;
			}
			record(r, ev, at + off, &f);
			if (ev == FRM_EV_DONE) {
				frm_resp_begin(&f, method_for(ctl, ++nresp), rw);
				f.insert_close = rw;
			} else if (ev == FRM_EV_ERROR || ev == FRM_EV_CLOSE_BODY ||
				   ev == FRM_EV_UPGRADE) {
				stop = true; /* the rest is not framed */
			}
		}
		memcpy(r->out + at, p, plen);
		free(p);
		at += plen;
		if (stop) {
			memcpy(r->out + at, data + at, n - at);
			break;
		}
	}
}

static void same(const struct run *a, const struct run *b, size_t n, const char *how,
		 size_t k)
{
	size_t i;

	for (i = 0; i < a->n && i < b->n; i++)
		INVARIANT(memcmp(&a->e[i], &b->e[i], sizeof(a->e[i])) == 0,
			  "%s %zu: event %zu differs (ev %d at %zu vs ev %d at %zu)", how, k, i,
			  a->e[i].ev, a->e[i].off, b->e[i].ev, b->e[i].off);
	INVARIANT(a->n == b->n, "%s %zu: %zu events vs %zu", how, k, a->n, b->n);
	INVARIANT(memcmp(a->out, b->out, n) == 0, "%s %zu: the program sees other bytes", how, k);
}

static bool same_head(const struct frm_req_head *a, const struct frm_req_head *b)
{
	return a->head_len == b->head_len && a->method == b->method &&
	       a->version_minor == b->version_minor && a->body_kind == b->body_kind &&
	       a->body_len == b->body_len && a->app_close == b->app_close &&
	       a->has_conn_header == b->has_conn_header &&
	       a->keepalive_token == b->keepalive_token && a->upgrade == b->upgrade &&
	       a->idempotency_key == b->idempotency_key &&
	       a->expect_continue == b->expect_continue && a->conn_bound == b->conn_bound &&
	       a->doubt == b->doubt && a->close_token == b->close_token &&
	       a->conn_lines == b->conn_lines &&
	       memcmp(a->conn_val, b->conn_val, sizeof(a->conn_val)) == 0;
}

/* Every prefix of data as a request head: 0 until complete, then the same
 * head; -1 stays -1. */
static void request_prefixes(const char *data, size_t n)
{
	struct frm_req_head whole, h;
	long rc = frm_req_parse_head(data, n, &whole), r;
	size_t k;
	int state = 0; /* 0: more, 1: complete, -1: refused */

	for (k = 0; k <= n; k++) {
		char *p = fz_copy(data, k);

		r = frm_req_parse_head(p, k, &h);
		free(p);
		if (state == 1) {
			INVARIANT(r == rc && same_head(&h, &whole), "prefix %zu: head differs", k);
		} else if (state == -1) {
			INVARIANT(r == -1, "prefix %zu: %ld after a refusal", k, r);
		} else if (r > 0) {
			INVARIANT(r == rc && same_head(&h, &whole), "prefix %zu: head differs", k);
			state = 1;
		} else if (r < 0) {
			INVARIANT(rc == -1, "prefix %zu refused, the whole is %ld", k, rc);
			state = -1;
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
	static struct run whole, split, bytes;
	const char *data;
	uint8_t ctl;
	size_t n, k;

	if (size < 1)
		return 0;
	ctl = in[0];
	data = (const char *)in + 1;
	n = size - 1 < MAX_IN ? size - 1 : MAX_IN;

	feed(data, n, ctl, 0, n ? n : 1, &whole);
	if (!(ctl & 0x40))
		INVARIANT(memcmp(whole.out, data, n) == 0, "bytes changed without the rewrite");
	/* split in two at every offset: the head around the cut goes to the
	 * byte machine, later heads whole to the fast path again */
	for (k = 1; k < n; k++) {
		feed(data, n, ctl, k, n, &split);
		same(&whole, &split, n, "split at", k);
	}
	feed(data, n, ctl, 0, 1, &bytes);
	same(&whole, &bytes, n, "a byte at a time", 1);
	if (ctl & 0x80)
		request_prefixes(data, n);
	return 0;
}
