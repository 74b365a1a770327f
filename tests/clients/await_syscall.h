/*
 * await_syscall.h - wait until a thread sleeps in a given system call on a
 * given fd: an event (the kernel's own record of the call a thread is in,
 * /proc/self/task/TID/syscall), never a timing.
 */
#ifndef KEEPALIVE_TEST_AWAIT_SYSCALL_H
#define KEEPALIVE_TEST_AWAIT_SYSCALL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* Until thread tid is inside system call nr on fd; exits 1 (naming what)
 * if it never is. */
static __attribute__((unused)) void await_syscall(pid_t tid, long nr, int fd, const char *what)
{
	char path[64], want[32], line[256];
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	snprintf(want, sizeof(want), "%ld 0x%x ", nr, fd);
	for (int tries = 0; tries < 100000; tries++) {
		FILE *f = fopen(path, "r");
		if (f) {
			char *ok = fgets(line, sizeof(line), f);
			fclose(f);
			if (ok && !strncmp(line, want, strlen(want)))
				return;
		}
		usleep(200);
	}
	fprintf(stderr, "%s: the thread never waited in %s\n", program_invocation_short_name, what);
	exit(1);
}

#endif
