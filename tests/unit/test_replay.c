/*
 * test_replay.c - replay.h's decisions: which first requests ride a reused
 * connection, and which are sent again when it dies under them.
 */
#include <stdio.h>

#include "replay.h"

#include "check.h"

#define MAX 65536

static void plans(void)
{
	struct kp_req_facts get = { .idempotent = true, .framable = true, .bytes = 100 };
	CHECK(kp_replay_plan(&get, false, true, MAX) == KP_PLAN_IDEMPOTENT);
	CHECK(kp_replay_plan(&get, false, false, MAX) == KP_PLAN_IDEMPOTENT);
	get.extra = 50; /* a pipelined request behind it */
	CHECK(kp_replay_plan(&get, true, true, MAX) == KP_PLAN_FRESH);

	struct kp_req_facts post = { .framable = true, .bytes = 100 + 20480, .body_len = 20480 };
	CHECK(kp_replay_plan(&post, true, true, MAX) == KP_PLAN_UNACKED);
	post.extra = 20480; /* the body in the head's call */
	CHECK(kp_replay_plan(&post, true, true, MAX) == KP_PLAN_UNACKED);
	post.extra = 20481; /* and a pipelined request */
	CHECK(kp_replay_plan(&post, true, true, MAX) == KP_PLAN_FRESH);
	post.extra = 0;
	/* no count from the kernel: today's rule */
	CHECK(kp_replay_plan(&post, false, true, MAX) == KP_PLAN_FRESH);
	/* KEEPALIVE_METHODS=idempotent */
	CHECK(kp_replay_plan(&post, true, false, MAX) == KP_PLAN_FRESH);
	/* bigger than the copy: fresh (the 1 GiB sendfile upload) */
	struct kp_req_facts big = { .framable = true, .bytes = 1ull << 30, .body_len = 1ull << 30 };
	CHECK(kp_replay_plan(&big, true, true, MAX) == KP_PLAN_FRESH);
	post.bytes = MAX;
	CHECK(kp_replay_plan(&post, true, true, MAX) == KP_PLAN_UNACKED);
	post.bytes = MAX + 1;
	CHECK(kp_replay_plan(&post, true, true, MAX) == KP_PLAN_FRESH);
	/* chunked, upgrade, CONNECT, doubt */
	struct kp_req_facts chunked = { .framable = false, .bytes = 100 };
	CHECK(kp_replay_plan(&chunked, true, true, MAX) == KP_PLAN_FRESH);
}

static void verdicts(void)
{
	CHECK(kp_replay_verdict(KP_PLAN_IDEMPOTENT, false, 0, 0) == KP_REPLAY_IDEMPOTENT);
	CHECK(kp_replay_verdict(KP_PLAN_IDEMPOTENT, true, 10, 500) == KP_REPLAY_IDEMPOTENT);
	/* RST, nothing acknowledged since the first byte */
	CHECK(kp_replay_verdict(KP_PLAN_UNACKED, true, 1201, 1201) == KP_REPLAY_UNACKED);
	/* the server's TCP took some or all of it: never twice */
	CHECK(kp_replay_verdict(KP_PLAN_UNACKED, true, 1201, 1202) == KP_REPLAY_NO_ACKED);
	CHECK(kp_replay_verdict(KP_PLAN_UNACKED, true, 1201, 21801) == KP_REPLAY_NO_ACKED);
	/* the count unreadable now */
	CHECK(kp_replay_verdict(KP_PLAN_UNACKED, false, 1201, 1201) == KP_REPLAY_NO_COUNT);
	CHECK(kp_replay_verdict(KP_PLAN_FRESH, true, 1, 1) == KP_REPLAY_NO_COUNT);
	CHECK(kp_replay_allowed(KP_REPLAY_UNACKED) && kp_replay_allowed(KP_REPLAY_IDEMPOTENT));
	CHECK(!kp_replay_allowed(KP_REPLAY_NO_ACKED) && !kp_replay_allowed(KP_REPLAY_NO_COUNT));
}

int main(void)
{
	plans();
	verdicts();
	printf("test_replay: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
