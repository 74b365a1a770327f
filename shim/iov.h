/*
 * iov.h - iovec arithmetic (base layer: no calls, no state).
 */
#ifndef KEEPALIVE_IOV_H
#define KEEPALIVE_IOV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* the bytes in iov; SIZE_MAX when they overflow */
static inline size_t iov_total(const struct iovec *iov, int n)
{
	size_t t = 0;
	for (int i = 0; i < n; i++) {
		if (iov[i].iov_len > SIZE_MAX - t)
			return SIZE_MAX;
		t += iov[i].iov_len;
	}
	return t;
}

#endif
