/*
 * inline_uring.c - a liburing of the newer kind (2.2 on, x86-64): it
 * exports io_uring_setup and io_uring_enter and makes each system call
 * with the syscall instruction inline, never through libc's syscall()
 * (which the library wraps).  Built as build/clients/liburing_inline.so
 * for tests/clients/uring_lib_get.c (docs/limits.md, "io_uring").
 */
#include <linux/io_uring.h>
#include <sys/syscall.h>

static long raw6(long n, long a, long b, long c, long d, long e, long f)
{
	long r;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return r;
}

/* as liburing: the kernel's -errno returned, errno untouched */
int io_uring_setup(unsigned entries, struct io_uring_params *p)
{
	return (int)raw6(SYS_io_uring_setup, entries, (long)p, 0, 0, 0, 0);
}

int io_uring_enter(unsigned fd, unsigned submit, unsigned wait, unsigned flags, void *sig)
{
	return (int)raw6(SYS_io_uring_enter, fd, submit, wait, flags, (long)sig, 8);
}
