/*
 * clock.h - the library's one clock: monotonic milliseconds.  Base layer
 * (libc only): every file that needs the time includes this, not conn.h.
 */
#ifndef KEEPALIVE_CLOCK_H
#define KEEPALIVE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t kp_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

#endif
