/*
 * inline_aio.c - a libaio of the older kind (releases before 0.3.111): it
 * exports io_setup, io_submit, io_getevents and makes each system call
 * with the syscall instruction inline, never through libc's syscall()
 * (which the library wraps).  Built as build/clients/libinline_aio.so
 * for tests/clients/inline_aio_get.c (docs/replay.md, "Kernel AIO").
 */
#include <linux/aio_abi.h>
#include <sys/syscall.h>
#include <time.h>

static long raw3(long n, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "0"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}

static long raw5(long n, long a, long b, long c, long d, long e)
{
	long r;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "0"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
			 : "rcx", "r11", "memory");
	return r;
}

/* as libaio: the kernel's -errno returned, errno untouched */
int io_setup(unsigned nr, aio_context_t *ctx)
{
	return (int)raw3(SYS_io_setup, nr, (long)ctx, 0);
}

int io_submit(aio_context_t ctx, long n, struct iocb **iocbs)
{
	return (int)raw3(SYS_io_submit, (long)ctx, n, (long)iocbs);
}

int io_getevents(aio_context_t ctx, long min, long max, struct io_event *ev, struct timespec *t)
{
	return (int)raw5(SYS_io_getevents, (long)ctx, min, max, (long)ev, (long)t);
}
