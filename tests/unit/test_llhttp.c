/*
 * test_llhttp.c - differential test of shim/framer.c against llhttp (the
 * parser of Node.js, from Debian's node-llhttp; compiled into this test
 * only, in its strict mode: see the Makefile).  Usage: test_llhttp [CORPUS_DIR]   (default tests/corpus; see its
 * README.md)
 *
 * Responses: every file of response/ and response-hand/, named
 * <name>.<METHOD> (the method of the request it answers), is fed whole,
 * split in two at every offset (over 16 KiB: every offset near a byte that
 * is not a letter or digit, and a stride) and, under 4 KiB, one byte at a
 * time, to our response framer (until DONE) and to llhttp (HTTP_RESPONSE,
 * until the first final response; no body after HEAD, 1xx, 204, 304; a
 * close-delimited body ends at llhttp_finish).  Neither may depend on the
 * split.  Then:
 * - ours reusable: llhttp must end the same messages (1xx included) at the
 *   same bytes, by their framing, and keep the connection open;
 * - ours not reusable (frm_resp_reusable() false, CLOSE_BODY, UPGRADE,
 *   ERROR): printed with our reason.  Still a failure: ours finds no end
 *   where llhttp finds one, or both find one but not the same (the shim
 *   ends the program's response where ours does).
 * Requests: every file of request/ is a stream of requests, fed to
 * frm_req_parse_head() + frm_body_*() as the shim feeds them and to llhttp
 * (HTTP_REQUEST).  Message by message, until ours refuses (passthrough),
 * doubts (no rewrite, no pooling) or meets an upgrade/CONNECT, both must
 * find the same head and body ends and agree on whether the client asked
 * to close.
 *
 * llhttp 8.1 refuses a few valid messages; where it stops on one, its input
 * is rewritten into an equivalent it accepts (oracle_fix()) and the line
 * says so.  One line per file; exit 1 on any disagreement.  Our inputs sit
 * right before a PROT_NONE page, so an over-read crashes.
 */
#include "framer.h"
#include "llhttp.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <strings.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_FILE (1u << 20)

static int failures;

/* ---------------------------------------------------------------- guard */

#define GUARD_AREA (2 * MAX_FILE)
#include "guard.h"

/* ---------------------------------------------------------------- events */

/* One event of either parser at a stream offset:
 *   I  an interim (1xx) response ended       D  a final response ended
 *   C  close-delimited body starts (ours)    U  upgrade: not HTTP after
 *   E  malformed                             N  the input ended first
 *   H  a request head ended                  B  a request (its body) ended
 *   X  ours refused the request head (not HTTP/1.x, malformed, too long) */
enum {
	F_REUSE = 1,  /* ours: frm_resp_reusable() */
	F_CLOSE = 2,  /* server_close / the request asked to close */
	F_DOUBT = 4,
	F_BOUND = 8,  /* NTLM/Negotiate */
	F_KA = 16,    /* llhttp_should_keep_alive() */
	F_EOF = 32,   /* llhttp: ended by llhttp_finish */
	F_UPG = 64,   /* request: Upgrade */
	F_TRL = 128,  /* llhttp: a framing field among the trailers */
};

struct ev {
	char k;
	size_t off;
	unsigned status; /* responses; requests: method */
	char body;       /* body kind: - L K C */
	uint64_t len;
	unsigned fl;
	const char *err; /* llhttp errno name */
};

#define MAX_EV 64
struct evs {
	struct ev e[MAX_EV];
	size_t n;
	bool overflow;
};

static struct ev *ev_add(struct evs *v, char k, size_t off)
{
	static struct ev sink;

	if (v->n == MAX_EV) {
		v->overflow = true;
		memset(&sink, 0, sizeof(sink));
		return &sink;
	}
	memset(&v->e[v->n], 0, sizeof(v->e[0]));
	v->e[v->n].k = k;
	v->e[v->n].off = off;
	return &v->e[v->n++];
}

static bool ev_eq(const struct ev *a, const struct ev *b)
{
	return a->k == b->k && a->off == b->off && a->status == b->status &&
	       a->body == b->body && a->len == b->len && a->fl == b->fl &&
	       (a->err == b->err || (a->err && b->err && !strcmp(a->err, b->err)));
}

static bool evs_eq(const struct evs *a, const struct evs *b)
{
	size_t i;

	if (a->n != b->n || a->overflow != b->overflow)
		return false;
	for (i = 0; i < a->n; i++)
		if (!ev_eq(&a->e[i], &b->e[i]))
			return false;
	return true;
}

static const char *evs_str(const struct evs *v)
{
	static char bufs[2][2048];
	static int which;
	char *s = bufs[which ^= 1];
	size_t n = 0, i;

	s[0] = '\0';
	for (i = 0; i < v->n && n < 1900; i++) {
		const struct ev *e = &v->e[i];

		n += (size_t)snprintf(s + n, 2048 - n, "%s%c", i ? " " : "", e->k);
		if (e->k != 'N')
			n += (size_t)snprintf(s + n, 2048 - n, "@%zu", e->off);
		if (e->status)
			n += (size_t)snprintf(s + n, 2048 - n, " %u", e->status);
		if (e->body)
			n += (size_t)snprintf(s + n, 2048 - n, " %c", e->body);
		if (e->body == 'L' && e->k == 'H')
			n += (size_t)snprintf(s + n, 2048 - n, "%llu",
					      (unsigned long long)e->len);
		n += (size_t)snprintf(s + n, 2048 - n, "%s%s%s%s%s%s%s%s%s%s",
				      e->fl & F_REUSE ? " reusable" : "",
				      e->fl & F_CLOSE ? " close" : "",
				      e->fl & F_DOUBT ? " doubt" : "",
				      e->fl & F_BOUND ? " bound" : "",
				      e->fl & F_KA ? " keep-alive" : "",
				      e->fl & F_EOF ? " at-eof" : "",
				      e->fl & F_UPG ? " upgrade" : "",
				      e->fl & F_TRL ? " framing-trailer" : "",
				      e->err ? " " : "", e->err ? e->err : "");
		n += (size_t)snprintf(s + n, 2048 - n, ";");
	}
	if (v->overflow)
		snprintf(s + n, 2048 - n, " ...");
	return s;
}

/* ---------------------------------------------------------------- splits */

/* Split points of an n-byte input: all of them up to 16 KiB; beyond, every
 * offset within 4 KiB of either end or next to a byte that is not a letter
 * or digit (wherever a parser can change state), and a stride of ~2000. */
static bool split_here(const char *in, size_t n, size_t k)
{
	size_t j;

	if (n <= 16384 || k < 4096 || n - k < 4096 || k % (n / 2000 + 1) == 0)
		return true;
	for (j = k - 2; j < k + 2 && j < n; j++) {
		unsigned char c = (unsigned char)in[j];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
		      (c >= 'A' && c <= 'Z')))
			return true;
	}
	return false;
}

/* ---------------------------------------------------------------- methods */

static enum frm_method method_of(const char *name)
{
	return frm_method_id(name, strlen(name));
}

static char kind_char(uint8_t kind)
{
	return "-LKC"[kind & 3];
}

/* ---------------------------------------------------------------- ours */

/* Feed in[0..n) in the pieces bounds[0] = 0 < ... < bounds[npieces] = n to
 * our response framer, until its final event; *last: the framer then. */
static void ours_resp(const char *in, size_t n, enum frm_method m,
		      const size_t *bounds, size_t npieces, struct evs *v,
		      struct frm_resp *last)
{
	struct frm_resp r;
	enum frm_resp_event ev = FRM_EV_NONE;
	struct ev *e;
	size_t b;

	memset(v, 0, sizeof(*v));
	frm_resp_begin(&r, m, false);
	for (b = 0; b < npieces; b++) {
		size_t plen = bounds[b + 1] - bounds[b], off = 0, k;
		char *p = guarded(in + bounds[b], plen);

		while (off < plen) {
			k = frm_resp_feed(&r, p + off, plen - off, &ev);
			if (k > plen - off) {
				printf("    OVERCONSUMED: %zu of %zu\n", k, plen - off);
				failures++;
				ev_add(v, 'E', bounds[b] + off)->err = "OVERCONSUMED";
				goto out;
			}
			off += k;
			if (ev == FRM_EV_NONE) {
				if (off != plen)
					ev_add(v, 'E', bounds[b] + off)->err = "SHORT";
				break;
			}
			e = ev_add(v, "NIDCUE"[ev], bounds[b] + off);
			if (ev == FRM_EV_INTERIM)
				continue;
			e->status = r.status;
			if (ev == FRM_EV_DONE) {
				e->body = kind_char(r.body.kind);
				e->fl = (frm_resp_reusable(&r) ? F_REUSE : 0) |
					(r.server_close ? F_CLOSE : 0) |
					(r.doubt ? F_DOUBT : 0) |
					(r.conn_bound ? F_BOUND : 0);
			}
			goto out;
		}
	}
	ev_add(v, 'N', n);
out:
	*last = r;
}

/* Our request side, fed as the shim feeds it: the head re-parsed whenever
 * bytes arrive (the shim keeps it), then the body piece by piece; all the
 * requests of the stream, until one is refused or upgrades. */
static void ours_req(const char *in, size_t n, const size_t *bounds,
		     size_t npieces, struct evs *v)
{
	struct frm_req_head h;
	struct frm_body body;
	struct ev *e;
	size_t b, off = 0;
	bool in_body = false, app_close = false;
	long rc;

	memset(v, 0, sizeof(*v));
	for (b = 0; b < npieces; b++) {
		size_t avail = bounds[b + 1], len;
		long used;

		while (off < avail) {
			if (!in_body) {
				len = avail - off;
				rc = frm_req_parse_head(guarded(in + off, len), len, &h);
				if (rc == 0)
					break;
				if (rc < 0 || (size_t)rc > len) {
					if (rc > 0) {
						printf("    head_len %ld > %zu given\n", rc, len);
						failures++;
					}
					ev_add(v, 'X', off);
					return;
				}
				off += (size_t)rc;
				e = ev_add(v, 'H', off);
				e->status = h.method;
				e->body = kind_char(h.body_kind);
				e->len = h.body_len;
				e->fl = (h.app_close ? F_CLOSE : 0) |
					(h.doubt ? F_DOUBT : 0) |
					(h.upgrade ? F_UPG : 0);
				if (h.upgrade || h.method == FRM_M_CONNECT)
					return;
				app_close = h.app_close;
				frm_body_init(&body, h.body_kind, h.body_len);
				in_body = true;
			}
			len = avail - off;
			used = frm_body_feed(&body, guarded(in + off, len), len);
			if (used < 0 || (size_t)used > len) {
				if (used > 0) {
					printf("    body used %ld > %zu given\n", used, len);
					failures++;
				}
				ev_add(v, 'E', off);
				return;
			}
			off += (size_t)used;
			if (!body.done)
				break;
			in_body = false;
			e = ev_add(v, 'B', off);
			e->fl = (body.doubt ? F_DOUBT : 0) | (app_close ? F_CLOSE : 0);
		}
	}
	if (off < n || in_body || n == 0)
		ev_add(v, 'N', n);
}

/* ---------------------------------------------------------------- llhttp */

struct ll_ctx {
	enum frm_method m;
	bool response;
	bool paused_head; /* the last pause was in on_headers_complete */
	int status;       /* of the message that completed */
	bool ka;          /* llhttp_should_keep_alive() at its end */
	bool completed;
	bool in_trailers; /* fields now are trailer fields */
	bool trl_framing; /* a trailer field llhttp applies to the message */
	char name[24];
	size_t nlen;
};

/* llhttp parses trailer fields like header fields: a Transfer-Encoding,
 * Content-Length or Connection trailer changes its keep-alive verdict,
 * while trailers cannot frame or manage a connection (RFC 9110 6.5.1) and
 * ours ignores them.  Noted (F_TRL) so that the verdict is not held against
 * ours. */
static int ll_header_field(llhttp_t *p, const char *at, size_t len)
{
	struct ll_ctx *c = p->data;
	size_t k = len < sizeof(c->name) - c->nlen ? len : sizeof(c->name) - c->nlen;

	memcpy(c->name + c->nlen, at, k);
	c->nlen += k;
	return 0;
}

static int ll_header_field_complete(llhttp_t *p)
{
	static const char *names[] = { "transfer-encoding", "content-length",
				       "connection", "keep-alive" };
	struct ll_ctx *c = p->data;
	size_t k;

	for (k = 0; k < 4 && c->in_trailers; k++)
		if (c->nlen == strlen(names[k]) && !strncasecmp(c->name, names[k], c->nlen))
			c->trl_framing = true;
	c->nlen = 0;
	return 0;
}

static int ll_headers_complete(llhttp_t *p)
{
	struct ll_ctx *c = p->data;
	int st = llhttp_get_status_code(p);

	c->in_trailers = true;
	if (!c->response) {
		c->paused_head = true;
		return HPE_PAUSED; /* to learn where the head ends */
	}
	/* RFC 9112 6.3 rule 1: no body in a response to HEAD, nor in a 1xx,
	 * 204 or 304, whatever its headers say: llhttp leaves this to its
	 * caller (it reads a 304's Content-Length body).  2xx to CONNECT ends
	 * HTTP on the connection. */
	if (c->m == FRM_M_CONNECT && st / 100 == 2)
		return 2;
	if (c->m == FRM_M_HEAD || (st / 100 == 1 && st != 101) || st == 204 ||
	    st == 304)
		return 1;
	return 0;
}

static int ll_message_complete(llhttp_t *p)
{
	struct ll_ctx *c = p->data;

	c->paused_head = false;
	c->completed = true;
	c->in_trailers = false;
	c->status = llhttp_get_status_code(p);
	c->ka = llhttp_should_keep_alive(p);
	return HPE_PAUSED;
}

/* a second opinion for what ours frames but does not pool: llhttp with its
 * leniency flags (invalid header bytes, TE with CL, TE without chunked) */
static bool ll_lenient;

/* Feed llhttp in the pieces and log its events like ours_resp() and
 * ours_req(): responses until the first final one, requests all. */
static void ll_run(const char *in, size_t n, bool response, enum frm_method m,
		   const size_t *bounds, size_t npieces, struct evs *v)
{
	llhttp_settings_t st;
	llhttp_t p;
	struct ll_ctx c = { .m = m, .response = response };
	struct ev *e;
	size_t b, pos;
	llhttp_errno_t err;

	memset(v, 0, sizeof(*v));
	llhttp_settings_init(&st);
	st.on_headers_complete = ll_headers_complete;
	st.on_message_complete = ll_message_complete;
	st.on_header_field = ll_header_field;
	st.on_header_field_complete = ll_header_field_complete;
	llhttp_init(&p, response ? HTTP_RESPONSE : HTTP_REQUEST, &st);
	p.data = &c;
	if (ll_lenient) {
		llhttp_set_lenient_headers(&p, 1);
		llhttp_set_lenient_chunked_length(&p, 1);
		llhttp_set_lenient_transfer_encoding(&p, 1);
	}
	for (b = 0; b < npieces; b++) {
		pos = bounds[b];
		/* after a pause, once more even with no bytes left: callbacks
		 * due at the very end (a bodyless request's end) run then */
		for (;;) {
			err = llhttp_execute(&p, in + pos, bounds[b + 1] - pos);
			if (err == HPE_OK)
				break;
			if (err == HPE_PAUSED_UPGRADE) {
				ev_add(v, 'U', (size_t)(llhttp_get_error_pos(&p) - in));
				return;
			}
			if (err != HPE_PAUSED) {
				e = ev_add(v, 'E', (size_t)(llhttp_get_error_pos(&p) - in));
				e->err = llhttp_errno_name(err);
				return;
			}
			pos = (size_t)(llhttp_get_error_pos(&p) - in);
			llhttp_resume(&p);
			if (c.paused_head) {
				ev_add(v, 'H', pos);
				continue;
			}
			if (!response) {
				ev_add(v, 'B', pos)->fl = (c.ka ? F_KA : 0) |
							  (c.trl_framing ? F_TRL : 0);
				c.trl_framing = false;
				continue;
			}
			if (c.status == 101 || (m == FRM_M_CONNECT && c.status / 100 == 2)) {
				ev_add(v, 'U', pos)->status = (unsigned)c.status;
				return;
			}
			if (c.status / 100 == 1) {
				ev_add(v, 'I', pos);
				continue;
			}
			e = ev_add(v, 'D', pos);
			e->status = (unsigned)c.status;
			e->fl = (c.ka ? F_KA : 0) | (c.trl_framing ? F_TRL : 0);
			return;
		}
	}
	c.completed = false;
	err = llhttp_finish(&p);
	if (c.completed && response) {
		e = ev_add(v, 'D', n);
		e->status = (unsigned)c.status;
		e->fl = F_EOF | (c.ka ? F_KA : 0);
	} else {
		ev_add(v, 'N', n)->err = err == HPE_OK ? NULL : llhttp_errno_name(err);
	}
}

/* ---------------------------------------------------------------- verdicts */

/* A Content-Length value: a number, or a list of that same number. */
static bool cl_value(const char *v, size_t n, uint64_t *x)
{
	size_t i = 0, d;
	bool any = false;
	uint64_t first = 0, cur;

	while (i < n) {
		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == '\r' || v[i] == ','))
			i++;
		if (i == n)
			break;
		for (cur = 0, d = 0; i < n && v[i] >= '0' && v[i] <= '9'; i++, d++)
			cur = cur * 10 + (uint64_t)(v[i] - '0');
		if (d == 0 || d > 18 || (any && cur != first))
			return false;
		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == '\r'))
			i++;
		if (i < n && v[i] != ',')
			return false;
		first = cur;
		any = true;
	}
	*x = first;
	return any;
}

/* Why a doubtful head is doubtful: a hint from its bytes (the framer keeps
 * a single flag). */
static void doubt_hint(const char *in, size_t n, bool resp, char *out, size_t cap)
{
	const char *end = in + n, *p, *q;
	size_t i, k = 0, ncl = 0;
	bool bare_lf = false, fold = false, te = false, v10, long_val = false;
	bool cl_differ = false, te_param = false, te_empty = false;
	uint64_t cl = 0, x;

	for (i = 0; i + 1 < n; i++) {
		if (in[i + 1] == '\n' &&
		    (in[i] == '\n' || (i >= 1 && in[i] == '\r' && in[i - 1] == '\n'))) {
			end = in + i + 1;
			break;
		}
	}
	for (p = in; p < end; p++) {
		size_t left;

		if (*p != '\n')
			continue;
		if (p == in || p[-1] != '\r')
			bare_lf = true;
		if (p + 1 < end && (p[1] == ' ' || p[1] == '\t'))
			fold = true;
		left = (size_t)(end - p - 1);
		q = memchr(p + 1, '\n', left);
		if (!q)
			q = end;
		if (left > 15 && !strncasecmp(p + 1, "content-length:", 15)) {
			if (!cl_value(p + 16, (size_t)(q - p - 16), &x) || (ncl && x != cl))
				cl_differ = true;
			cl = x;
			ncl++;
		}
		if (left > 18 && !strncasecmp(p + 1, "transfer-encoding:", 18)) {
			const char *v = p + 19, *ve = q, *c;

			te = true;
			/* the last coding: "chunked" followed by anything */
			for (c = ve; c > v && c[-1] != ','; c--)
				;
			while (c < ve && (*c == ' ' || *c == '\t'))
				c++;
			while (ve > c && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
				ve--;
			if (ve - c > 7 && !strncasecmp(c, "chunked", 7))
				te_param = true;
			/* an empty list element: ",," or a leading/trailing ',' */
			for (c = v;; c++) {
				while (c < ve && (*c == ' ' || *c == '\t'))
					c++;
				if (c == ve || *c == ',')
					te_empty = true;
				while (c < ve && *c != ',')
					c++;
				if (c == ve)
					break;
			}
		}
		if (q - p > 256 + 12 && (!strncasecmp(p + 1, "connection:", 11) ||
					 !strncasecmp(p + 1, "keep-alive:", 11)))
			long_val = true;
	}
	if (resp)
		v10 = n > 7 && !memcmp(in, "HTTP/1.0", 8);
	else
		v10 = memmem(in, (size_t)(end - in), "HTTP/1.0\r", 9) != NULL;
	out[0] = '\0';
#define HINT(cond, s)                                                          \
	if ((cond) && k + strlen(s) + 3 < cap)                                  \
		k += (size_t)snprintf(out + k, cap - k, "%s%s", k ? ", " : "", s)
	HINT(bare_lf, "bare LF in the head");
	HINT(fold, "obs-fold");
	HINT(ncl && te, "Transfer-Encoding with Content-Length");
	HINT(te && v10, "Transfer-Encoding in HTTP/1.0");
	HINT(cl_differ && !te, "Content-Length values that differ");
	HINT(te_param, "parameters on chunked");
	HINT(te_empty, "an empty element in Transfer-Encoding");
	HINT(long_val, "a Connection/Keep-Alive value over 256 bytes");
	HINT(k == 0 && te, "lenient chunked framing: whitespace or bare LF in a chunk line");
	HINT(k == 0, "see the bytes");
#undef HINT
}

/* Our reason for "not reusable" (NULL: reusable). */
static const char *resp_reason(const struct evs *v, const struct frm_resp *r,
			       const char *in, size_t n)
{
	static char why[320];
	const struct ev *e = &v->e[v->n - 1];
	char hint[160];
	size_t k = 0;

	switch (e->k) {
	case 'C':
		snprintf(why, sizeof(why), "close-delimited body (%s)",
			 r->have_te ? "Transfer-Encoding not ending in chunked"
				    : "neither Content-Length nor Transfer-Encoding");
		return why;
	case 'U':
		snprintf(why, sizeof(why), "%u %s: not HTTP after it", e->status,
			 e->status == 101 ? "Switching Protocols" : "to CONNECT");
		return why;
	case 'E':
		snprintf(why, sizeof(why), "ERROR at %zu: malformed, no end can be found",
			 e->off);
		return why;
	case 'N':
		return "incomplete: the response does not end in the file";
	default:
		break;
	}
	if (e->fl & F_REUSE)
		return NULL;
	why[0] = '\0';
	if (r->server_close)
		k += (size_t)snprintf(why + k, sizeof(why) - k, "%s",
				      r->close_token ? "Connection: close"
						     : "HTTP/1.0 without keep-alive");
	if (r->conn_bound)
		k += (size_t)snprintf(why + k, sizeof(why) - k,
				      "%sNTLM/Negotiate binds the connection", k ? "; " : "");
	if (r->doubt) {
		doubt_hint(in, n, true, hint, sizeof(hint));
		k += (size_t)snprintf(why + k, sizeof(why) - k, "%sdoubt: %s",
				      k ? "; " : "", hint);
	}
	if (k == 0)
		snprintf(why, sizeof(why), "status %u", r->status);
	return why;
}

/* The message ends of a response log, as comparable text: I@off, D@off, and
 * D@eof for a body that ends when the server closes (our C, llhttp's end at
 * llhttp_finish). */
static void resp_ends(const struct evs *v, char *out, size_t cap)
{
	size_t i, k = 0;

	out[0] = '\0';
	for (i = 0; i < v->n && k + 24 < cap; i++) {
		const struct ev *e = &v->e[i];

		if (e->k == 'C' || (e->k == 'D' && (e->fl & F_EOF)))
			k += (size_t)snprintf(out + k, cap - k, "D@eof ");
		else if (e->k == 'I' || e->k == 'D')
			k += (size_t)snprintf(out + k, cap - k, "%c@%zu ", e->k, e->off);
	}
}

/* ---------------------------------------------------------------- oracle */

/* llhttp 8.1 refuses some valid messages.  When it stops with one of these
 * errors, the line it stopped on is rewritten - length-preserving, into an
 * equivalent the oracle accepts - and it is run again:
 * - "Content-Length: 8, 8" and a repeated "Content-Length: 8" (RFC 9112
 *   6.3 rule 5 / RFC 9110 8.6: the one value; docs/design.md §3.4): the list becomes
 *   "8" padded with spaces, the repeated header "Xontent-Length", provided
 *   every Content-Length value of the head is that same number;
 * - several chunk extensions after a token value, "1A;a=1;b=2" (valid, RFC
 *   9112 7.1.1; llhttp fixed this after 8.1: nodejs/llhttp#248): the
 *   extensions become one name, ";aaaaaaaaa".
 * Returns a label for the fix made, NULL if none applies. */
static const char *oracle_fix(char *buf, size_t n, const struct ev *err)
{
	size_t ls, le, i, e2, hs;
	uint64_t v, w;
	char num[32];

	if (!err->err || err->off > n)
		return NULL;
	/* the line the error is on */
	for (ls = err->off < n ? err->off : n; ls > 0 && buf[ls - 1] != '\n'; ls--)
		;
	for (le = ls; le < n && buf[le] != '\r' && buf[le] != '\n'; le++)
		;
	if (!strcmp(err->err, "HPE_INVALID_CONTENT_LENGTH") ||
	    !strcmp(err->err, "HPE_UNEXPECTED_CONTENT_LENGTH")) {
		if (le - ls < 15 || strncasecmp(buf + ls, "content-length:", 15) ||
		    !cl_value(buf + ls + 15, le - ls - 15, &v))
			return NULL;
		/* every Content-Length of this head holds that same number;
		 * the head starts after the last blank line before ls */
		for (hs = ls; hs >= 2; hs--)
			if (buf[hs - 1] == '\n' && (buf[hs - 2] == '\n' ||
			    (hs >= 3 && buf[hs - 2] == '\r' && buf[hs - 3] == '\n')))
				break;
		if (hs < 2)
			hs = 0;
		for (i = hs; i < n; i = e2 + 1) {
			for (e2 = i; e2 < n && buf[e2] != '\n'; e2++)
				;
			if (buf[i] == '\r' || buf[i] == '\n')
				break; /* the blank line */
			if (e2 - i < 15 || strncasecmp(buf + i, "content-length:", 15))
				continue;
			if (!cl_value(buf + i + 15, e2 - i - 15 - (buf[e2 - 1] == '\r'), &w) ||
			    w != v)
				return NULL;
		}
		if (!strcmp(err->err, "HPE_UNEXPECTED_CONTENT_LENGTH")) {
			buf[ls] = 'X';
			return "repeated Content-Length hidden";
		}
		snprintf(num, sizeof(num), " %llu", (unsigned long long)v);
		if (strlen(num) > le - ls - 15)
			return NULL;
		memset(buf + ls + 15, ' ', le - ls - 15);
		memcpy(buf + ls + 15, num, strlen(num));
		return "Content-Length list folded";
	}
	if (!strcmp(err->err, "HPE_INVALID_CHUNK_SIZE")) {
		for (i = ls; i < le && isxdigit((unsigned char)buf[i]); i++)
			;
		/* only the llhttp 8.1 bug: a second extension after a token
		 * value; never a malformed size */
		if (i == ls || i == le || buf[i] != ';' ||
		    !memchr(buf + i + 1, ';', le - i - 1) || !memchr(buf + i, '=', le - i))
			return NULL;
		memset(buf + i + 1, 'a', le - i - 1);
		return "chunk extensions merged";
	}
	return NULL;
}

/* Run llhttp on in (whole), rewriting what oracle_fix() fixes, until it
 * gets past them; the labels of the fixes in *fixes. */
static void ll_fixed(const char *in, size_t n, bool resp, enum frm_method m,
		     struct evs *ll, char *fixes, size_t cap)
{
	static char *buf;
	size_t bounds[2] = { 0, n }, k = 0;
	const char *label;
	int round;

	if (!buf)
		buf = malloc(MAX_FILE + 1);
	memcpy(buf, in, n);
	fixes[0] = '\0';
	for (round = 0; round < 16; round++) {
		const struct ev *last;

		ll_run(buf, n, resp, m, bounds, 1, ll);
		last = &ll->e[ll->n - 1];
		if (last->k != 'E' || !(label = oracle_fix(buf, n, last)))
			return;
		if (k + strlen(label) + 16 < cap)
			k += (size_t)snprintf(fixes + k, cap - k, "%s%s at %zu",
					      k ? ", " : "", label, last->off);
	}
}

/* ---------------------------------------------------------------- responses */

static size_t *bounds_buf;

/* Both parsers, fed whole, in two at every split point, and byte by byte:
 * each must give the same log every time.  False (and a FAIL line) if not. */
static bool run_both(const char *name, const char *in, size_t n, bool resp,
		     enum frm_method m, struct evs *ours, struct evs *ll,
		     struct frm_resp *last)
{
	static struct evs o2, l2;
	struct frm_resp r2;
	const char *who = NULL;
	size_t k, at = 0;

	bounds_buf[0] = 0;
	bounds_buf[1] = n;
	if (resp)
		ours_resp(in, n, m, bounds_buf, 1, ours, last);
	else
		ours_req(in, n, bounds_buf, 1, ours);
	ll_run(in, n, resp, m, bounds_buf, 1, ll);
	for (k = 1; k <= n && !who; k++) {
		size_t np = 2;

		if (k == n) { /* one byte at a time */
			if (n >= 4096)
				break;
			for (np = 0; np <= n; np++)
				bounds_buf[np] = np;
			np = n;
		} else if (split_here(in, n, k)) {
			bounds_buf[1] = k;
			bounds_buf[2] = n;
		} else {
			continue;
		}
		if (resp)
			ours_resp(in, n, m, bounds_buf, np, &o2, &r2);
		else
			ours_req(in, n, bounds_buf, np, &o2);
		ll_run(in, n, resp, m, bounds_buf, np, &l2);
		if (!evs_eq(&o2, ours))
			who = "ours";
		else if (!evs_eq(&l2, ll))
			who = "llhttp's";
		at = k;
	}
	if (!who)
		return true;
	printf("%-9s%-30s FAIL: %s events depend on the split (%s %zu)\n"
	       "    whole: ours [%s] llhttp [%s]\n    split: ours [%s] llhttp [%s]\n",
	       resp ? "response" : "request", name, who,
	       at == n ? "bytewise" : "at", at, evs_str(ours), evs_str(ll),
	       evs_str(&o2), evs_str(&l2));
	failures++;
	return false;
}

/* Ours reusable: llhttp must end the same messages at the same bytes, by
 * their framing (not at EOF), and keep the connection open. */
static bool resp_agree(const struct evs *ours, const struct evs *ll)
{
	const struct ev *fin = &ll->e[ll->n - 1];
	char eo[512], el[512];

	resp_ends(ours, eo, sizeof(eo));
	resp_ends(ll, el, sizeof(el));
	return !strcmp(eo, el) && fin->k == 'D' && !(fin->fl & F_EOF) &&
	       (fin->fl & (F_KA | F_TRL));
}

static void resp_file(const char *name, const char *in, size_t n)
{
	const char *dot = strrchr(name, '.');
	enum frm_method m = method_of(dot ? dot + 1 : "GET");
	static struct evs ours, ll, l2;
	struct frm_resp last;
	char eo[512], el[512], fixes[256];
	size_t bounds[2] = { 0, n };
	const char *why;

	if (!run_both(name, in, n, true, m, &ours, &ll, &last))
		return;
	resp_ends(&ours, eo, sizeof(eo));
	why = resp_reason(&ours, &last, in, n);
	if (ours.e[ours.n - 1].k == 'N' && ll.e[ll.n - 1].k == 'D' &&
	    !(ll.e[ll.n - 1].fl & F_EOF)) {
		/* not an excuse: the shim would wait for an end that came */
		printf("response %-30s FAIL: ours finds no end, llhttp does\n"
		       "    ours [%s] llhttp [%s]\n", name, evs_str(&ours), evs_str(&ll));
		failures++;
		return;
	}
	resp_ends(&ll, el, sizeof(el));
	if (why && ours.e[ours.n - 1].k == 'D' && ll.e[ll.n - 1].k == 'D' &&
	    !(ll.e[ll.n - 1].fl & F_EOF) && strcmp(eo, el)) {
		/* not pooled, but where ours ends it the shim may end the
		 * program's response (EOF owed): both found an end, so it
		 * must be the same one */
		printf("response %-30s FAIL: not reusable, but ours ends it elsewhere\n"
		       "    ours [%s] llhttp [%s]\n", name, evs_str(&ours), evs_str(&ll));
		failures++;
		return;
	}
	if (why) {
		if (!strcmp(eo, el)) {
			printf("response %-30s ours not reusable: %s; ends agree\n", name, why);
			return;
		}
		ll_lenient = true;
		ll_run(in, n, true, m, bounds, 1, &l2);
		ll_lenient = false;
		resp_ends(&l2, el, sizeof(el));
		printf("response %-30s ours not reusable: %s; ends %s\n"
		       "    ours [%s] llhttp [%s]\n", name, why,
		       strcmp(eo, el) ? "differ, also from lenient llhttp"
				      : "agree with lenient llhttp only",
		       evs_str(&ours), evs_str(&ll));
		return;
	}
	if (resp_agree(&ours, &ll)) {
		printf("response %-30s agree: %s%s\n", name, eo,
		       ll.e[ll.n - 1].fl & F_KA ? ""
			: "(llhttp would close: it applies a framing field of the trailers)");
		return;
	}
	ll_fixed(in, n, true, m, &l2, fixes, sizeof(fixes));
	if (fixes[0] && resp_agree(&ours, &l2)) {
		printf("response %-30s agree: %s(llhttp 8.1 refuses it: %s)\n", name, eo,
		       fixes);
		return;
	}
	printf("response %-30s FAIL: ours reusable, llhttp disagrees\n"
	       "    ours [%s] llhttp [%s]\n", name, evs_str(&ours), evs_str(&ll));
	failures++;
}

/* ---------------------------------------------------------------- requests */

/* Compare message by message until ours would stop pooling: llhttp must
 * find the same head and body ends and agree on whether the client asked to
 * close.  *why: ours' reason to stop (empty: none); *agreed: what agreed. */
static bool req_agree(const char *in, const struct evs *ours, const struct evs *ll,
		      char *why, size_t wcap, char *agreed, size_t acap)
{
	char hint[160];
	size_t i, k = 0, hstart = 0;

	why[0] = '\0';
	agreed[0] = '\0';
	for (i = 0; i < ours->n; i++) {
		const struct ev *o = &ours->e[i], *l = i < ll->n ? &ll->e[i] : NULL;

		switch (o->k) {
		case 'H':
			if (o->fl & F_DOUBT) {
				doubt_hint(in + hstart, o->off - hstart, false, hint, sizeof(hint));
				snprintf(why, wcap, "doubt at %zu (%s): no rewrite, no pooling",
					 hstart, hint);
			} else if (o->fl & F_UPG || o->status == FRM_M_CONNECT) {
				snprintf(why, wcap, "%s at %zu: not HTTP after it, passthrough",
					 o->fl & F_UPG ? "Upgrade" : "CONNECT", hstart);
			}
			break;
		case 'B':
			if (o->fl & F_DOUBT)
				snprintf(why, wcap, "lenient chunked body before %zu: no pooling",
					 o->off);
			hstart = o->off;
			break;
		case 'X':
			snprintf(why, wcap,
				 "refused at %zu (not HTTP/1.x, malformed, or a head over %d bytes): passthrough",
				 o->off, FRM_MAX_HEAD);
			break;
		case 'E':
			snprintf(why, wcap, "malformed chunked body at %zu: passthrough", o->off);
			break;
		default: /* N: llhttp must not see an end where we see none */
			if (l && (l->k == 'H' || l->k == 'B'))
				return false;
			snprintf(why, wcap, "incomplete: the %s does not end in the file",
				 i > 0 && ours->e[i - 1].k == 'H' ? "body" : "head");
			break;
		}
		if (why[0])
			return true;
		if (!l || l->k != o->k || l->off != o->off ||
		    (o->k == 'B' && !(l->fl & F_TRL) && !(o->fl & F_CLOSE) != !!(l->fl & F_KA)))
			return false;
		k += (size_t)snprintf(agreed + k, acap - k, "%s%c@%zu%s", k ? " " : "",
				      o->k, o->off,
				      o->k == 'B' && (o->fl & F_CLOSE) ? " close" : "");
	}
	return true;
}

static void req_file(const char *name, const char *in, size_t n)
{
	static struct evs ours, ll, l2;
	char why[320], agreed[512], fixes[256];
	bool ok;

	if (!run_both(name, in, n, false, FRM_M_GET, &ours, &ll, NULL))
		return;
	fixes[0] = '\0';
	ok = req_agree(in, &ours, &ll, why, sizeof(why), agreed, sizeof(agreed));
	if (!ok && ll.e[ll.n - 1].k == 'E') {
		ll_fixed(in, n, false, FRM_M_GET, &l2, fixes, sizeof(fixes));
		if (fixes[0])
			ok = req_agree(in, &ours, &l2, why, sizeof(why), agreed, sizeof(agreed));
	}
	if (!ok) {
		printf("request  %-30s FAIL: ours and llhttp disagree\n"
		       "    ours [%s] llhttp [%s]\n", name, evs_str(&ours), evs_str(&ll));
		failures++;
		return;
	}
	if (why[0])
		printf("request  %-30s ours not reusable: %s%s%s\n", name, why,
		       agreed[0] ? "; before it agree: " : "", agreed);
	else
		printf("request  %-30s agree: %s\n", name, agreed);
	if (fixes[0])
		printf("    (llhttp 8.1 refuses it: %s)\n", fixes);
}

/* ---------------------------------------------------------------- files */

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Run fn on every file of dir (sorted); the number of files, -1 if dir is
 * missing. */
static int each_file(const char *dir, void (*fn)(const char *, const char *, size_t))
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL, path[4096];
	size_t nn = 0, cap = 0, k;
	static char buf[MAX_FILE + 1];

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (nn == cap) {
			cap = cap ? 2 * cap : 64;
			names = realloc(names, cap * sizeof(*names));
		}
		names[nn++] = strdup(de->d_name);
	}
	closedir(d);
	qsort(names, nn, sizeof(*names), by_name);
	for (k = 0; k < nn; k++) {
		FILE *f;
		size_t n;

		snprintf(path, sizeof(path), "%s/%s", dir, names[k]);
		f = fopen(path, "rb");
		if (!f) {
			fprintf(stderr, "%s: %s\n", path, strerror(errno));
			failures++;
			continue;
		}
		n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		if (n > MAX_FILE) {
			printf("%-39s skipped: over 1 MiB\n", names[k]);
			continue;
		}
		fn(names[k], buf, n);
		free(names[k]);
	}
	free(names);
	return (int)nn;
}

int main(int argc, char **argv)
{
	const char *root = argc > 1 ? argv[1] : "tests/corpus";
	char dir[4096];
	int nr, nh, nq;

	setvbuf(stdout, NULL, _IOLBF, 0);
	guard_init();
	bounds_buf = malloc((MAX_FILE + 2) * sizeof(*bounds_buf));
	snprintf(dir, sizeof(dir), "%s/response", root);
	nr = each_file(dir, resp_file);
	snprintf(dir, sizeof(dir), "%s/response-hand", root);
	nh = each_file(dir, resp_file);
	snprintf(dir, sizeof(dir), "%s/request", root);
	nq = each_file(dir, req_file);
	if (nr <= 0 || nq <= 0) {
		fprintf(stderr, "test_llhttp: no corpus in %s (response/, request/)\n", root);
		return 1;
	}
	printf("%d responses, %d requests: %s\n", nr + (nh > 0 ? nh : 0), nq,
	       failures ? "DISAGREEMENT" : "no disagreement");
	return failures ? 1 : 0;
}
