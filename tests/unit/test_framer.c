/*
 * test_framer.c - unit tests for shim/framer.c.
 *
 * Every input is placed right before a PROT_NONE page (as picohttpparser's
 * tests do), so an over-read crashes instead of passing by luck.  Response
 * cases are fed whole, split at every offset, and one byte at a time; the
 * event logs (events, their stream offsets, the facts) must be identical.
 */
#include "framer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int passed, failed;

#define CHECK(cond, ...)                                                  \
	do {                                                              \
		if (cond) {                                               \
			passed++;                                         \
		} else {                                                  \
			failed++;                                         \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                     \
			fputc('\n', stderr);                              \
		}                                                         \
	} while (0)

/* ---------------------------------------------------------------- guard */

#define GUARD_AREA (4u << 20)
#include "guard.h"

/* ---------------------------------------------------------------- strings */

struct sb {
	char s[4096];
	size_t n;
};

static void sb_add(struct sb *b, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (b->n >= sizeof(b->s) - 1)
		return;
	va_start(ap, fmt);
	k = vsnprintf(b->s + b->n, sizeof(b->s) - b->n, fmt, ap);
	va_end(ap);
	if (k > 0)
		b->n += (size_t)k;
	if (b->n > sizeof(b->s) - 1)
		b->n = sizeof(b->s) - 1;
}

/* expected vs actual: '$' in want stands for total, '?' for any number */
static bool log_match(const char *want, const char *got, size_t total)
{
	char num[32];
	size_t nl;

	snprintf(num, sizeof(num), "%zu", total);
	nl = strlen(num);
	while (*want) {
		if (*want == '$') {
			if (strncmp(got, num, nl) != 0)
				return false;
			got += nl;
			want++;
		} else if (*want == '?') {
			if (*got < '0' || *got > '9')
				return false;
			while (*got >= '0' && *got <= '9')
				got++;
			want++;
		} else if (*want++ != *got++) {
			return false;
		}
	}
	return *got == '\0';
}

/* ---------------------------------------------------------------- responses */

static enum frm_method method_of(char c)
{
	switch (c) {
	case 'H': return FRM_M_HEAD;
	case 'C': return FRM_M_CONNECT;
	case 'P': return FRM_M_POST;
	default: return FRM_M_GET;
	}
}

static char kind_char(uint8_t kind)
{
	return "-LKC"[kind & 3];
}

static void log_facts(struct sb *lg, const struct frm_resp *r)
{
	char fl[8];
	size_t k = 0;

	if (frm_resp_reusable(r))
		fl[k++] = 'r';
	if (r->server_close)
		fl[k++] = 'c';
	if (r->doubt)
		fl[k++] = 'd';
	if (r->conn_bound)
		fl[k++] = 'b';
	if (k == 0)
		fl[k++] = '-';
	fl[k] = '\0';
	sb_add(lg, " %u %c %s", r->status, kind_char(r->body.kind), fl);
	if (r->ka_timeout != -1 || r->ka_max != -1)
		sb_add(lg, " ka=%d,%d", r->ka_timeout, r->ka_max);
}

/* Feed in[0..n) in the pieces bounds[0] = 0 < bounds[1] < ... = n and log
 * every event.  out receives the bytes as the program would see them. */
static void drive(const char *in, size_t n, const char *methods, bool rw,
		  const size_t *bounds, size_t npieces, struct sb *lg, char *out)
{
	struct frm_resp r;
	enum frm_resp_event ev = FRM_EV_NONE;
	size_t mi = 0, b;
	bool stop = false;

	memcpy(out, in, n);
	frm_resp_begin(&r, method_of(methods[0]), rw);
	for (b = 0; b < npieces && !stop; b++) {
		size_t plen = bounds[b + 1] - bounds[b], off = 0, k;
		char *p = guarded(in + bounds[b], plen);

		while (off < plen) {
			k = frm_resp_feed(&r, p + off, plen - off, &ev);
			if (k > plen - off) {
				sb_add(lg, "OVERCONSUMED");
				stop = true;
				break;
			}
			off += k;
			if (ev == FRM_EV_NONE) {
				if (off != plen)
					sb_add(lg, "SHORT@%zu;", bounds[b] + off);
				break;
			}
			switch (ev) {
			case FRM_EV_INTERIM:
				sb_add(lg, "I@%zu; ", bounds[b] + off);
				continue;
			case FRM_EV_DONE:
				sb_add(lg, "D@%zu", bounds[b] + off);
				log_facts(lg, &r);
				sb_add(lg, "; ");
				if (methods[mi])
					mi++;
				frm_resp_begin(&r, method_of(methods[mi]), rw);
				continue;
			case FRM_EV_CLOSE_BODY:
				sb_add(lg, "C@%zu", bounds[b] + off);
				log_facts(lg, &r);
				sb_add(lg, "; ");
				/* a close-delimited body swallows the rest */
				k = frm_resp_feed(&r, p + off, plen - off, &ev);
				if (k != plen - off || ev != FRM_EV_NONE)
					sb_add(lg, "CLOSE-NOT-ALL; ");
				break;
			case FRM_EV_UPGRADE:
				sb_add(lg, "U@%zu %u; ", bounds[b] + off, r.status);
				break;
			case FRM_EV_ERROR:
				sb_add(lg, "E@%zu; ", bounds[b] + off);
				/* further feeds: 0 consumed, ERROR */
				k = frm_resp_feed(&r, p, plen, &ev);
				if (k != 0 || ev != FRM_EV_ERROR)
					sb_add(lg, "ERROR-NOT-STICKY; ");
				break;
			default:
				sb_add(lg, "BADEV; ");
				break;
			}
			stop = true;
			break;
		}
		memcpy(out + bounds[b], p, plen);
	}
	if (!stop && ev == FRM_EV_NONE && n > 0)
		sb_add(lg, "N");
}

static size_t bounds_buf[1 << 17];

/* Feed whole, split at every offset, and byte by byte: all logs must agree
 * and match want; in rewrite mode the whole-feed output must be want_out, and
 * every split feed must give the program the very same bytes.  Returns the log of
 * the whole feed (static). */
static const char *resp_case3(const char *name, const char *in, size_t n,
			      const char *methods, bool rw, const char *want,
			      const char *want_out)
{
	static struct sb whole;
	struct sb lg;
	char *out_whole = malloc(n + 1), *out = malloc(n + 1);
	size_t k;
	bool same = true, outok = true;

	memset(&whole, 0, sizeof(whole));
	bounds_buf[0] = 0;
	bounds_buf[1] = n;
	drive(in, n, methods, rw, bounds_buf, 1, &whole, out_whole);
	if (want)
		CHECK(log_match(want, whole.s, n), "%s: want [%s] got [%s]",
		      name, want, whole.s);
	if (want_out)
		CHECK(memcmp(out_whole, want_out, n) == 0,
		      "%s: rewrite output [%.*s]", name, (int)n, out_whole);
	else
		CHECK(memcmp(out_whole, in, n) == 0, "%s: buf modified", name);

	/* split at every offset (big inputs: at ~2000 of them) */
	for (k = 1; k < n && same; k += n > 4096 ? n / 2000 + 1 : 1) {
		memset(&lg, 0, sizeof(lg));
		bounds_buf[0] = 0;
		bounds_buf[1] = k;
		bounds_buf[2] = n;
		drive(in, n, methods, rw, bounds_buf, 2, &lg, out);
		if (strcmp(lg.s, whole.s) != 0) {
			same = false;
			fprintf(stderr, "  split at %zu: [%s]\n", k, lg.s);
		}
		if (memcmp(out, out_whole, n) != 0)
			outok = false;
	}
	CHECK(same, "%s: split feed differs from whole [%s]", name, whole.s);

	/* one byte at a time */
	if (n < sizeof(bounds_buf) / sizeof(bounds_buf[0])) {
		memset(&lg, 0, sizeof(lg));
		for (k = 0; k <= n; k++)
			bounds_buf[k] = k;
		drive(in, n, methods, rw, bounds_buf, n, &lg, out);
		CHECK(strcmp(lg.s, whole.s) == 0,
		      "%s: bytewise [%s] vs whole [%s]", name, lg.s, whole.s);
		if (memcmp(out, out_whole, n) != 0)
			outok = false;
	}
	CHECK(outok, "%s: split feed wrote unexpected bytes", name);
	free(out_whole);
	free(out);
	return whole.s;
}

static void resp_case(const char *name, const char *in, const char *methods,
		      const char *want)
{
	resp_case3(name, in, strlen(in), methods, false, want, NULL);
}

#define H11 "HTTP/1.1 200 OK\r\n"
#define H10 "HTTP/1.0 200 OK\r\n"
#define CHUNKED "Transfer-Encoding: chunked\r\n"

static void test_resp_basic(void)
{
	resp_case("cl", H11 "Content-Length: 5\r\n\r\nhello", "G", "D@$ 200 L r; ");
	resp_case("cl0", H11 "Content-Length: 0\r\n\r\n", "G", "D@$ 200 L r; ");
	resp_case("cl incomplete", H11 "Content-Length: 5\r\n\r\nhel", "G", "N");
	resp_case("head incomplete", H11 "Content-Len", "G", "N");
	resp_case("cl ows", H11 "content-length:\t 5 \t\r\n\r\nhello", "G",
		  "D@$ 200 L r; ");
	resp_case("cl list same", H11 "Content-Length: 4, 4\r\n\r\nabcd", "G",
		  "D@$ 200 L r; ");
	resp_case("cl repeated same",
		  H11 "Content-Length: 4\r\nX: y\r\nContent-Length: 4\r\n\r\nabcd",
		  "G", "D@$ 200 L r; ");
	resp_case("cl max u64", H11 "Content-Length: 18446744073709551615\r\n\r\nab",
		  "G", "N");
	resp_case("chunked", H11 CHUNKED "\r\n5\r\nhello\r\n0\r\n\r\n", "G",
		  "D@$ 200 K r; ");
	resp_case("chunked ext trailers hex",
		  H11 "transfer-encoding: Chunked\r\n\r\n"
		      "000A;foo=bar;q=\"x y\"\r\n0123456789\r\n"
		      "1f\r\n0123456789012345678901234567890\r\n"
		      "0000;last\r\nX-Trailer: 1\r\nY: 2\r\n\r\n",
		  "G", "D@$ 200 K r; ");
	resp_case("chunked leading zeros",
		  H11 CHUNKED "\r\n000000000000000000000000000001\r\nx\r\n0\r\n\r\n",
		  "G", "D@$ 200 K r; ");
	resp_case("te gzip, chunked", H11 "Transfer-Encoding: gzip, chunked\r\n\r\n"
		  "1\r\nx\r\n0\r\n\r\n", "G", "D@$ 200 K r; ");
	resp_case("te two headers", H11 "Transfer-Encoding: gzip\r\n" CHUNKED "\r\n"
		  "1\r\nx\r\n0\r\n\r\n", "G", "D@$ 200 K r; ");
	/* chunked has no parameters (RFC 9112 7.1: treat them as an error);
	 * llhttp does not take such a body for chunked (fuzz_llhttp): framed
	 * as chunked, never reused */
	resp_case("te chunked;param", H11 "Transfer-Encoding: chunked ; x=1\r\n\r\n"
		  "0\r\n\r\n", "G", "D@$ 200 K d; ");
	resp_case("te chunked;", H11 "Transfer-Encoding: chunked;\r\n\r\n"
		  "1\r\nx\r\n0\r\n\r\n", "G", "D@$ 200 K d; ");
	resp_case("te chunked junk", H11 "Transfer-Encoding: chunked x\r\n\r\n"
		  "0\r\n\r\n", "G", "D@$ 200 K d; ");
	resp_case("te gzip;q, chunked", H11 "Transfer-Encoding: gzip;q=1, chunked\r\n\r\n"
		  "0\r\n\r\n", "G", "D@$ 200 K r; ");
	/* empty list elements: llhttp then does not take it for chunked */
	resp_case("te chunked,", H11 "Transfer-Encoding: chunked,\r\n\r\n"
		  "0\r\n\r\n", "G", "D@$ 200 K d; ");
	resp_case("te , chunked", H11 "Transfer-Encoding: , chunked\r\n\r\n"
		  "0\r\n\r\n", "G", "D@$ 200 K d; ");
	resp_case("te chunked, gzip -> close",
		  H11 "Transfer-Encoding: chunked, gzip\r\n\r\nxxxx", "G",
		  "C@? 200 C -; ");
	resp_case("te gzip -> close", H11 "Transfer-Encoding: gzip\r\n\r\n", "G",
		  "C@$ 200 C -; ");
	resp_case("te empty -> close, doubt", H11 "Transfer-Encoding: \r\n\r\n",
		  "G", "C@$ 200 C d; ");
	resp_case("te+cl", H11 "Content-Length: 3\r\n" CHUNKED "\r\n0\r\n\r\n", "G",
		  "D@$ 200 K d; ");
	resp_case("te+bad cl", H11 "Content-Length: x\r\n" CHUNKED "\r\n0\r\n\r\n",
		  "G", "D@$ 200 K d; ");
	resp_case("no framing", H11 "X: y\r\n\r\nwhatever", "G", "C@? 200 C -; ");
	resp_case("no framing 1.0", H10 "\r\n", "G", "C@$ 200 C c; ");
}

static void test_resp_nobody(void)
{
	resp_case("head", H11 "Content-Length: 100\r\n\r\n", "H", "D@$ 200 - r; ");
	resp_case("head chunked", H11 CHUNKED "\r\n", "H", "D@$ 200 - r; ");
	resp_case("204", "HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n", "G",
		  "D@$ 204 - r; ");
	resp_case("304 te", "HTTP/1.1 304 Not Modified\r\n" CHUNKED "\r\n", "G",
		  "D@$ 304 - r; ");
	resp_case("304 bad cl", "HTTP/1.1 304 Not Modified\r\nContent-Length: 1, 2\r\n\r\n",
		  "G", "D@$ 304 - r; ");
	resp_case("100 then 200",
		  "HTTP/1.1 100 Continue\r\n\r\n" H11 "Content-Length: 2\r\n\r\nok",
		  "P", "I@25; D@$ 200 L r; ");
	resp_case("103 102 then 204",
		  "HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n"
		  "HTTP/1.1 102 Processing\r\n\r\n"
		  "HTTP/1.1 204 No Content\r\n\r\n",
		  "G", "I@?; I@?; D@$ 204 - r; ");
	resp_case("1xx ignores cl", "HTTP/1.1 100 Continue\r\nContent-Length: 5\r\n\r\n"
		  H11 "Content-Length: 0\r\n\r\n", "P", "I@?; D@$ 200 L r; ");
	resp_case("sloppy 100 taints", "HTTP/1.1 100 Continue\n\n"
		  H11 "Content-Length: 0\r\n\r\n", "P", "I@?; D@$ 200 L d; ");
	/* found by fuzz_llhttp: an interim that says the server will close
	 * (llhttp then treats the connection as closed) */
	resp_case("1.0 interim: close", "HTTP/1.0 100 Continue\r\n\r\n"
		  H11 "Content-Length: 2\r\n\r\nok", "P", "I@25; D@$ 200 L c; ");
	resp_case("interim with close", "HTTP/1.1 103 Early Hints\r\nConnection: close\r\n\r\n"
		  H11 "Content-Length: 0\r\n\r\n", "G", "I@?; D@$ 200 L c; ");
	resp_case("1.0 interim keep-alive", "HTTP/1.0 100 Continue\r\nConnection: keep-alive\r\n\r\n"
		  H11 "Content-Length: 0\r\n\r\n", "P", "I@?; D@$ 200 L r; ");
	resp_case("101", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
		  "Connection: Upgrade\r\n\r\n", "G", "U@$ 101; ");
	resp_case("101 + frames", "HTTP/1.1 101 Switching\r\n\r\n\x81\x05hello",
		  "G", "U@26 101; ");
	resp_case("connect 200", "HTTP/1.1 200 Connection established\r\n\r\n\x16\x03",
		  "C", "U@39 200; ");
	resp_case("connect 407", "HTTP/1.1 407 Proxy Auth\r\nContent-Length: 1\r\n\r\nx",
		  "C", "D@$ 407 L r; ");
}

static void test_resp_cl_errors(void)
{
	static const char *bad[] = {
		"+4", "-1", "", "4a", "0x10", "4 4", "4,", ",4", "4, 5",
		"18446744073709551616", "99999999999999999999999", "1.0",
	};
	char in[256], name[64];
	size_t k;

	for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		snprintf(in, sizeof(in), H11 "Content-Length: %s\r\n\r\nabcd", bad[k]);
		snprintf(name, sizeof(name), "bad cl [%s]", bad[k]);
		resp_case3(name, in, strlen(in), "G", false, "E@?; ", NULL);
	}
	resp_case("cl conflict headers",
		  H11 "Content-Length: 4\r\nContent-Length: 5\r\n\r\nabcd", "G",
		  "E@?; ");
	/* exact position: the last LF of the head */
	snprintf(in, sizeof(in), H11 "Content-Length: +4\r\n\r\n");
	snprintf(name, sizeof(name), "E@%zu; ", strlen(in) - 1);
	resp_case("bad cl position", in, "G", name);
}

static void test_resp_connection(void)
{
	resp_case("1.0 cl", H10 "Content-Length: 1\r\n\r\nx", "G", "D@$ 200 L c; ");
	resp_case("1.0 keep-alive", H10 "Connection: Keep-Alive\r\nContent-Length: 1\r\n\r\nx",
		  "G", "D@$ 200 L r; ");
	resp_case("1.0 ka token list", H10 "Connection: foo ,  keep-alive ,\r\n"
		  "Content-Length: 0\r\n\r\n", "G", "D@$ 200 L r; ");
	resp_case("1.0 keep-alivex", H10 "Connection: keep-alivex\r\nContent-Length: 0\r\n\r\n",
		  "G", "D@$ 200 L c; ");
	resp_case("1.1 close", H11 "Connection: close\r\nContent-Length: 0\r\n\r\n", "G",
		  "D@$ 200 L c; ");
	resp_case("1.1 CLOSE list", H11 "Connection: Upgrade, CLOSE\r\nContent-Length: 0\r\n\r\n",
		  "G", "D@$ 200 L c; ");
	resp_case("1.0 chunked", H10 "Connection: keep-alive\r\n" CHUNKED "\r\n0\r\n\r\n",
		  "G", "D@$ 200 K d; ");
	resp_case("keep-alive hdr", H11 "Keep-Alive: timeout=5, max=100\r\n"
		  "Content-Length: 0\r\n\r\n", "G", "D@$ 200 L r ka=5,100; ");
	resp_case("keep-alive spaces quotes", H11 "keep-alive:  Timeout = \"7\" ; foo=bar,MAX=3 \r\n"
		  "Content-Length: 0\r\n\r\n", "G", "D@$ 200 L r ka=7,3; ");
	resp_case("keep-alive max only", H11 "Keep-Alive: max=9\r\nContent-Length: 0\r\n\r\n",
		  "G", "D@$ 200 L r ka=-1,9; ");
	resp_case("keep-alive junk", H11 "Keep-Alive: timeout=abc, max=, x\r\n"
		  "Content-Length: 0\r\n\r\n", "G", "D@$ 200 L r; ");
	resp_case("keep-alive huge", H11 "Keep-Alive: timeout=99999999999999\r\n"
		  "Content-Length: 0\r\n\r\n", "G", "D@$ 200 L r ka=2147483647,-1; ");
}

static void test_resp_auth(void)
{
	char big[2048], in[4096];

	resp_case("ntlm", "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: NTLM\r\n"
		  "Content-Length: 0\r\n\r\n", "G", "D@$ 401 L b; ");
	resp_case("negotiate token", "HTTP/1.1 401 U\r\nwww-authenticate: Negotiate YIIGhgYGKwYBBQUCoIIGejCCBnag==\r\n"
		  "Content-Length: 0\r\n\r\n", "G", "D@$ 401 L b; ");
	resp_case("basic, ntlm", "HTTP/1.1 401 U\r\nWWW-Authenticate: Basic realm=\"x\", NTLM\r\n"
		  "Content-Length: 0\r\n\r\n", "G", "D@$ 401 L b; ");
	resp_case("proxy negotiate", "HTTP/1.1 407 U\r\nProxy-Authenticate: negotiate\r\n"
		  "Content-Length: 0\r\n\r\n", "G", "D@$ 407 L b; ");
	resp_case("basic only", "HTTP/1.1 401 U\r\nWWW-Authenticate: Basic realm=\"NTLMish\"\r\n"
		  "Content-Length: 0\r\n\r\n", "G", "D@$ 401 L r; ");
	resp_case("ntlmx", "HTTP/1.1 401 U\r\nWWW-Authenticate: NTLMX, Negotiates\r\n"
		  "Content-Length: 0\r\n\r\n", "G", "D@$ 401 L r; ");
	resp_case("ntlm on 200", H11 "WWW-Authenticate: NTLM abc\r\nContent-Length: 0\r\n\r\n",
		  "G", "D@$ 200 L b; ");

	/* a value longer than val[]: the scan slides over it */
	memset(big, 'a', 1000);
	big[1000] = '\0';
	snprintf(in, sizeof(in), "HTTP/1.1 401 U\r\nWWW-Authenticate: Basic realm=\"%s\", NTLM\r\n"
		 "Content-Length: 0\r\n\r\n", big);
	resp_case("long realm then ntlm", in, "G", "D@$ 401 L b; ");
	snprintf(in, sizeof(in), "HTTP/1.1 401 U\r\nWWW-Authenticate: Basic realm=%s, x=\"\"  , Negotiate\r\n"
		 "Content-Length: 0\r\n\r\n", big + 500);
	resp_case("long realm then negotiate", in, "G", "D@$ 401 L b; ");
	snprintf(in, sizeof(in), "HTTP/1.1 401 U\r\nWWW-Authenticate: Basic %sntlm\r\n"
		 "Content-Length: 0\r\n\r\n", big);
	resp_case("long token ending in ntlm", in, "G", "D@$ 401 L r; ");
	snprintf(in, sizeof(in), "HTTP/1.1 401 U\r\nWWW-Authenticate: Basic %.247s NTLM\r\n"
		 "Content-Length: 0\r\n\r\n", big);
	resp_case("ntlm across the val[] edge", in, "G", "D@$ 401 L b; ");
}

static void test_resp_lenient(void)
{
	resp_case("chunk size ws", H11 CHUNKED "\r\n5 \r\nhello\r\n0\t\r\n\r\n", "G",
		  "D@$ 200 K d; ");
	resp_case("chunk size ws ext", H11 CHUNKED "\r\n5 \t;a=b\r\nhello\r\n0\r\n\r\n", "G",
		  "D@$ 200 K d; ");
	resp_case("chunk bare lf", H11 CHUNKED "\r\n5\nhello\n0\n\n", "G",
		  "D@$ 200 K d; ");
	resp_case("trailer bare lf", H11 CHUNKED "\r\n0\r\nX: y\n\r\n", "G",
		  "D@$ 200 K d; ");
	resp_case("head bare lf", "HTTP/1.1 200 OK\nContent-Length: 1\n\nx", "G",
		  "D@$ 200 L d; ");
	resp_case("head bare lf end", H11 "Content-Length: 1\r\n\nx", "G",
		  "D@$ 200 L d; ");
	resp_case("no reason", "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", "G",
		  "D@$ 200 L r; ");
	resp_case("empty reason", "HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n", "G",
		  "D@$ 200 L r; ");
	resp_case("HTTP/1.2", "HTTP/1.2 200 OK\r\nContent-Length: 0\r\n\r\n", "G",
		  "D@$ 200 L r; ");
	resp_case("fold other", H11 "X-Long: a\r\n  b\r\nContent-Length: 0\r\n\r\n", "G",
		  "D@$ 200 L d; ");
	resp_case("fold keep-alive", H11 "Keep-Alive: timeout=3\r\n\tmax=4\r\n"
		  "Content-Length: 0\r\n\r\n", "G", "D@$ 200 L d ka=3,-1; ");
	resp_case("fold first line", H11 " junk\r\nContent-Length: 0\r\n\r\n", "G",
		  "D@$ 200 L d; ");
	resp_case("fold content-length", H11 "Content-Length: 1\r\n 2\r\n\r\nx", "G",
		  "E@?; ");
	resp_case("fold te", H11 "Transfer-Encoding: gzip,\r\n chunked\r\n\r\n", "G",
		  "E@?; ");
	resp_case("fold connection", H11 "Connection: keep-alive,\r\n\tclose\r\n"
		  "Content-Length: 0\r\n\r\n", "G", "E@?; ");
	resp_case("long connection value", H11 "Connection: "
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aa, keep-alive\r\nContent-Length: 0\r\n\r\n", "G", "D@$ 200 L d; ");
}

static void test_resp_errors(void)
{
	static const char *bad[] = {
		"HTTP/1.1 20 OK\r\n\r\n", "HTTP/2 200 OK\r\n\r\n",
		"HTTP/1.1 2000 OK\r\n\r\n", "http/1.1 200 OK\r\n\r\n",
		"HTTP/1.1 099 Low\r\n\r\n", "HTTP/1.x 200 OK\r\n\r\n",
		"HTTP/1.1  200 OK\r\n\r\n", "HTTP/1.1 200 OK\rX\n\r\n",
		"\r\nHTTP/1.1 200 OK\r\n\r\n", "FOO", "\x16\x03\x01\x02\x00",
		"<html>", H11 "Content-Length : 5\r\n\r\nhello",
		H11 "Bad Header: x\r\n\r\n", H11 ": x\r\n\r\n", H11 "NoColon\r\n\r\n",
		H11 "X: a\rb\r\n\r\n", H11 "X: y\r\n\rX",
		H11 CHUNKED "\r\nzz\r\n", H11 CHUNKED "\r\n\r\n",
		H11 CHUNKED "\r\n5\r\nhelloX\r\n0\r\n\r\n",
		H11 CHUNKED "\r\n5\r\nhello\r\n0\r\n\rX",
		H11 CHUNKED "\r\n5\r\nhello\r\n0\r\nX: y\rZ\r\n\r\n",
		H11 CHUNKED "\r\n1 2\r\n", H11 CHUNKED "\r\n-1\r\n",
		H11 CHUNKED "\r\n5\rX",
		/* 2^64: one hex digit too many */
		H11 CHUNKED "\r\n10000000000000000\r\n",
		H11 CHUNKED "\r\nFFFFFFFFFFFFFFFFF\r\n",
	};
	size_t k;
	char name[64];

	for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		snprintf(name, sizeof(name), "error #%zu", k);
		resp_case(name, bad[k], "G", "E@?; ");
	}
	resp_case3("nul in value", H11 "X: a\0b\r\n\r\n", sizeof(H11 "X: a\0b\r\n\r\n") - 1,
		   "G", false, "E@21; ", NULL);
	resp_case("error position", "HTTP/1.1 200 OK\r\nX", "G", "N");
	resp_case("error at byte 0", "X", "G", "E@0; ");
	resp_case("error at byte 5", "HTTP/2", "G", "E@5; ");
	resp_case("chunk max ok", H11 CHUNKED "\r\nFFFFFFFFFFFFFFFF\r\nabc", "G", "N");
}

static void test_resp_pipelined(void)
{
	char in[1024], want[256];
	const char *a = H11 "Content-Length: 5\r\n\r\nhello";
	const char *b = H11 CHUNKED "\r\n3\r\nabc\r\n0\r\n\r\n";
	const char *c = "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n";
	const char *d = H11 "Content-Length: 10\r\n\r\n";
	const char *e = "HTTP/1.1 100 Continue\r\n\r\n";
	size_t la = strlen(a), lb = strlen(b), lc = strlen(c), ld = strlen(d);
	size_t le = strlen(e);

	snprintf(in, sizeof(in), "%s%s%s%s", a, b, c, a);
	snprintf(want, sizeof(want), "D@%zu 200 L r; D@%zu 200 K r; D@%zu 304 - r; D@$ 200 L r; ",
		 la, la + lb, la + lb + lc);
	resp_case("pipelined 4", in, "GGGG", want);

	/* a HEAD response's Content-Length must not eat the next response */
	snprintf(in, sizeof(in), "%s%s", d, a);
	snprintf(want, sizeof(want), "D@%zu 200 - r; D@$ 200 L r; ", ld);
	resp_case("pipelined head", in, "HG", want);

	snprintf(in, sizeof(in), "%s%s%s%s", e, a, b, "HTTP/1.1 200");
	snprintf(want, sizeof(want), "I@%zu; D@%zu 200 L r; D@%zu 200 K r; N", le,
		 le + la, le + la + lb);
	resp_case("pipelined interim + partial", in, "PG", want);

	snprintf(in, sizeof(in), "%s%sjunk", a, H11 "Connection: close\r\n\r\n");
	snprintf(want, sizeof(want), "D@%zu 200 L r; C@%zu 200 C c; ", la,
		 strlen(in) - 4);
	resp_case("pipelined then close-delimited", in, "GG", want);
}

static void test_resp_rewrite(void)
{
	const char *in = H11 "Connection: keep-alive\r\nContent-Length: 0\r\n\r\n";
	const char *out = H11 "Connection:      close\r\nContent-Length: 0\r\n\r\n";
	const char *in2 = H11 "connection: Upgrade,Keep-Alive , x\r\nContent-Length: 2\r\n\r\nok";
	const char *out2 = H11 "connection: Upgrade,     close , x\r\nContent-Length: 2\r\n\r\nok";
	const char *in3 = H11 "Keep-Alive: timeout=5\r\nX: keep-alive\r\nContent-Length: 0\r\n\r\n";

	resp_case3("rewrite ka", in, strlen(in), "G", true, "D@$ 200 L r; ", out);
	resp_case3("no rewrite flag", in, strlen(in), "G", false, "D@$ 200 L r; ", NULL);
	resp_case3("rewrite ka list", in2, strlen(in2), "G", true, "D@$ 200 L r; ", out2);
	resp_case3("rewrite only Connection", in3, strlen(in3), "G", true,
		   "D@$ 200 L r ka=5,-1; ", NULL);
	/* the value reads exactly "close" after OWS stripping, every split */
	resp_case3("rewrite no OWS", H11 "Connection:keep-alive\r\nContent-Length: 0\r\n\r\n",
		   strlen(H11 "Connection:keep-alive\r\nContent-Length: 0\r\n\r\n"), "G", true,
		   "D@$ 200 L r; ", H11 "Connection:     close\r\nContent-Length: 0\r\n\r\n");
	resp_case3("rewrite first of list",
		   H11 "Connection: Keep-Alive, TE\r\nContent-Length: 0\r\n\r\n",
		   strlen(H11 "Connection: Keep-Alive, TE\r\nContent-Length: 0\r\n\r\n"), "G", true,
		   "D@$ 200 L r; ", H11 "Connection:      close, TE\r\nContent-Length: 0\r\n\r\n");
	/* HTTP/1.0 keep-alive: still framed as reusable, shown as close */
	resp_case3("rewrite 1.0",
		   "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok",
		   strlen("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"),
		   "G", true, "D@$ 200 L r; ",
		   "HTTP/1.0 200 OK\r\nConnection:      close\r\nContent-Length: 2\r\n\r\nok");
	/* not an element of its own: a longer token keeps its tail; a body
	 * that looks like a header is never touched */
	resp_case3("rewrite longer token",
		   H11 "Connection: keep-alivex\r\nContent-Length: 24\r\n\r\nConnection: keep-alive\r\n",
		   strlen(H11 "Connection: keep-alivex\r\nContent-Length: 24\r\n\r\nConnection: keep-alive\r\n"),
		   "G", true, "D@$ 200 L r; ",
		   H11 "Connection:      closex\r\nContent-Length: 24\r\n\r\nConnection: keep-alive\r\n");
	{
		/* the token straddles two feeds: masked all the same (a header
		 * across http.client's 8 KiB reads, recv(1) loops) */
		struct frm_resp r;
		enum frm_resp_event ev;
		char buf[128];
		size_t n = strlen(in), cut = strlen(H11 "Connection: keep-"), k;

		memcpy(buf, in, n);
		frm_resp_begin(&r, FRM_M_GET, true);
		k = frm_resp_feed(&r, buf, cut, &ev);
		CHECK(k == cut && ev == FRM_EV_NONE, "straddle 1");
		k = frm_resp_feed(&r, buf + cut, n - cut, &ev);
		CHECK(k == n - cut && ev == FRM_EV_DONE, "straddle 2");
		CHECK(memcmp(buf, out, n) == 0, "straddled token masked");
		/* started in an earlier call, but wholly in this one */
		cut = strlen(H11 "Connection: ");
		memcpy(buf, in, n);
		frm_resp_begin(&r, FRM_M_GET, true);
		k = frm_resp_feed(&r, buf, cut, &ev);
		k += frm_resp_feed(&r, buf + cut, n - cut, &ev);
		CHECK(k == n && ev == FRM_EV_DONE && memcmp(buf, out, n) == 0,
		      "value began in the previous feed: token rewritten");
	}
}

/* The close line (docs/replay.md, "A closing answer"): fed in two pieces
 * cut at every offset (a recv(1) loop, a head across reads), the program's
 * stream -- the bytes with FRM_CLOSE_LINE where FRM_EV_INSERT says -- is
 * always want, and the framing ends at the same place. */
static void close_line_case(const char *name, const char *in, enum frm_method m, const char *want,
			    enum frm_resp_event last)
{
	size_t n = strlen(in);
	for (size_t cut = 0; cut <= n; cut++) {
		struct frm_resp r;
		enum frm_resp_event ev = FRM_EV_NONE;
		char buf[512], out[1024];
		size_t o = 0, inserts = 0;
		bool saw_last = false;
		memcpy(buf, in, n);
		frm_resp_begin(&r, m, true);
		r.insert_close = true;
		size_t pieces[2][2] = { { 0, cut }, { cut, n } };
		for (int pc = 0; pc < 2; pc++) {
			size_t off = pieces[pc][0], end = pieces[pc][1];
			while (off < end) {
				size_t k = frm_resp_feed(&r, buf + off, end - off, &ev);
				memcpy(out + o, buf + off, k);
				o += k;
				off += k;
				if (ev == FRM_EV_INSERT) {
					memcpy(out + o, FRM_CLOSE_LINE, FRM_CLOSE_LINE_LEN);
					o += FRM_CLOSE_LINE_LEN;
					inserts++;
				}
				saw_last |= ev == last;
				if (ev != FRM_EV_NONE && ev != FRM_EV_INTERIM && ev != FRM_EV_INSERT &&
				    ev != FRM_EV_CLOSE_BODY)
					break;
			}
		}
		out[o] = 0;
		CHECK(strcmp(out, want) == 0 && saw_last && inserts <= 1, "%s: cut %zu: %s", name,
		      cut, out);
	}
}

static void test_close_line(void)
{
	close_line_case("no Connection header", H11 "Content-Length: 2\r\n\r\nok", FRM_M_GET,
			H11 "Content-Length: 2\r\nConnection: close\r\n\r\nok", FRM_EV_DONE);
	close_line_case("chunked", H11 "Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
			FRM_M_GET,
			H11 "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\nok\r\n0\r\n\r\n",
			FRM_EV_DONE);
	close_line_case("other token", H11 "Connection: TE\r\nContent-Length: 0\r\n\r\n", FRM_M_GET,
			H11 "Connection: TE\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", FRM_EV_DONE);
	close_line_case("keep-alive: masked, nothing inserted",
			H11 "Connection: keep-alive\r\nContent-Length: 0\r\n\r\n", FRM_M_GET,
			H11 "Connection:      close\r\nContent-Length: 0\r\n\r\n", FRM_EV_DONE);
	close_line_case("close already", H11 "Connection: close\r\nContent-Length: 0\r\n\r\n", FRM_M_GET,
			H11 "Connection: close\r\nContent-Length: 0\r\n\r\n", FRM_EV_DONE);
	close_line_case("HTTP/1.0: closes unless it says keep-alive",
			"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", FRM_M_GET,
			"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", FRM_EV_DONE);
	close_line_case("interim first: only the final head",
			"HTTP/1.1 100 Continue\r\n\r\n" H11 "Content-Length: 0\r\n\r\n", FRM_M_POST,
			"HTTP/1.1 100 Continue\r\n\r\n" H11 "Content-Length: 0\r\nConnection: close\r\n\r\n",
			FRM_EV_DONE);
	close_line_case("HEAD", H11 "Content-Length: 99\r\n\r\n", FRM_M_HEAD,
			H11 "Content-Length: 99\r\nConnection: close\r\n\r\n", FRM_EV_DONE);
	close_line_case("bare LF head", "HTTP/1.1 204 No Content\nX: y\n\n", FRM_M_GET,
			"HTTP/1.1 204 No Content\nX: y\nConnection: close\r\n\n", FRM_EV_DONE);
	close_line_case("101: not ours", "HTTP/1.1 101 Switching\r\nUpgrade: x\r\n\r\n", FRM_M_GET,
			"HTTP/1.1 101 Switching\r\nUpgrade: x\r\n\r\n", FRM_EV_UPGRADE);
	close_line_case("close-delimited", H11 "X: y\r\n\r\nbody", FRM_M_GET,
			H11 "X: y\r\nConnection: close\r\n\r\nbody", FRM_EV_CLOSE_BODY);
	{
		/* without insert_close: never an INSERT (the old behaviour) */
		struct frm_resp r;
		enum frm_resp_event ev;
		char buf[] = H11 "Content-Length: 0\r\n\r\n";
		frm_resp_begin(&r, FRM_M_GET, true);
		size_t k = frm_resp_feed(&r, buf, strlen(buf), &ev);
		CHECK(k == strlen(buf) && ev == FRM_EV_DONE, "no insert_close: no close line");
	}
}

/* a big header block is never buffered */
static void test_resp_big(void)
{
	size_t n = 70 * 1024, hl;
	char *in = malloc(n + 256), *bigbuf;
	struct frm_resp r;
	enum frm_resp_event ev;
	size_t k, i, total;
	static char piece[64 * 1024];

	hl = (size_t)sprintf(in, H11 "Set-Cookie: ");
	memset(in + hl, 'c', 66 * 1024);
	hl += 66 * 1024;
	hl += (size_t)sprintf(in + hl, "\r\nContent-Length: 3\r\n\r\nabc");
	resp_case3("64 KiB header", in, hl, "G", false, "D@$ 200 L r; ", NULL);

	/* a 64 KiB NTLM challenge value */
	hl = (size_t)sprintf(in, "HTTP/1.1 401 U\r\nWWW-Authenticate: Negotiate ");
	memset(in + hl, 'Q', 65 * 1024);
	hl += 65 * 1024;
	hl += (size_t)sprintf(in + hl, "==\r\nContent-Length: 0\r\n\r\n");
	resp_case3("64 KiB negotiate", in, hl, "G", false, "D@$ 401 L b; ", NULL);

	/* Content-Length with 300 leading zeros: cannot be read whole */
	hl = (size_t)sprintf(in, H11 "Content-Length: ");
	memset(in + hl, '0', 300);
	hl += 300;
	hl += (size_t)sprintf(in + hl, "1\r\n\r\nx");
	resp_case3("cl over val[]", in, hl, "G", false, "E@?; ", NULL);
	resp_case3("cl over val[] on HEAD", in, hl - 1, "H", false, "D@$ 200 - r; ", NULL);
	hl = (size_t)sprintf(in, H11 "Transfer-Encoding: ");
	for (i = 0; i < 50; i++)
		hl += (size_t)sprintf(in + hl, "gzip, ");
	hl += (size_t)sprintf(in + hl, "chunked\r\n\r\n0\r\n\r\n");
	resp_case3("te over val[]", in, hl, "G", false, "E@?; ", NULL);
	resp_case3("te over val[] on HEAD", in, hl - 5, "H", false, "D@$ 200 - r; ", NULL);
	free(in);

	/* 100 MB body: skipped by arithmetic, piece by piece */
	memset(piece, 'x', sizeof(piece));
	{
		const char *h = H11 "Content-Length: 104857600\r\n\r\n";

		frm_resp_begin(&r, FRM_M_GET, false);
		k = frm_resp_feed(&r, guarded(h, strlen(h)), strlen(h), &ev);
		CHECK(k == strlen(h) && ev == FRM_EV_NONE && r.head_done, "100MB head");
		bigbuf = guarded(piece, sizeof(piece));
		for (i = 0, total = 0; i < 1600; i++) {
			k = frm_resp_feed(&r, bigbuf, sizeof(piece), &ev);
			total += k;
			if (k != sizeof(piece) || (i < 1599 ? ev != FRM_EV_NONE : ev != FRM_EV_DONE))
				break;
		}
		CHECK(i == 1600 && total == 104857600 && frm_resp_reusable(&r),
		      "100MB body: i=%zu total=%zu", i, total);

		/* the same with the next response glued to the last piece */
		frm_resp_begin(&r, FRM_M_GET, false);
		frm_resp_feed(&r, guarded(h, strlen(h)), strlen(h), &ev);
		for (i = 0; i < 1599; i++)
			frm_resp_feed(&r, bigbuf, sizeof(piece), &ev);
		k = frm_resp_feed(&r, bigbuf, sizeof(piece), &ev);
		CHECK(k == sizeof(piece) && ev == FRM_EV_DONE, "100MB exact end");
	}
	{
		/* a 100 MB chunk, then the last chunk in the same feed */
		const char *h = H11 CHUNKED "\r\n6400000\r\n";
		const char *tail = "\r\n0\r\n\r\nHTTP";

		frm_resp_begin(&r, FRM_M_GET, false);
		k = frm_resp_feed(&r, guarded(h, strlen(h)), strlen(h), &ev);
		CHECK(k == strlen(h) && ev == FRM_EV_NONE, "100MB chunk head");
		for (i = 0; i < 1600; i++)
			if (frm_resp_feed(&r, bigbuf, sizeof(piece), &ev) != sizeof(piece))
				break;
		CHECK(i == 1600 && ev == FRM_EV_NONE && r.body.left == 0, "100MB chunk");
		k = frm_resp_feed(&r, guarded(tail, strlen(tail)), strlen(tail), &ev);
		CHECK(k == strlen(tail) - 4 && ev == FRM_EV_DONE && frm_resp_reusable(&r),
		      "100MB chunk end k=%zu", k);
	}
}

static void test_resp_misuse(void)
{
	struct frm_resp r;
	enum frm_resp_event ev;
	const char *a = H11 "Content-Length: 0\r\n\r\n";
	char *p = guarded(a, strlen(a));
	size_t k;

	frm_resp_begin(&r, FRM_M_GET, false);
	k = frm_resp_feed(&r, p, 0, &ev);
	CHECK(k == 0 && ev == FRM_EV_NONE, "empty feed");
	k = frm_resp_feed(&r, p, strlen(a), &ev);
	CHECK(k == strlen(a) && ev == FRM_EV_DONE, "done");
	/* fed again without frm_resp_begin: refused, and no spin */
	k = frm_resp_feed(&r, p, strlen(a), &ev);
	CHECK(k == 0 && ev == FRM_EV_ERROR, "after DONE without begin");
	CHECK(frm_resp_reusable(&r), "still reusable");
	frm_resp_begin(&r, FRM_M_GET, false);
	CHECK(!frm_resp_reusable(&r), "not done: not reusable");
}

/* frm_resp_in_body: only between a final head's end and its body's end
 * (splice() from a connection moves such bytes with the kernel's splice:
 * docs/replay.md "splice() from a connection") */
static void test_resp_in_body(void)
{
	struct frm_resp r;
	enum frm_resp_event ev;
	const char *a = "HTTP/1.1 100 Continue\r\n\r\n" H11 "Content-Length: 4\r\n\r\nbodyHTTP";
	size_t n = strlen(a), k = 0, interim = strlen("HTTP/1.1 100 Continue\r\n\r\n");
	char *p = guarded(a, n);

	frm_resp_begin(&r, FRM_M_GET, true);
	r.insert_close = true;
	CHECK(!frm_resp_in_body(&r), "not in a body before the head");
	k += frm_resp_feed(&r, p, interim, &ev);
	CHECK(k == interim && ev == FRM_EV_INTERIM && !frm_resp_in_body(&r), "not after an interim head");
	k += frm_resp_feed(&r, p + k, 10, &ev);
	CHECK(!frm_resp_in_body(&r), "not inside the final head");
	k += frm_resp_feed(&r, p + k, n - k, &ev);
	CHECK(ev == FRM_EV_INSERT && !frm_resp_in_body(&r), "not at the close line");
	k += frm_resp_feed(&r, p + k, 2, &ev);
	CHECK(ev == FRM_EV_NONE && frm_resp_in_body(&r), "in the body after the blank line");
	k += frm_resp_feed(&r, p + k, 3, &ev);
	CHECK(ev == FRM_EV_NONE && frm_resp_in_body(&r), "in the body with a byte left");
	k += frm_resp_feed(&r, p + k, n - k, &ev);
	CHECK(ev == FRM_EV_DONE && k == n - 4 && !frm_resp_in_body(&r), "not after the body");
}

/* ---------------------------------------------------------------- bodies */

static void test_body(void)
{
	const char *in = "4\r\nWiki\r\n5;x=y\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nT: v\r\n\r\nNEXT";
	size_t n = strlen(in), body = n - 4, k, cut;
	struct frm_body b;
	long rc, sum;

	frm_body_init(&b, FRM_BODY_CHUNKED, 0);
	rc = frm_body_feed(&b, guarded(in, n), n);
	CHECK(rc == (long)body && b.done && !b.doubt, "chunked whole rc=%ld", rc);
	rc = frm_body_feed(&b, guarded(in, n), n);
	CHECK(rc == 0, "after done: 0");
	for (cut = 1; cut < n; cut++) {
		frm_body_init(&b, FRM_BODY_CHUNKED, 0);
		sum = frm_body_feed(&b, guarded(in, cut), cut);
		if (!b.done)
			sum += frm_body_feed(&b, guarded(in + cut, n - cut), n - cut);
		if (sum != (long)body || !b.done)
			break;
	}
	CHECK(cut == n, "chunked split at %zu", cut);
	frm_body_init(&b, FRM_BODY_CHUNKED, 0);
	for (k = 0, sum = 0; k < n && !b.done; k++)
		sum += frm_body_feed(&b, guarded(in + k, 1), 1);
	CHECK(sum == (long)body && b.done, "chunked bytewise");

	frm_body_init(&b, FRM_BODY_LENGTH, 3);
	rc = frm_body_feed(&b, guarded("abcdef", 6), 6);
	CHECK(rc == 3 && b.done, "length 3");
	frm_body_init(&b, FRM_BODY_LENGTH, 0);
	CHECK(b.done && frm_body_feed(&b, guarded("a", 1), 1) == 0, "length 0");
	frm_body_init(&b, FRM_BODY_NONE, 0);
	CHECK(b.done, "none is done");
	frm_body_init(&b, FRM_BODY_CLOSE, 0);
	CHECK(frm_body_feed(&b, guarded("abc", 3), 3) == 3 && !b.done, "close never ends");
	frm_body_init(&b, FRM_BODY_LENGTH, 5ull << 40);
	for (k = 0; k < 10; k++)
		frm_body_feed(&b, guarded(in, n), n);
	CHECK(b.left == (5ull << 40) - 10 * n && !b.done, "big length arithmetic");

	frm_body_init(&b, FRM_BODY_CHUNKED, 0);
	CHECK(frm_body_feed(&b, guarded("x\r\n", 3), 3) == -1, "bad chunk size");
	CHECK(frm_body_feed(&b, guarded("0\r\n", 3), 3) == -1, "error sticks");
	frm_body_init(&b, FRM_BODY_CHUNKED, 0);
	CHECK(frm_body_feed(&b, guarded("1 \nx\n0\n\n", 8), 8) == 8 && b.done && b.doubt,
	      "lenient chunk doubt");
}

/* ---------------------------------------------------------------- requests */

static const char *req_summary(const char *in, size_t n, struct frm_req_head *h)
{
	static char s[128];
	long rc = frm_req_parse_head(guarded(in, n), n, h);
	char body[32];

	if (rc <= 0) {
		snprintf(s, sizeof(s), "%ld", rc);
		return s;
	}
	if (h->body_kind == FRM_BODY_LENGTH)
		snprintf(body, sizeof(body), "L%llu", (unsigned long long)h->body_len);
	else
		snprintf(body, sizeof(body), "%c", kind_char(h->body_kind));
	snprintf(s, sizeof(s), "%ld m%d 1.%u %s %s%s%s%s%s%s%s%s", rc, (int)h->method,
		 h->version_minor, body, h->app_close ? "c" : "",
		 h->has_conn_header ? "h" : "", h->keepalive_token ? "k" : "",
		 h->upgrade ? "u" : "", h->idempotency_key ? "i" : "",
		 h->expect_continue ? "e" : "", h->doubt ? "d" : "", h->conn_bound ? "b" : "");
	return s;
}

/* parse in, check the summary, and check every prefix: 0 until the head is
 * complete (or -1, and then -1 for every longer prefix) */
static void req_case2(const char *in, size_t n, const char *want)
{
	struct frm_req_head h;
	char whole[128];
	long full, rc;
	size_t p;
	bool mono = true, err = false;

	snprintf(whole, sizeof(whole), "%s", req_summary(in, n, &h));
	CHECK(log_match(want, whole, n), "req [%.*s]: want [%s] got [%s]",
	      (int)(n > 40 ? 40 : n), in, want, whole);
	full = strtol(whole, NULL, 10);
	for (p = 0; p < n; p++) {
		rc = frm_req_parse_head(guarded(in, p), p, &h);
		if (err && rc != -1)
			mono = false;
		if (rc == -1)
			err = true;
		else if (full > 0 && (size_t)full <= p ? rc != full : rc != 0)
			mono = false;
		if (rc == -1 && full != -1)
			mono = false;
	}
	CHECK(mono, "req [%.*s]: prefixes inconsistent", (int)(n > 40 ? 40 : n), in);
}

static void req_case(const char *in, const char *want)
{
	req_case2(in, strlen(in), want);
}

static void test_req_parse(void)
{
	struct frm_req_head h;
	char *big;
	size_t n;

	req_case("GET / HTTP/1.1\r\nHost: a\r\n\r\n", "$ m1 1.1 - ");
	req_case("GET / HTTP/1.1\r\nHost: a\r\n\r\nBODY", "? m1 1.1 - ");
	req_case("HEAD /x?y HTTP/1.0\r\n\r\n", "$ m2 1.0 - c");
	req_case("OPTIONS * HTTP/1.1\r\n\r\n", "$ m3 1.1 - ");
	req_case("TRACE / HTTP/1.1\r\n\r\n", "$ m4 1.1 - ");
	req_case("PUT / HTTP/1.1\r\nContent-Length: 12\r\n\r\n", "$ m5 1.1 L12 ");
	req_case("DELETE / HTTP/1.1\r\n\r\n", "$ m6 1.1 - ");
	req_case("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", "$ m7 1.1 K ");
	req_case("PATCH / HTTP/1.1\r\ncontent-length: 3, 3\r\n\r\n", "$ m8 1.1 L3 ");
	req_case("CONNECT a:443 HTTP/1.1\r\n\r\n", "$ m9 1.1 - ");
	req_case("get / HTTP/1.1\r\n\r\n", "$ m0 1.1 - ");
	req_case("M-SEARCH * HTTP/1.1\r\n\r\n", "$ m0 1.1 - ");
	req_case("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", "$ m1 1.0 - hk");
	req_case("GET / HTTP/1.1\r\nConnection: close\r\n\r\n", "$ m1 1.1 - ch");
	req_case("GET / HTTP/1.1\r\nConnection: TE, close\r\nTE: trailers\r\n\r\n",
		 "$ m1 1.1 - ch");
	req_case("GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
		 "$ m1 1.1 - hu");
	req_case("GET / HTTP/1.1\r\nUpgrade: h2c\r\n\r\n", "$ m1 1.1 - u");
	/* connection-bound logins from the request side; per-request schemes not */
	req_case("GET / HTTP/1.1\r\nAuthorization: Negotiate YIIabc==\r\n\r\n", "$ m1 1.1 - b");
	req_case("GET / HTTP/1.1\r\nauthorization:   NTLM TlRMTVNTUAAB\r\n\r\n", "$ m1 1.1 - b");
	req_case("GET / HTTP/1.1\r\nProxy-Authorization: kerberos x\r\n\r\n", "$ m1 1.1 - b");
	req_case("GET / HTTP/1.1\r\nAuthorization: Negotiate\r\n\r\n", "$ m1 1.1 - b");
	req_case("GET / HTTP/1.1\r\nAuthorization: Basic dTpw\r\n\r\n", "$ m1 1.1 - ");
	req_case("GET / HTTP/1.1\r\nAuthorization: Bearer NTLM\r\n\r\n", "$ m1 1.1 - ");
	req_case("GET / HTTP/1.1\r\nAuthorization: NTLMX y\r\n\r\n", "$ m1 1.1 - ");
	req_case("GET / HTTP/1.1\r\nX-Authorization: NTLM y\r\n\r\n", "$ m1 1.1 - ");
	req_case("POST / HTTP/1.1\r\nIdempotency-Key: \"8e03\"\r\nContent-Length: 0\r\n\r\n",
		 "$ m7 1.1 L0 i");
	req_case("POST / HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 9\r\n\r\n",
		 "$ m7 1.1 L9 e");
	req_case("POST / HTTP/1.1\r\nExpect: 100-continuex\r\n\r\n", "$ m7 1.1 - ");
	/* doubt */
	req_case("GET / HTTP/1.1\nHost: a\n\n", "$ m1 1.1 - d");
	req_case("GET / HTTP/1.1\r\nHost: a\r\n\n", "$ m1 1.1 - d");
	req_case("GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", "$ m1 1.1 - d");
	req_case("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
		 "$ m7 1.1 K d");
	req_case("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
		 "$ m7 1.1 L3 d");
	req_case("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", "$ m7 1.0 K cd");
	req_case("POST / HTTP/1.1\r\nTransfer-Encoding: chunked;x=1\r\n\r\n", "$ m7 1.1 K d");
	req_case("POST / HTTP/1.1\r\nTransfer-Encoding: chunked,\r\n\r\n", "$ m7 1.1 K d");
	/* not HTTP/1.x, or malformed: as early as possible */
	req_case("", "0");
	req_case("G", "0");
	req_case("GE", "0");
	req_case("GET / HTTP/1.", "0");
	req_case("GET / HTTP/1.1\r", "0");
	req_case2("\x16", 1, "-1");
	req_case2("\x16\x03", 2, "-1");
	req_case2("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11, "-1");
	req_case("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "-1");
	req_case("PRI * HTTP/2", "-1");
	req_case(" GET / HTTP/1.1\r\n\r\n", "-1");
	req_case("\r\nGET / HTTP/1.1\r\n\r\n", "-1");
	req_case("GET  / HTTP/1.1\r\n\r\n", "-1");
	req_case("GET /\r\n", "-1");
	req_case("GET / HTTP/1.2\r\n\r\n", "-1");
	req_case("GET / HTTP/2.0\r\n\r\n", "-1");
	req_case("GET / http/1.1\r\n\r\n", "-1");
	req_case("GET / HTTP/1.1 \r\n\r\n", "-1");
	req_case("GET / HTTP/1.1\r\r\n", "-1");
	req_case("G(T / HTTP/1.1\r\n\r\n", "-1");
	req_case("GET / HTTP/1.1\r\nHost : a\r\n\r\n", "-1");
	req_case("GET / HTTP/1.1\r\n: a\r\n\r\n", "-1");
	req_case("GET / HTTP/1.1\r\nNoColon\r\n\r\n", "-1");
	req_case("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", "-1");
	req_case2("GET / HTTP/1.1\r\nX: a\0b\r\n\r\n", 27, "-1");
	req_case("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", "-1");
	req_case("POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", "-1");
	req_case("POST / HTTP/1.1\r\nContent-Length: +4\r\n\r\n", "-1");
	req_case("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", "-1");
	req_case("POST / HTTP/1.1\r\nContent-Length: 4\r\n 5\r\n\r\n", "-1");
	req_case("GET / HTTP/1.1\r\nConnection: close,\r\n keep-alive\r\n\r\n", "-1");

	/* the 64 KiB limit */
	big = malloc(FRM_MAX_HEAD + 64);
	n = (size_t)sprintf(big, "GET / HTTP/1.1\r\nX-Big: ");
	memset(big + n, 'b', FRM_MAX_HEAD - n - 4);
	memcpy(big + FRM_MAX_HEAD - 4, "\r\n\r\n", 4);
	CHECK(frm_req_parse_head(guarded(big, FRM_MAX_HEAD), FRM_MAX_HEAD, &h) == FRM_MAX_HEAD,
	      "head of exactly FRM_MAX_HEAD");
	CHECK(frm_req_parse_head(guarded(big, FRM_MAX_HEAD - 1), FRM_MAX_HEAD - 1, &h) == 0,
	      "one byte short: more");
	memmove(big + FRM_MAX_HEAD - 3, big + FRM_MAX_HEAD - 4, 4);
	big[FRM_MAX_HEAD - 4] = 'b';
	CHECK(frm_req_parse_head(guarded(big, FRM_MAX_HEAD + 1), FRM_MAX_HEAD + 1, &h) == -1,
	      "head over FRM_MAX_HEAD");
	CHECK(frm_req_parse_head(guarded(big, FRM_MAX_HEAD), FRM_MAX_HEAD, &h) == -1,
	      "cannot complete within FRM_MAX_HEAD");
	free(big);
}

/* ---------------------------------------------------------------- rewrite */

static void rw_case(const char *in, const char *want)
{
	struct frm_req_head h, h2;
	char out[1024];
	long rc, n = frm_req_parse_head(guarded(in, strlen(in)), strlen(in), &h);
	const char *head;

	CHECK(n > 0, "rewrite input parses: [%s]", in);
	if (n <= 0)
		return;
	head = guarded(in, strlen(in));
	memset(out, '#', sizeof(out));
	rc = frm_req_rewrite_head(head, &h, out, sizeof(out));
	if (!want) {
		CHECK(rc == 0 && out[0] == '#', "rewrite [%s]: want no change, got %ld", in, rc);
		return;
	}
	CHECK(rc == (long)strlen(want) && memcmp(out, want, strlen(want)) == 0,
	      "rewrite [%s]: got %ld [%.*s]", in, rc, rc > 0 ? (int)rc : 0, out);
	if (rc <= 0)
		return;
	/* the result is a valid head that keeps the connection */
	CHECK(frm_req_parse_head(guarded(out, (size_t)rc), (size_t)rc, &h2) == rc &&
	      !h2.app_close && h2.keepalive_token && h2.method == h.method &&
	      h2.body_kind == h.body_kind && h2.body_len == h.body_len,
	      "rewritten head re-parses");
	/* too small: -1; exactly enough: ok */
	head = guarded(in, strlen(in));
	CHECK(frm_req_rewrite_head(head, &h, out, (size_t)rc - 1) == -1, "cap too small");
	CHECK(frm_req_rewrite_head(head, &h, out, (size_t)rc) == rc, "cap exact");
}

/* The User-Agent's hash (how a TLS server ends is learnt per kind of
 * request: docs/tls.md "Ragged closes"): 0 without one, odd with one, the
 * same for the same value whatever the name's case and the OWS, different
 * for another value. */
static uint32_t ua_of(const char *head)
{
	struct frm_req_head h;
	long r = frm_req_parse_head(head, strlen(head), &h);
	CHECK(r > 0, "ua_of: %s: %ld", head, r);
	return r > 0 ? h.ua_hash : 0;
}

static void test_ua_hash(void)
{
	uint32_t none = ua_of("GET / HTTP/1.1\r\nHost: a\r\n\r\n");
	uint32_t a = ua_of("GET / HTTP/1.1\r\nUser-Agent: curl/8\r\n\r\n");
	uint32_t a2 = ua_of("GET /x HTTP/1.1\r\nuser-agent:   curl/8  \r\nHost: b\r\n\r\n");
	uint32_t b = ua_of("GET / HTTP/1.1\r\nUser-Agent: Mozilla/4.0 (compatible; MSIE 5.0)\r\n\r\n");
	uint32_t empty = ua_of("GET / HTTP/1.1\r\nUser-Agent:\r\n\r\n");
	CHECK(none == 0, "no User-Agent: %u", none);
	CHECK(a & 1, "a User-Agent: odd, got %u", a);
	CHECK(a == a2, "the same value: %u %u", a, a2);
	CHECK(a != b, "another value: %u %u", a, b);
	CHECK(empty != 0, "an empty User-Agent is one: %u", empty);
	/* another name that ends in it is not it */
	CHECK(ua_of("GET / HTTP/1.1\r\nX-User-Agent: curl/8\r\n\r\n") == 0, "X-User-Agent");
}

static void test_rewrite(void)
{
	rw_case("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\n");
	rw_case("GET / HTTP/1.1\r\nConnection: TE, close\r\nTE: trailers\r\n\r\n",
		"GET / HTTP/1.1\r\nConnection: TE, keep-alive\r\nTE: trailers\r\n\r\n");
	rw_case("GET / HTTP/1.1\r\nConnection: close, close\r\n\r\n",
		"GET / HTTP/1.1\r\nConnection: keep-alive, keep-alive\r\n\r\n");
	rw_case("GET / HTTP/1.1\r\nconnection:CLOSE \t\r\nX: close\r\n\r\n",
		"GET / HTTP/1.1\r\nconnection:keep-alive \t\r\nX: close\r\n\r\n");
	rw_case("POST /u HTTP/1.1\r\nContent-Length: 3\r\nConnection: close\r\n\r\n",
		"POST /u HTTP/1.1\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\n");
	rw_case("GET / HTTP/1.0\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.0\r\nHost: a\r\nConnection: keep-alive\r\n\r\n");
	rw_case("GET / HTTP/1.0\r\n\r\n", "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
	rw_case("GET / HTTP/1.0\r\nConnection: TE\r\nTE: x\r\n\r\n",
		"GET / HTTP/1.0\r\nConnection: TE, keep-alive\r\nTE: x\r\n\r\n");
	rw_case("GET / HTTP/1.0\r\nConnection: TE  \r\n\r\n",
		"GET / HTTP/1.0\r\nConnection: TE, keep-alive  \r\n\r\n");
	rw_case("GET / HTTP/1.0\r\nConnection: \r\n\r\n",
		"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
	rw_case("GET / HTTP/1.0\r\nConnection: close\r\n\r\n",
		"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
	rw_case("GET / HTTP/1.0\r\nConnection: foo\r\nConnection: close\r\n\r\n",
		"GET / HTTP/1.0\r\nConnection: foo\r\nConnection: keep-alive\r\n\r\n");
	/* nothing to do */
	rw_case("GET / HTTP/1.1\r\nHost: a\r\n\r\n", NULL);
	rw_case("GET / HTTP/1.1\r\nConnection: closed\r\n\r\n", NULL);
	rw_case("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", NULL);
	rw_case("GET / HTTP/1.1\r\nConnection: Upgrade, close\r\nUpgrade: websocket\r\n\r\n", NULL);
	rw_case("GET / HTTP/1.1\nConnection: close\n\n", NULL);
	rw_case("GET / HTTP/1.1\r\nX: a\r\n b\r\nConnection: close\r\n\r\n", NULL);
	{
		/* body bytes after the head are not part of the rewrite */
		const char *in = "POST / HTTP/1.1\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi";
		struct frm_req_head h;
		char out[256];
		long n = frm_req_parse_head(in, strlen(in), &h);

		CHECK(n == (long)strlen(in) - 2, "head_len excludes body");
		CHECK(frm_req_rewrite_head(in, &h, out, sizeof(out)) == n + 5,
		      "rewrite length");
	}
	{
		/* a head the rewrite would grow to FRM_MAX_HEAD or more goes
		 * as it is: frm_req_parse_head would refuse the result; one
		 * byte shorter is still rewritten */
		static char in[FRM_MAX_HEAD], out[FRM_MAX_HEAD + 64];
		const char *tail = "\r\nConnection: close\r\n\r\n";
		struct frm_req_head h;
		size_t n, pad;
		long rc;

		for (pad = FRM_MAX_HEAD - 31; pad < FRM_MAX_HEAD - 23; pad++) {
			n = (size_t)snprintf(in, sizeof(in), "GET / HTTP/1.1\r\nX: ");
			memset(in + n, 'a', pad - n);
			n = pad;
			memcpy(in + n, tail, strlen(tail));
			n += strlen(tail);
			rc = frm_req_parse_head(guarded(in, n), n, &h);
			CHECK(rc == (long)n, "long head parses (%zu)", n);
			rc = frm_req_rewrite_head(guarded(in, n), &h, out, sizeof(out));
			CHECK(n + 5 >= FRM_MAX_HEAD ? rc == 0 : rc == (long)n + 5,
			      "head of %zu bytes: rewrite %ld", n, rc);
			if (rc > 0)
				CHECK(frm_req_parse_head(guarded(out, (size_t)rc), (size_t)rc, &h) == rc,
				      "the rewritten head of %ld bytes parses", rc);
		}
	}
}

/* ---------------------------------------------------------------- mini fuzz */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* mutated responses: whole, random two-way split and bytewise must agree */
static void test_mutations(void)
{
	static const char *seeds[] = {
		H11 "Content-Length: 5\r\nConnection: keep-alive\r\n\r\nhello" H11 CHUNKED
		    "\r\n5;a=b\r\nhello\r\n0\r\nT: 1\r\n\r\n",
		("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\nKeep-Alive: timeout=5, max=3\r\n"
		 "Connection: Keep-Alive\r\nContent-Length: 1, 1\r\n\r\nx"),
		"HTTP/1.1 401 U\r\nWWW-Authenticate: NTLM\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n",
	};
	char in[512], out[512];
	struct sb a, b;
	size_t bounds[514], s, k, n, m, i, cut;
	int iter, bad = 0;

	for (iter = 0; iter < 3000; iter++) {
		s = (size_t)iter % 3;
		n = strlen(seeds[s]);
		memcpy(in, seeds[s], n);
		m = 1 + next_rand() % 4;
		for (k = 0; k < m; k++) {
			i = next_rand() % n;
			switch (next_rand() % 4) {
			case 0: in[i] = (char)next_rand(); break;
			case 1: in[i] = "\r\n :;,\t0"[next_rand() % 8]; break;
			case 2: in[i] = (char)(in[i] ^ 0x20); break;
			default: n = i + 1; break;
			}
		}
		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		bounds[0] = 0;
		bounds[1] = n;
		drive(in, n, "GGG", true, bounds, 1, &a, out);
		cut = 1 + next_rand() % (n > 1 ? n - 1 : 1);
		if (cut < n) {
			bounds[1] = cut;
			bounds[2] = n;
			drive(in, n, "GGG", true, bounds, 2, &b, out);
			if (strcmp(a.s, b.s) != 0)
				bad++;
		}
		memset(&b, 0, sizeof(b));
		for (k = 0; k <= n; k++)
			bounds[k] = k;
		drive(in, n, "GGG", true, bounds, n, &b, out);
		if (strcmp(a.s, b.s) != 0) {
			if (bad++ < 3)
				fprintf(stderr, "  mutation [%.*s]\n  whole [%s]\n  bytes [%s]\n",
					(int)n, in, a.s, b.s);
		}
		/* requests: never a crash, prefixes consistent */
		frm_req_parse_head(guarded(in, n), n, &(struct frm_req_head){ 0 });
	}
	CHECK(bad == 0, "mutations: %d inconsistent", bad);
}

/* The fast path (framer.c resp_head_fast, docs/cost.md) on what it reads
 * and on what it leaves to the byte machine; resp_case3 compares the whole
 * feed (fast path) with every split and a byte at a time (byte machine). */
static void test_resp_fast(void)
{
	static const char nginx[] = "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\n"
		"Date: Fri, 04 Dec 2026 21:00:00 GMT\r\nContent-Type: text/plain\r\n"
		"Content-Length: 3\r\nLast-Modified: Fri, 04 Dec 2026 20:00:00 GMT\r\n"
		"Connection: keep-alive\r\nETag: \"69321234-400\"\r\n"
		"Accept-Ranges: bytes\r\n\r\nabc";
	char in[512], out[512];
	size_t k, n;

	resp_case3("nginx", nginx, strlen(nginx), "G", false, "D@$ 200 L r; ", NULL);
	memcpy(out, nginx, sizeof(nginx));
	memcpy(strstr(out, "keep-alive"), "     close", 10);
	resp_case3("nginx rewrite", nginx, strlen(nginx), "G", true, "D@$ 200 L r; ", out);
	/* names compared a word at a time: case, and a same-length near miss */
	resp_case("CL upper", H11 "CONTENT-LENGTH: 1\r\n\r\nx", "G", "D@$ 200 L r; ");
	resp_case("CL underscore", H11 "Content_Length: 1\r\n\r\nx", "G", "C@? 200 C -; ");
	resp_case("TE mixed", H11 "transfer-ENCODING: chunked\r\n\r\n0\r\n\r\n", "G",
		  "D@$ 200 K r; ");
	resp_case("connection close upper", H11 "CONNECTION: CLOSE\r\nContent-Length: 0\r\n\r\n",
		  "G", "D@$ 200 L c; ");
	/* every alignment of a line end against the 16- and 8-byte scans */
	for (k = 0; k < 40; k++) {
		n = (size_t)snprintf(in, sizeof(in), H11 "X: %.*s\r\nContent-Length: 1\r\n\r\nx",
				     (int)k, "0123456789012345678901234567890123456789");
		resp_case3("line end alignment", in, n, "G", false, "D@$ 200 L r; ", NULL);
		/* the head ends exactly at the buffer's end */
		n = (size_t)snprintf(in, sizeof(in), H11 "X: %.*s\r\n\r\n", (int)k,
				     "0123456789012345678901234567890123456789");
		resp_case3("head at the end", in, n, "H", false, "D@$ 200 - r; ", NULL);
	}
	/* left to the byte machine: a lone CR, a status without SP before the
	 * reason, status 0xx, duplicates, more Connection headers than the
	 * fast path masks */
	resp_case("lone cr in value", H11 "X: a\rb\r\nContent-Length: 0\r\n\r\n", "G", "E@?; ");
	resp_case("lone cr in reason", "HTTP/1.1 200 O\rK\r\nContent-Length: 0\r\n\r\n", "G",
		  "E@?; ");
	resp_case("status glued", "HTTP/1.1 200OK\r\nContent-Length: 0\r\n\r\n", "G", "E@?; ");
	resp_case("status 099", "HTTP/1.1 099 OK\r\nContent-Length: 0\r\n\r\n", "G", "E@?; ");
	resp_case("cl twice, differ", H11 "Content-Length: 1\r\nContent-Length: 2\r\n\r\nxy", "G",
		  "E@?; ");
	resp_case("te twice", H11 "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n",
		  "G", "C@? 200 C -; ");
	{
		const char *five = H11 "Connection: keep-alive\r\nConnection: keep-alive\r\n"
			"Connection: keep-alive\r\nConnection: keep-alive\r\n"
			"Connection: Keep-Alive \r\nContent-Length: 0\r\n\r\n";
		n = strlen(five);
		memcpy(out, five, n + 1);
		for (char *q = out; (q = strcasestr(q, "keep-alive")) != NULL; q += 10)
			memcpy(q, "     close", 10);
		resp_case3("five connection headers", five, n, "G", true, "D@$ 200 L r; ", out);
	}
}

int main(void)
{
	guard_init();
	test_resp_basic();
	test_resp_nobody();
	test_resp_cl_errors();
	test_resp_connection();
	test_resp_auth();
	test_resp_lenient();
	test_resp_errors();
	test_resp_pipelined();
	test_resp_rewrite();
	test_resp_big();
	test_close_line();
	test_resp_misuse();
	test_resp_in_body();
	test_resp_fast();
	test_body();
	test_req_parse();
	test_ua_hash();
	test_rewrite();
	test_mutations();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
