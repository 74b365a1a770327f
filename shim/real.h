/*
 * real.h - the real libc functions, each bound with dlsym(RTLD_NEXT) the
 * first time it is called.  Every call the shim makes to a wrapped
 * function goes through kp_real.
 */
#ifndef KEEPALIVE_REAL_H
#define KEEPALIVE_REAL_H

#include <aio.h>
#include <dirent.h>
#include <poll.h>
#include <sys/epoll.h>
#include <stdio.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <spawn.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <setjmp.h>
#include <time.h>
#include <wchar.h>

/* X(return type, name, parameter list) */
#define KP_REAL_FUNCS(X)                                                             \
	X(int, socket, (int, int, int))                                              \
	X(int, connect, (int, const struct sockaddr *, socklen_t))                   \
	X(int, bind, (int, const struct sockaddr *, socklen_t))                      \
	X(int, accept, (int, struct sockaddr *, socklen_t *))                        \
	X(int, accept4, (int, struct sockaddr *, socklen_t *, int))                  \
	X(int, socketpair, (int, int, int, int *))                                   \
	X(int, open, (const char *, int, ...))                                       \
	X(int, open64, (const char *, int, ...))                                     \
	X(int, openat, (int, const char *, int, ...))                                \
	X(int, openat64, (int, const char *, int, ...))                              \
	X(int, pipe, (int *))                                                        \
	X(int, pipe2, (int *, int))                                                  \
	X(int, eventfd, (unsigned int, int))                                         \
	X(int, epoll_create, (int))                                                  \
	X(int, epoll_create1, (int))                                                 \
	X(int, epoll_ctl, (int, int, int, struct epoll_event *))                     \
	X(int, epoll_wait, (int, struct epoll_event *, int, int))                    \
	X(int, epoll_pwait, (int, struct epoll_event *, int, int, const sigset_t *)) \
	X(int, epoll_pwait2, (int, struct epoll_event *, int, const struct timespec *, \
			      const sigset_t *))                                     \
	X(long, syscall, (long, ...))                                                \
	X(int, fclose, (FILE *))                                                     \
	X(FILE *, fdopen, (int, const char *))                                       \
	X(FILE *, fopen, (const char *, const char *))                               \
	X(FILE *, fopen64, (const char *, const char *))                             \
	X(DIR *, opendir, (const char *))                                            \
	X(int, creat, (const char *, mode_t))                                        \
	X(int, memfd_create, (const char *, unsigned int))                           \
	X(int, timerfd_create, (int, int))                                           \
	X(int, inotify_init1, (int))                                                 \
	X(int, close, (int))                                                         \
	X(int, close_range, (unsigned int, unsigned int, int))                       \
	X(void, closefrom, (int))                                                    \
	X(int, shutdown, (int, int))                                                 \
	X(int, dup, (int))                                                           \
	X(int, dup2, (int, int))                                                     \
	X(int, dup3, (int, int, int))                                                \
	X(int, fcntl, (int, int, ...))                                               \
	X(int, setsockopt, (int, int, int, const void *, socklen_t))                 \
	X(int, getsockopt, (int, int, int, void *, socklen_t *))                     \
	X(int, getpeername, (int, struct sockaddr *, socklen_t *))                   \
	X(int, getsockname, (int, struct sockaddr *, socklen_t *))                   \
	X(int, ioctl, (int, unsigned long, ...))                                     \
	X(ssize_t, write, (int, const void *, size_t))                               \
	X(ssize_t, writev, (int, const struct iovec *, int))                         \
	X(ssize_t, send, (int, const void *, size_t, int))                           \
	X(ssize_t, sendto, (int, const void *, size_t, int, const struct sockaddr *, \
			    socklen_t))                                              \
	X(ssize_t, sendmsg, (int, const struct msghdr *, int))                       \
	X(ssize_t, sendfile, (int, int, off_t *, size_t))                            \
	X(ssize_t, splice, (int, loff_t *, int, loff_t *, size_t, unsigned int))     \
	X(int, sendmmsg, (int, struct mmsghdr *, unsigned int, int))                 \
	X(int, recvmmsg, (int, struct mmsghdr *, unsigned int, int, struct timespec *)) \
	X(ssize_t, read, (int, void *, size_t))                                      \
	X(ssize_t, readv, (int, const struct iovec *, int))                          \
	X(ssize_t, preadv2, (int, const struct iovec *, int, off_t, int))            \
	X(int, aio_read, (struct aiocb *))                                           \
	X(int, aio_write, (struct aiocb *))                                          \
	X(int, lio_listio, (int, struct aiocb *const[], int, struct sigevent *))     \
	X(ssize_t, pwritev2, (int, const struct iovec *, int, off_t, int))           \
	X(ssize_t, recv, (int, void *, size_t, int))                                 \
	X(ssize_t, recvfrom, (int, void *, size_t, int, struct sockaddr *,           \
			      socklen_t *))                                          \
	X(ssize_t, recvmsg, (int, struct msghdr *, int))                             \
	X(int, poll, (struct pollfd *, nfds_t, int))                                 \
	X(int, ppoll, (struct pollfd *, nfds_t, const struct timespec *,             \
		       const sigset_t *))                                            \
	X(int, select, (int, fd_set *, fd_set *, fd_set *, struct timeval *))        \
	X(int, pselect, (int, fd_set *, fd_set *, fd_set *, const struct timespec *, \
			 const sigset_t *))                                            \
	X(int, execve, (const char *, char *const[], char *const[]))                 \
	X(int, execv, (const char *, char *const[]))                                 \
	X(int, execvp, (const char *, char *const[]))                                \
	X(int, execvpe, (const char *, char *const[], char *const[]))                \
	X(int, fexecve, (int, char *const[], char *const[]))                         \
	X(int, posix_spawn, (pid_t *, const char *, const posix_spawn_file_actions_t *, \
			     const posix_spawnattr_t *, char *const[], char *const[]))   \
	X(int, posix_spawnp, (pid_t *, const char *, const posix_spawn_file_actions_t *, \
			      const posix_spawnattr_t *, char *const[], char *const[]))  \
	X(int, system, (const char *))                                               \
	X(FILE *, popen, (const char *, const char *))                               \
	X(int, fputc, (int, FILE *))                                                 \
	X(int, putc, (int, FILE *))                                                  \
	X(int, _IO_putc, (int, FILE *))                                              \
	X(int, fputc_unlocked, (int, FILE *))                                        \
	X(int, putc_unlocked, (int, FILE *))                                         \
	X(int, __overflow, (FILE *, int))                                            \
	X(int, fputs, (const char *, FILE *))                                        \
	X(int, fputs_unlocked, (const char *, FILE *))                               \
	X(int, puts, (const char *))                                                 \
	X(size_t, fwrite, (const void *, size_t, size_t, FILE *))                    \
	X(size_t, fwrite_unlocked, (const void *, size_t, size_t, FILE *))           \
	X(int, vfprintf, (FILE *, const char *, va_list))                            \
	X(int, __vfprintf_chk, (FILE *, int, const char *, va_list))                 \
	X(int, vdprintf, (int, const char *, va_list))                               \
	X(int, __vdprintf_chk, (int, int, const char *, va_list))                    \
	X(int, fflush, (FILE *))                                                     \
	X(wint_t, fputwc, (wchar_t, FILE *))                                         \
	X(wint_t, putwc, (wchar_t, FILE *))                                          \
	X(wint_t, fputwc_unlocked, (wchar_t, FILE *))                                \
	X(wint_t, putwc_unlocked, (wchar_t, FILE *))                                 \
	X(wint_t, putwchar, (wchar_t))                                               \
	X(wint_t, putwchar_unlocked, (wchar_t))                                      \
	X(int, fputws, (const wchar_t *, FILE *))                                    \
	X(int, fputws_unlocked, (const wchar_t *, FILE *))                           \
	X(int, vfwprintf, (FILE *, const wchar_t *, va_list))                        \
	X(int, __vfwprintf_chk, (FILE *, int, const wchar_t *, va_list))             \
	X(int, fflush_unlocked, (FILE *))                                            \
	X(int, setuid, (uid_t))                                                      \
	X(int, seteuid, (uid_t))                                                     \
	X(int, setreuid, (uid_t, uid_t))                                             \
	X(int, setresuid, (uid_t, uid_t, uid_t))                                     \
	X(int, setgid, (gid_t))                                                      \
	X(int, setegid, (gid_t))                                                     \
	X(int, setregid, (gid_t, gid_t))                                             \
	X(int, setresgid, (gid_t, gid_t, gid_t))                                     \
	X(int, setgroups, (size_t, const gid_t *))                                   \
	X(int, initgroups, (const char *, gid_t))                                   \
	X(int, setfsuid, (uid_t))                                                    \
	X(int, setfsgid, (gid_t))                                                    \
	X(int, capset, (void *, const void *))                                       \
	X(int, unshare, (int))                                                       \
	X(int, setns, (int, int))                                                    \
	X(pid_t, _Fork, (void))                                                      \
	X(pid_t, vfork, (void))                                                      \
	X(int, clone, (int (*)(void *), void *, int, void *, ...))                   \
	X(int, execveat, (int, const char *, char *const[], char *const[], int))     \
	X(int, pidfd_getfd, (int, int, unsigned int))                                \
	X(int, prctl, (int, ...))                                                    \
	X(void, longjmp, (struct __jmp_buf_tag *, int))                              \
	X(void, _longjmp, (struct __jmp_buf_tag *, int))                             \
	X(void, siglongjmp, (struct __jmp_buf_tag *, int))                           \
	X(void, __longjmp_chk, (struct __jmp_buf_tag *, int))

/* The wrapped functions POSIX lists as async-signal-safe (and the Linux
 * ones of the same kind: accept4, dup3, pipe2, ppoll, readv, writev; and
 * the longjmp family, which handlers call to leave): a
 * signal handler may call any of them first while the program is inside
 * dlsym or malloc, so they are bound before main, never lazily
 * (docs/binding.md). */
#define KP_REAL_SIGNAL_SAFE(X)                                                        \
	X(socket) X(connect) X(bind) X(accept) X(accept4) X(socketpair) X(open)       \
	X(open64) X(openat) X(openat64) X(creat) X(pipe) X(pipe2) X(close)            \
	X(shutdown) X(dup) X(dup2) X(dup3) X(fcntl) X(setsockopt) X(getsockopt)      \
	X(getpeername) X(getsockname) X(write) X(writev) X(send) X(sendto)           \
	X(sendmsg) X(read) X(readv) X(recv) X(recvfrom) X(recvmsg) X(poll) X(ppoll)  \
	X(select) X(pselect) X(execve) X(execv) X(fexecve) X(setuid) X(setgid)       \
	X(_Fork) X(longjmp) X(_longjmp) X(siglongjmp) X(__longjmp_chk)

/* Bind those now (the constructor). */
void kp_real_bind_signal_safe(void);

#define KP_REAL_FIELD(ret, name, args) ret(*name) args;
struct kp_real_table {
	KP_REAL_FUNCS(KP_REAL_FIELD)
};
#undef KP_REAL_FIELD

/* hidden: one instruction from a wrapper, no GOT load */
extern __attribute__((visibility("hidden"))) struct kp_real_table kp_real;

#if defined(__x86_64__)
/* Lazy: each pointer starts at its own resolver stub (real.c), which binds
 * that one symbol, stores it and jumps on with the caller's arguments, as
 * the dynamic linker's lazy PLT does.  Start-up binds nothing; a pointer
 * is never NULL, also before our constructor has run; a call costs a
 * load and an indirect call, and the first one a dlsym. */
#define KP_REAL_LAZY 1
#define KP_REAL(name) KP_REAL_BOUND(name)
#else
/* Elsewhere: every symbol bound at once, from the constructor or by the
 * first call to find its pointer NULL (idempotent, thread-safe). */
void kp_real_bind(void);
#define KP_REAL(name) (kp_real.name ? kp_real.name : (kp_real_bind(), kp_real.name))
#endif

/* The pointer without a check: lazily it is never NULL; bound eagerly,
 * it is set before the constructor gives kp_fdtab_len its value, so a
 * caller that saw a valid fd may use it (hooks_io.c KP_FAST).  Relaxed
 * atomic: a plain load, and no race for ThreadSanitizer with the store
 * of a first call in another thread. */
#define KP_REAL_BOUND(name) (__atomic_load_n(&kp_real.name, __ATOMIC_RELAXED))

/* Can this process read len bytes at p?  The kernel's answer (real.c):
 * a wrapper that must read one of the program's structures before the
 * kernel does (a pollfd array, an iovec array, a msghdr) asks first, and
 * where the kernel would answer EFAULT lets it (docs/limits.md "A
 * pointer the kernel refuses").  errno kept. */
bool kp_readable(const void *p, size_t len);
/* kp_readable_init: once, from the constructor (under valgrind no probe) */
void kp_readable_init(void);
/* The same for the bytes an iovec names (the array itself readable), the
 * first most of them. */
/* kp_sockaddr_readable: an IPv4 or IPv6 address the kernel would read
 * (connect(): a length it takes, memory the program can read), before
 * we read it for the pool's key; else the kernel's EINVAL or EFAULT */
bool kp_sockaddr_readable(const struct sockaddr *addr, socklen_t len);
bool kp_readable_iov(const struct iovec *iov, int iovcnt, size_t most);

#endif
