/*
 * framer.c - pure, incremental HTTP/1.x framing (RFC 9112 section 6.3) and
 * the request Connection-header rewrite.  See framer.h for the contract.
 *
 * No syscalls, no allocation, no mutable globals.  Response heads are parsed
 * byte by byte by a small state machine that keeps only the value of the
 * headers it interprets (struct frm_resp.val); a head whole in one buffer
 * first tries the fast path (resp_head_fast: a line at a time, the same
 * facts, the byte machine its fallback; docs/cost.md); bodies with a
 * length are skipped by arithmetic.  Request heads are parsed whole (the caller keeps
 * them, up to FRM_MAX_HEAD, because it may have to rewrite them).
 *
 * Choices the header leaves open:
 * - A Content-Length or Transfer-Encoding value longer than val[] cannot be
 *   read, so it is an ERROR when the framing depends on it (HEAD, 1xx, 204,
 *   304 do not); other long values only set doubt.  Authenticate values
 *   slide through val[], so any length is scanned for NTLM/Negotiate.
 * - A malformed Content-Length is likewise ignored where rule 1 or a TE
 *   frames the message (RFC 9112 6.3 applies its rules in order).
 * - ERROR is reported with the offset of the offending byte as the count
 *   consumed, the same however the stream is split.
 * - Feeding after DONE without frm_resp_begin() returns 0 and ERROR, so a
 *   caller that forgot cannot spin.
 * - Response heads have no size limit (nothing is buffered); lines of the
 *   chunked framing (size, extensions, trailers) are capped at FRM_MAX_HEAD
 *   so that a stream of garbage cannot pass for an endless extension.
 */
#include "framer.h"

#include <limits.h>
#include <stddef.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* ---------------------------------------------------------------- helpers */

/* headers we interpret; everything else is skipped without being stored */
enum hdr_id {
	H_NONE = 0,
	H_CL,      /* Content-Length */
	H_TE,      /* Transfer-Encoding */
	H_CONN,    /* Connection */
	H_KA,      /* Keep-Alive (responses) */
	H_AUTH,    /* WWW-Authenticate, Proxy-Authenticate (responses) */
	H_UPGRADE, /* Upgrade (requests) */
	H_IDEM,    /* Idempotency-Key (requests) */
	H_EXPECT,  /* Expect (requests) */
	H_AUTHZ,   /* Authorization, Proxy-Authorization (requests) */
	H_UA,      /* User-Agent (requests) */
};

static bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

static bool is_ows(unsigned char c)
{
	return c == ' ' || c == '\t';
}

static unsigned char lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* RFC 9110 5.6.2: tchar, as a table (one load per byte of a name) */
static const bool tchar_tab[256] = {
	['0' ... '9'] = true, ['a' ... 'z'] = true, ['A' ... 'Z'] = true,
	['!'] = true, ['#'] = true, ['$'] = true, ['%'] = true, ['&'] = true,
	['\''] = true, ['*'] = true, ['+'] = true, ['-'] = true, ['.'] = true,
	['^'] = true, ['_'] = true, ['`'] = true, ['|'] = true, ['~'] = true,
};

static bool is_tchar(unsigned char c)
{
	return tchar_tab[c];
}

static uint64_t load64(const char *p)
{
	uint64_t x;

	memcpy(&x, p, 8);
	return x;
}

static uint32_t load32(const char *p)
{
	uint32_t x;

	memcpy(&x, p, 4);
	return x;
}

/* The bytes of x that are zero, as their high bits; the lowest one
 * flagged is exact (a borrow can only flag bytes above a zero byte). */
static uint64_t zero_bytes(uint64_t x)
{
	return (x - 0x0101010101010101ULL) & ~x & 0x8080808080808080ULL;
}

/* The first NUL, CR or LF in [p, end), or end: what ends a line for the
 * byte machines (or breaks it), eight bytes at a time. */
static const char *find_ctl(const char *p, const char *end)
{
	const uint64_t ones = 0x0101010101010101ULL;
	uint64_t x, m;
#ifdef __SSE2__
	/* sixteen at a time where the ISA has it (every x86-64) */
	const __m128i nul = _mm_setzero_si128(), cr = _mm_set1_epi8('\r'),
		      lf = _mm_set1_epi8('\n');
	__m128i v;
	int bits;

	for (; end - p >= 16; p += 16) {
		v = _mm_loadu_si128((const __m128i *)(const void *)p);
		bits = _mm_movemask_epi8(_mm_or_si128(
			_mm_or_si128(_mm_cmpeq_epi8(v, nul), _mm_cmpeq_epi8(v, cr)),
			_mm_cmpeq_epi8(v, lf)));
		if (bits)
			return p + __builtin_ctz((unsigned)bits);
	}
#endif
	for (; end - p >= 8; p += 8) {
		x = load64(p);
		m = zero_bytes(x) | zero_bytes(x ^ (0x0d * ones)) | zero_bytes(x ^ (0x0a * ones));
		if (m)
			return p + (__builtin_ctzll(m) >> 3);
	}
	for (; p < end; p++)
		if (*p == '\0' || *p == '\r' || *p == '\n')
			break;
	return p;
}

/* The end of the tchar run from p; the run must end before the buffer
 * does (the caller knows a CR follows). */
static const char *skip_tchars(const char *p)
{
	for (;; p += 4) {
		if (!tchar_tab[(unsigned char)p[0]])
			return p;
		if (!tchar_tab[(unsigned char)p[1]])
			return p + 1;
		if (!tchar_tab[(unsigned char)p[2]])
			return p + 2;
		if (!tchar_tab[(unsigned char)p[3]])
			return p + 3;
	}
}

/* The end of the tchar run in [p, end): four at a time, then the tail. */
static const char *skip_tchars_to(const char *p, const char *end)
{
	for (; end - p >= 4; p += 4) {
		if (!tchar_tab[(unsigned char)p[0]])
			return p;
		if (!tchar_tab[(unsigned char)p[1]])
			return p + 1;
		if (!tchar_tab[(unsigned char)p[2]])
			return p + 2;
		if (!tchar_tab[(unsigned char)p[3]])
			return p + 3;
	}
	while (p < end && tchar_tab[(unsigned char)*p])
		p++;
	return p;
}

/* The end of the request-target run in [p, end): any visible byte,
 * obs-text tolerated; the first byte at or below SP, or DEL, ends it, sixteen at a time where SSE2 is. */
static const char *skip_target(const char *p, const char *end)
{
#ifdef __SSE2__
	const __m128i sp = _mm_set1_epi8(' '), del = _mm_set1_epi8(0x7f);
	__m128i v;
	int bits;

	for (; end - p >= 16; p += 16) {
		v = _mm_loadu_si128((const __m128i *)(const void *)p);
		/* unsigned v <= SP: min(v, SP) == v */
		bits = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(v, sp), v),
						      _mm_cmpeq_epi8(v, del)));
		if (bits)
			return p + __builtin_ctz((unsigned)bits);
	}
#endif
	while (p < end && (unsigned char)*p > ' ' && *p != 0x7f)
		p++;
	return p;
}

/* s[0..n), a field name (tchars only), equals the lower-case literal lit
 * of length n >= 4, ignoring case: OR 0x20 lower-cases a letter and turns
 * no other tchar into a letter or '-', so words compare whole. */
static bool name_eq(const char *s, size_t n, const char *lit)
{
	const uint64_t b8 = 0x2020202020202020ULL;
	const uint32_t b4 = 0x20202020u;
	size_t i;

	if (n < 8)
		return (load32(s) | b4) == load32(lit) &&
		       (load32(s + n - 4) | b4) == load32(lit + n - 4);
	for (i = 0; i + 8 < n; i += 8)
		if ((load64(s + i) | b8) != load64(lit + i))
			return false;
	return (load64(s + n - 8) | b8) == load64(lit + n - 8);
}

static int hexval(unsigned char c)
{
	if (is_digit(c))
		return c - '0';
	c = lower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* s[0..n) equals the lower-case literal lit, ignoring case */
static inline bool ieq(const char *s, size_t n, const char *lit)
{
	size_t i;

	/* (strlen of a literal: folded once inlined) */
	if (n != strlen(lit))
		return false;
	/* the case servers and clients send (a compare of words, the length
	 * being a constant), then any case a byte at a time */
	if (memcmp(s, lit, strlen(lit)) == 0)
		return true;
	for (i = 0; i < n; i++)
		if (lower(s[i]) != (unsigned char)lit[i])
			return false;
	return true;
}

/* One element of a sep-separated list (RFC 9110 5.6.1) from [*p, end), OWS
 * trimmed.  Empty elements are returned with *n == 0; false once the list is
 * exhausted (*p == NULL). */
static bool list_next(const char **p, const char *end, char sep,
		      const char **s, size_t *n)
{
	const char *q = *p, *e;

	if (!q)
		return false;
	e = memchr(q, sep, (size_t)(end - q));
	*p = e ? e + 1 : NULL;
	if (!e)
		e = end;
	while (q < e && is_ows(*q))
		q++;
	while (e > q && is_ows(e[-1]))
		e--;
	*s = q;
	*n = (size_t)(e - q);
	return true;
}

/* Which header a name is: by its length first, so that most names cost
 * one switch and at most two compares. */
static enum hdr_id header_id(const char *name, size_t n, bool response)
{
	switch (n) {
	case 14:
		return name_eq(name, n, "content-length") ? H_CL : H_NONE;
	case 17:
		return name_eq(name, n, "transfer-encoding") ? H_TE : H_NONE;
	case 10:
		if (name_eq(name, n, "connection"))
			return H_CONN;
		if (!response && name_eq(name, n, "user-agent"))
			return H_UA;
		return response && name_eq(name, n, "keep-alive") ? H_KA : H_NONE;
	case 16:
		return response && name_eq(name, n, "www-authenticate") ? H_AUTH : H_NONE;
	case 18:
		return response && name_eq(name, n, "proxy-authenticate") ? H_AUTH : H_NONE;
	case 7:
		return !response && name_eq(name, n, "upgrade") ? H_UPGRADE : H_NONE;
	case 15:
		return !response && name_eq(name, n, "idempotency-key") ? H_IDEM : H_NONE;
	case 6:
		return !response && name_eq(name, n, "expect") ? H_EXPECT : H_NONE;
	case 13:
		return !response && name_eq(name, n, "authorization") ? H_AUTHZ : H_NONE;
	case 19:
		return !response && name_eq(name, n, "proxy-authorization") ? H_AUTHZ : H_NONE;
	}
	return H_NONE;
}

/* Content-Length value, RFC 9110 8.6: 1*DIGIT, or a list of identical
 * values.  Returns 0 (ok), 1 (differs from an earlier value: *len keeps the
 * first), -1 (malformed: empty, sign, non-digit, overflow). */
static int clen_parse(const char *v, size_t vn, bool *have, uint64_t *len)
{
	const char *p = v, *s;
	size_t n, i;
	int rc = 0;
	uint64_t x = 0;

	/* the common case: a few digits, no list, no OWS */
	if (vn > 0 && vn < 19) {
		for (i = 0; i < vn && is_digit(v[i]); i++)
			x = x * 10 + (unsigned)(v[i] - '0');
		if (i == vn) {
			if (*have && x != *len)
				return 1;
			*have = true;
			*len = x;
			return 0;
		}
	}
	while (list_next(&p, v + vn, ',', &s, &n)) {
		x = 0;

		if (n == 0)
			return -1;
		for (i = 0; i < n; i++) {
			unsigned d = (unsigned char)s[i] - '0';

			if (d > 9 || x > (UINT64_MAX - d) / 10)
				return -1;
			x = x * 10 + d;
		}
		if (*have && x != *len) {
			rc = 1;
		} else {
			*have = true;
			*len = x;
		}
	}
	return rc;
}

/* Transfer-Encoding value: 1 when its last coding is chunked, 0 when it is
 * another coding, -1 when the list is empty (RFC 9112 6.1).  *odd is set
 * when that chunked carries parameters or other bytes ("chunked;x=1",
 * "chunked;"): chunked has none, and RFC 9112 7.1 says to treat them as an
 * error; and when the list has empty elements ("chunked,"): RFC 9110 5.6.1
 * ignores them, but other parsers (llhttp) then do not take the body for
 * chunked either. */
static int te_last_chunked(const char *v, size_t vn, bool *odd)
{
	const char *p = v, *s;
	size_t n, k;
	int rc = -1;

	while (list_next(&p, v + vn, ',', &s, &n)) {
		if (n == 0) {
			*odd = true;
			continue;
		}
		/* transfer-coding = token *( OWS ";" OWS transfer-parameter ) */
		for (k = 0; k < n && s[k] != ';' && !is_ows(s[k]); k++)
			;
		rc = ieq(s, k, "chunked");
		if (rc && k < n)
			*odd = true;
	}
	return rc;
}

/* ---------------------------------------------------------------- bodies */

enum chunk_state {
	CB_SIZE0 = 0, /* first hex digit of a chunk size */
	CB_SIZE,      /* more hex digits */
	CB_SIZE_WS,   /* whitespace after the size (lenient) */
	CB_EXT,       /* chunk extensions, skipped */
	CB_SIZE_LF,   /* CR seen on the size line */
	CB_DATA,      /* chunk data: skipped by arithmetic */
	CB_DATA_CR,   /* CRLF after the data */
	CB_DATA_LF,
	CB_TRL0,      /* start of a trailer line (or of the final CRLF) */
	CB_TRL,       /* inside a trailer field line, skipped */
	CB_TRL_LF,
	CB_END_LF,    /* CR of the final empty line seen */
	CB_ERROR,
};

void frm_body_init(struct frm_body *b, enum frm_body_kind kind, uint64_t len)
{
	memset(b, 0, sizeof(*b));
	b->kind = (uint8_t)kind;
	b->left = kind == FRM_BODY_LENGTH ? len : 0;
	b->done = kind == FRM_BODY_NONE || (kind == FRM_BODY_LENGTH && len == 0);
}

/* Body engine.  Returns 0 with *used = the bytes that belong to the body, or
 * -1 with *used = the offset of the byte that broke the framing. */
static int body_run(struct frm_body *b, const char *buf, size_t len,
		    size_t *used)
{
	size_t i = 0, n;
	int hex;

	*used = 0;
	if (b->done)
		return 0;
	switch (b->kind) {
	case FRM_BODY_LENGTH:
		n = b->left < len ? (size_t)b->left : len;
		b->left -= n;
		b->done = b->left == 0;
		*used = n;
		return 0;
	case FRM_BODY_CLOSE:
		*used = len;
		return 0;
	case FRM_BODY_CHUNKED:
		break;
	default:
		return -1;
	}

	/* RFC 9112 7.1: chunked-body = *chunk last-chunk trailer-section CRLF */
	while (i < len) {
		unsigned char c = buf[i];

		/* no line of the chunk framing is legitimately this long: a
		 * stream of garbage must not look like an endless extension */
		if (b->state != CB_DATA && ++b->line > FRM_MAX_HEAD)
			goto bad;
		switch (b->state) {
		case CB_DATA:
			n = b->left < len - i ? (size_t)b->left : len - i;
			b->left -= n;
			i += n;
			if (b->left == 0)
				b->state = CB_DATA_CR;
			continue;
		case CB_SIZE0:
			hex = hexval(c);
			if (hex < 0)
				goto bad;
			b->left = (uint64_t)hex;
			b->state = CB_SIZE;
			break;
		case CB_SIZE:
			hex = hexval(c);
			if (hex >= 0) {
				/* sizes are unbounded hex (leading zeros too) */
				if (b->left > UINT64_MAX >> 4)
					goto bad;
				b->left = b->left << 4 | (uint64_t)hex;
				break;
			}
			/* fall through */
		case CB_SIZE_WS:
			if (is_ows(c)) {
				/* BWS before ';' is legal (RFC 9112 7.1.1),
				 * before CRLF it is not: both are rare */
				b->doubt = true;
				b->state = CB_SIZE_WS;
			} else if (c == ';') {
				b->state = CB_EXT;
			} else if (c == '\r') {
				b->state = CB_SIZE_LF;
			} else if (c == '\n') {
				b->doubt = true;
				goto size_end;
			} else {
				goto bad;
			}
			break;
		case CB_EXT:
			if (c == '\r') {
				b->state = CB_SIZE_LF;
			} else if (c == '\n') {
				b->doubt = true;
				goto size_end;
			}
			break;
		case CB_SIZE_LF:
			if (c != '\n')
				goto bad;
		size_end:
			b->state = b->left ? CB_DATA : CB_TRL0;
			b->line = 0;
			break;
		case CB_DATA_CR:
			if (c == '\r') {
				b->state = CB_DATA_LF;
			} else if (c == '\n') {
				b->doubt = true;
				b->state = CB_SIZE0;
				b->line = 0;
			} else {
				goto bad;
			}
			break;
		case CB_DATA_LF:
			if (c != '\n')
				goto bad;
			b->state = CB_SIZE0;
			b->line = 0;
			break;
		case CB_TRL0:
			if (c == '\r') {
				b->state = CB_END_LF;
				break;
			}
			if (c == '\n') {
				b->doubt = true;
				goto finished;
			}
			b->state = CB_TRL;
			/* fall through */
		case CB_TRL:
			if (c == '\r') {
				b->state = CB_TRL_LF;
			} else if (c == '\n') {
				b->doubt = true;
				b->state = CB_TRL0;
				b->line = 0;
			}
			break;
		case CB_TRL_LF:
			if (c != '\n')
				goto bad;
			b->state = CB_TRL0;
			b->line = 0;
			break;
		case CB_END_LF:
			if (c != '\n')
				goto bad;
		finished:
			b->done = true;
			*used = i + 1;
			return 0;
		default:
			goto bad;
		}
		i++;
	}
	*used = len;
	return 0;
bad:
	b->state = CB_ERROR;
	*used = i;
	return -1;
}

long frm_body_feed(struct frm_body *b, const char *buf, size_t len)
{
	size_t used;

	if (len > LONG_MAX)
		len = LONG_MAX;
	if (body_run(b, buf, len, &used) < 0)
		return -1;
	return (long)used;
}

/* ---------------------------------------------------------------- requests */

enum frm_method frm_method_id(const char *s, size_t n)
{
	/* RFC 9110 9.1: method names are case-sensitive */
	switch (n) {
	case 3:
		if (memcmp(s, "GET", 3) == 0)
			return FRM_M_GET;
		if (memcmp(s, "PUT", 3) == 0)
			return FRM_M_PUT;
		break;
	case 4:
		if (memcmp(s, "HEAD", 4) == 0)
			return FRM_M_HEAD;
		if (memcmp(s, "POST", 4) == 0)
			return FRM_M_POST;
		break;
	case 5:
		if (memcmp(s, "TRACE", 5) == 0)
			return FRM_M_TRACE;
		if (memcmp(s, "PATCH", 5) == 0)
			return FRM_M_PATCH;
		break;
	case 6:
		if (memcmp(s, "DELETE", 6) == 0)
			return FRM_M_DELETE;
		break;
	case 7:
		if (memcmp(s, "OPTIONS", 7) == 0)
			return FRM_M_OPTIONS;
		if (memcmp(s, "CONNECT", 7) == 0)
			return FRM_M_CONNECT;
		break;
	}
	return FRM_M_OTHER;
}

/* Line end at *i: CRLF, or a bare LF (tolerated, RFC 9112 2.2, with doubt).
 * 1 = consumed, 0 = need more bytes, -1 = malformed. */
static int eol(const char *buf, size_t lim, size_t *i, bool *doubt)
{
	if (*i >= lim)
		return 0;
	if (buf[*i] == '\n') {
		*doubt = true;
		*i += 1;
		return 1;
	}
	if (buf[*i] != '\r')
		return -1;
	if (*i + 1 >= lim)
		return 0;
	if (buf[*i + 1] != '\n')
		return -1;
	*i += 2;
	return 1;
}

/* Rest of a field line from *i: *ve = end of its content, then the line end.
 * Returns as eol(). */
static int line_rest(const char *buf, size_t lim, size_t *i, size_t *ve,
		     bool *doubt)
{
	const char *q = find_ctl(buf + *i, buf + lim);

	*i = (size_t)(q - buf);
	if (*i < lim && *q == '\0') /* RFC 9110 5.5 */
		return -1;
	*ve = *i;
	return eol(buf, lim, i, doubt);
}

long frm_req_parse_head(const char *buf, size_t len, struct frm_req_head *out)
{
	size_t lim = len < FRM_MAX_HEAD ? len : FRM_MAX_HEAD;
	/* what "the block is not complete yet" means: past FRM_MAX_HEAD it
	 * can no longer complete */
	long more = len >= FRM_MAX_HEAD ? -1 : 0;
	enum hdr_id prev = H_NONE, id;
	bool have_cl = false, have_te = false, te_chunked = false;
	bool close_tok = false;
	uint64_t cl = 0;
	size_t i = 0, s, ns, ne, vs, ve, k, n;
	const char *p, *t;
	int rc;

	memset(out, 0, sizeof(*out));

	/* request-line = method SP request-target SP HTTP-version (RFC 9112
	 * 3).  Every byte is checked as it comes so that TLS (0x16), an
	 * HTTP/2 preface or garbage is refused as early as possible. */
	i = (size_t)(skip_tchars_to(buf, buf + lim) - buf);
	if (i == lim)
		return more;
	if (i == 0 || buf[i] != ' ')
		return -1;
	out->method = frm_method_id(buf, i);
	s = ++i;
	i = (size_t)(skip_target(buf + i, buf + lim) - buf);
	if (i == lim)
		return more;
	if (i == s || buf[i] != ' ')
		return -1;
	i++;
	if (lim - i >= 8 && memcmp(buf + i, "HTTP/1.", 7) == 0 &&
	    (buf[i + 7] == '0' || buf[i + 7] == '1')) {
		i += 8; /* the common case at once */
	} else {
		for (k = 0; k < 8; k++, i++) {
			if (i == lim)
				return more;
			if (k < 7 ? buf[i] != "HTTP/1."[k] : (buf[i] != '0' && buf[i] != '1'))
				return -1;
		}
	}
	out->version_minor = (uint8_t)(buf[i - 1] - '0');
	rc = eol(buf, lim, &i, &out->doubt);
	if (rc <= 0)
		return rc < 0 ? -1 : more;

	for (;;) {
		if (i == lim)
			return more;
		if (buf[i] == '\r' || buf[i] == '\n') {
			rc = eol(buf, lim, &i, &out->doubt);
			if (rc <= 0)
				return rc < 0 ? -1 : more;
			break;
		}
		if (is_ows(buf[i])) {
			/* obs-fold (RFC 9112 5.2): continues the previous
			 * field; we refuse to guess the framing headers */
			if (prev == H_CL || prev == H_TE || prev == H_CONN)
				return -1;
			out->doubt = true;
			rc = line_rest(buf, lim, &i, &ve, &out->doubt);
			if (rc <= 0)
				return rc < 0 ? -1 : more;
			continue;
		}
		ns = i;
		i = (size_t)(skip_tchars_to(buf + i, buf + lim) - buf);
		if (i == lim)
			return more;
		/* RFC 9112 5.1: no whitespace between name and colon */
		if (i == ns || buf[i] != ':')
			return -1;
		ne = i++;
		while (i < lim && is_ows(buf[i]))
			i++;
		vs = i;
		rc = line_rest(buf, lim, &i, &ve, &out->doubt);
		if (rc <= 0)
			return rc < 0 ? -1 : more;
		while (ve > vs && is_ows(buf[ve - 1]))
			ve--;

		id = prev = header_id(buf + ns, ne - ns, false);
		switch (id) {
		case H_CL:
			rc = clen_parse(buf + vs, ve - vs, &have_cl, &cl);
			if (rc < 0)
				return -1;
			if (rc > 0)
				out->doubt = true;
			break;
		case H_TE:
			have_te = true;
			rc = te_last_chunked(buf + vs, ve - vs, &out->doubt);
			if (rc < 0)
				out->doubt = true;
			else
				te_chunked = rc;
			break;
		case H_CONN:
			out->has_conn_header = true;
			if (out->conn_lines < FRM_CONN_LINES) {
				out->conn_val[out->conn_lines][0] = (uint32_t)vs;
				out->conn_val[out->conn_lines][1] = (uint32_t)ve;
			}
			if (out->conn_lines < UINT8_MAX)
				out->conn_lines++;
			if (ieq(buf + vs, ve - vs, "close")) {
				close_tok = true; /* the common value whole */
				break;
			}
			p = buf + vs;
			while (list_next(&p, buf + ve, ',', &t, &n)) {
				if (ieq(t, n, "close"))
					close_tok = true;
				else if (ieq(t, n, "keep-alive"))
					out->keepalive_token = true;
				else if (ieq(t, n, "upgrade"))
					out->upgrade = true;
			}
			break;
		case H_UPGRADE:
			out->upgrade = true;
			break;
		case H_IDEM:
			out->idempotency_key = true;
			break;
		case H_EXPECT:
			if (ieq(buf + vs, ve - vs, "100-continue"))
				out->expect_continue = true;
			break;
		case H_UA:
			/* FNV-1a, odd: 0 stays "none" */
			for (t = buf + vs; t < buf + ve; t++)
				out->ua_hash = (out->ua_hash ^ (uint8_t)*t) * 16777619u;
			out->ua_hash |= 1;
			break;
		case H_AUTHZ:
			/* credentials = auth-scheme [ 1*SP token68 / params ]
			 * (RFC 9110 11.4): schemes that authenticate the
			 * connection, not the request (IIS keeps a Kerberos
			 * login for the connection's life) */
			for (t = buf + vs; t < buf + ve && !is_ows(*t); t++)
				;
			n = (size_t)(t - (buf + vs));
			if (ieq(buf + vs, n, "ntlm") || ieq(buf + vs, n, "negotiate") ||
			    ieq(buf + vs, n, "kerberos"))
				out->conn_bound = true;
			break;
		default:
			break;
		}
	}

	out->head_len = i;
	if (have_te) {
		/* RFC 9112 6.3 rule 4: a request whose TE does not end in
		 * chunked cannot be framed; the server answers 400 */
		if (!te_chunked)
			return -1;
		out->body_kind = FRM_BODY_CHUNKED;
		/* TE+CL is a smuggling pattern; TE in 1.0 is faulty (6.1) */
		if (have_cl || out->version_minor == 0)
			out->doubt = true;
	} else if (have_cl) {
		out->body_kind = FRM_BODY_LENGTH;
		out->body_len = cl;
	}
	out->close_token = close_tok;
	out->app_close = close_tok ||
			 (out->version_minor == 0 && !out->keepalive_token);
	return (long)i;
}

/* The next field line of a head from *i.  1: a field, name [*ns, *ne) and
 * value [*vs, *ve) (OWS trimmed), *i past its line; 0: *i is at the blank
 * line; -1: no line end before len. */
static int next_field(const char *h, size_t len, size_t *i, size_t *ns,
		      size_t *ne, size_t *vs, size_t *ve)
{
	const char *lf = memchr(h + *i, '\n', len - *i);
	size_t end;

	if (!lf)
		return -1;
	end = (size_t)(lf - h);
	if (end > *i && h[end - 1] == '\r')
		end--;
	if (end == *i)
		return 0;
	*ns = *i;
	for (*ne = *i; *ne < end && h[*ne] != ':'; *ne += 1)
		;
	*vs = *ne < end ? *ne + 1 : end;
	while (*vs < end && is_ows(h[*vs]))
		*vs += 1;
	*ve = end;
	while (*ve > *vs && is_ows(h[*ve - 1]))
		*ve -= 1;
	*i = (size_t)(lf - h) + 1;
	return 1;
}

struct outbuf {
	char *p;
	size_t cap, n;
	size_t need; /* what the whole output takes, room or not */
	bool full;
};

static void put(struct outbuf *o, const char *s, size_t n)
{
	o->need += n;
	if (o->full || n > o->cap - o->n) {
		o->full = true;
		return;
	}
	memcpy(o->p + o->n, s, n);
	o->n += n;
}

static bool is_conn_field(const char *h, size_t ns, size_t ne)
{
	return ieq(h + ns, ne - ns, "connection");
}

/* Copy head[*done, ve) to o with every close token of the Connection
 * value [vs, ve) turned into keep-alive, and keep-alive appended once if
 * need_ka. */
static void conn_value_rewrite(struct outbuf *o, const char *head, size_t vs,
			       size_t ve, size_t *done, bool need_ka, bool *appended)
{
	const char *p = head + vs, *t;
	size_t n;

	put(o, head + *done, vs - *done);
	*done = vs;
	/* the common value whole: what the loop below makes of it */
	if (ve - vs == 5 && ieq(p, 5, "close")) {
		put(o, "keep-alive", 10);
		*done = ve;
		p = NULL;
	}
	while (list_next(&p, head + ve, ',', &t, &n)) {
		if (!ieq(t, n, "close"))
			continue;
		put(o, head + *done, (size_t)(t - head) - *done);
		put(o, "keep-alive", 10);
		*done = (size_t)(t - head) + n;
	}
	put(o, head + *done, ve - *done);
	*done = ve;
	if (need_ka && !*appended) {
		if (ve > vs)
			put(o, ", keep-alive", 12);
		else
			put(o, "keep-alive", 10);
		*appended = true;
	}
}

long frm_req_rewrite_head(const char *head, const struct frm_req_head *h,
			  char *out, size_t out_cap)
{
	struct outbuf o = { out, out_cap, 0, 0, false };
	size_t len = h->head_len, i = 0, first, done = 0, ns, ne, vs, ve, n, k;
	const char *lf, *p, *t;
	bool has_close = false, need_ka, appended = false, known;
	int rc;

	/* an Upgrade handshake or a doubtful head is passed through as is */
	if (h->upgrade || h->doubt || len == 0)
		return 0;
	lf = memchr(head, '\n', len);
	if (!lf)
		return 0;
	first = (size_t)(lf - head) + 1;

	/* the Connection values as frm_req_parse_head found them (a head
	 * without doubt has CRLF line ends and token names, so they are the
	 * values next_field() finds): no pass over the other lines */
	known = h->conn_lines <= FRM_CONN_LINES &&
		(h->conn_lines > 0 || !h->has_conn_header) && len >= 2 &&
		head[len - 2] == '\r' && head[len - 1] == '\n';
	for (k = 0; known && k < h->conn_lines; k++)
		if (h->conn_val[k][0] < (k ? h->conn_val[k - 1][1] : first) ||
		    h->conn_val[k][1] < h->conn_val[k][0] || h->conn_val[k][1] > len - 2)
			known = false;
	if (known) {
		has_close = h->close_token;
	} else {
		/* pass 1: is there a close token to turn into keep-alive? */
		i = first;
		while ((rc = next_field(head, len, &i, &ns, &ne, &vs, &ve)) == 1) {
			if (!is_conn_field(head, ns, ne))
				continue;
			p = head + vs;
			while (list_next(&p, head + ve, ',', &t, &n))
				if (ieq(t, n, "close"))
					has_close = true;
		}
		if (rc < 0)
			return 0;
	}
	/* HTTP/1.0 persists only with an explicit keep-alive (RFC 9112 9.3) */
	need_ka = h->version_minor == 0 && !h->keepalive_token && !has_close;
	if (!has_close && !need_ka)
		return 0;

	/* pass 2: copy, changing only Connection values */
	if (known) {
		for (k = 0; k < h->conn_lines; k++)
			conn_value_rewrite(&o, head, h->conn_val[k][0], h->conn_val[k][1],
					   &done, need_ka, &appended);
		i = len - 2; /* the blank line */
	} else {
		i = first;
		while ((rc = next_field(head, len, &i, &ns, &ne, &vs, &ve)) == 1)
			if (is_conn_field(head, ns, ne))
				conn_value_rewrite(&o, head, vs, ve, &done, need_ka, &appended);
		if (rc < 0)
			return 0;
	}
	if (need_ka && !appended) {
		/* i is at the blank line that ends the head */
		put(&o, head + done, i - done);
		put(&o, "Connection: keep-alive\r\n", 24);
		done = i;
	}
	put(&o, head + done, len - done);
	/* a head our own parser would refuse as too long is not made: it
	 * goes as the program wrote it (found by fuzz_rewrite) */
	if (o.need >= FRM_MAX_HEAD)
		return 0;
	if (o.full || o.n > LONG_MAX)
		return -1;
	return (long)o.n;
}

/* ---------------------------------------------------------------- responses */

enum resp_state {
	RS_VERSION = 0, /* "HTTP/1." (line_len = bytes matched) */
	RS_MINOR,       /* the version digit */
	RS_SP,          /* SP before the status code */
	RS_STATUS,      /* three digits (line_len = digits seen) */
	RS_STATUS_END,  /* SP before the reason, or the line end */
	RS_REASON,
	RS_STATUS_LF,
	RS_LINE,        /* start of a field line or of the blank line */
	RS_NAME,        /* field name, kept lower-cased in val[] */
	RS_OWS,         /* OWS before the value */
	RS_VALUE,       /* value; stored in val[] if the header is ours */
	RS_VALUE_LF,
	RS_FOLD,        /* an obs-fold continuation line, skipped */
	RS_FOLD_LF,
	RS_HEAD_LF,     /* CR of the blank line seen */
	RS_BODY,        /* in r->body */
	RS_DONE,
	RS_CLOSE,       /* close-delimited body: everything until EOF */
	RS_UPGRADE,     /* not HTTP any more */
	RS_ERROR,
};

#define VAL_CAP sizeof(((struct frm_resp *)0)->val)
#define VAL_OVERFLOW (VAL_CAP + 1) /* vlen value: the value did not fit */
/* r->line_len once the status line is parsed */
#define HEAD_BAD_CLEN 1u /* a conflicting or malformed Content-Length */
#define HEAD_BAD_TE 2u   /* a Transfer-Encoding too long for val[] */

static bool is_auth_delim(unsigned char c)
{
	return c == ' ' || c == '\t' || c == ',';
}

/* Any NTLM or Negotiate auth-scheme token in v[0..n)?  A token inside a
 * quoted realm also matches: that only errs towards not pooling. */
static bool auth_scan(const char *v, size_t n)
{
	size_t i = 0, s;

	while (i < n) {
		while (i < n && is_auth_delim(v[i]))
			i++;
		for (s = i; i < n && !is_auth_delim(v[i]); i++)
			;
		if (ieq(v + s, i - s, "ntlm") || ieq(v + s, i - s, "negotiate"))
			return true;
	}
	return false;
}

/* val[] of an authenticate header is full: scan the complete tokens, keep
 * the unfinished last one (a long one only as a non-matching placeholder). */
static void auth_slide(struct frm_resp *r)
{
	size_t k = r->vlen, tail;

	while (k > 0 && !is_auth_delim(r->val[k - 1]))
		k--;
	if (auth_scan(r->val, k))
		r->conn_bound = true;
	tail = r->vlen - k;
	if (tail > 9) {
		r->val[0] = '#';
		r->vlen = 1;
	} else {
		memmove(r->val, r->val + k, tail);
		r->vlen = (uint16_t)tail;
	}
}

/* Keep-Alive: timeout=5, max=100 (RFC 2068 19.7.1.1; quotes optional) */
static void ka_param(struct frm_resp *r, const char *s, size_t n)
{
	const char *eq = memchr(s, '=', n), *v, *ve;
	size_t nn;
	int64_t x = 0;

	if (!eq)
		return;
	for (nn = (size_t)(eq - s); nn > 0 && is_ows(s[nn - 1]); nn--)
		;
	v = eq + 1;
	ve = s + n;
	while (v < ve && is_ows(*v))
		v++;
	if (ve - v >= 2 && *v == '"' && ve[-1] == '"') {
		v++;
		ve--;
	}
	if (v == ve)
		return;
	for (; v < ve; v++) {
		if (!is_digit(*v))
			return;
		if (x < INT32_MAX)
			x = x * 10 + (*v - '0');
	}
	if (x > INT32_MAX)
		x = INT32_MAX;
	if (ieq(s, nn, "timeout"))
		r->ka_timeout = (int32_t)x;
	else if (ieq(s, nn, "max"))
		r->ka_max = (int32_t)x;
}

/* The value v[0..vn) of header hdr (<= VAL_CAP bytes, as the server sent
 * them, before any mask): the facts it carries.  Shared by the byte machine
 * and the fast path, so that both read a value the same way. */
static void resp_field_value(struct frm_resp *r, enum hdr_id hdr, const char *v,
			     size_t vn)
{
	const char *end = v + vn, *p, *q, *s, *t;
	size_t n, m;
	int rc;

	switch (hdr) {
	case H_CL:
		/* RFC 9112 6.3 rule 5: conflicting or invalid lengths are
		 * unrecoverable errors - unless rules 1-3 frame the message
		 * without them (decided at the end of the head) */
		if (clen_parse(v, vn, &r->have_clen, &r->clen) != 0)
			r->line_len |= HEAD_BAD_CLEN;
		break;
	case H_TE:
		r->have_te = true;
		rc = te_last_chunked(v, vn, &r->doubt);
		if (rc < 0)
			r->doubt = true;
		else
			r->te_chunked_last = rc;
		break;
	case H_CONN:
		/* the common values whole, then any list */
		if (ieq(v, vn, "keep-alive")) {
			r->ka_token = true;
			break;
		}
		if (ieq(v, vn, "close")) {
			r->close_token = true;
			break;
		}
		p = v;
		while (list_next(&p, end, ',', &s, &n)) {
			if (ieq(s, n, "close")) {
				r->close_token = true;
			} else if (ieq(s, n, "keep-alive")) {
				r->ka_token = true;
			}
		}
		break;
	case H_KA:
		p = v;
		while (list_next(&p, end, ',', &s, &n)) {
			q = s;
			while (list_next(&q, s + n, ';', &t, &m))
				ka_param(r, t, m);
		}
		break;
	case H_AUTH:
		if (auth_scan(v, vn))
			r->conn_bound = true;
		break;
	default:
		break;
	}
}

/* The value of header r->hdr is complete in val[0..vlen) (the bytes as the
 * server sent them, before any mask). */
static void resp_field_end(struct frm_resp *r)
{
	if (r->vlen > VAL_CAP) {
		/* a framing header we could not read whole: an error unless
		 * the message turns out to have no body at all */
		if (r->hdr == H_TE)
			r->line_len |= HEAD_BAD_TE;
		else if (r->hdr == H_CL)
			r->line_len |= HEAD_BAD_CLEN;
		else
			r->doubt = true;
		return;
	}
	resp_field_value(r, (enum hdr_id)r->hdr, r->val, r->vlen);
}

/*
 * The mask (framer.h): every "keep-alive" element of a Connection value is
 * shown to the program as "     close", a byte at a time as the bytes pass,
 * because the program may read the value in pieces (a recv(1) loop, or a
 * header straddling http.client's 8 KiB reads) and we hold nothing back.
 * The spaces come first: leading OWS is not part of a field value or of a
 * list element (RFC 9110 5.5, 5.6.1), and every parser strips it, while
 * trailing spaces are kept by many (http.client, LWP read "close     ").
 * Each byte is decided from the bytes before it only, so the program sees
 * the same bytes however the response is split into reads; the price is
 * that an element which starts like keep-alive and then turns out to be
 * another token has its first bytes already blanked (no such Connection
 * option is known).  r->mask_pos: MASK_START at an element's start (OWS
 * skipped), 1..10 bytes of keep-alive matched (and replaced), MASK_NO: not
 * ours, until the next comma.
 */
#define MASK_START 0
#define MASK_NO 11
static void mask_byte(struct frm_resp *r, char *p)
{
	static const char from[] = "keep-alive", to[] = "     close";
	unsigned char c = (unsigned char)*p;
	unsigned k = r->mask_pos;

	if (c == ',') {
		r->mask_pos = MASK_START;
	} else if (k == MASK_START && is_ows(c)) {
		/* OWS before the element */
	} else if (k < 10 && lower(c) == (unsigned char)from[k]) {
		*p = to[k];
		r->mask_pos = (uint8_t)(k + 1);
	} else if (!(k == 10 && is_ows(c))) {
		r->mask_pos = MASK_NO;
	}
}

static void resp_value_byte(struct frm_resp *r, unsigned char c)
{
	if (r->hdr == H_AUTH && r->vlen == VAL_CAP)
		auth_slide(r);
	if (r->vlen < VAL_CAP) {
		r->val[r->vlen++] = (char)c;
	} else {
		r->vlen = VAL_OVERFLOW;
	}
}

void frm_resp_begin(struct frm_resp *r, enum frm_method m, bool rewrite_ka_to_close)
{
	/* val[] is read only up to vlen (0 now): not cleared */
	memset(r, 0, offsetof(struct frm_resp, val));
	r->req_method = m;
	r->rewrite_ka_to_close = rewrite_ka_to_close;
	r->ka_timeout = -1;
	r->ka_max = -1;
	r->st = RS_VERSION;
}

/* Run the body from buf[off]; returns the bytes consumed in total. */
static size_t resp_body(struct frm_resp *r, char *buf, size_t off, size_t len,
			enum frm_resp_event *ev)
{
	size_t used;

	if (body_run(&r->body, buf + off, len - off, &used) < 0) {
		r->st = RS_ERROR;
		*ev = FRM_EV_ERROR;
		return off + used;
	}
	if (!r->body.done)
		return len;
	if (r->body.doubt)
		r->doubt = true;
	r->st = RS_DONE;
	*ev = FRM_EV_DONE;
	return off + used;
}

/* The head ended at buf[off - 1]: decide the framing, RFC 9112 6.3 in order. */
static size_t resp_head_end(struct frm_resp *r, char *buf, size_t off,
			    size_t len, enum frm_resp_event *ev)
{
	unsigned cls = r->status / 100;

	r->head_done = true;
	/* RFC 9112 9.3: 1.0 persists only with an explicit keep-alive */
	if (r->close_token || (r->version_minor == 0 && !r->ka_token))
		r->server_close = true;

	if (cls == 1 && r->status != 101) {
		/* interim: the final response to the same request follows;
		 * a sloppy interim makes the whole exchange doubtful, and an
		 * interim that says the server will close (Connection: close,
		 * or HTTP/1.0, which has no 1xx: RFC 9110 15.2) is believed:
		 * llhttp, for one, treats the connection as closed after it */
		enum frm_method m = r->req_method;
		bool rw = r->rewrite_ka_to_close, doubt = r->doubt;
		bool server_close = r->server_close, ins = r->insert_close;

		frm_resp_begin(r, m, rw);
		r->insert_close = ins;
		r->doubt = doubt;
		r->server_close = server_close;
		*ev = FRM_EV_INTERIM;
		return off;
	}
	if (r->status == 101 || (cls == 2 && r->req_method == FRM_M_CONNECT)) {
		r->st = RS_UPGRADE;
		*ev = FRM_EV_UPGRADE;
		return off;
	}
	/* rule 1: no body, whatever Content-Length or TE say */
	if (r->req_method == FRM_M_HEAD || r->status == 204 || r->status == 304) {
		frm_body_init(&r->body, FRM_BODY_NONE, 0);
		r->st = RS_DONE;
		*ev = FRM_EV_DONE;
		return off;
	}
	if (r->line_len & HEAD_BAD_TE) {
		r->st = RS_ERROR;
		*ev = FRM_EV_ERROR;
		return off - 1;
	}
	if (r->have_te) {
		/* rule 3: TE overrides CL, but together they are a request
		 * smuggling pattern; TE in a 1.0 message is faulty (6.1) */
		if (r->have_clen || (r->line_len & HEAD_BAD_CLEN) ||
		    r->version_minor == 0)
			r->doubt = true;
		if (!r->te_chunked_last) {
			frm_body_init(&r->body, FRM_BODY_CLOSE, 0);
			r->st = RS_CLOSE;
			*ev = FRM_EV_CLOSE_BODY;
			return off;
		}
		frm_body_init(&r->body, FRM_BODY_CHUNKED, 0);
	} else if (r->line_len & HEAD_BAD_CLEN) {
		/* the error is reported on the last byte of the head */
		r->st = RS_ERROR;
		*ev = FRM_EV_ERROR;
		return off - 1;
	} else if (r->have_clen) {
		frm_body_init(&r->body, FRM_BODY_LENGTH, r->clen);
	} else {
		/* rule 8: read until the server closes */
		frm_body_init(&r->body, FRM_BODY_CLOSE, 0);
		r->st = RS_CLOSE;
		*ev = FRM_EV_CLOSE_BODY;
		return off;
	}
	r->st = RS_BODY;
	return resp_body(r, buf, off, len, ev);
}

/* The head about to end says nothing of closing to a program that asked
 * to close (Go, Node, http.server and aiohttp send no Connection header on
 * keep-alive): it must still read a closing answer (docs/replay.md).  Not
 * an interim, a 101 or a CONNECT tunnel (no closing answer there); not
 * HTTP/1.0, which closes unless it says keep-alive (masked to close). */
static bool close_line_due(const struct frm_resp *r)
{
	return r->insert_close && !r->close_inserted && r->status >= 200 &&
	       r->version_minor >= 1 && !r->close_token &&
	       !(r->ka_token && r->rewrite_ka_to_close) && r->req_method != FRM_M_CONNECT;
}

/*
 * The fast path (docs/cost.md): a response head that is whole in one buffer
 * and starts it, in the common shape, is read a line at a time - memchr()
 * for each line end, the name through the tchar table, the value only for
 * the headers the byte machine interprets (the same resp_field_value) -
 * instead of a state transition per byte.  It reads every fact the byte
 * machine reads from a head: the version digit and the status, then per
 * field Content-Length (list, conflicts), Transfer-Encoding (last coding,
 * odd lists), the Connection tokens close and keep-alive (and the mask),
 * Keep-Alive timeout/max, the NTLM/Negotiate challenges of WWW-/Proxy-
 * Authenticate, and where the blank line is (the close line goes before
 * it).  Whatever it is unsure of, it leaves to the byte machine with r as
 * it was: a head not complete in buf, a bare LF, a CR or NUL inside a
 * line, obs-fold, a byte that is not a tchar in a name, an interpreted
 * value longer than val[], a second Content-Length or Transfer-Encoding
 * header, more than four Connection headers to mask.  The bytes are
 * masked only once the head is known good, so a fallback sees them as
 * they came.  Returns false for the fallback; true with the consumed count
 * in *used and the event in *ev, exactly as the byte machine would.
 */
#define FAST_MAX_CONN 4
static bool resp_head_fast(struct frm_resp *r, char *buf, size_t len,
			   size_t *used, enum frm_resp_event *ev)
{
	const char *p = buf, *end = buf + len, *lf, *le, *c, *v;
	const char *conn[FAST_MAX_CONN][2];
	unsigned nconn = 0, seen = 0;
	enum hdr_id hdr;
	struct frm_resp save;
	size_t k;

	/* status-line = HTTP-version SP status-code SP [ reason ] CRLF;
	 * each line ends at its first NUL, CR or LF, which must be CRLF */
	if (len < 17 || memcmp(p, "HTTP/1.", 7) != 0 || !is_digit(p[7]) || p[8] != ' ' ||
	    !is_digit(p[9]) || !is_digit(p[10]) || !is_digit(p[11]) || p[9] == '0')
		return false;
	le = find_ctl(p + 12, end);
	if (end - le < 2 || le[0] != '\r' || le[1] != '\n' ||
	    (le > p + 12 && p[12] != ' '))
		return false;
	lf = le + 1;

	memcpy(&save, r, offsetof(struct frm_resp, val));
	r->version_minor = (uint8_t)(p[7] - '0');
	r->status = (uint16_t)((p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0'));
	r->line_len = 0; /* from here on: HEAD_* flags */

	for (p = lf + 1;; p = lf + 1) {
		le = find_ctl(p, end);
		/* incomplete, a bare LF, a NUL or a lone CR */
		if (end - le < 2 || le[0] != '\r' || le[1] != '\n')
			goto fallback;
		lf = le + 1;
		if (le == p)
			break; /* the blank line */
		/* (*le is the CR: no tchar) */
		c = skip_tchars(p);
		/* obs-fold, a name that is no token, no colon */
		if (c == p || c == le || *c != ':')
			goto fallback;
		hdr = header_id(p, (size_t)(c - p), true);
		if (hdr == H_NONE)
			continue;
		for (v = c + 1; v < le && is_ows(*v); v++)
			;
		if ((size_t)(le - v) > VAL_CAP)
			goto fallback;
		if (hdr == H_CL || hdr == H_TE) {
			if (seen & (1u << hdr))
				goto fallback; /* a duplicate framing header */
			seen |= 1u << hdr;
		}
		if (hdr == H_CONN && r->rewrite_ka_to_close) {
			if (nconn == FAST_MAX_CONN)
				goto fallback;
			conn[nconn][0] = v;
			conn[nconn++][1] = le;
		}
		resp_field_value(r, hdr, v, (size_t)(le - v));
	}

	/* the head is good: mask as the byte machine would have */
	for (k = 0; k < nconn; k++) {
		v = conn[k][0];
		if (conn[k][1] - v == 10 && ieq(v, 10, "keep-alive")) {
			/* what mask_byte makes of it, at once */
			memcpy(buf + (v - buf), "     close", 10);
			continue;
		}
		r->mask_pos = MASK_START;
		for (; v < conn[k][1]; v++)
			mask_byte(r, buf + (v - buf));
	}
	r->hdr = H_NONE;
	if (close_line_due(r)) {
		/* the caller shows the close line, then feeds from the blank
		 * line on: the byte machine takes it from RS_LINE */
		r->close_inserted = true;
		r->st = RS_LINE;
		*ev = FRM_EV_INSERT;
		*used = (size_t)(p - buf);
		return true;
	}
	*used = resp_head_end(r, buf, (size_t)(lf + 1 - buf), len, ev);
	return true;
fallback:
	memcpy(r, &save, offsetof(struct frm_resp, val));
	return false;
}

size_t frm_resp_feed(struct frm_resp *r, char *buf, size_t len, enum frm_resp_event *ev)
{
	size_t i;

	*ev = FRM_EV_NONE;
	switch (r->st) {
	case RS_DONE:  /* the caller must frm_resp_begin() first */
	case RS_ERROR:
		*ev = FRM_EV_ERROR;
		return 0;
	case RS_CLOSE:
	case RS_UPGRADE:
		return len;
	case RS_BODY:
		return resp_body(r, buf, 0, len, ev);
	case RS_VERSION:
		/* a head that starts this buffer: the fast path first */
		if (r->line_len == 0 && resp_head_fast(r, buf, len, &i, ev))
			return i;
		break;
	default:
		break;
	}

	for (i = 0; i < len; i++) {
		unsigned char c = buf[i];

		switch (r->st) {
		case RS_VERSION:
			/* status-line = HTTP-version SP status-code SP
			 * [ reason-phrase ] (RFC 9112 4) */
			if (r->line_len >= 7 || c != "HTTP/1."[r->line_len])
				goto error;
			if (++r->line_len == 7)
				r->st = RS_MINOR;
			break;
		case RS_MINOR:
			if (!is_digit(c))
				goto error;
			r->version_minor = c - '0';
			r->st = RS_SP;
			break;
		case RS_SP:
			if (c != ' ')
				goto error;
			r->status = 0;
			r->line_len = 0;
			r->st = RS_STATUS;
			break;
		case RS_STATUS:
			if (!is_digit(c))
				goto error;
			r->status = (uint16_t)(r->status * 10 + (c - '0'));
			if (++r->line_len < 3)
				break;
			if (r->status < 100)
				goto error;
			r->line_len = 0; /* from here on: HEAD_* flags */
			r->st = RS_STATUS_END;
			break;
		case RS_STATUS_END:
			/* many servers omit the SP of an empty reason */
			if (c == ' ') {
				r->st = RS_REASON;
			} else if (c == '\r') {
				r->st = RS_STATUS_LF;
			} else if (c == '\n') {
				r->doubt = true;
				r->st = RS_LINE;
			} else {
				goto error;
			}
			break;
		case RS_REASON:
			if (c == '\r') {
				r->st = RS_STATUS_LF;
			} else if (c == '\n') {
				r->doubt = true;
				r->st = RS_LINE;
			} else if (c == '\0') {
				goto error;
			}
			break;
		case RS_STATUS_LF:
		case RS_FOLD_LF:
			if (c != '\n')
				goto error;
			r->st = RS_LINE;
			break;
		case RS_LINE:
			if ((c == '\r' || c == '\n') && close_line_due(r)) {
				r->close_inserted = true;
				*ev = FRM_EV_INSERT;
				return i;
			}
			if (c == '\r') {
				r->st = RS_HEAD_LF;
			} else if (c == '\n') {
				r->doubt = true;
				return resp_head_end(r, buf, i + 1, len, ev);
			} else if (is_ows(c)) {
				/* obs-fold (RFC 9112 5.2): a continuation of
				 * the previous field; we do not guess at
				 * folded framing headers */
				if (r->hdr == H_CL || r->hdr == H_TE ||
				    r->hdr == H_CONN)
					goto error;
				r->doubt = true;
				r->st = RS_FOLD;
			} else if (is_tchar(c)) {
				r->hdr = H_NONE;
				r->val[0] = (char)lower(c);
				r->vlen = 1;
				r->st = RS_NAME;
			} else {
				goto error;
			}
			break;
		case RS_NAME:
			if (c == ':') {
				r->hdr = header_id(r->val, r->vlen, true);
				r->vlen = 0;
				r->mask_pos = MASK_START;
				r->st = RS_OWS;
			} else if (is_tchar(c)) {
				/* long names are simply not ours */
				if (r->vlen < VAL_CAP)
					r->val[r->vlen++] = (char)lower(c);
			} else {
				/* RFC 9112 5.1: no whitespace before ':' */
				goto error;
			}
			break;
		case RS_OWS:
			if (is_ows(c))
				break;
			r->st = RS_VALUE;
			/* fall through */
		case RS_VALUE:
			if (c == '\r') {
				r->st = RS_VALUE_LF;
				break;
			}
			if (c == '\n') {
				r->doubt = true;
				goto field_end;
			}
			if (c == '\0') /* RFC 9110 5.5 */
				goto error;
			if (r->hdr == H_CONN && r->rewrite_ka_to_close)
				mask_byte(r, buf + i);
			if (r->hdr != H_NONE)
				resp_value_byte(r, c);
			break;
		case RS_VALUE_LF:
			if (c != '\n')
				goto error;
		field_end:
			resp_field_end(r);
			r->st = RS_LINE;
			break;
		case RS_FOLD:
			if (c == '\r') {
				r->st = RS_FOLD_LF;
			} else if (c == '\n') {
				r->st = RS_LINE;
			} else if (c == '\0') {
				goto error;
			}
			break;
		case RS_HEAD_LF:
			if (c != '\n')
				goto error;
			return resp_head_end(r, buf, i + 1, len, ev);
		default:
			goto error;
		}
	}
	return len;
error:
	r->st = RS_ERROR;
	*ev = FRM_EV_ERROR;
	return i;
}

bool frm_resp_in_body(const struct frm_resp *r)
{
	return r->st == RS_BODY;
}

bool frm_resp_reusable(const struct frm_resp *r)
{
	if (r->st != RS_DONE || r->server_close || r->doubt || r->conn_bound)
		return false;
	if (r->status < 200)
		return false;
	return r->body.kind == FRM_BODY_NONE || r->body.kind == FRM_BODY_LENGTH ||
	       r->body.kind == FRM_BODY_CHUNKED;
}
