/*
 * aio_scan.h - is there a kernel AIO library in the process whose
 * io_submit the library cannot see (docs/replay.md, "Kernel AIO")?
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

#endif
