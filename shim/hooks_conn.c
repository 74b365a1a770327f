/*
 * hooks_conn.c - exported wrappers for a socket's life and what can make
 * or take a descriptor: socket, bind, setsockopt, getsockopt, getsockname,
 * getpeername, connect, accept, socketpair, pipe, open/openat/creat,
 * fopen/fdopen/fclose, eventfd, memfd/timerfd/inotify, epoll_create,
 * close, close_range, closefrom, shutdown, the dup family, fcntl, ioctl,
 * clone, _Fork, pidfd_getfd; plus the library's constructor, destructor
 * and fork handler (syscall(), the calls made by number: hooks_syscall.c).  Each wrapper: fast-path check, then the connection core.
 */
#include <dirent.h>
#include <linux/aio_abi.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/sendfile.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/inotify.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "aio_scan.h"
#include "config.h"
#include "dl_real.h"
#include "conn.h"
#include "fdtable.h"
#include "hooks_syscall.h"
#include "alias.h"
#include "real.h"
#include "stdio_drain.h"
#include "tls.h"
#include "watch.h"

#define KP_EXPORT __attribute__((visibility("default")))

/* A hidden fd of ours (a pooled socket, a twin) is not the program's: to
 * the program the number is not open (docs/owner.md). */
static int not_yours(void)
{
	errno = EBADF;
	return -1;
}

/* ------------------------------------------------------------ life */

static pid_t our_pid;

/* Whether this process may ever have been a vfork child's parent: set
 * before any vfork (our vfork, a CLONE_VM clone or raw SYS_vfork/clone),
 * never cleared.  Until then in_vfork_child() costs no system call: a
 * program that never vforks pays no getpid on any close (the reuse
 * path's calls are counted: tests/edges.bats).  Elsewhere than x86-64
 * (no trampoline below) it starts set. */
#if defined(__x86_64__)
__attribute__((visibility("hidden"))) bool kp_vforked;
#else
__attribute__((visibility("hidden"))) bool kp_vforked = true;
#endif

#if defined(__x86_64__)
/* vfork() cannot be a C wrapper: the child returns on the parent's stack,
 * and a frame of ours there would be the parent's when it resumes.  So
 * it is a trampoline that touches no stack: it notes kp_vforked, then
 * jumps to libc's vfork (through its lazy pointer, whose first call binds
 * it with the caller's frame intact, as a PLT stub). */
__attribute__((visibility("hidden"))) pid_t (**const kp_vfork_slot)(void) = &kp_real.vfork;
__asm__(".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	".globl __vfork\n" /* glibc's second name (the names a program binds) */
	".type __vfork, @function\n"
	"vfork:\n"
	"__vfork:\n"
	"\tmovb $1, kp_vforked(%rip)\n"
	"\tmovq kp_vfork_slot(%rip), %rax\n"
	"\tjmp *(%rax)\n"
	".size vfork, .-vfork\n");
#endif

static void after_fork_child(void)
{
	__atomic_store_n(&our_pid, getpid(), __ATOMIC_RELAXED);
	/* the parent's counts are the parent's: each process prints its own */
	memset(&kp_stats, 0, sizeof(kp_stats));
	kp_conn_after_fork_child();
}

/* io_uring known in the process (shim/aio_scan.h): nothing changes hands
 * from then on, as after a thread's change of identity */
void kp_uring_divide(void)
{
	static bool divided_for_uring;
	if (kp_uring_seen() && !__atomic_exchange_n(&divided_for_uring, true, __ATOMIC_RELAXED)) {
		kp_conn_divide("io_uring in the process, unseen");
		/* the ring reads past us: what we owe the connections made
		 * before it goes to the kernel now */
		kp_conn_settle_all("io_uring");
	}
}

/* the loaded objects scanned again (shim/aio_scan.h) */
static void unseen_rescan(void)
{
	kp_aio_rescan();
	kp_uring_divide();
}

__attribute__((constructor)) static void kp_init(void)
{
	/* also with KEEPALIVE_DISABLE: the wrappers still call through */
	kp_real_bind_signal_safe();
	kp_readable_init();
	kp_config_load();
	if (kp_cfg.disabled)
		return kp_fin_owed_from_env(); /* (only its entry taken) */
	kp_conn_init();
	/* the objects the program links are loaded: a kernel AIO library we
	 * cannot see is looked for now and at its dlsym, dlvsym and dlopen
	 * calls, never on the request path (shim/aio_scan.h) */
	unseen_rescan();
	kp_dl_watch(unseen_rescan);
	kp_dl_watch_open(kp_aio_dlopen);
	struct rlimit rl;
	if (kp_fdtab_init(&rl) < 0)
		return kp_fin_owed_from_env(); /* the table stays empty: everything passes through */
	kp_conn_fd_limits_from(&rl);
	kp_fin_owed_from_env(); /* a forked child's copies, across its exec */
	kp_tls_start();
	our_pid = getpid();
	pthread_atfork(kp_conn_before_fork, kp_conn_after_fork_parent, after_fork_child);
	kp_debug("loaded version=%s", KP_VERSION);
}

__attribute__((destructor)) static void kp_fini(void)
{
	/* not in a child that forgot the pool, nor when we never started;
	 * nor in exit() from a signal handler that interrupted us inside a
	 * lock of ours: the exit work would wait for it, which only the
	 * interrupted code releases (docs/binding.md "Signal handlers inside
	 * our locks": the idle connections die with us, unparked) */
	if (!kp_cfg.disabled && kp_fdtab_len && getpid() == __atomic_load_n(&our_pid, __ATOMIC_RELAXED) &&
	    !kp_reentered()) {
		/* exit() flushes every FILE after us, inside libc */
		kp_stdio_drain_all(true);
		kp_conn_exit();
	}
	/* under a seccomp filter its open (KEEPALIVE_STATS_FILE), getpid,
	 * even its write may be refused (docs/owner.md "A sandbox") */
	if (kp_cfg.stats && !__atomic_load_n(&kp_fdtab_aside, __ATOMIC_ACQUIRE))
		kp_stats_print();
}

static inline int fresh(int fd);
static bool in_vfork_child(void);
#define RETRY_IF_SHORT(call)                          \
	({                                            \
		__typeof__(call) r_ = (call);         \
		if (r_ < 0 && !kp_reentered() &&      \
		    kp_fds_short())                   \
			r_ = (call);                  \
		r_;                                   \
	})

/* ------------------------------------------------------------ forks past atfork */

/* _Fork() and clone() make a child without the atfork handlers: the child
 * would hand out the pooled sockets the parent still holds, and the
 * parent park connections the child holds.  So they get what fork() gets
 * (docs/owner.md). */
KP_EXPORT pid_t _Fork(void)
{
	if (!kp_fdtab_len)
		return KP_REAL(_Fork)();
	kp_conn_before_fork();
	pid_t pid = KP_REAL(_Fork)();
	int saved = errno;
	if (pid == 0)
		after_fork_child();
	else
		kp_conn_after_fork_parent();
	errno = saved;
	return pid;
}

/* the child of a clone() without CLONE_VM runs fn on a copy of our memory */
struct clone_start {
	int (*fn)(void *);
	void *arg;
};

/* A clone's child that is a task of its own on our memory (not a thread,
 * not suspended until its exec as a vfork child), or in other namespaces:
 * its identity is its own from then on (glibc's setxid broadcast reaches
 * pthreads only), so the process is divided (kp_conn_divide). */
static bool clone_divides(unsigned long flags)
{
	return ((flags & CLONE_VM) && !(flags & (CLONE_THREAD | CLONE_VFORK))) || (flags & KP_CLONE_NEW_ANY);
}

static int clone_child(void *p)
{
	struct clone_start st = *(struct clone_start *)p;
	after_fork_child();
	return st.fn(st.arg);
}

KP_EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	void *ptid = va_arg(ap, void *), *tls = va_arg(ap, void *), *ctid = va_arg(ap, void *);
	va_end(ap);
	if (!kp_fdtab_len || !fn)
		return KP_REAL(clone)(fn, stack, flags, arg, ptid, tls, ctid);
	if (flags & CLONE_VM) {
		/* a thread, or vfork-like: the child's calls are seen on our
		 * memory (its exec and dup2 as a vfork child's); a copy of
		 * our fds in another memory is not */
		if (!(flags & CLONE_THREAD))
			__atomic_store_n(&kp_vforked, true, __ATOMIC_RELAXED);
		if (!(flags & CLONE_FILES))
			kp_conn_handoff_all(false, KP_HANDOFF_INHERIT, "clone");
		if (clone_divides((unsigned long)flags))
			kp_conn_divide("clone(CLONE_VM) of a task of its own");
		return KP_REAL(clone)(fn, stack, flags, arg, ptid, tls, ctid);
	}
	struct clone_start *st = malloc(sizeof(*st));
	if (!st) {
		errno = ENOMEM;
		return -1;
	}
	st->fn = fn;
	st->arg = arg;
	kp_conn_before_fork();
	if (flags & CLONE_FILES) /* one fd table, two memories: nothing is known */
		kp_conn_cred_change(true);
	int r = KP_REAL(clone)(clone_child, stack, flags, st, ptid, tls, ctid);
	int saved = errno;
	kp_conn_after_fork_parent();
	free(st);
	errno = saved;
	return r;
}

/* A raw clone/fork through syscall(): fork-like (no new stack, no
 * CLONE_VM) gets fork()'s handlers; anything else the hand-off of every
 * connection, as for a vfork. */
long kp_raw_fork(long number, const long a[6])
{
	unsigned long flags = 0;
	bool own_stack = false;
	if (number != SYS_fork) /* may share our memory: in_vfork_child */
		__atomic_store_n(&kp_vforked, true, __ATOMIC_RELAXED);
	if (number == SYS_clone) {
		flags = (unsigned long)a[0];
		own_stack = a[1] != 0;
	} else if (number == SYS_clone3) {
		/* the program's struct clone_args, read as the kernel would: a
		 * size below the first version's 64 bytes, or an address it
		 * cannot read, is the kernel's to refuse (EINVAL, EFAULT), and
		 * nothing forks; we must not fault where it would not */
		uint64_t args[6]; /* flags .. stack (offset 40) */
		struct iovec local = { args, sizeof(args) }, remote = { (void *)a[0], sizeof(args) };
		if ((unsigned long)a[1] < 64)
			return KP_REAL(syscall)(number, a[0], a[1], a[2], a[3], a[4], a[5]);
		int saved = errno;
		long got = KP_REAL(syscall)(SYS_process_vm_readv, (long)getpid(), (long)&local, 1L,
					    (long)&remote, 1L, 0L);
		if ((got < 0 && errno == EFAULT) || (got >= 0 && got != (long)sizeof(args)))
			return KP_REAL(syscall)(number, a[0], a[1], a[2], a[3], a[4], a[5]);
		errno = saved;
		if (got < 0) /* the call refused (a sandbox): read it ourselves */
			memcpy(args, (const void *)a[0], sizeof(args));
		flags = args[0];
		own_stack = args[5] != 0;
	}
	if ((flags & CLONE_VM) || own_stack || number == SYS_vfork) {
		if (!(flags & CLONE_FILES))
			kp_conn_handoff_all(false, KP_HANDOFF_INHERIT, "clone");
		if (clone_divides(flags))
			kp_conn_divide("a raw clone of a task of its own");
		return KP_REAL(syscall)(number, a[0], a[1], a[2], a[3], a[4], a[5]);
	}
	kp_conn_before_fork();
	long r = KP_REAL(syscall)(number, a[0], a[1], a[2], a[3], a[4], a[5]);
	int saved = errno;
	if (r == 0)
		after_fork_child();
	else
		kp_conn_after_fork_parent();
	errno = saved;
	return r;
}

/* pidfd_getfd(): a copy of a process's fd.  Of another process's: a fresh
 * number for us; of one of ours (pidfd names this process): that
 * connection has an owner we cannot count.  The call does not say which:
 * ours with that number is shared from now on, either way. */
KP_EXPORT int pidfd_getfd(int pidfd, int targetfd, unsigned int flags)
{
	if (kp_fdtab_len) {
		int saved = errno;
		kp_conn_passing_fd(targetfd);
		errno = saved;
	}
	return fresh(RETRY_IF_SHORT(KP_REAL(pidfd_getfd)(pidfd, targetfd, flags)));
}

/* Forget what we knew of a number the kernel has just handed out. */
static void fresh_fd(int fd, kp_fdfl flags)
{
	if (!kp_fd_valid(fd))
		return;
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		kp_forget_fd_raw(fd);
	else if (kp_fd_conn(fd))
		kp_forget_fd(fd, false); /* its close went past us (syscall(), say) */
	if (kp_fl(fd) & KP_FD_EPOLL)
		kp_watch_forget_epfd(fd);
	kp_fl_set(fd, flags);
	if (flags & KP_FD_TCP)
		kp_fd_note_high(fd); /* fork and exec must find it (conn.c) */
}

/* ------------------------------------------------------------ fd budget */

/* An fd-making call that failed for want of fd numbers while the pool held
 * some gets them back and one more try (hidden.c kp_fds_short, the macro
 * RETRY_IF_SHORT above).  Costs the fast path nothing but the test of the
 * result it already has. */

/* ------------------------------------------------------------ socket */

KP_EXPORT int socket(int domain, int type, int protocol)
{
	int fd = RETRY_IF_SHORT(KP_REAL(socket)(domain, type, protocol));
	if (fd >= 0 && kp_fdtab_len) {
		int saved = errno;
		bool tcp = (domain == AF_INET || domain == AF_INET6) &&
			   (type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) == SOCK_STREAM &&
			   (protocol == 0 || protocol == IPPROTO_TCP);
		kp_fdfl fl = tcp ? KP_FD_TCP : KP_FD_NOT_TCP;
		if (tcp && domain == AF_INET6)
			fl |= KP_FD_INET6;
		if (type & SOCK_NONBLOCK)
			fl |= KP_FD_NONBLOCK;
		if (type & SOCK_CLOEXEC)
			fl |= KP_FD_CLOEXEC;
		fresh_fd(fd, fl);
		errno = saved;
	}
	return fd;
}

/* Every other call that hands out an fd number: whatever we knew of that
 * number belongs to a socket whose close we did not see (fclose(),
 * syscall(SYS_close)...), and must not follow the new file around. */
static KP_SLOW void fresh_slow(int fd)
{
	int saved = errno;
	/* (a number new in a vfork child's table is still the parent's
	 * socket in the parent's, which our table describes) */
	if (!in_vfork_child())
		fresh_fd(fd, 0);
	errno = saved;
}

static inline int fresh(int fd)
{
	if (fd >= 0 && kp_fd_valid(fd) && (kp_fd_conn(fd) || kp_fl(fd)))
		fresh_slow(fd);
	return fd;
}

static int fresh_pair(int r, const int fds[2])
{
	if (r == 0) {
		fresh(fds[0]);
		fresh(fds[1]);
	}
	return r;
}

/* open, fcntl and ioctl take one optional argument (a mode, an int or a
 * pointer).  On x86-64 it arrives in a register just as a fixed one would
 * (SysV ABI: a variadic callee differs only in reading %al), so there the
 * wrappers are defined with it fixed, under the libc names: no va_list to
 * set up, and fcntl and ioctl calls that teach us nothing are a compare
 * and a tail jump.  open's mode is passed on whatever the register holds:
 * libc reads it only with O_CREAT or O_TMPFILE, as before.  Elsewhere the
 * wrappers are variadic. */
#if defined(__x86_64__)
#define KP_FIXED_VARARG 1
#define KP_OPEN_WRAPPER(name, params, ...)                                      \
	KP_EXPORT int kp_##name params __asm__(#name);                          \
	int kp_##name params                                                    \
	{                                                                       \
		return fresh(RETRY_IF_SHORT(KP_REAL(name)(__VA_ARGS__)));       \
	}
#else
/* The mode argument of an open call, present only with O_CREAT/O_TMPFILE.
 * A macro: va_start must run in the variadic function itself. */
#define OPEN_MODE(last_named, flags)                                              \
	({                                                                        \
		mode_t mode_ = 0;                                                 \
		if (((flags) & O_CREAT) || ((flags) & O_TMPFILE) == O_TMPFILE) { \
			va_list ap_;                                              \
			va_start(ap_, last_named);                                \
			mode_ = va_arg(ap_, mode_t);                              \
			va_end(ap_);                                              \
		}                                                                 \
		mode_;                                                            \
	})
#define KP_OPEN_WRAPPER(name, params, ...)                                      \
	KP_EXPORT int name(KP_OPEN_PARAMS_##name, ...)                          \
	{                                                                       \
		mode_t mode = OPEN_MODE(flags, flags);                          \
		return fresh(RETRY_IF_SHORT(KP_REAL(name)(__VA_ARGS__)));       \
	}
#define KP_OPEN_PARAMS_open const char *path, int flags
#define KP_OPEN_PARAMS_open64 const char *path, int flags
#define KP_OPEN_PARAMS_openat int dirfd, const char *path, int flags
#define KP_OPEN_PARAMS_openat64 int dirfd, const char *path, int flags
#endif

KP_OPEN_WRAPPER(open, (const char *path, int flags, mode_t mode), path, flags, mode)
KP_OPEN_WRAPPER(open64, (const char *path, int flags, mode_t mode), path, flags, mode)
KP_OPEN_WRAPPER(openat, (int dirfd, const char *path, int flags, mode_t mode), dirfd, path, flags, mode)
KP_OPEN_WRAPPER(openat64, (int dirfd, const char *path, int flags, mode_t mode), dirfd, path, flags,
		mode)

KP_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	return fresh(RETRY_IF_SHORT(KP_REAL(accept)(fd, addr, len)));
}

KP_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	return fresh(RETRY_IF_SHORT(KP_REAL(accept4)(fd, addr, len, flags)));
}

KP_EXPORT int socketpair(int domain, int type, int protocol, int sv[2])
{
	return fresh_pair(RETRY_IF_SHORT(KP_REAL(socketpair)(domain, type, protocol, sv)), sv);
}

KP_EXPORT int pipe(int fds[2])
{
	return fresh_pair(RETRY_IF_SHORT(KP_REAL(pipe)(fds)), fds);
}

KP_EXPORT int pipe2(int fds[2], int flags)
{
	return fresh_pair(RETRY_IF_SHORT(KP_REAL(pipe2)(fds, flags)), fds);
}

KP_EXPORT int eventfd(unsigned int count, int flags)
{
	return fresh(RETRY_IF_SHORT(KP_REAL(eventfd)(count, flags)));
}

/* Calls that make an fd inside libc (glibc's fopen and opendir call its
 * internal open, which we never see): only the EMFILE retry, and what we
 * knew of the number is forgotten as for open(). */
static FILE *fresh_file(FILE *fp)
{
	if (fp)
		fresh(fileno(fp));
	return fp;
}

#define RETRY_NULL_IF_SHORT(call)                     \
	({                                            \
		__typeof__(call) p_ = (call);         \
		if (!p_ && kp_fds_short())            \
			p_ = (call);                  \
		p_;                                   \
	})

KP_EXPORT FILE *fopen(const char *path, const char *mode)
{
	return fresh_file(RETRY_NULL_IF_SHORT(KP_REAL(fopen)(path, mode)));
}

KP_EXPORT FILE *fopen64(const char *path, const char *mode)
{
	return fresh_file(RETRY_NULL_IF_SHORT(KP_REAL(fopen64)(path, mode)));
}

KP_EXPORT DIR *opendir(const char *path)
{
	DIR *d = RETRY_NULL_IF_SHORT(KP_REAL(opendir)(path));
	if (d)
		fresh(dirfd(d));
	return d;
}

KP_EXPORT int creat(const char *path, mode_t mode)
{
	return fresh(RETRY_IF_SHORT(KP_REAL(creat)(path, mode)));
}

KP_EXPORT int memfd_create(const char *name, unsigned int flags)
{
	return fresh(RETRY_IF_SHORT(KP_REAL(memfd_create)(name, flags)));
}

KP_EXPORT int timerfd_create(int clock, int flags)
{
	return fresh(RETRY_IF_SHORT(KP_REAL(timerfd_create)(clock, flags)));
}

KP_EXPORT int inotify_init1(int flags)
{
	return fresh(RETRY_IF_SHORT(KP_REAL(inotify_init1)(flags)));
}

static int fresh_epoll(int epfd)
{
	if (epfd >= 0 && kp_fd_valid(epfd)) {
		int saved = errno;
		fresh(epfd);
		kp_watch_forget_epfd(epfd); /* an earlier set's, closed unseen */
		kp_fl_set(epfd, KP_FD_EPOLL);
		errno = saved;
	}
	return epfd;
}

KP_EXPORT int epoll_create(int size)
{
	return fresh_epoll(RETRY_IF_SHORT(KP_REAL(epoll_create)(size)));
}

KP_EXPORT int epoll_create1(int flags)
{
	return fresh_epoll(RETRY_IF_SHORT(KP_REAL(epoll_create1)(flags)));
}

/* stdio closes its fd inside libc, where we cannot see it.  Its writes
 * went through us (hooks_stdio.c): what is still buffered goes out first,
 * then the connection is let go as a close would (parked from a copy when
 * it may be: libc's close takes the program's fd). */
KP_EXPORT int fclose(FILE *fp)
{
	int fd = fp ? fileno(fp) : -1;
	if (fd >= 0 && kp_fd_conn(fd) && kp_fd_conn(fd) != KP_POOLED && !in_vfork_child()) {
		int saved = errno;
		/* what we could not empty (a wide stream's buffer) goes out
		 * unseen in libc's fclose: then the connection is not parked */
		bool clean = kp_stdio_before_fclose(fp);
		kp_forget_fd(fd, clean);
		errno = saved;
	}
	return KP_REAL(fclose)(fp);
}

KP_EXPORT FILE *fdopen(int fd, const char *mode)
{
	struct kp_conn *c = kp_fd_conn(fd);
	if (c == KP_POOLED) {
		errno = EBADF;
		return NULL;
	}
	/* a FILE on a socket not connected yet: stdio's reads of whatever it
	 * connects to will go past us (docs/hold.md) */
	if (!c && kp_fd_valid(fd) && (kp_fl(fd) & KP_FD_TCP))
		kp_fl_or(fd, KP_FD_STDIO);
	if (c && c != KP_POOLED && mode)
		kp_note_fdopen(c, fd, (mode[0] == 'w' || mode[0] == 'a') && !strchr(mode, '+'));
	return KP_REAL(fdopen)(fd, mode);
}

/* newfd is a dup of an fd we do not track: it shares what we learnt of
 * oldfd's socket (O_NONBLOCK belongs to the description), its own CLOEXEC.
 * A TCP socket not connected yet gets a connection object now, shared by
 * both numbers, so that a connection made on it later knows them all
 * (docs/owner.md); without one (no memory), neither is ever ours. */
static void dup_fdflags(int oldfd, int newfd, bool cloexec)
{
	fresh(newfd);
	if (!kp_fd_valid(oldfd) || !kp_fd_valid(newfd) || !kp_fl(oldfd))
		return;
	kp_fdfl fl = kp_fl(oldfd);
	kp_fl_set(newfd, (kp_fdfl)((fl & ~KP_FD_CLOEXEC) | (cloexec ? KP_FD_CLOEXEC : 0)));
	if (!(fl & KP_FD_TCP) || (fl & (KP_FD_CONNECTED | KP_FD_SHARED)))
		return;
	/* (a signal handler inside our locks, kp_lock.h: no object) */
	struct kp_conn *c = kp_reentered() ? NULL : kp_conn_track(oldfd);
	if (c) {
		kp_dup_to(c, oldfd, newfd);
	} else {
		kp_fl_or(oldfd, KP_FD_SHARED);
		kp_fl_or(newfd, KP_FD_SHARED);
	}
}

KP_EXPORT int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	if (kp_fd_conn(fd) == KP_POOLED)
		return not_yours();
	if (kp_fd_valid(fd))
		kp_fl_or(fd, KP_FD_BOUND);
	return KP_REAL(bind)(fd, addr, len);
}

static KP_SLOW int setsockopt_slow(int fd, int level, int name, const void *val, socklen_t len)
{
	struct kp_conn *c = kp_fd_conn(fd);
	if (c == KP_POOLED)
		return not_yours();
	if (c && kp_sockopt_already(c, fd, level, name, val, len))
		return 0;
	if (c)
		kp_sockopt_before(c, fd, level, name, val, len);
	int r = KP_REAL(setsockopt)(fd, level, name, val, len);
	if (r == 0 && kp_fd_valid(fd) && (kp_fl(fd) & KP_FD_TCP || kp_fd_conn(fd))) {
		int saved = errno;
		kp_note_sockopt(fd, level, name, val, len);
		errno = saved;
	}
	return r;
}

/* Options matter only on TCP sockets whose socket() we saw (carried onto
 * a pooled connection) and on connections: for other fds a tail jump. */
KP_EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	if (kp_fd_valid(fd) && (kp_fd_conn(fd) || (kp_fl(fd) & KP_FD_TCP)))
		return setsockopt_slow(fd, level, name, val, len);
	return KP_REAL(setsockopt)(fd, level, name, val, len);
}

static KP_SLOW int getsockopt_slow(struct kp_conn *c, int fd, int level, int name, void *val,
				   socklen_t *len)
{
	if (c == KP_POOLED)
		return not_yours();
	kp_before_getsockopt(c, fd);
	/* the program observes the connection before its read: settled
	 * first, as the read would (conn.h kp_conn_observe) */
	if ((level == SOL_SOCKET && name == SO_ERROR) || (level == IPPROTO_TCP && name == TCP_INFO))
		kp_conn_observe(c, fd);
	/* (a length the program cannot read: the kernel's EFAULT) */
	socklen_t len0 = len && kp_readable(len, sizeof(*len)) ? *len : 0;
	int r = KP_REAL(getsockopt)(fd, level, name, val, len);
	/* SO_ERROR of a pooled socket reset while idle (curl asks it after
	 * its connect): the program gets a fresh connection's answer */
	if (r == 0 && level == SOL_SOCKET && name == SO_ERROR && len && *len >= sizeof(int) &&
	    *(int *)val != 0 && kp_conn_dead_seen(c, fd)) {
		*len = len0;
		r = KP_REAL(getsockopt)(fd, level, name, val, len);
	}
	return r;
}

KP_EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct kp_conn *c = kp_fd_conn(fd);
	if (c)
		return getsockopt_slow(c, fd, level, name, val, len);
	return KP_REAL(getsockopt)(fd, level, name, val, len);
}

/* getpeername() says ENOTCONN on a pooled socket reset while idle
 * (CPython's ssl asks it before its handshake): as for SO_ERROR */
static KP_SLOW int getpeername_slow(struct kp_conn *c, int fd, struct sockaddr *addr,
				    socklen_t *len)
{
	if (c == KP_POOLED)
		return not_yours();
	kp_conn_observe(c, fd);
	/* (ENOTCONN leaves *len as it was: nothing to restore, and nothing
	 * read of a length the program may have given unreadable) */
	int r = KP_REAL(getpeername)(fd, addr, len);
	if (r < 0 && errno == ENOTCONN && kp_conn_dead_seen(c, fd))
		r = KP_REAL(getpeername)(fd, addr, len);
	return r;
}

KP_EXPORT int getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct kp_conn *c = kp_fd_conn(fd);
	if (c)
		return getpeername_slow(c, fd, addr, len);
	return KP_REAL(getpeername)(fd, addr, len);
}

KP_EXPORT int getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	if (kp_fd_pooled(fd))
		return not_yours();
	return KP_REAL(getsockname)(fd, addr, len);
}

KP_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	if (!kp_fdtab_len)
		return KP_REAL(connect)(fd, addr, len);
	return kp_connect(fd, addr, len);
}

/* ------------------------------------------------------------ close */

/* In a vfork() child (CPython's subprocess closes fds with close_range()
 * there; a C program closes the socket before exec) our memory is the
 * parent's, but the fd table is not: settling, parking, freeing or
 * recording anything of an fd would change the parent's state for a
 * number only the child's table changed.  So in a vfork child the calls
 * that change the fd table (close, close_range, closefrom, fclose, dup,
 * dup2, dup3, fcntl's F_DUPFD and F_SETFD, ioctl's FIOCLEX) are the
 * kernel's alone, and only what the child's image will hold changes our
 * state: a copy it keeps across exec leaves our hands (as at exec), a
 * shutdown (the socket's, the parent's too) makes the connection ours no
 * more.  vfork runs no atfork handler, so the pid tells; only calls on an
 * fd we know pay the getpid (docs/replay.md "A vfork child"). */
static bool in_vfork_child(void)
{
	return __atomic_load_n(&kp_vforked, __ATOMIC_RELAXED) &&
	       getpid() != __atomic_load_n(&our_pid, __ATOMIC_RELAXED);
}

static KP_SLOW int close_slow(int fd)
{
	struct kp_conn *c = kp_fd_conn(fd);
	if (in_vfork_child()) /* the child's table only: the parent's fd stays */
		return c == KP_POOLED ? not_yours() : KP_REAL(close)(fd);
	if (c)
		return kp_close(fd, c);
	/* what socket()/fcntl() taught us dies with the fd */
	if (kp_fl(fd) & KP_FD_EPOLL)
		kp_watch_close_epfd(fd);
	kp_fl_set(fd, 0);
	return KP_REAL(close)(fd);
}

/* An fd with neither a connection nor anything learnt of it (most of them:
 * files, pipes, sockets made before us): a tail jump to libc. */
KP_EXPORT int close(int fd)
{
	if (__builtin_expect((unsigned)fd < kp_fdtab_len, 1) &&
	    __builtin_expect(kp_fd_conn(fd) || kp_fl(fd), 0))
		return close_slow(fd);
	return KP_REAL(close)(fd);
}

static int close_gaps(unsigned first, unsigned last, int flags, const int *keep, size_t n);

/* Close [first, last] without closing pooled sockets: settle our tracked
 * fds first, then let the kernel close the gaps between pooled ones. */
static int close_range_keep_pool(unsigned first, unsigned last, int flags)
{
	if (!(flags & CLOSE_RANGE_CLOEXEC)) {
		int high = kp_fd_high();
		for (int fd = (int)first; fd <= high && (unsigned)fd <= last; fd++) {
			struct kp_conn *c = kp_fd_conn(fd);
			if (c && c != KP_POOLED)
				kp_close(fd, c);
		}
	}
	/* only now: the loop above may have parked connections in the range.
	 * Kept: pooled sockets, and the twins of connections in use outside
	 * the range (conn.c) */
	size_t cap = kp_hidden_count() + 16;
	int *pooled = malloc(cap * sizeof(*pooled));
	if (!pooled)
		return (int)KP_REAL(syscall)(SYS_close_range, first, last, flags);
	size_t n = kp_hidden_fds(pooled, cap);
	int r = close_gaps(first, last, flags, pooled, n);
	free(pooled);
	return r;
}

/* close_range over [first, last] minus the sorted fds in keep[]. */
static int close_gaps(unsigned first, unsigned last, int flags, const int *keep, size_t n)
{
	unsigned lo = first;
	for (size_t i = 0; i < n && lo <= last; i++) {
		unsigned p = (unsigned)keep[i];
		if (p < lo || p > last)
			continue;
		if (p > lo && KP_REAL(syscall)(SYS_close_range, lo, p - 1, flags) < 0)
			return -1;
		lo = p + 1; /* an fd is an int: no wrap-around */
	}
	if (lo <= last && lo >= first)
		return (int)KP_REAL(syscall)(SYS_close_range, lo, last, flags);
	return 0;
}

/* close_range from a signal handler inside our locks (kp_lock.h): the
 * pooled sockets are found in the fd table, without the pool's lock; the
 * program's connections get the kernel's close (kp_close). */
static int close_range_reentered(unsigned first, unsigned last, int flags)
{
	unsigned lo = first;
	int high = kp_fd_high();
	for (unsigned fd = first; fd <= last && high >= 0 && fd <= (unsigned)high; fd++) {
		if (kp_fd_conn((int)fd) != KP_POOLED)
			continue;
		if (fd > lo && KP_REAL(syscall)(SYS_close_range, lo, fd - 1, flags) < 0)
			return -1;
		lo = fd + 1;
	}
	if (lo <= last && lo >= first)
		return (int)KP_REAL(syscall)(SYS_close_range, lo, last, flags);
	return 0;
}

/* The number has a connection or something we learnt of it. */
/* Nothing of ours in [first, last]: no connection, no pooled socket, no
 * flag (one load an fd up to the highest number we ever noted). */
static bool range_unknown(unsigned first, unsigned last)
{
	int high = kp_fd_high();
	for (int fd = (int)first; fd <= high && (unsigned)fd <= last; fd++)
		if (kp_fd_known(fd))
			return false;
	return true;
}

KP_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	/* the calling thread's own fd table from now on: as
	 * unshare(CLONE_FILES) (docs/owner.md) */
	if ((flags & CLOSE_RANGE_UNSHARE) && kp_fdtab_len && !in_vfork_child())
		kp_conn_cred_change(true);
	if (!kp_fdtab_len || first > last || range_unknown(first, last) || in_vfork_child())
		return (int)KP_REAL(syscall)(SYS_close_range, first, last, flags);
	if (kp_reentered())
		return close_range_reentered(first, last, flags);
	return close_range_keep_pool(first, last, flags);
}

KP_EXPORT void closefrom(int lowfd)
{
	if (lowfd < 0)
		lowfd = 0;
	if (kp_fdtab_len && !range_unknown((unsigned)lowfd, ~0u) && in_vfork_child()) {
		KP_REAL(syscall)(SYS_close_range, (unsigned)lowfd, ~0u, 0);
		return;
	}
	if (close_range((unsigned)lowfd, ~0u, 0) == 0)
		return;
	/* like glibc: fall back to closing one by one */
	int high = (int)sysconf(_SC_OPEN_MAX);
	for (int fd = lowfd; fd < high; fd++)
		if (kp_fd_conn(fd) != KP_POOLED)
			close(fd);
}

static KP_SLOW int shutdown_slow(struct kp_conn *c, int fd, int how)
{
	if (c == KP_POOLED)
		return not_yours();
	if (in_vfork_child()) {
		/* the socket is the parent's too: what we know of it may be
		 * wrong now, so the connection is given up (raw) */
		kp_conn_raw(c);
		return KP_REAL(shutdown)(fd, how);
	}
	if ((how == SHUT_RD || how == SHUT_WR || how == SHUT_RDWR) &&
	    kp_shutdown(c, fd, how))
		return 0;
	return KP_REAL(shutdown)(fd, how);
}

KP_EXPORT int shutdown(int fd, int how)
{
	struct kp_conn *c = kp_fd_conn(fd);
	if (c)
		return shutdown_slow(c, fd, how);
	return KP_REAL(shutdown)(fd, how);
}

/* ------------------------------------------------------------ dup */


/* A copy made in a vfork child (dup, F_DUPFD): the table is the parent's
 * and must not change; a copy the exec'd image keeps takes the connection
 * out of our hands, as exec does. */
static int dup_in_vfork_child(int fd, int nfd, bool cloexec)
{
	struct kp_conn *c = kp_fd_conn(fd);
	if (nfd >= 0 && c && c != KP_POOLED && !cloexec)
		kp_conn_handoff_fd(fd, KP_HANDOFF_INHERIT, "a copy in a vfork child");
	return nfd;
}

static KP_SLOW int dup_slow(int fd)
{
	if (kp_fd_conn(fd) == KP_POOLED)
		return not_yours();
	if (in_vfork_child())
		return dup_in_vfork_child(fd, KP_REAL(dup)(fd), false);
	int nfd = RETRY_IF_SHORT(KP_REAL(dup)(fd));
	struct kp_conn *c = kp_fd_conn(fd);
	if (nfd >= 0 && c && c != KP_POOLED)
		kp_dup_to(c, fd, nfd), kp_fin_owed_onto(fd, nfd);
	else if (nfd >= 0)
		kp_fin_owed_onto(fd, nfd), dup_fdflags(fd, nfd, false);
	return nfd;
}

/* An fd we know nothing of: its copy only needs the new number's stale
 * state forgotten, as any fresh fd (dup_fdflags with no flags to copy). */
KP_EXPORT int dup(int fd)
{
	if (__builtin_expect(kp_fd_known(fd), 0))
		return dup_slow(fd);
	return fresh(RETRY_IF_SHORT(KP_REAL(dup)(fd)));
}

/* dup2/dup3 in a vfork child (CPython's subprocess moving a socket onto
 * the child's stdin): the table is the parent's and must not change; the
 * connection leaves our hands for the image the child will exec. */
static int dup_onto_in_vfork_child(struct kp_conn *c, int oldfd, int newfd, int flags, bool is_dup2)
{
	if (c && c != KP_POOLED && !(flags & O_CLOEXEC))
		kp_conn_handoff_fd(oldfd, newfd <= 2 ? KP_HANDOFF_READER : KP_HANDOFF_INHERIT,
				   "dup2 in a vfork child");
	return is_dup2 ? KP_REAL(dup2)(oldfd, newfd) : KP_REAL(dup3)(oldfd, newfd, flags);
}

static KP_SLOW int dup_onto(int oldfd, int newfd, int flags, bool is_dup2)
{
	struct kp_conn *c = kp_fd_conn(oldfd);
	if ((c || kp_fd_conn(newfd)) && in_vfork_child())
		return dup_onto_in_vfork_child(c, oldfd, newfd, flags, is_dup2);
	if (!c && !kp_fd_conn(newfd)) {
		int r = is_dup2 ? KP_REAL(dup2)(oldfd, newfd) : KP_REAL(dup3)(oldfd, newfd, flags);
		if (r >= 0 && r != oldfd)
			kp_fin_owed_onto(oldfd, r);
		if (r >= 0 && r != oldfd)
			dup_fdflags(oldfd, r, flags & O_CLOEXEC);
		return r;
	}
	if (oldfd == newfd) /* dup2: no-op; dup3: EINVAL */
		return is_dup2 ? KP_REAL(dup2)(oldfd, newfd) : KP_REAL(dup3)(oldfd, newfd, flags);
	if (c == KP_POOLED) {
		errno = EBADF; /* not the program's fd */
		return -1;
	}
	/* The kernel closes newfd implicitly, but only if the call succeeds:
	 * check what would make it fail before settling newfd as a close. */
	if ((!is_dup2 && (flags & ~O_CLOEXEC)) || KP_REAL(fcntl)(oldfd, F_GETFD) < 0)
		return is_dup2 ? KP_REAL(dup2)(oldfd, newfd) : KP_REAL(dup3)(oldfd, newfd, flags);
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		kp_forget_fd_raw(newfd);
	else
		kp_forget_fd(newfd, true);
	int r = is_dup2 ? KP_REAL(dup2)(oldfd, newfd) : KP_REAL(dup3)(oldfd, newfd, flags);
	if (r >= 0 && c)
		kp_dup_to(c, oldfd, r), kp_fin_owed_onto(oldfd, r);
	else if (r >= 0)
		dup_fdflags(oldfd, r, flags & O_CLOEXEC);
	return r;
}

/* Neither number known to us: the copy teaches us nothing (dup_onto would
 * find nothing to forget and no flags to copy), a tail jump. */
KP_EXPORT int dup2(int oldfd, int newfd)
{
	if (!kp_fd_known(oldfd) && !kp_fd_known(newfd))
		return KP_REAL(dup2)(oldfd, newfd);
	return dup_onto(oldfd, newfd, 0, true);
}

KP_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	if (!kp_fd_known(oldfd) && !kp_fd_known(newfd))
		return KP_REAL(dup3)(oldfd, newfd, flags);
	return dup_onto(oldfd, newfd, flags, false);
}

/* fcntl and ioctl: see open above for their fixed third parameter */

/* fcntl in a vfork child: a copy as dup's; O_NONBLOCK belongs to the
 * socket's description, the parent's too (noted); close-on-exec to the
 * child's table (not noted). */
static int fcntl_in_vfork_child(int fd, int cmd, void *arg)
{
	int r = KP_REAL(fcntl)(fd, cmd, arg);
	int saved = errno;
	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
		r = dup_in_vfork_child(fd, r, cmd == F_DUPFD_CLOEXEC);
	else if (r >= 0 && cmd == F_SETFL && kp_fd_valid(fd))
		kp_note_nonblock(fd, (long)arg & O_NONBLOCK);
	errno = saved;
	return r;
}
static KP_SLOW int fcntl_slow(int fd, int cmd, void *arg)
{
	if (kp_fd_conn(fd) == KP_POOLED)
		return not_yours();
	if (in_vfork_child())
		return fcntl_in_vfork_child(fd, cmd, arg);
	int r = KP_REAL(fcntl)(fd, cmd, arg);
	if (r < 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && !kp_reentered() && kp_fds_short())
		r = KP_REAL(fcntl)(fd, cmd, arg);
	if (r < 0 || !kp_fd_valid(fd))
		return r;
	int saved = errno;
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC: {
		struct kp_conn *c = kp_fd_conn(fd);
		if (c && c != KP_POOLED)
			kp_dup_to(c, fd, r), kp_fin_owed_onto(fd, r);
		else
			kp_fin_owed_onto(fd, r), dup_fdflags(fd, r, cmd == F_DUPFD_CLOEXEC);
		break;
	}
	case F_SETFL:
		kp_note_nonblock(fd, (long)arg & O_NONBLOCK);
		break;
	case F_SETFD:
		if ((long)arg & FD_CLOEXEC)
			kp_fl_or(fd, KP_FD_CLOEXEC);
		else
			kp_fl_clear(fd, KP_FD_CLOEXEC);
		break;
	}
	errno = saved;
	return r;
}

static inline int fcntl_fast(int fd, int cmd, void *arg)
{
	if (kp_fd_pooled(fd))
		return not_yours();
	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
		return fcntl_slow(fd, cmd, arg);
	/* flags of an fd we know (a connection, a TCP socket that may become
	 * one: socket() marked it); of any other, the kernel's alone */
	if ((cmd == F_SETFL || cmd == F_SETFD) && kp_fd_known(fd))
		return fcntl_slow(fd, cmd, arg);
	return KP_REAL(fcntl)(fd, cmd, arg);
}

static KP_SLOW int ioctl_slow(int fd, unsigned long req, void *arg)
{
	struct kp_conn *oc = kp_fd_conn(fd);
	if (oc == KP_POOLED)
		return not_yours();
	/* bytes waiting, bytes unsent: the connection observed before its
	 * read, settled first (conn.h kp_conn_observe) */
	if (oc && (req == FIONREAD || req == TIOCOUTQ) && !in_vfork_child())
		kp_conn_observe(oc, fd);
	int r = KP_REAL(ioctl)(fd, req, arg);
	if ((req == FIOCLEX || req == FIONCLEX) && in_vfork_child())
		return r; /* the child's table's, not the parent's */
	if (r == 0 && kp_fd_valid(fd)) {
		int saved = errno;
		if (req == FIONBIO && arg)
			kp_note_nonblock(fd, *(const int *)arg != 0);
		else if (req == FIOCLEX) /* libuv sets close-on-exec this way */
			kp_fl_or(fd, KP_FD_CLOEXEC);
		else if (req == FIONCLEX)
			kp_fl_clear(fd, KP_FD_CLOEXEC);
		else if (req == FIONREAD && arg) {
			/* a close line's bytes waiting for the next read count
			 * as the kernel's do (conn.h rx_extra) */
			struct kp_conn *c = kp_fd_conn(fd);
			if (c && c != KP_POOLED)
				*(int *)arg += __atomic_load_n(&c->rx_extra_len, __ATOMIC_ACQUIRE);
		}
		errno = saved;
	}
	return r;
}

static inline int ioctl_fast(int fd, unsigned long req, void *arg)
{
	if (kp_fd_pooled(fd))
		return not_yours();
	if (req == FIONBIO || req == FIOCLEX || req == FIONCLEX ||
	    ((req == FIONREAD || req == TIOCOUTQ) && kp_fd_conn(fd)))
		return ioctl_slow(fd, req, arg);
	return KP_REAL(ioctl)(fd, req, arg);
}

#ifdef KP_FIXED_VARARG
KP_EXPORT int kp_fcntl(int fd, int cmd, void *arg) __asm__("fcntl");
KP_EXPORT int kp_ioctl(int fd, unsigned long req, void *arg) __asm__("ioctl");

int kp_fcntl(int fd, int cmd, void *arg)
{
	return fcntl_fast(fd, cmd, arg);
}

int kp_ioctl(int fd, unsigned long req, void *arg)
{
	return ioctl_fast(fd, req, arg);
}
#else
KP_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_fast(fd, cmd, arg);
}

KP_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return ioctl_fast(fd, req, arg);
}
#endif

/* fcntl64 is the same function on 64-bit glibc; programs built against
 * _FILE_OFFSET_BITS=64 on 32-bit call it. */
KP_EXPORT int fcntl64(int fd, int cmd, ...) __attribute__((alias("fcntl")));

/* glibc exports these functions under a second name too, and a program
 * may bind either: __read from a program of its own build, the LFS names
 * under _FILE_OFFSET_BITS=64, libio's _IO_ names.  One not wrapped went
 * past the library (shim/alias.h; docs/structure.md "The names a program
 * binds", checked by make unit). */
KP_ALIAS(__clone, clone);
KP_ALIAS(__close, close);
KP_ALIAS(__connect, connect);
KP_ALIAS(creat64, creat);
KP_ALIAS(__dup2, dup2);
KP_ALIAS(_IO_fclose, fclose);
KP_ALIAS(__fcntl, fcntl);
KP_ALIAS(_IO_fdopen, fdopen);
KP_ALIAS(_IO_fopen, fopen);
KP_ALIAS(__open, open);
KP_ALIAS(__open64, open64);
KP_ALIAS(__pipe, pipe);
