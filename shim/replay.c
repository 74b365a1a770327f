/*
 * replay.c - the first request on a reused connection: ride it or not,
 * replay it or not (docs/replay.md).  No syscalls: unit-tested alone
 * (tests/unit/test_replay.c).
 */
#include <string.h>
#include <strings.h>

#include "replay.h"

enum kp_first_plan kp_replay_plan(const struct kp_req_facts *r, bool acked_known, bool any_method,
				  uint64_t copy_max)
{
	/* bytes after a bodiless head are a pipelined request: its replay
	 * would be ours to frame twice; kept simple, as before */
	if (r->idempotent)
		return r->extra ? KP_PLAN_FRESH : KP_PLAN_IDEMPOTENT;
	/* Any other method may ride the reused connection only where the
	 * kernel can later tell whether the server's TCP took any of it, and
	 * the whole request fits the copy a replay needs (a chunked body has
	 * no known end; a 1 GiB sendfile upload stays zero-copy, fresh). */
	if (!any_method || !acked_known || !r->framable || r->bytes > copy_max ||
	    r->extra > r->body_len)
		return KP_PLAN_FRESH;
	return KP_PLAN_PROVE;
}

/*
 * docs/replay.md, "The rule".  An idempotent request may always go again.
 * Any other only on proof that no server program can have read it: (a)
 * none of its bytes left the program, or (b) the server's FIN came before
 * any reset and any response byte, and then a reset came with none of our
 * bytes acknowledged (they met a closed socket: the reset is the kernel's
 * answer to data for a socket nobody can read any more).  A reset with no
 * FIN before it proves nothing: a server that read the request and aborted
 * within its delayed-ACK time sends just that, and the client's kernel
 * drops the acknowledgment the reset carries.  Where the sequences cannot
 * be told apart: no replay.
 */
enum kp_replay_verdict kp_replay_verdict(enum kp_first_plan plan, const struct kp_death *d)
{
#if defined(KP_TEST_PROOF_ALWAYS)
	/* test builds only: the proof disabled, every request replayed (the
	 * suites must then see requests served twice) */
	(void)plan;
	(void)d;
	return KP_REPLAY_CLOSED;
#endif
	if (plan == KP_PLAN_IDEMPOTENT)
		return KP_REPLAY_IDEMPOTENT;
	if (plan != KP_PLAN_PROVE)
		return KP_REPLAY_NO_COUNT;
	if (d->unsent)
		return KP_REPLAY_UNSENT;
#if defined(KP_TEST_PROOF_NEVER)
	return KP_REPLAY_NO_ACKED; /* test builds only: nothing proved */
#endif
	if (d->response)
		return KP_REPLAY_NO_RESPONSE;
	if (!d->fin_first)
		return KP_REPLAY_NO_RESET;
	if (!d->count_known)
		return KP_REPLAY_NO_COUNT;
	/* The count only grows; anything acknowledged since the request's
	 * first byte went out may be its bytes (or, where earlier bytes were
	 * still in flight then, theirs: the safe side). */
	if (d->acked)
		return KP_REPLAY_NO_ACKED;
	if (!d->reset_after)
		return KP_REPLAY_NO_SETTLED;
	return KP_REPLAY_CLOSED;
}

unsigned kp_replay_settle_ms(uint32_t srtt_us)
{
	/* four round trips: ours to arrive, the reset back, with slack for
	 * a retransmission's jitter; loopback's ~0.05-6 ms gives the floor */
	uint64_t ms = ((uint64_t)srtt_us * 4 + 999) / 1000;
	if (ms < 10)
		return 10;
	return ms > 1000 ? 1000 : (unsigned)ms;
}

const char *kp_replay_verdict_str(enum kp_replay_verdict v)
{
	switch (v) {
	case KP_REPLAY_NO_ACKED:
		return "some of its bytes were acknowledged by the server's TCP: it may have been "
		       "applied, so it is not sent again";
	case KP_REPLAY_NO_COUNT:
		return "whether the server's TCP took its bytes cannot be read: not sent again";
	case KP_REPLAY_NO_RESET:
		return "a reset with no FIN before it (a server that read it and aborted sends the "
		       "same): not sent again";
	case KP_REPLAY_NO_SETTLED:
		return "the server's FIN, and no reset within the bound: its TCP may hold the "
		       "request; not sent again";
	case KP_REPLAY_NO_RESPONSE:
		return "a response byte exists: not sent again";
	case KP_REPLAY_IDEMPOTENT:
		return "idempotent";
	case KP_REPLAY_UNSENT:
		return "none of its bytes left the program";
	case KP_REPLAY_CLOSED:
		return "the server's FIN, then a reset with none of its bytes acknowledged: they met "
		       "a closed socket";
	}
	return "?";
}

/* Connection's tokens in v[0..n): *close, *keep set for "close",
 * "keep-alive" (case-insensitive, comma-separated, optional whitespace). */
static void conn_tokens(const char *v, size_t n, bool *close, bool *keep)
{
	size_t i = 0;
	while (i < n) {
		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		size_t s = i;
		while (i < n && v[i] != ',' && v[i] != ' ' && v[i] != '\t')
			i++;
		if (i - s == 5 && !strncasecmp(v + s, "close", 5))
			*close = true;
		else if (i - s == 10 && !strncasecmp(v + s, "keep-alive", 10))
			*keep = true;
	}
}

bool kp_replay_408_closes(const char *p, size_t n)
{
	if (n < 12 || memcmp(p, "HTTP/1.", 7) || (p[7] != '0' && p[7] != '1') ||
	    memcmp(p + 8, " 408", 4))
		return false;
	bool close = false, keep = false;
	const char *end = p + n;
	const char *l = memchr(p, '\n', n);
	while (l) {
		const char *s = l + 1;
		const char *e = memchr(s, '\n', (size_t)(end - s));
		if (!e)
			return false; /* the head not whole: no proof */
		size_t len = (size_t)(e - s);
		if (len && s[len - 1] == '\r')
			len--;
		if (!len) /* the blank line */
			return close || (p[7] == '0' && !keep);
		if (len > 11 && !strncasecmp(s, "connection:", 11))
			conn_tokens(s + 11, len - 11, &close, &keep);
		l = e;
	}
	return false;
}

bool kp_body_maybe_unread(unsigned status)
{
	return status >= 400 || status == 307 || status == 308;
}
