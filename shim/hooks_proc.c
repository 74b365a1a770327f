/*
 * hooks_proc.c - exported wrappers for the calls that hand the program's
 * fds to another program: the exec family, posix_spawn, system, popen.
 * (fork is seen by the atfork handler in hooks_conn.c.)  The image that
 * runs next has a copy of the library that never saw our connections: a
 * connection it inherits with an exchange we rewrote leaves our hands
 * first (conn.c, "hand-off").  None of these is a hot path.
 */
#include <errno.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "conn.h"
#include "fdtable.h"
#include "real.h"

#define KP_EXPORT __attribute__((visibility("default")))

/* exec keeps the fds without FD_CLOEXEC */
static void before_exec(void)
{
	if (kp_fdtab_len)
		kp_conn_handoff_all(true, "exec");
}

KP_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	before_exec();
	return KP_REAL(execve)(path, argv, envp);
}

KP_EXPORT int execv(const char *path, char *const argv[])
{
	before_exec();
	return KP_REAL(execv)(path, argv);
}

KP_EXPORT int execvp(const char *file, char *const argv[])
{
	before_exec();
	return KP_REAL(execvp)(file, argv);
}

KP_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	before_exec();
	return KP_REAL(execvpe)(file, argv, envp);
}

KP_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
			int flags)
{
	before_exec();
	return KP_REAL(execveat)(dirfd, path, argv, envp, flags);
}

KP_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	before_exec();
	return KP_REAL(fexecve)(fd, argv, envp);
}

/* The execl family: glibc builds the argv and calls its internal execve,
 * which we would not see.  So do the same here.  A macro: va_start must
 * run in the variadic function itself.  Like glibc, the argv lives on the
 * stack (exec does not return on success). */
#define ARGV_FROM_VA(arg0, argv_name, after_null)                          \
	size_t n_ = 1;                                                     \
	va_list ap_;                                                       \
	va_start(ap_, arg0);                                               \
	while (va_arg(ap_, const char *))                                  \
		n_++;                                                      \
	va_end(ap_);                                                       \
	if (n_ > 65536) {                                                  \
		errno = E2BIG;                                             \
		return -1;                                                 \
	}                                                                  \
	char *argv_name[n_ + 1];                                           \
	argv_name[0] = (char *)(arg0);                                     \
	va_start(ap_, arg0);                                               \
	for (size_t i_ = 1; i_ <= n_; i_++)                                \
		argv_name[i_] = va_arg(ap_, char *);                       \
	after_null;                                                        \
	va_end(ap_)

KP_EXPORT int execl(const char *path, const char *arg, ...)
{
	ARGV_FROM_VA(arg, argv, (void)0);
	return execv(path, argv);
}

KP_EXPORT int execlp(const char *file, const char *arg, ...)
{
	ARGV_FROM_VA(arg, argv, (void)0);
	return execvp(file, argv);
}

KP_EXPORT int execle(const char *path, const char *arg, ...)
{
	char *const *envp;
	ARGV_FROM_VA(arg, argv, envp = va_arg(ap_, char *const *));
	return execve(path, argv, envp);
}

/* posix_spawn's file actions may dup any fd onto the child's, CLOEXEC or
 * not (and glibc's are internal calls we never see): every connection
 * with an exchange of ours leaves our hands. */
KP_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
			  const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	if (kp_fdtab_len)
		kp_conn_handoff_all(fa == NULL, "posix_spawn");
	return KP_REAL(posix_spawn)(pid, path, fa, attr, argv, envp);
}

KP_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
			   const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	if (kp_fdtab_len)
		kp_conn_handoff_all(fa == NULL, "posix_spawn");
	return KP_REAL(posix_spawnp)(pid, file, fa, attr, argv, envp);
}

/* glibc's system() and popen() spawn with internal calls: the shell they
 * run inherits the fds without FD_CLOEXEC */
KP_EXPORT int system(const char *cmd)
{
	if (cmd)
		before_exec();
	return KP_REAL(system)(cmd);
}

KP_EXPORT FILE *popen(const char *cmd, const char *mode)
{
	before_exec();
	return KP_REAL(popen)(cmd, mode);
}
