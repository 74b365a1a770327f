/*
 * hooks_syscall.h - what syscall() (hooks_syscall.c) and the rest of the
 * wrappers (hooks_conn.c) share.
 */
#ifndef KP_HOOKS_SYSCALL_H
#define KP_HOOKS_SYSCALL_H
#include <stdbool.h>

#pragma GCC visibility push(hidden)

/* hooks_conn.c: a raw fork or clone (kp_raw_fork); io_uring known in the
 * process, nothing changes hands from then on (kp_uring_divide) */
long kp_raw_fork(long number, const long a[6]);
void kp_uring_divide(void);

/* that call made through its wrapper, its result in *r: false where the
 * kernel's own call must be made (an argument the kernel refuses) */
bool kp_syscall_by_name(long number, const long a[6], long *r);
/* io_submit with the iocbs that name a connection of ours set up as the
 * program alone would see them (docs/replay.md "Kernel AIO") */
long kp_io_submit_slow(const long a[6]);
/* hooks_sandbox.c: SYS_seccomp and SYS_prctl (PR_SET_SECCOMP installs a
 * filter: the library steps aside for good) */
long kp_sandbox_syscall(long number, const long a[6]);

#pragma GCC visibility pop

#endif
