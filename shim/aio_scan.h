/*
 * aio_scan.h - is there a kernel AIO library in the process whose
 * io_submit the library cannot see (docs/replay.md, "Kernel AIO")?
 */
#ifndef KP_AIO_SCAN_H
#define KP_AIO_SCAN_H
#include <stdbool.h>

/* true when a loaded object defines io_submit and does not import
 * syscall (an older libaio: the system call instruction inline, past our
 * syscall() wrapper).  Looked at again whenever objects were loaded. */
bool kp_aio_unseen(void);

#endif
