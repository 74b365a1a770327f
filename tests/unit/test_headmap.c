/*
 * test_headmap.c - a torn request head (shim/headmap.h, docs/hold.md "A
 * head the socket took in part"): real heads rewritten by the framer, torn
 * at every byte and then fed to a socket that takes random amounts (none,
 * EAGAIN, included), the program offering what it was told did not go out
 * (as a program must).  What the server gets must be the rewritten head
 * exactly, each byte once; the program must never be told a byte went out
 * that the server lacks the equivalent of, nor anything of the rewritten
 * head sent before the program offered what it stands for; and it ends.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "framer.h"
#include "headmap.h"

#include "check.h"

static unsigned long rnd_state = 12345;
static unsigned rnd(unsigned n)
{
	rnd_state = rnd_state * 6364136223846793005UL + 1442695040888963407UL;
	return (unsigned)((rnd_state >> 33) % n);
}

static const char *heads[] = {
	"GET / HTTP/1.1\r\nConnection: close\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nconnection: Close\r\nX: y\r\n\r\n",
	"GET / HTTP/1.1\r\nConnection: close, TE\r\nTE: trailers\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.1\r\nConnection: TE\r\nConnection: close\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.1\r\nConnection: close\r\nHost: a\r\nConnection: close\r\n\r\n",
	"GET / HTTP/1.0\r\n\r\n",
	"GET / HTTP/1.0\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.0\r\nHost: a\r\nConnection: TE\r\nTE: x\r\n\r\n",
	"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nConnection: close\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\n\r\n", /* not rewritten: the map is 1:1 */
};

/* One run: the head O (ol), rewritten to R (rl); the program's first
 * held bytes (told sent, not sent: an earlier write's); the socket takes
 * first, then random amounts.  Returns 0 when all held. */
static int run(const char *o, size_t ol, const char *r, size_t rl, size_t held, size_t first)
{
	struct kp_headmap m;
	kp_headmap_init(&m, r, rl, o, ol);
	char got[4096];
	size_t k = 0, pos = held, offered_end = held, steps = 0;
	size_t take = first;
	while (pos < ol) {
		if (++steps > 10000)
			return 1; /* no end */
		/* the program offers what it has not been told went out, all
		 * of it or (a program writing in pieces) a part */
		size_t n = rnd(3) ? ol - pos : 1 + rnd((unsigned)(ol - pos));
		if (pos + n > offered_end)
			offered_end = pos + n;
		size_t target = kp_headmap_target(&m, k, pos, n);
		if (target > rl || target < k)
			return 2;
		size_t h = target - k < take ? target - k : take;
		memcpy(got + k, r + k, h);
		k += h;
		size_t newpos = kp_headmap_told(&m, pos, n, k, target);
		if (newpos < pos || newpos > ol)
			return 3;
		/* told bytes are at the server (their R equivalent) */
		if (kp_headmap_fwd(&m, newpos) > k && newpos > held)
			return 4;
		/* nothing of R is sent ahead of what it stands for */
		if (k > kp_headmap_fwd(&m, offered_end))
			return 5;
		pos = newpos;
		take = rnd(4) ? 1 + rnd(8) : 0;
	}
	if (k != rl || memcmp(got, r, rl))
		return 6;
	return 0;
}

/* TLS (kp_headmap_pump): a fake engine with OpenSSL's write rules.  A call
 * it cannot finish (WANT_WRITE) keeps R[from, from + len) begun, and the
 * next call must be exactly that again (else BAD_WRITE_RETRY / BAD_LENGTH:
 * error 10); a partial-write engine takes a record of up to 5 bytes per
 * call.  Bytes reach the server in order, each once. */
struct engine {
	const char *r;
	char got[4096];
	size_t sent;              /* at the server */
	size_t pend_from, pend_len; /* begun */
	int partial, misuse;
};

static long engine_push(void *ctx, size_t from, size_t len)
{
	struct engine *e = ctx;
	if (e->pend_len && (from != e->pend_from || len != e->pend_len)) {
		e->misuse = 1;
		return -1;
	}
	if (from != e->sent || !len) {
		e->misuse = 1;
		return -1;
	}
	if (!rnd(3)) { /* the socket is full: a record begun */
		e->pend_from = from;
		e->pend_len = len;
		return 0;
	}
	size_t w = len;
	if (e->partial && !e->pend_len && w > 5)
		w = 1 + rnd(5);
	e->pend_len = 0;
	memcpy(e->got + e->sent, e->r + from, w);
	e->sent += w;
	return (long)w;
}

/* The program writes O (its first held bytes told sent already) with
 * SSL_write; the library's first call hands the engine all of R (the head
 * and what follows it, staged); then the program's retries, the same
 * bytes after WANT_WRITE, its rest (or a part) after a count.  Returns 0
 * when all held. */
static int run_tls(const char *o, size_t ol, const char *r, size_t rl, size_t held, int partial)
{
	struct kp_headmap m;
	kp_headmap_init(&m, r, rl, o, ol);
	struct engine e = { .r = r, .partial = partial };
	size_t k = 0, pend = 0, pos = held, offered_end = ol, steps = 0;
	long w = engine_push(&e, 0, rl);
	if (w > 0)
		k = (size_t)w;
	else
		pend = rl;
	int sent_once = 1;
	size_t n = ol - pos;
	while (pos < ol) {
		if (++steps > 10000)
			return 1;
		size_t target = kp_headmap_target(&m, k, pos, n);
		int why = kp_headmap_pump(&m, &k, &pend, pos, n, target, sent_once, engine_push, &e);
		sent_once = 0;
		if (e.misuse)
			return 10;
		if (why == KP_HM_WANT) { /* WANT_WRITE: the same call again */
			if (k + pend > kp_headmap_fwd(&m, offered_end))
				return 5;
			continue;
		}
		if (why)
			return 11;
		size_t newpos = kp_headmap_told(&m, pos, n, k, target);
		if (newpos <= pos || newpos > pos + n)
			return 3; /* SSL_write returns > 0 or fails */
		if (!partial && newpos != pos + n)
			return 12; /* without partial writes: all or nothing */
		if (kp_headmap_fwd(&m, newpos) > k && newpos > held)
			return 4;
		if (k != e.sent)
			return 13;
		pos = newpos;
		n = rnd(3) || pos == ol ? ol - pos : 1 + rnd((unsigned)(ol - pos));
	}
	if (pend || k != rl || e.sent != rl || memcmp(e.got, r, rl))
		return 6;
	/* a retry that offers less than the begun record: refused, not sent */
	struct engine e2 = { .r = r };
	size_t k2 = 0, pend2 = rl;
	e2.pend_len = rl;
	if (ol > held + 1 &&
	    kp_headmap_pump(&m, &k2, &pend2, held, ol - held - 1,
			    kp_headmap_target(&m, 0, held, ol - held - 1), 0, engine_push, &e2) != KP_HM_SHORT &&
	    kp_headmap_fwd(&m, ol - 1) < rl)
		return 7;
	return 0;
}

int main(void)
{
	char out[8192];
	struct kp_headmap m0;
	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
		const char *o = heads[i];
		size_t ol = strlen(o);
		struct frm_req_head h;
		long hl = frm_req_parse_head(o, ol, &h);
		CHECK(hl == (long)ol);
		long rl = frm_req_rewrite_head(o, &h, out, sizeof(out));
		CHECK(rl >= 0);
		const char *r = rl > 0 ? out : o;
		size_t rlen = rl > 0 ? (size_t)rl : ol;
		int fails = 0;
		for (size_t held = 0; held < ol; held += 7)
			for (size_t first = 1; first < rlen; first++)
				for (int rep = 0; rep < 4; rep++) {
					int e = run(o, ol, r, rlen, held, first);
					if (e && !fails++)
						fprintf(stderr, "head %zu held %zu torn at %zu: error %d\n", i,
							held, first, e);
				}
		CHECK(fails == 0);
		/* TLS: with a body after the head (rides in R), held bytes,
		 * partial writes or not */
		char ob[4096], rb[8192];
		size_t bl = i % 3 ? 0 : 37;
		memcpy(ob, o, ol);
		memcpy(rb, r, rlen);
		for (size_t j = 0; j < bl; j++)
			ob[ol + j] = rb[rlen + j] = (char)('a' + j % 26);
		kp_headmap_init(&m0, rb, rlen + bl, ob, ol + bl);
		fails = 0;
		for (size_t held = 0; held < ol; held += 5)
			for (int partial = 0; partial < 2; partial++)
				for (int rep = 0; rep < 40; rep++) {
					int e = run_tls(ob, ol + bl, rb, rlen + bl, held, partial);
					if (e && !fails++)
						fprintf(stderr, "TLS head %zu held %zu partial %d: error %d\n", i,
							held, partial, e);
				}
		CHECK(fails == 0);
	}
	/* the map itself, on a known pair */
	struct kp_headmap m;
	const char *o = "AB close CD", *r = "AB keep-alive CD";
	kp_headmap_init(&m, r, strlen(r), o, strlen(o));
	CHECK(m.p == 3 && m.s == 4); /* "e CD" */
	CHECK(kp_headmap_back(&m, 3) == 3);
	CHECK(kp_headmap_back(&m, 8) == 3);  /* inside the span: none of it */
	CHECK(kp_headmap_back(&m, 13) == 8); /* past it: offset */
	CHECK(kp_headmap_fwd(&m, 5) == 12);  /* inside: all of R's span */
	CHECK(kp_headmap_fwd(&m, 9) == 14);
	printf("test_headmap: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
