/*
 * aio_scan.h - is there a kernel AIO library in the process whose
 * io_submit the library cannot see (docs/replay.md, "Kernel AIO")?  Is
 * there an io_uring?
 */
#ifndef KP_AIO_SCAN_H
#define KP_AIO_SCAN_H
#include <stdbool.h>

/* true when a loaded object defines io_submit and does not import
 * syscall (an older libaio: the system call instruction inline, past our
 * syscall() wrapper), as last scanned, or when the program called dlopen
 * since that scan (not known yet: default deny).  Async-signal-safe: two
 * loads. */
bool kp_aio_unseen(void);
/* scan the loaded objects again if any were loaded since the last scan:
 * at our constructor (every object the program links is loaded by then)
 * and at each dlsym of the program (how it reaches io_submit in a library
 * it opened; shim/dl_real.c).  Not on the request path: it calls dlopen
 * and dlsym, which allocate, and takes the loader's lock. */
void kp_aio_rescan(void);
/* the program calls dlopen (hooks_dl.c, before the real one: its end is
 * the real dlopen's, a tail jump): what it opens is seen at the next scan,
 * which the program's next dlsym, dlvsym or dlopen makes */
void kp_aio_dlopen(void);

/*
 * io_uring (docs/limits.md "io_uring"): the kernel reads and writes the
 * connection for the ring, past every wrapper, so a connection handed out
 * to such a process could meet a server's idle close where no replay can
 * follow, and an EOF we owed would never be delivered.  Default deny: once
 * a ring is known in the process (syscall(SYS_io_uring_setup); a loaded
 * liburing that makes the system call inline, found by kp_aio_rescan) it
 * hands out, parks and rewrites nothing from then on.  Set for good:
 * kp_uring_note; asked: kp_uring_seen (a load, async-signal-safe).
 */
void kp_uring_note(void);
bool kp_uring_seen(void);

#endif
