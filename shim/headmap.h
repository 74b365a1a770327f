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

#endif
