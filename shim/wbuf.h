/*
 * wbuf.h - the write path's buffers (a held head, the replay copy, a large
 * rewritten head, an iovec copy) from mmap, never malloc: write(), send(),
 * writev() and sendmsg() are async-signal-safe, and a handler may run them
 * while the program it interrupted is inside malloc (docs/binding.md,
 * "The write path in a signal handler").
 */
#ifndef KEEPALIVE_WBUF_H
#define KEEPALIVE_WBUF_H

#include <stddef.h>

/* A buffer of at least need bytes, p's contents kept (p may be NULL, *cap
 * its size, 0 then); *cap is set to what it holds.  NULL when there is no
 * memory: p and *cap are as they were. */
void *kp_wbuf_grow(void *p, size_t *cap, size_t need);

/* Give p (of cap bytes, as kp_wbuf_grow set it) back.  NULL: nothing. */
void kp_wbuf_free(void *p, size_t cap);

/* Buffers up to this size stay with a recycled connection object. */
#define KP_WBUF_KEEP 16384

#endif
