/*
 * iov.h - iovec arithmetic (base layer: no calls, no state).
 */
#ifndef KEEPALIVE_IOV_H
#define KEEPALIVE_IOV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
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

/* The first n bytes of iov (or all it has, if fewer) equal p's. */
static inline bool iov_equal(const struct iovec *iov, int iovcnt, const char *p, size_t n)
{
	for (int i = 0; i < iovcnt && n; i++) {
		size_t l = iov[i].iov_len < n ? iov[i].iov_len : n;
		if (memcmp(iov[i].iov_base, p, l))
			return false;
		p += l;
		n -= l;
	}
	return true;
}

#endif
