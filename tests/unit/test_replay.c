/*
 * test_replay.c - replay.h's decisions: which first requests ride a reused
 * connection, and which are sent again when it dies under them.
 */
#include <stdio.h>
#include <string.h>

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
	CHECK(kp_replay_plan(&post, true, true, MAX) == KP_PLAN_PROVE);
	post.extra = 20480; /* the body in the head's call */
	CHECK(kp_replay_plan(&post, true, true, MAX) == KP_PLAN_PROVE);
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
	CHECK(kp_replay_plan(&post, true, true, MAX) == KP_PLAN_PROVE);
	post.bytes = MAX + 1;
	CHECK(kp_replay_plan(&post, true, true, MAX) == KP_PLAN_FRESH);
	/* chunked, upgrade, CONNECT, doubt */
	struct kp_req_facts chunked = { .framable = false, .bytes = 100 };
	CHECK(kp_replay_plan(&chunked, true, true, MAX) == KP_PLAN_FRESH);
}

/* the measured sequences (docs/replay.md, "Measured"), as facts */
static void verdicts(void)
{
	const struct kp_death none = { 0 };
	/* idempotent: whatever happened */
	CHECK(kp_replay_verdict(KP_PLAN_IDEMPOTENT, &none) == KP_REPLAY_IDEMPOTENT);
	struct kp_death d = { .count_known = true, .acked = true, .response = false };
	CHECK(kp_replay_verdict(KP_PLAN_IDEMPOTENT, &d) == KP_REPLAY_IDEMPOTENT);
	/* no plan to replay */
	CHECK(kp_replay_verdict(KP_PLAN_FRESH, &none) == KP_REPLAY_NO_COUNT);

	/* (a) nothing left the program: any method */
	d = (struct kp_death){ .unsent = true };
	CHECK(kp_replay_verdict(KP_PLAN_PROVE, &d) == KP_REPLAY_UNSENT);

	/* fin-then-request: FIN, our bytes, a reset, none acknowledged */
	d = (struct kp_death){ .fin_first = true, .reset_after = true, .count_known = true };
	CHECK(kp_replay_verdict(KP_PLAN_PROVE, &d) == KP_REPLAY_CLOSED);
	/* ... acknowledged after all: never twice */
	d.acked = true;
	CHECK(kp_replay_verdict(KP_PLAN_PROVE, &d) == KP_REPLAY_NO_ACKED);
	/* ... the count unreadable */
	d = (struct kp_death){ .fin_first = true, .reset_after = true };
	CHECK(kp_replay_verdict(KP_PLAN_PROVE, &d) == KP_REPLAY_NO_COUNT);

	/* read-then-rst (the POST executed twice): a reset, no FIN before
	 * it, nothing acknowledged: never proof */
	d = (struct kp_death){ .count_known = true };
	CHECK(kp_replay_verdict(KP_PLAN_PROVE, &d) == KP_REPLAY_NO_RESET);
	/* request-then-fin-unread: the same on the wire */
	CHECK(kp_replay_verdict(KP_PLAN_PROVE, &d) == KP_REPLAY_NO_RESET);

	/* read-then-fin: the FIN acknowledges it */
	d = (struct kp_death){ .fin_first = true, .count_known = true, .acked = true };
	CHECK(kp_replay_verdict(KP_PLAN_PROVE, &d) == KP_REPLAY_NO_ACKED);
	/* halfclose-read-fin: the FIN, nothing acknowledged, no reset in the
	 * bound: the server's TCP may hold it (and here its program read it) */
	d = (struct kp_death){ .fin_first = true, .count_known = true };
	CHECK(kp_replay_verdict(KP_PLAN_PROVE, &d) == KP_REPLAY_NO_SETTLED);

	/* a response byte exists: never, whatever TCP says */
	d = (struct kp_death){ .fin_first = true, .reset_after = true, .count_known = true,
			       .response = true };
	CHECK(kp_replay_verdict(KP_PLAN_PROVE, &d) == KP_REPLAY_NO_RESPONSE);
	/* ... but nothing left the program: unsent wins (the bytes are stale) */
	d.unsent = true;
	CHECK(kp_replay_verdict(KP_PLAN_PROVE, &d) == KP_REPLAY_UNSENT);

	CHECK(kp_replay_allowed(KP_REPLAY_CLOSED) && kp_replay_allowed(KP_REPLAY_IDEMPOTENT) &&
	      kp_replay_allowed(KP_REPLAY_UNSENT));
	CHECK(!kp_replay_allowed(KP_REPLAY_NO_ACKED) && !kp_replay_allowed(KP_REPLAY_NO_COUNT) &&
	      !kp_replay_allowed(KP_REPLAY_NO_RESET) && !kp_replay_allowed(KP_REPLAY_NO_SETTLED) &&
	      !kp_replay_allowed(KP_REPLAY_NO_RESPONSE));
	for (int v = KP_REPLAY_NO_ACKED; v <= KP_REPLAY_CLOSED; v++)
		CHECK(kp_replay_verdict_str((enum kp_replay_verdict)v)[0] != '?');
}

static void bounds(void)
{
	CHECK(kp_replay_settle_ms(0) == 10);
	CHECK(kp_replay_settle_ms(400) == 10);    /* loopback */
	CHECK(kp_replay_settle_ms(2500) == 10);
	CHECK(kp_replay_settle_ms(2501) == 11);
	CHECK(kp_replay_settle_ms(50000) == 200); /* 50 ms away */
	CHECK(kp_replay_settle_ms(900000) == 1000);
	CHECK(kp_replay_settle_ms(UINT32_MAX) == 1000);
}

static bool closes(const char *head)
{
	return kp_replay_408_closes(head, strlen(head));
}

/* a 408 is the server's idle close only when it says it closes */
static void idle_408s(void)
{
	CHECK(closes("HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"));
	CHECK(closes("HTTP/1.1 408 Request Timeout\nconnection: Keep-Alive, CLOSE\n\n"));
	CHECK(closes("HTTP/1.0 408 Request Timeout\r\nContent-Length: 0\r\n\r\n"));
	CHECK(!closes("HTTP/1.0 408 Request Timeout\r\nConnection: keep-alive\r\n\r\n"));
	/* a 408 that keeps the connection: an answer */
	CHECK(!closes("HTTP/1.1 408 Request Timeout\r\nContent-Length: 7\r\n\r\ntimeout"));
	CHECK(!closes("HTTP/1.1 408 Request Timeout\r\nConnection: keep-alive\r\n\r\n"));
	CHECK(!closes("HTTP/1.1 408 Request Timeout\r\nX-Connection: close\r\n\r\n"));
	CHECK(!closes("HTTP/1.1 408 Request Timeout\r\nConnection: closed\r\n\r\n"));
	/* the head not whole: no proof */
	CHECK(!closes("HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n"));
	CHECK(!closes("HTTP/1.1 408 Request Timeout\r\nConnection: cl"));
	CHECK(!closes("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"));
	CHECK(!closes("HTTP/1.1 4080"));
	CHECK(!closes(""));
	/* every prefix of a closing one: never read past n */
	const char *h = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n";
	for (size_t i = 0; i < strlen(h); i++) {
		char b[128];
		memcpy(b, h, i);
		CHECK(!kp_replay_408_closes(b, i));
	}
}

static void body_answers(void)
{
	CHECK(!kp_body_maybe_unread(200));
	CHECK(!kp_body_maybe_unread(201));
	CHECK(!kp_body_maybe_unread(204));
	CHECK(!kp_body_maybe_unread(302));
	CHECK(!kp_body_maybe_unread(303));
	CHECK(kp_body_maybe_unread(307));
	CHECK(kp_body_maybe_unread(308));
	CHECK(kp_body_maybe_unread(400));
	CHECK(kp_body_maybe_unread(401));
	CHECK(kp_body_maybe_unread(413));
	CHECK(kp_body_maybe_unread(417));
	CHECK(kp_body_maybe_unread(500));
	CHECK(kp_body_maybe_unread(503));
}

int main(void)
{
	body_answers();
	idle_408s();
	plans();
	verdicts();
	bounds();
	printf("test_replay: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
