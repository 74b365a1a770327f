/*
 * raw_syscall.c - syscall() as programs that bypass libc make it, on fds
 * and arguments the library has no business with: it must answer as
 * glibc's syscall() does (the kernel's call, nothing more).
 *
 *   raw_syscall
 *
 * Prints, one line each:
 *   cancel: a thread with a cancellation pending makes syscall(SYS_write)
 *           and syscall(SYS_read), syscall(SYS_close) on its own pipe: raw
 *           syscalls are no cancellation points, so it returns 42
 *   clone3: bad arguments (an unreadable address, a size below 64, the
 *           struct at the end of a page with the next one unmapped): the
 *           kernel's errno, no fault
 *   getown: fcntl F_GETOWN by syscall() on a pipe owned by a process
 *           group: the kernel's raw answer (a negative number)
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static int p[2];
static long results[3] = { -2, -2, -2 };

static void *cancelled(void *arg)
{
	(void)arg;
	pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, NULL);
	pthread_cancel(pthread_self());
	char b[2];
	results[0] = syscall(SYS_write, p[1], "x", 1);
	results[1] = syscall(SYS_read, p[0], b, 1);
	results[2] = syscall(SYS_close, p[1]);
	return (void *)42; /* (printf would be a cancellation point) */
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (pipe(p) < 0)
		return 1;
	pthread_t t;
	void *ret;
	pthread_create(&t, NULL, cancelled, NULL);
	pthread_join(t, &ret);
	printf("cancel: write %ld read %ld close %ld\n", results[0], results[1], results[2]);
	printf("cancel: thread %s\n", ret == PTHREAD_CANCELED ? "cancelled" : ret == (void *)42 ? "returned 42" : "?");

	long r;
	errno = 0;
	r = syscall(SYS_clone3, (void *)8, 88);
	printf("clone3 unreadable: %ld %s\n", r, strerrorname_np(errno));
	char small[64] = { 0 };
	errno = 0;
	r = syscall(SYS_clone3, small, 8);
	printf("clone3 size 8: %ld %s\n", r, strerrorname_np(errno));
	char *pg = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pg == MAP_FAILED || munmap(pg + 4096, 4096) < 0)
		return 1;
	memset(pg, 0, 4096);
	errno = 0;
	r = syscall(SYS_clone3, pg + 4096 - 8, 8);
	printf("clone3 page end, size 8: %ld %s\n", r, strerrorname_np(errno));
	errno = 0;
	r = syscall(SYS_clone3, pg + 4096 - 16, 88);
	printf("clone3 page end, size 88: %ld %s\n", r, strerrorname_np(errno));

	setpgid(0, 0);
	int q[2];
	if (pipe(q) < 0 || fcntl(q[0], F_SETOWN, -getpgrp()) < 0)
		return 1;
	errno = 0;
	r = syscall(SYS_fcntl, q[0], F_GETOWN);
	printf("getown: %s\n", r == -getpgrp() ? "-pgid" : r == -1 && errno == getpgrp() ? "-1, errno pgid" : "other");
	return 0;
}
