/*
 * test_mem.c - kp_mem (pool/kp_mem.c): the pool's allocator that is not
 * malloc.  Every size from 0 to past a page: zeroed, 16-byte aligned,
 * writable to its last byte (ASan sees none of it: mmap), freed blocks
 * reused by their class, large blocks mapped alone.
 */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "kp_mem.h"

static int zeroed(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static void sizes(void)
{
	static unsigned char *blocks[9000];
	int bad_zero = 0, bad_align = 0, null = 0;
	for (size_t n = 0; n < 9000; n++) {
		blocks[n] = kp_mem_calloc(n);
		if (!blocks[n]) {
			null++;
			continue;
		}
		bad_zero += !zeroed(blocks[n], n);
		bad_align += ((uintptr_t)blocks[n] & 15) != 0;
		memset(blocks[n], 0xa5, n);
	}
	CHECK(null == 0);
	CHECK(bad_zero == 0);
	CHECK(bad_align == 0);
	/* no two blocks overlap: each still holds its own bytes */
	int clobbered = 0;
	for (size_t n = 1; n < 9000; n++)
		clobbered += blocks[n] && (blocks[n][0] != 0xa5 || blocks[n][n - 1] != 0xa5);
	CHECK(clobbered == 0);
	for (size_t n = 0; n < 9000; n++)
		kp_mem_free(blocks[n]);
}

static void reuse(void)
{
	void *a = kp_mem_calloc(100);
	memset(a, 1, 100);
	kp_mem_free(a);
	unsigned char *b = kp_mem_calloc(90); /* the same class: the same block, zeroed again */
	CHECK(b == a);
	CHECK(zeroed(b, 90));
	kp_mem_free(b);
	kp_mem_free(NULL);
	CHECK(kp_mem_calloc(SIZE_MAX - 4) == NULL); /* overflow */
	unsigned char *big = kp_mem_calloc(1u << 20);
	CHECK(big != NULL && zeroed(big, 1u << 20));
	kp_mem_free(big);
}

int main(void)
{
	sizes();
	reuse();
	printf("test_mem: %d passed, %d failed\n", passed, failed);
	return failed != 0;
}
