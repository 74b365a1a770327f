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

int main(void)
{
	char out[8192];
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
