/*
 * kp_mem.h - small objects of the pool (idle entries, destinations, learnt
 * caps, uthash's buckets) and the write path's small buffers (wbuf.c)
 * from mmap'd memory, never malloc: connect() and
 * close() are async-signal-safe, and a handler may call them while the
 * program it interrupted is inside malloc (docs/binding.md, "The write
 * path in a signal handler").
 */
#ifndef KEEPALIVE_KP_MEM_H
#define KEEPALIVE_KP_MEM_H

#include <stddef.h>

/* n bytes, zeroed; NULL when the kernel has no memory. */
void *kp_mem_calloc(size_t n);

/* Give back what kp_mem_calloc returned (NULL: nothing). */
void kp_mem_free(void *p);

/* Map the first arena now (the constructor), so that the first requests
 * map nothing. */
void kp_mem_reserve(void);

/* fork(): every allocation is made under the pool's lock, which is held
 * across fork, so the lists are whole; the lock is made new in the child. */
void kp_mem_after_fork_child(void);

#endif
