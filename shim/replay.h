/*
 * replay.h - may the first request on a reused connection ride it, and may
 * it be sent again when the connection turns out dead under it?
 * Pure decisions on facts; the syscalls that read the kernel's view of the
 * socket are kp_tcp_*() (tcpinfo.c).  The rule: docs/replay.md.
 * Prefix: kp_replay_.
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
	KP_PLAN_PROVE,      /* on the reused one, with a copy: replayed only on
	                       proof that the server never received it
	                       (kp_replay_verdict, docs/replay.md) */
};

/* acked_known: the kernel reports tcpi_bytes_acked for this socket;
 * any_method: KEEPALIVE_METHODS=all; copy_max: KEEPALIVE_REPLAY_MAX. */
enum kp_first_plan kp_replay_plan(const struct kp_req_facts *r, bool acked_known, bool any_method,
				  uint64_t copy_max);

/*
 * What the kernel showed of a reused connection that died under its first
 * request (docs/replay.md, "The rule").  Gathered by conn_replay.c
 * (settle_facts) without consuming the socket's pending error where the
 * program could still read it.
 */
struct kp_death {
	bool unsent;      /* (a) none of the request's bytes left the program: the
	                     send failed, or the pre-send probe found it dead */
	bool response;    /* a response byte exists (read, or waiting unread);
	                     a 408 followed by the close is not one */
	bool fin_first;   /* the server's FIN came before any reset */
	bool reset_after; /* a reset followed that FIN, within the bound: our
	                     bytes hit a closed socket */
	bool count_known; /* tcpi_bytes_acked could be read */
	bool acked;       /* TCP acknowledged bytes since the request's first
	                     byte went out (may be its bytes: the safe side) */
};

/* Why a request that met a dead connection before any response byte is,
 * or is not, sent again. */
enum kp_replay_verdict {
	KP_REPLAY_NO_ACKED = 0, /* some of its bytes reached the server's TCP:
	                           it may have been applied; never twice */
	KP_REPLAY_NO_COUNT,     /* the count could not be read now */
	KP_REPLAY_NO_RESET,     /* a reset with no FIN before it: also what a
	                           server that read it and aborted sends */
	KP_REPLAY_NO_SETTLED,   /* the FIN, but no reset within the bound: the
	                           server's TCP may hold it, unread or read */
	KP_REPLAY_NO_RESPONSE,  /* a response byte exists: the server answers;
	                           never replayed, never swapped */
	KP_REPLAY_IDEMPOTENT,   /* replay: sending it twice is harmless */
	KP_REPLAY_UNSENT,       /* replay: none of its bytes left the program */
	KP_REPLAY_CLOSED,       /* replay: the server's FIN, then a reset with
	                           none of its bytes acknowledged: they hit a
	                           closed socket, no server program read them */
};

enum kp_replay_verdict kp_replay_verdict(enum kp_first_plan plan, const struct kp_death *d);

static inline bool kp_replay_allowed(enum kp_replay_verdict v)
{
	return v >= KP_REPLAY_IDEMPOTENT;
}

const char *kp_replay_verdict_str(enum kp_replay_verdict v);

/* How long the kernel is given to settle our bytes after the server's FIN
 * (a reset, or an acknowledgment): a few smoothed round trips, at least
 * 10 ms, at most 1 s.  srtt_us: tcpi_rtt (0: unknown). */
unsigned kp_replay_settle_ms(uint32_t srtt_us);

/* getsockopt(TCP_INFO) tcpi_bytes_acked (Linux >= 4.2; the count includes
 * the SYN).  0, or -1 with errno (ENOPROTOOPT when tcp_info is too short
 * to hold it: an older kernel). */
int kp_tcp_bytes_acked(int fd, uint64_t *acked);

/* The kernel's count of bytes written to fd's socket, plus one for the
 * SYN: those it acknowledged, and those still in its send queue
 * (SIOCOUTQ).  0, or -1. */
int kp_tcp_kernel_tx(int fd, uint64_t *w);

/* The socket's TCP state (TCP_ESTABLISHED, TCP_CLOSE_WAIT, TCP_CLOSE...),
 * tcpi_bytes_acked and tcpi_bytes_received (acked_ok false on a kernel
 * without them) and tcpi_rtt, in one getsockopt(TCP_INFO): 0, or -1 with
 * errno.  received counts the server's FIN as one byte (rcv_nxt moves over
 * it) and a reset as none: docs/replay.md "What the program observes". */
struct kp_tcp_view {
	uint8_t state;
	bool acked_ok;
	uint64_t acked;
	uint64_t received;
	uint32_t srtt_us;
};
int kp_tcp_view(int fd, struct kp_tcp_view *v);

/* Acknowledge now what the kernel would acknowledge late (TCP_QUICKACK):
 * docs/cost.md "A response in two writes". */
int kp_tcp_quickack(int fd);

/* Send now what Nagle holds (setting TCP_NODELAY pushes the queue), then
 * TCP_NODELAY off again: for a socket whose program has it off and no
 * cork (docs/cost.md "A request in two writes"). */
void kp_tcp_push(int fd);

/* A 408 is the server's idle timer (its close, which the program alone
 * would have met as its connect() to a server that had gone) only when it
 * says it closes: the whole head in p[0..n), "Connection: close" among
 * its tokens, or HTTP/1.0 without keep-alive.  Any other 408 (the
 * connection kept, or a head we cannot read whole) is an answer to the
 * program's request: it reads it (docs/replay.md, "A 408"). */
bool kp_replay_408_closes(const char *p, size_t n);

/* A final answer with this status to a request that had a body may have
 * been sent before the server read the body (an upload refused: 401, 413,
 * 417; an error; a redirect that keeps the method, 307 and 308, made by a
 * routing layer): the body may wait in the server's buffer, to be read as
 * the next request on the connection.  True for 3xx 307/308 and any 4xx or
 * 5xx (docs/replay.md "A request with a body answered early"). */
bool kp_body_maybe_unread(unsigned status);

#endif
