/*
 * sys_prlimit.h - the kernel's prlimit64, by a system call of our own: no
 * libc symbol to bind, nothing instrumented, so that the program's
 * getrlimit/setrlimit (hooks_proc.c), which ASan's runtime calls before its
 * shadow memory exists and before our constructor, may use it
 * (docs/limits.md).  Header-only: fdtable.c and fdlimit.c both need it.
 */
#ifndef KEEPALIVE_SYS_PRLIMIT_H
#define KEEPALIVE_SYS_PRLIMIT_H

#include <errno.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "real.h"

#define KP_NO_SANITIZE __attribute__((no_sanitize("address", "undefined", "thread")))

/* -1 and errno, or 0 */
static inline KP_NO_SANITIZE int kp_sys_prlimit(int pid, int res, const struct rlimit *new_rl,
						struct rlimit *old_rl)
{
#if defined(__x86_64__)
	long r;
	register long r10 __asm__("r10") = (long)old_rl;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"((long)SYS_prlimit64), "D"((long)pid), "S"((long)res), "d"(new_rl), "r"(r10)
			 : "rcx", "r11", "memory");
	if (r < 0 && r > -4096) {
		errno = (int)-r;
		return -1;
	}
	return 0;
#else
	return (int)KP_REAL(syscall)(SYS_prlimit64, pid, res, new_rl, old_rl);
#endif
}

#endif
