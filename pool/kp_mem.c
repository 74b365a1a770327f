/*
 * kp_mem.c - see kp_mem.h.  Power-of-two size classes from 32 to 4096
 * bytes (a 16-byte header included), each a free list, fed one block at a
 * time from an arena of 256 KiB (mapped by kp_mem_reserve at start-up:
 * a request path maps nothing until the arena is used up); larger blocks
 * are mapped alone.  Nothing is unmapped but the large blocks: the
 * objects are few and recycled.  One lock, taken
 * through kp_lock: a handler that interrupts it finds kp_reentered() and
 * never reaches here.
 */
#include "kp_mem.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "kp_lock.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#define MIN_SHIFT 5
#define MAX_SHIFT 12
#define ARENA (256u * 1024)

struct hdr {
	size_t size; /* the block's whole size: a class, or the mapping */
	size_t pad;  /* keeps the payload 16-byte aligned */
};

struct free_block {
	struct free_block *next;
};

/* kp_lock.h: how deep this thread is inside our locks (here: the lowest
 * layer that locks) */
__thread unsigned kp_inside __attribute__((tls_model("initial-exec")));
__thread unsigned kp_outside __attribute__((tls_model("initial-exec")));

static struct free_block *free_lists[MAX_SHIFT + 1];
static char *arena;       /* the unused rest of the current arena */
static size_t arena_left;
static kp_mutex_t mem_lock = KP_MUTEX_INITIALIZER;

static void *map(size_t n)
{
	void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
#ifdef __SANITIZE_ADDRESS__
	__lsan_register_root_region(m, n);
#endif
	return m;
}

void *kp_mem_calloc(size_t n)
{
	size_t whole = n + sizeof(struct hdr);
	if (whole < n)
		return NULL;
	struct hdr *h;
	if (whole > (1u << MAX_SHIFT)) {
		whole = (whole + 4095) & ~(size_t)4095;
		if (!(h = map(whole)))
			return NULL;
	} else {
		unsigned k = MIN_SHIFT;
		while ((1u << k) < whole)
			k++;
		whole = 1u << k;
		kp_lock(&mem_lock);
		if (!free_lists[k]) {
			if (arena_left < whole) {
				char *a = map(ARENA);
				if (a) {
					arena = a;
					arena_left = ARENA;
				}
			}
			if (arena_left >= whole) {
				struct free_block *nb = (struct free_block *)arena;
				arena += whole;
				arena_left -= whole;
				nb->next = NULL;
				free_lists[k] = nb;
			}
		}
		struct free_block *b = free_lists[k];
		if (b)
			free_lists[k] = b->next;
		kp_unlock(&mem_lock);
		if (!b)
			return NULL;
		h = (struct hdr *)b;
	}
	memset(h, 0, whole);
	h->size = whole;
	return h + 1;
}

void kp_mem_free(void *p)
{
	if (!p)
		return;
	struct hdr *h = (struct hdr *)p - 1;
	size_t whole = h->size;
	if (whole > (1u << MAX_SHIFT)) {
#ifdef __SANITIZE_ADDRESS__
		__lsan_unregister_root_region(h, whole);
#endif
		munmap(h, whole);
		return;
	}
	unsigned k = MIN_SHIFT;
	while ((1u << k) < whole)
		k++;
	struct free_block *b = (struct free_block *)h;
	kp_lock(&mem_lock);
	b->next = free_lists[k];
	free_lists[k] = b;
	kp_unlock(&mem_lock);
}

void kp_mem_reserve(void)
{
	kp_lock(&mem_lock);
	if (!arena_left && (arena = map(ARENA)))
		arena_left = ARENA;
	kp_unlock(&mem_lock);
}

void kp_mem_after_fork_child(void)
{
	kp_mutex_init(&mem_lock);
}
