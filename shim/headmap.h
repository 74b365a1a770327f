/*
 * headmap.h - where a request head we rewrote was torn (docs/hold.md,
 * "A head the socket took in part").  Pure: no syscalls.
 *
 * The server gets R (the rewritten head), the program wrote O (its own).
 * They share a prefix of p bytes and a suffix of s bytes; between them lie
 * the spans that differ (R[p, rl-s) for O[p, ol-s)).  When the socket took
 * only part of R, the program is told how many of its own bytes went out:
 * 1:1 in the prefix, offset by rl-ol in the suffix, and none of the span
 * until all of R's span went.
 */
#ifndef KP_HEADMAP_H
#define KP_HEADMAP_H

#include <stddef.h>

struct kp_headmap {
	size_t rl, ol; /* lengths of R and O */
	size_t p, s;   /* common prefix and suffix, p + s <= min(rl, ol) */
};

static inline void kp_headmap_init(struct kp_headmap *m, const char *r, size_t rl, const char *o,
				   size_t ol)
{
	size_t min = rl < ol ? rl : ol, p = 0, s = 0;
	while (p < min && r[p] == o[p])
		p++;
	while (s < min - p && r[rl - 1 - s] == o[ol - 1 - s])
		s++;
	m->rl = rl;
	m->ol = ol;
	m->p = p;
	m->s = s;
}

/* How much of R the server must have for the program's first x bytes of O
 * to be there: inside the span, all of R's span. */
static inline size_t kp_headmap_fwd(const struct kp_headmap *m, size_t x)
{
	if (x <= m->p)
		return x;
	if (x >= m->ol - m->s)
		return m->rl - (m->ol - x);
	return m->rl - m->s;
}

/* How many of the program's bytes of O the server's first y bytes of R
 * stand for: inside the span, none of it. */
static inline size_t kp_headmap_back(const struct kp_headmap *m, size_t y)
{
	if (y <= m->p)
		return y;
	if (y >= m->rl - m->s)
		return m->ol - (m->rl - y);
	return m->p;
}

/* The program offers O[pos, pos + n) with the server at R[0, k): send R up
 * to this. */
static inline size_t kp_headmap_target(const struct kp_headmap *m, size_t k, size_t pos, size_t n)
{
	size_t t = kp_headmap_fwd(m, pos + n);
	return t < k ? k : t;
}

/* The program offered O[pos, pos + n); the server now has R[0, k), having
 * been sent up to target = max(k before, fwd(pos + n)).  The program's new
 * position in O (what it is told went out, counted from 0). */
static inline size_t kp_headmap_told(const struct kp_headmap *m, size_t pos, size_t n, size_t k,
				     size_t target)
{
	if (k >= target)
		return pos + n;
	size_t b = kp_headmap_back(m, k);
	return b > pos ? b : pos;
}

/* TLS (docs/hold.md "HTTPS"): the engine is the socket.  push(ctx, from,
 * len) hands it R[from, from + len): the bytes it took (a partial-write
 * engine may take a prefix), 0 when it began a record it could not finish
 * (WANT_WRITE), -1 for an error.  A call it could not finish (*pend bytes
 * from *k) must be made again with just those bytes before anything else
 * (OpenSSL's write retry).  R goes up to target, until the program, which
 * offers O[pos0, pos0 + n), can be told some of its bytes went out.
 * sent_once: the first call was made already (*k, *pend say how it went).
 * Returns 0, or why the program's call fails now: */
enum { KP_HM_WANT = 1, /* a record begun (*pend): the program's WANT_WRITE */
       KP_HM_SHORT,    /* it offers fewer bytes than that record stands for */
       KP_HM_ERR };    /* push failed */
typedef long (*kp_headmap_push)(void *ctx, size_t from, size_t len);
static inline int kp_headmap_pump(const struct kp_headmap *m, size_t *k, size_t *pend, size_t pos0,
				  size_t n, size_t target, int sent_once, kp_headmap_push push,
				  void *ctx)
{
	while (*k < target && kp_headmap_told(m, pos0, n, *k, target) <= pos0) {
		if (*pend && sent_once)
			return KP_HM_WANT;
		if (*pend && *k + *pend > target)
			return KP_HM_SHORT;
		size_t len = *pend ? *pend : target - *k;
		long w = push(ctx, *k, len);
		if (w < 0)
			return KP_HM_ERR;
		if (w == 0) {
			*pend = len;
			return KP_HM_WANT;
		}
		*pend = 0;
		*k += (size_t)w;
		sent_once = 0;
	}
	return 0;
}

#endif
