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
#include <stdbool.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "conn.h"
#include "fdtable.h"
#include "fdlimit.h"
#include "alias.h"
#include "real.h"

#define KP_EXPORT __attribute__((visibility("default")))

/* exec keeps the fds without FD_CLOEXEC; the new image keeps the limit
 * (never one we raised for a moment: fdlimit.c) */
static void before_exec(void)
{
	if (kp_fdtab_len) {
		kp_conn_tls_leave_at_exec();
		kp_conn_handoff_all(true, KP_HANDOFF_INHERIT, "exec");
	}
	kp_spawn_enter(false);
}

/* A forked child's copies of a socket whose answer is owed, named to the
 * next image (conn_child.c kp_fin_owed_env): EXEC_ENV(envp, e) declares
 * e, envp with that one entry added (on the stack: no malloc, which a
 * vfork child must not call), or envp itself when there is none.  The
 * program's envp is never changed. */
static size_t exec_env_len(char *const *envp, char *entry, size_t cap)
{
	if (!kp_fdtab_len)
		return 0;
	/* only for an image that loads the library, whose constructor takes
	 * the entry out: any other (an envp without our LD_PRELOAD) would
	 * find it in its environment */
	size_t n = 0;
	bool ours = false;
	for (; envp && envp[n]; n++)
		ours |= !strncmp(envp[n], "LD_PRELOAD=", 11) && strstr(envp[n], "libkeepalive");
	if (!ours || !kp_fin_owed_env(entry, cap))
		return 0;
	return n + 1;
}

static char *const *exec_env_fill(char **e, char *const *envp, size_t n, char *entry)
{
	if (n > 1)
		memcpy(e, envp, (n - 1) * sizeof(*e));
	e[n - 1] = entry;
	e[n] = NULL;
	return e;
}

#define EXEC_ENV(envp, e)                                                  \
	char e##_entry[256]; /* this thread's: two threads may exec at once */ \
	size_t e##_n = exec_env_len(envp, e##_entry, sizeof(e##_entry));   \
	char *e##_buf[e##_n ? e##_n + 1 : 1];                              \
	char *const *e = e##_n ? exec_env_fill(e##_buf, envp, e##_n, e##_entry) : (envp)

KP_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	before_exec();
	EXEC_ENV(envp, e);
	return KP_REAL(execve)(path, argv, e);
}

KP_EXPORT int execv(const char *path, char *const argv[])
{
	before_exec();
	EXEC_ENV(environ, e);
	if (e == environ)
		return KP_REAL(execv)(path, argv);
	return KP_REAL(execve)(path, argv, e);
}

KP_EXPORT int execvp(const char *file, char *const argv[])
{
	before_exec();
	EXEC_ENV(environ, e);
	if (e == environ)
		return KP_REAL(execvp)(file, argv);
	return KP_REAL(execvpe)(file, argv, e);
}

KP_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	before_exec();
	EXEC_ENV(envp, e);
	return KP_REAL(execvpe)(file, argv, e);
}

KP_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
			int flags)
{
	before_exec();
	EXEC_ENV(envp, e);
	return KP_REAL(execveat)(dirfd, path, argv, e, flags);
}

KP_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	before_exec();
	EXEC_ENV(envp, e);
	return KP_REAL(fexecve)(fd, argv, e);
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
		kp_conn_handoff_all(fa == NULL, fa ? KP_HANDOFF_READER : KP_HANDOFF_INHERIT,
				    "posix_spawn");
	kp_spawn_enter(true);
	int r = KP_REAL(posix_spawn)(pid, path, fa, attr, argv, envp);
	kp_spawn_leave();
	return r;
}

KP_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
			   const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	if (kp_fdtab_len)
		kp_conn_handoff_all(fa == NULL, fa ? KP_HANDOFF_READER : KP_HANDOFF_INHERIT,
				    "posix_spawn");
	kp_spawn_enter(true);
	int r = KP_REAL(posix_spawnp)(pid, file, fa, attr, argv, envp);
	kp_spawn_leave();
	return r;
}

/* glibc's system() and popen() spawn with internal calls: the shell they
 * run inherits the fds without FD_CLOEXEC */
KP_EXPORT int system(const char *cmd)
{
	if (cmd && kp_fdtab_len)
		kp_conn_handoff_all(true, KP_HANDOFF_INHERIT, "exec");
	kp_spawn_enter(true);
	int r = KP_REAL(system)(cmd);
	kp_spawn_leave();
	return r;
}

KP_EXPORT FILE *popen(const char *cmd, const char *mode)
{
	if (kp_fdtab_len)
		kp_conn_handoff_all(true, KP_HANDOFF_INHERIT, "exec");
	kp_spawn_enter(true);
	FILE *f = KP_REAL(popen)(cmd, mode);
	kp_spawn_leave();
	return f;
}

/* ------------------------------------------------------------ limits */

/* RLIMIT_NOFILE is the program's: our hidden fds live above its soft
 * limit, raised for a moment to make one (fdlimit.c, docs/limits.md).  Its
 * own calls wait for that moment to pass, and a new limit is a new plan.
 * ASan's runtime calls these before its shadow memory exists (and before
 * our constructor): until then, and for other resources, the kernel's
 * call, by a system call of ours, with nothing instrumented on the way. */
static KP_NO_SANITIZE bool limits_ours(int res)
{
	return res == RLIMIT_NOFILE && __atomic_load_n(&kp_fdtab_len, __ATOMIC_RELAXED);
}

static int limit_call(int pid, int res, const struct rlimit *new_rl, struct rlimit *old_rl)
{
	bool locked = kp_rl_enter();
	int r = kp_sys_prlimit(pid, res, new_rl, old_rl);
	int saved = errno;
	kp_rl_leave(locked);
	if (r == 0 && locked && new_rl)
		kp_conn_fd_limits(true);
	errno = saved;
	return r;
}

KP_EXPORT KP_NO_SANITIZE int getrlimit(__rlimit_resource_t res, struct rlimit *rl)
{
	if (!limits_ours(res))
		return kp_sys_prlimit(0, res, NULL, rl);
	return limit_call(0, res, NULL, rl);
}

KP_EXPORT KP_NO_SANITIZE int setrlimit(__rlimit_resource_t res, const struct rlimit *rl)
{
	if (!limits_ours(res))
		return kp_sys_prlimit(0, res, rl, NULL);
	return limit_call(0, res, rl, NULL);
}

KP_EXPORT KP_NO_SANITIZE int prlimit(pid_t pid, __rlimit_resource_t res, const struct rlimit *new_rl,
				     struct rlimit *old_rl)
{
	if (!limits_ours(res))
		return kp_sys_prlimit(pid, res, new_rl, old_rl);
	return limit_call(pid, res, new_rl, old_rl);
}

#if __WORDSIZE == 64
/* The LFS names (a program built with _FILE_OFFSET_BITS=64 calls them):
 * the same functions, the same struct, on a 64-bit ABI. */
_Static_assert(sizeof(struct rlimit) == sizeof(struct rlimit64), "rlimit64 is rlimit");
KP_EXPORT KP_NO_SANITIZE int getrlimit64(__rlimit_resource_t res, struct rlimit64 *rl)
{
	return getrlimit(res, (struct rlimit *)rl);
}

KP_EXPORT KP_NO_SANITIZE int setrlimit64(__rlimit_resource_t res, const struct rlimit64 *rl)
{
	return setrlimit(res, (const struct rlimit *)rl);
}

KP_EXPORT KP_NO_SANITIZE int prlimit64(pid_t pid, __rlimit_resource_t res, const struct rlimit64 *new_rl,
			struct rlimit64 *old_rl)
{
	return prlimit(pid, res, (const struct rlimit *)new_rl, (struct rlimit *)old_rl);
}
#endif

/* glibc's second name of popen (hooks_conn.c, the names a program binds) */
KP_ALIAS(_IO_popen, popen);
