/*
 * stdio_drain.h - a FILE whose fd is one of our connections keeps its
 * buffer until stdio would write it, and then it goes out through the
 * shim (hooks_stdio.c).  These empty such buffers through the shim where
 * glibc would otherwise write them itself.
 */
#ifndef KEEPALIVE_STDIO_DRAIN_H
#define KEEPALIVE_STDIO_DRAIN_H

#include <stdbool.h>
#include <stdio.h>

/* Every open FILE of ours (fflush(NULL); at_exit: exit, where a FILE
 * another thread holds locked is left to libc, as its own exit flush
 * takes no locks). */
void kp_stdio_drain_all(bool at_exit);

/* fp is about to be closed: its buffer, if fp is ours.  False when output
 * is left that libc's fclose will write unseen (a wide stream). */
bool kp_stdio_before_fclose(FILE *fp);

#endif
