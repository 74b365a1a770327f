/*
 * wbuf.c - buffers for the write path (wbuf.h), never from malloc: up to
 * WBUF_SMALL bytes from kp_mem (an arena mapped at start-up: the first
 * requests map nothing), larger ones mapped alone and grown by mremap.
 * mmap, mremap and munmap are system calls with no lock of libc's; kp_mem
 * takes a lock of ours through kp_lock, which no handler ever waits on
 * (kp_lock.h).  Growth doubles; the buffers of a recycled connection
 * object are kept for its next use (hidden.c), so a steady run of requests
 * allocates nothing.
 */
#include "wbuf.h"

#include <string.h>
#include <sys/mman.h>

#include "kp_mem.h"

#define PAGE 4096u
/* the largest kp_mem class (4096) less its header */
#define WBUF_SMALL 4080u

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
	if (want < 256)
		want = 256;
	if (want <= WBUF_SMALL) {
		void *m = kp_mem_calloc(want);
		if (!m)
			return NULL;
		if (p)
			memcpy(m, p, *cap);
		kp_mem_free(p); /* p was small too: *cap < want */
		*cap = want;
		return m;
	}
	want = pages(want);
	void *m;
	if (p && *cap > WBUF_SMALL) {
		m = mremap(p, *cap, want, MREMAP_MAYMOVE);
	} else {
		m = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m != MAP_FAILED && p) {
			memcpy(m, p, *cap);
			kp_mem_free(p);
		}
	}
	if (m == MAP_FAILED)
		return NULL;
	*cap = want;
	return m;
}

void kp_wbuf_free(void *p, size_t cap)
{
	if (!p)
		return;
	if (cap <= WBUF_SMALL)
		kp_mem_free(p);
	else
		munmap(p, cap);
}
