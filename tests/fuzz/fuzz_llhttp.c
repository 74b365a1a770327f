/*
 * fuzz_llhttp.c - libFuzzer harness: our response framer against llhttp
 * (Debian's node-llhttp, built in its strict mode: the default build takes
 * any two bytes after chunk data for the CRLF) on arbitrary bytes, the
 * differential test of tests/unit/test_llhttp.c without a corpus.
 *
 * Input: byte 0 & 7 picks the request method (GET HEAD POST CONNECT OPTIONS
 * PUT DELETE OTHER); the rest is the response stream, fed whole to both,
 * up to our first final event / llhttp's first final message.  llhttp is
 * stricter in many places (it refuses what we frame leniently, without
 * pooling); a refusal is no disagreement.  abort() when both could frame
 * it and:
 * - ours says reusable, and llhttp ends a message elsewhere (1xx ends
 *   included), ends it only at EOF, or would not keep the connection;
 * - ours ends it (DONE, reusable or not) and llhttp ends it by its framing
 *   somewhere else;
 * - ours finds no end where llhttp finds one by its framing.
 */
#include "framer.h"
#include "fuzz.h"
#include "llhttp.h"

static const enum frm_method methods[8] = {
	FRM_M_GET, FRM_M_HEAD,   FRM_M_POST,   FRM_M_CONNECT,
	FRM_M_OPTIONS, FRM_M_PUT, FRM_M_DELETE, FRM_M_OTHER,
};

#define MAX_ENDS 64

struct ends {
	size_t off[MAX_ENDS]; /* message ends, 1xx included */
	size_t n;
	char last;            /* D done, C close-delimited, U upgrade, E error,
	                         N no end, F (llhttp) ended at EOF, O too many */
	bool reusable;        /* ours: frm_resp_reusable; llhttp: keep-alive */
};

/* false once there are too many ends to keep (a long run of 1xx): the
 * input is then not compared */
static bool add(struct ends *e, size_t off)
{
	if (e->n == MAX_ENDS) {
		e->last = 'O';
		return false;
	}
	e->off[e->n++] = off;
	return true;
}

static void ours(const char *data, size_t n, enum frm_method m, struct ends *e)
{
	struct frm_resp r;
	enum frm_resp_event ev;
	char *p = fz_copy(data, n);
	size_t off = 0, k;

	memset(e, 0, sizeof(*e));
	e->last = 'N';
	frm_resp_begin(&r, m, false);
	while (off < n) {
		k = frm_resp_feed(&r, p + off, n - off, &ev);
		INVARIANT(k <= n - off, "consumed %zu of %zu", k, n - off);
		off += k;
		if (ev == FRM_EV_NONE)
			break;
		if (ev == FRM_EV_INTERIM) {
			if (!add(e, off))
				break;
			continue;
		}
		e->last = "NIDCUE"[ev];
		if (ev == FRM_EV_DONE && add(e, off))
			e->reusable = frm_resp_reusable(&r);
		break;
	}
	free(p);
}

struct ll_ctx {
	enum frm_method m;
	int status;
	bool ka, done;
	bool in_trailers;     /* the head is over: fields are trailer fields */
	bool trailer_framing; /* a trailer field llhttp applies to framing */
	char name[24];
	size_t nlen;
};

/* llhttp parses trailer fields as header fields: a Transfer-Encoding,
 * Content-Length or Connection trailer changes its keep-alive verdict,
 * while trailers cannot frame or manage a connection (RFC 9110 6.5.1) and
 * we ignore them.  Noted so that its verdict is not held against ours. */
static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
	struct ll_ctx *c = p->data;
	size_t k = len < sizeof(c->name) - c->nlen ? len : sizeof(c->name) - c->nlen;

	memcpy(c->name + c->nlen, at, k);
	c->nlen += k;
	return 0;
}

static int on_header_field_complete(llhttp_t *p)
{
	struct ll_ctx *c = p->data;

	static const char *names[] = { "transfer-encoding", "content-length",
				       "connection", "keep-alive" };
	size_t k;

	for (k = 0; k < 4 && c->in_trailers; k++)
		if (c->nlen == strlen(names[k]) && fz_iprefix(c->name, c->nlen, names[k]))
			c->trailer_framing = true;
	c->nlen = 0;
	return 0;
}

static int on_headers_complete(llhttp_t *p)
{
	struct ll_ctx *c = p->data;
	int st = llhttp_get_status_code(p);

	c->in_trailers = true;

	/* RFC 9112 6.3 rule 1, which llhttp leaves to its caller */
	if (c->m == FRM_M_CONNECT && st / 100 == 2)
		return 2;
	if (c->m == FRM_M_HEAD || (st / 100 == 1 && st != 101) || st == 204 || st == 304)
		return 1;
	return 0;
}

static int on_message_complete(llhttp_t *p)
{
	struct ll_ctx *c = p->data;

	c->status = llhttp_get_status_code(p);
	c->ka = llhttp_should_keep_alive(p);
	c->done = true;
	c->in_trailers = false;
	return HPE_PAUSED;
}

static void oracle(const char *data, size_t n, enum frm_method m, struct ends *e)
{
	llhttp_settings_t st;
	llhttp_t p;
	struct ll_ctx c = { .m = m };
	size_t pos = 0;
	llhttp_errno_t err;

	memset(e, 0, sizeof(*e));
	llhttp_settings_init(&st);
	st.on_headers_complete = on_headers_complete;
	st.on_message_complete = on_message_complete;
	st.on_header_field = on_header_field;
	st.on_header_field_complete = on_header_field_complete;
	llhttp_init(&p, HTTP_RESPONSE, &st);
	p.data = &c;
	for (;;) {
		c.done = false;
		err = llhttp_execute(&p, data + pos, n - pos);
		if (err == HPE_OK)
			break;
		if (err != HPE_PAUSED) {
			e->last = err == HPE_PAUSED_UPGRADE ? 'U' : 'E';
			return;
		}
		pos = (size_t)(llhttp_get_error_pos(&p) - data);
		llhttp_resume(&p);
		if (c.status == 101 || (m == FRM_M_CONNECT && c.status / 100 == 2)) {
			e->last = 'U';
			return;
		}
		if (!add(e, pos))
			return;
		if (c.status / 100 != 1) {
			e->last = 'D';
			e->reusable = c.ka || c.trailer_framing;
			return;
		}
	}
	c.done = false;
	err = llhttp_finish(&p);
	e->last = c.done ? 'F' : err == HPE_OK ? 'N' : 'E';
}

static bool same_ends(const struct ends *a, const struct ends *b)
{
	return a->n == b->n && memcmp(a->off, b->off, a->n * sizeof(a->off[0])) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
	struct ends o, l;
	enum frm_method m;
	const char *data;
	size_t n;

	if (size < 1)
		return 0;
	m = methods[in[0] & 7];
	data = (const char *)in + 1;
	n = size - 1;
	ours(data, n, m, &o);
	oracle(data, n, m, &l);

	if (l.last == 'E' || l.last == 'U' || l.last == 'O' || o.last == 'O')
		return 0; /* llhttp refuses (or is done with HTTP): nothing to compare */
	if (o.last == 'D' && o.reusable)
		INVARIANT(l.last == 'D' && l.reusable && same_ends(&o, &l),
			  "reusable, llhttp: %c ka=%d, ends %zu vs %zu", l.last, l.reusable,
			  o.n ? o.off[o.n - 1] : 0, l.n ? l.off[l.n - 1] : 0);
	if (o.last == 'D' && l.last == 'D')
		INVARIANT(same_ends(&o, &l), "ends %zu vs llhttp %zu",
			  o.off[o.n - 1], l.off[l.n - 1]);
	if (o.last == 'N')
		INVARIANT(l.last != 'D', "no end, llhttp ends it at %zu", l.off[l.n - 1]);
	return 0;
}
