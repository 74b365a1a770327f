/*
 * interpose.c - another interposer, preloaded before or after
 * libkeepalive (tests/signals.bats, the bind check): it defines read,
 * write, close, connect and posix_spawn (libc has two versions of the
 * last: this one, unversioned, is what dlsym(RTLD_NEXT) finds after it)
 * and passes each call on to the next object.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <spawn.h>
#include <sys/socket.h>
#include <unistd.h>

#define NEXT(name) static __typeof__(name) *next; if (!next) *(void **)&next = dlsym(RTLD_NEXT, #name)

ssize_t read(int fd, void *buf, size_t n)
{
	NEXT(read);
	return next(fd, buf, n);
}

ssize_t write(int fd, const void *buf, size_t n)
{
	NEXT(write);
	return next(fd, buf, n);
}

int close(int fd)
{
	NEXT(close);
	return next(fd);
}

int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	NEXT(connect);
	return next(fd, sa, len);
}

int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
		const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	NEXT(posix_spawn);
	return next(pid, path, fa, attr, argv, envp);
}
