/*
 * guard.h - test inputs that end right before a PROT_NONE page, so a
 * parser reading one byte too far crashes instead of reading garbage.
 * Define GUARD_AREA (bytes) before including.  Test code only.
 */
#ifndef KEEPALIVE_TEST_GUARD_H
#define KEEPALIVE_TEST_GUARD_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char *guard_base;

static void guard_init(void)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, GUARD_AREA + pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED || mprotect(p + GUARD_AREA, pg, PROT_NONE) != 0) {
		perror("mmap");
		exit(2);
	}
	guard_base = p;
}

/* a copy of src[0..n) that ends exactly at the guard page (src may itself
 * lie in the guarded area: memmove) */
static char *guarded(const char *src, size_t n)
{
	char *p = guard_base + GUARD_AREA - n;

	if (n > GUARD_AREA)
		abort();
	memmove(p, src, n);
	return p;
}

#endif
