/*
 * wbuf.c - mmap'd buffers for the write path (wbuf.h).  mmap, mremap and
 * munmap are system calls with no lock of libc's: safe in any handler.
 * Growth doubles, so a head written byte by byte costs log2 of its size
 * in mremaps; the buffers of a recycled connection object are kept for
 * its next use (conn.c), so a steady run of requests maps nothing.
 */
#include "wbuf.h"

#include <sys/mman.h>

#define PAGE 4096u

static size_t pages(size_t n)
{
	return (n + PAGE - 1) & ~(size_t)(PAGE - 1);
}

void *kp_wbuf_grow(void *p, size_t *cap, size_t need)
{
	if (p && need <= *cap)
		return p;
	size_t want = *cap * 2 > need ? *cap * 2 : need;
	if (want < need) /* overflow */
		return NULL;
	want = pages(want);
	void *m = p ? mremap(p, *cap, want, MREMAP_MAYMOVE)
		    : mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	*cap = want;
	return m;
}

void kp_wbuf_free(void *p, size_t cap)
{
	if (p)
		munmap(p, cap);
}
