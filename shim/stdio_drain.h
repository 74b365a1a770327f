/*
 * stdio_drain.h - a FILE whose fd is one of our connections keeps its
 * buffer until stdio would write it, and then it goes out through the
 * shim (hooks_stdio.c).  These empty such buffers through the shim where
 * glibc would otherwise write them itself.
 */
#ifndef KEEPALIVE_STDIO_DRAIN_H
#define KEEPALIVE_STDIO_DRAIN_H

#include <stdio.h>

/* Every open FILE of ours (fflush(NULL), exit). */
void kp_stdio_drain_all(void);

/* fp is about to be closed: its buffer, if fp is ours. */
void kp_stdio_before_fclose(FILE *fp);

#endif
