/*
 * replay.c - the first request on a reused connection: ride it or not,
 * replay it or not (DESIGN 4).  No syscalls: unit-tested alone
 * (tests/unit/test_replay.c).
 */
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
	return KP_PLAN_UNACKED;
}

enum kp_replay_verdict kp_replay_verdict(enum kp_first_plan plan, bool count_known,
					 uint64_t acked_before, uint64_t acked_now)
{
#if defined(KP_TEST_PROOF_ALWAYS)
	/* test builds only: the proof disabled, every request replayed (the
	 * suites must then see requests served twice) */
	return KP_REPLAY_UNACKED;
#elif defined(KP_TEST_PROOF_NEVER)
	/* test builds only: nothing proved, nothing replayed but idempotent */
	if (plan == KP_PLAN_IDEMPOTENT)
		return KP_REPLAY_IDEMPOTENT;
	return KP_REPLAY_NO_ACKED;
#endif
	if (plan == KP_PLAN_IDEMPOTENT)
		return KP_REPLAY_IDEMPOTENT;
	if (plan != KP_PLAN_UNACKED || !count_known)
		return KP_REPLAY_NO_COUNT;
	/* The count only grows; anything acknowledged since the request's
	 * first byte went out may be its bytes (or, where earlier bytes were
	 * still in flight then, theirs: the safe side).  A RST carrying no
	 * ACK of our data leaves it where it was. */
	return acked_now == acked_before ? KP_REPLAY_UNACKED : KP_REPLAY_NO_ACKED;
}

const char *kp_replay_verdict_str(enum kp_replay_verdict v)
{
	switch (v) {
	case KP_REPLAY_NO_ACKED:
		return "some of its bytes were acknowledged by the server's TCP: it may have been "
		       "applied, so it is not sent again";
	case KP_REPLAY_NO_COUNT:
		return "whether the server's TCP took its bytes cannot be read: not sent again";
	case KP_REPLAY_IDEMPOTENT:
		return "idempotent";
	case KP_REPLAY_UNACKED:
		return "none of its bytes acknowledged by the server's TCP";
	}
	return "?";
}
