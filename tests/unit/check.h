/*
 * check.h - the unit tests' one assertion: count, and on failure say where
 * and what.  Each test prints "<name>: N passed, M failed" and exits
 * non-zero when M > 0 (make unit stops there).
 */
#ifndef KEEPALIVE_TEST_CHECK_H
#define KEEPALIVE_TEST_CHECK_H

#include <stdio.h>

static int passed, failed;

#define CHECK(cond)                                                              \
	do {                                                                     \
		if (cond) {                                                      \
			passed++;                                                \
		} else {                                                         \
			failed++;                                                \
			fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond); \
		}                                                                \
	} while (0)

#endif
