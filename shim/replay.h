/*
 * replay.h - may the first request on a reused connection ride it, and may
 * it be sent again when the connection turns out dead under it (DESIGN 4)?
 * Pure decisions on facts; the one syscall, reading the kernel's count of
 * acknowledged bytes, is kp_tcp_bytes_acked() (tcpinfo.c).  Prefix: kp_replay_.
 */
#ifndef KEEPALIVE_REPLAY_H
#define KEEPALIVE_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What is known of a request when its head is whole, before any byte. */
struct kp_req_facts {
	bool idempotent;    /* GET, HEAD, OPTIONS, TRACE or Idempotency-Key,
	                       bodiless, no upgrade: the rule since the start */
	bool framable;      /* no body, or a Content-Length body; no upgrade,
	                       no CONNECT, nothing doubtful */
	uint64_t bytes;     /* head + body: what a copy must hold */
	uint64_t extra;     /* bytes in the same call after the head */
	uint64_t body_len;  /* Content-Length (0 without a body) */
};

/* How the first request on a reused connection goes out. */
enum kp_first_plan {
	KP_PLAN_FRESH = 0,  /* on a fresh connection; the pooled one goes back */
	KP_PLAN_IDEMPOTENT, /* on the reused one, with a copy: replayed on any
	                       failure before the response */
	KP_PLAN_UNACKED,    /* on the reused one, with a copy: replayed only
	                       while TCP shows none of its bytes acknowledged */
};

/* acked_known: the kernel reports tcpi_bytes_acked for this socket;
 * any_method: KEEPALIVE_METHODS=all; copy_max: KEEPALIVE_REPLAY_MAX. */
enum kp_first_plan kp_replay_plan(const struct kp_req_facts *r, bool acked_known, bool any_method,
				  uint64_t copy_max);

/* Why a request that met a dead connection before any response byte is,
 * or is not, sent again. */
enum kp_replay_verdict {
	KP_REPLAY_NO_ACKED = 0, /* some of its bytes reached the server's TCP:
	                           it may have been applied; never twice */
	KP_REPLAY_NO_COUNT,     /* the count could not be read now */
	KP_REPLAY_IDEMPOTENT,   /* replay: sending it twice is harmless */
	KP_REPLAY_UNACKED,      /* replay: no byte of it was acknowledged, so
	                           no server program can have read it */
};

enum kp_replay_verdict kp_replay_verdict(enum kp_first_plan plan, bool count_known,
					 uint64_t acked_before, uint64_t acked_now);

static inline bool kp_replay_allowed(enum kp_replay_verdict v)
{
	return v >= KP_REPLAY_IDEMPOTENT;
}

const char *kp_replay_verdict_str(enum kp_replay_verdict v);

/* getsockopt(TCP_INFO) tcpi_bytes_acked (Linux >= 4.2; the count includes
 * the SYN).  0, or -1 with errno (ENOPROTOOPT when tcp_info is too short
 * to hold it: an older kernel). */
int kp_tcp_bytes_acked(int fd, uint64_t *acked);

#endif
