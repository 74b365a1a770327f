/*
 * poll_until.h - one bounded wait on one descriptor: poll (the real one)
 * until an absolute deadline of kp_now_ms(), a signal's EINTR retried
 * with what is left.  Base layer (real.h, clock.h).
 */
#ifndef KEEPALIVE_POLL_UNTIL_H
#define KEEPALIVE_POLL_UNTIL_H

#include <errno.h>
#include <poll.h>

#include "clock.h"
#include "real.h"

/* poll's answer for fd and events by end_ms: > 0 ready (p->revents), 0
 * the deadline passed, < 0 an error other than EINTR. */
static inline int kp_poll_until(struct pollfd *p, uint64_t end_ms)
{
	int r;
	do {
		uint64_t now = kp_now_ms();
		r = KP_REAL(poll)(p, 1, now >= end_ms ? 0 : (int)(end_ms - now));
	} while (r < 0 && errno == EINTR);
	return r;
}

#endif
