/*
 * fuzz_response.c - libFuzzer harness for the response framer
 * (frm_resp_begin, frm_resp_feed, frm_resp_reusable).
 *
 * Input: a 16-byte control header, then a stream of responses.
 *   [0]      methods: low nibble & 7 for the 1st, 3rd... response, high
 *            nibble & 7 for the 2nd, 4th... (GET HEAD POST CONNECT OPTIONS
 *            PUT DELETE OTHER)
 *   [1]      low 3 bits: number of split points (0-7)
 *   [2..15]  7 split points, 16-bit little-endian, each taken mod (len+1)
 *
 * The stream is fed whole, and in the pieces the split points make (each
 * piece in a buffer of its own size), each time without and with
 * rewrite_ka_to_close.  abort() unless:
 * - a feed never consumes more than it was given, and consumes all of it
 *   unless it reports an event;
 * - event offsets strictly increase; after ERROR the framer stays in ERROR
 *   (0 consumed), a close-delimited body or an upgrade swallows the rest;
 * - the events (kind, offset, facts) are the same however the stream is
 *   split and whether or not it rewrites;
 * - rewriting changes bytes only inside Connection header values: the
 *   bytes of an element that begins like "keep-alive" become the bytes at
 *   the same offsets of "     close" (the same length), and a split feed
 *   gives exactly the bytes the whole feed gives;
 * - facts are consistent: reusable only for a final, framed, DONE response;
 * - with the rewrite (and insert_close) a close line is asked for at most
 *   once per response, right before the blank line of a final HTTP/1.1
 *   head with no close and no keep-alive token, and changes no event.
 */
#include "framer.h"
#include "fuzz.h"

#define HDR 16
#define MAX_EVENTS 512

static const enum frm_method methods[8] = {
	FRM_M_GET, FRM_M_HEAD,   FRM_M_POST,   FRM_M_CONNECT,
	FRM_M_OPTIONS, FRM_M_PUT, FRM_M_DELETE, FRM_M_OTHER,
};

struct event {
	int ev;
	size_t off;
	unsigned status, version;
	int kind;
	int reusable, server_close, doubt, conn_bound;
	int32_t ka_timeout, ka_max;
};

struct run {
	struct event e[MAX_EVENTS];
	size_t n;
	char *out; /* the bytes as the program sees them */
};

static enum frm_method method_for(uint8_t ctl, size_t i)
{
	return methods[(i % 2 ? ctl >> 4 : ctl) & 7];
}

static void record(struct run *r, int ev, size_t off, const struct frm_resp *f)
{
	struct event *e;

	INVARIANT(r->n < MAX_EVENTS, "too many events");
	/* every message has bytes; an ERROR may be on the first byte after
	 * the last one */
	INVARIANT(r->n == 0 || off > r->e[r->n - 1].off ||
		  (ev == FRM_EV_ERROR && off == r->e[r->n - 1].off),
		  "event %d at %zu after one at %zu", ev, off, r->e[r->n - 1].off);
	e = &r->e[r->n++];
	memset(e, 0, sizeof(*e));
	e->ev = ev;
	e->off = off;
	if (ev == FRM_EV_INTERIM || ev == FRM_EV_ERROR)
		return; /* the framer has been reset / holds partial facts */
	e->status = f->status;
	e->version = f->version_minor;
	e->kind = f->body.kind;
	e->reusable = frm_resp_reusable(f);
	e->server_close = f->server_close;
	e->doubt = f->doubt;
	e->conn_bound = f->conn_bound;
	e->ka_timeout = f->ka_timeout;
	e->ka_max = f->ka_max;
	INVARIANT(f->head_done, "event %d before the head ended", ev);
	INVARIANT(f->status >= 100 && f->status <= 999, "status %u", f->status);
	if (ev == FRM_EV_DONE) {
		INVARIANT(f->status >= 200, "DONE for a %u", f->status);
		INVARIANT(f->body.kind != FRM_BODY_CLOSE, "DONE with a close-delimited body");
		INVARIANT(f->body.done, "DONE with the body not done");
	} else {
		INVARIANT(!e->reusable, "reusable after event %d", ev);
	}
	if (e->reusable)
		INVARIANT(!f->server_close && !f->doubt && !f->conn_bound,
			  "reusable with server_close/doubt/conn_bound");
}

/* Feed data[0..n) in the pieces bounds[0]=0 < ... < bounds[np]=n. */
static void feed(const char *data, size_t n, uint8_t ctl, bool rw,
		 const size_t *bounds, size_t np, struct run *r)
{
	struct frm_resp f;
	enum frm_resp_event ev = FRM_EV_NONE;
	size_t b, nresp = 0;
	bool stop = false;

	size_t inserts = 0;

	r->n = 0;
	memcpy(r->out, data, n);
	frm_resp_begin(&f, method_for(ctl, nresp), rw);
	f.insert_close = rw;
	for (b = 0; b < np && !stop; b++) {
		size_t plen = bounds[b + 1] - bounds[b], off = 0, k;
		char *p = fz_copy(data + bounds[b], plen);

		while (off < plen) {
			k = frm_resp_feed(&f, p + off, plen - off, &ev);
			INVARIANT(k <= plen - off, "consumed %zu of %zu", k, plen - off);
			off += k;
			if (ev == FRM_EV_NONE) {
				INVARIANT(off == plen, "NONE with %zu bytes left", plen - off);
				break;
			}
			if (ev == FRM_EV_INSERT) {
				/* the close line: only with the rewrite, once per
				 * final head, right before its blank line, with no
				 * close token and no keep-alive one the mask turns
				 * into close (docs/replay.md, "A closing answer") */
				INVARIANT(rw && ++inserts == 1, "a second close line");
				INVARIANT(off < plen && (p[off] == '\r' || p[off] == '\n'),
					  "close line not before the blank line");
				INVARIANT(!f.head_done && f.status >= 200 && f.version_minor >= 1 &&
						  !f.close_token && !f.ka_token,
					  "close line for a head that says close, or an interim");
				continue;
			}
			record(r, ev, bounds[b] + off, &f);
			if (ev == FRM_EV_INTERIM)
				continue;
			if (ev == FRM_EV_DONE) {
				frm_resp_begin(&f, method_for(ctl, ++nresp), rw);
				f.insert_close = rw;
				inserts = 0;
				continue;
			}
			if (ev == FRM_EV_ERROR) {
				/* sticky: nothing more is consumed */
				k = frm_resp_feed(&f, p, plen, &ev);
				INVARIANT(k == 0 && ev == FRM_EV_ERROR, "ERROR not sticky");
			} else {
				/* CLOSE_BODY, UPGRADE: the rest is not HTTP */
				k = frm_resp_feed(&f, p + off, plen - off, &ev);
				INVARIANT(k == plen - off && ev == FRM_EV_NONE,
					  "after event %d: %zu of %zu", (int)ev, k, plen - off);
			}
			stop = true;
			break;
		}
		memcpy(r->out + bounds[b], p, plen);
		free(p);
	}
	/* once stopped, later pieces are not HTTP: the framer still says so */
	if (stop && b < np && (ev == FRM_EV_CLOSE_BODY || ev == FRM_EV_UPGRADE)) {
		size_t plen = n - bounds[b], k;
		char *p = fz_copy(data + bounds[b], plen);

		k = frm_resp_feed(&f, p, plen, &ev);
		INVARIANT(k == plen && ev == FRM_EV_NONE, "later piece not swallowed");
		INVARIANT(memcmp(p, data + bounds[b], plen) == 0, "later piece modified");
		free(p);
	}
}

static bool same_events(const struct run *a, const struct run *b)
{
	return a->n == b->n && memcmp(a->e, b->e, a->n * sizeof(a->e[0])) == 0;
}

/* Every changed byte lies in an element of a Connection header value that
 * begins like "keep-alive" (the mask is decided byte by byte, framer.c
 * mask_byte), as the byte at the same offset of "     close". */
static void check_rewrite(const char *in, const char *out, size_t n)
{
	static const char to[] = "     close";
	size_t i, ls, s, j;

	for (i = 0; i < n; i++) {
		if (in[i] == out[i])
			continue;
		/* the element's start: after the colon or a comma, and OWS */
		for (s = i; s > 0 && in[s - 1] != ',' && in[s - 1] != ':' && in[s - 1] != ' ' &&
			    in[s - 1] != '\t' && in[s - 1] != '\n'; s--)
			;
		INVARIANT(i - s < 10, "changed byte %zu is %zu into its element", i, i - s);
		for (j = s; j <= i; j++)
			INVARIANT(fz_lower((unsigned char)in[j]) == (unsigned char)"keep-alive"[j - s],
				  "changed byte at %zu is not in keep-alive", i);
		INVARIANT(out[i] == to[i - s], "masked to something else at %zu", i);
		for (j = s; j > 0 && (in[j - 1] == ' ' || in[j - 1] == '\t'); j--)
			;
		INVARIANT(j > 0 && (in[j - 1] == ',' || in[j - 1] == ':'), "not a list element at %zu", i);
		for (ls = i; ls > 0 && in[ls - 1] != '\n'; ls--)
			;
		INVARIANT(fz_iprefix(in + ls, 11, "connection:") && memchr(in + ls, ':', i - ls) == in + ls + 10,
			  "not a Connection value at %zu", i);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
	static struct run whole, wrw, split, srw;
	size_t n, bounds[10], nb, k, i, j;
	const char *data;
	uint8_t ctl;

	if (size < HDR)
		return 0;
	ctl = in[0];
	data = (const char *)in + HDR;
	n = size - HDR;
	whole.out = malloc(n + 1);
	wrw.out = malloc(n + 1);
	split.out = malloc(n + 1);
	srw.out = malloc(n + 1);

	/* split points: sorted, distinct, inside (0, n) */
	nb = 0;
	bounds[nb++] = 0;
	for (k = 0; k < (size_t)(in[1] & 7); k++) {
		size_t at = (size_t)(in[2 + 2 * k] | in[3 + 2 * k] << 8) % (n + 1);

		if (at == 0 || at >= n)
			continue;
		for (i = 1; i < nb && bounds[i] < at; i++)
			;
		if (i < nb && bounds[i] == at)
			continue;
		for (j = nb; j > i; j--)
			bounds[j] = bounds[j - 1];
		bounds[i] = at;
		nb++;
	}
	bounds[nb] = n;

	{
		size_t whole_b[2] = { 0, n };

		feed(data, n, ctl, false, whole_b, 1, &whole);
		INVARIANT(memcmp(whole.out, data, n) == 0, "bytes changed without rewrite");
		feed(data, n, ctl, true, whole_b, 1, &wrw);
		INVARIANT(same_events(&whole, &wrw), "rewriting changed the events");
		check_rewrite(data, wrw.out, n);
	}
	feed(data, n, ctl, false, bounds, nb, &split);
	INVARIANT(same_events(&whole, &split), "split feed changed the events");
	INVARIANT(memcmp(split.out, data, n) == 0, "bytes changed without rewrite (split)");
	feed(data, n, ctl, true, bounds, nb, &srw);
	INVARIANT(same_events(&whole, &srw), "split rewriting feed changed the events");
	check_rewrite(data, srw.out, n);
	/* the program reads the same bytes however the stream is split */
	INVARIANT(memcmp(srw.out, wrw.out, n) == 0, "split rewrite differs");

	free(whole.out);
	free(wrw.out);
	free(split.out);
	free(srw.out);
	return 0;
}
