/*
 * fuzz.h - shared by the libFuzzer harnesses in tests/fuzz/: the invariant
 * check (abort() on violation, so that libFuzzer keeps the input) and exact
 * copies (a piece of input in a buffer of its own size, so that ASan sees
 * any over-read).
 */
#ifndef KEEPALIVE_FUZZ_H
#define KEEPALIVE_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INVARIANT(cond, ...)                                                \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "invariant broken at %s:%d: %s: ", \
				__FILE__, __LINE__, #cond);                 \
			fprintf(stderr, __VA_ARGS__);                       \
			fputc('\n', stderr);                                \
			abort();                                            \
		}                                                           \
	} while (0)

/* a malloc'd copy of exactly n bytes (n == 0: a 1-byte buffer) */
static inline char *fz_copy(const void *src, size_t n)
{
	char *p = malloc(n ? n : 1);

	if (!p)
		abort();
	if (n)
		memcpy(p, src, n);
	return p;
}

static inline unsigned char fz_lower(unsigned char c)
{
	return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* s[0..n) starts with the lower-case literal lit, ignoring case */
static inline int fz_iprefix(const char *s, size_t n, const char *lit)
{
	size_t i;

	for (i = 0; lit[i]; i++)
		if (i >= n || fz_lower((unsigned char)s[i]) != (unsigned char)lit[i])
			return 0;
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
