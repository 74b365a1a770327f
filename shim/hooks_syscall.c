/*
 * hooks_syscall.c - the exported syscall(): every system call the library
 * wraps by name, made by number, goes through its wrapper (docs/binding.md
 * "What syscall() dispatches"; the few whose raw semantics differ from
 * libc's: ppoll's and pselect6's timeout written back, a sigset size of
 * the program's), io_submit, whose iocbs are read and changed as the
 * kernel takes them, and io_uring_setup (docs/limits.md "io_uring").
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "aio_scan.h"
#include "conn.h"
#include "fdtable.h"
#include "hooks_syscall.h"
#include "real.h"
#include "watch.h"

/* The rest of the calls wrapped by name (docs/binding.md "What syscall()
 * dispatches"): the fd makers (whatever we knew of the number they hand
 * out is forgotten, an EMFILE retried once the pool gave fds back), the
 * socket's own calls, epoll_ctl (a registration of a connection must be
 * known: it must not outlive the program's close), the waits (an EOF we
 * owe, readiness we settle) and the limits.  Each through its wrapper,
 * whose semantics are the kernel's call's, but for the few handled in
 * kp_syscall_by_name. */
static const unsigned short syscall_named[] = {
	SYS_socket,
	SYS_socketpair,
	SYS_accept,
	SYS_accept4,
	SYS_pipe,
	SYS_pipe2,
	SYS_open,
	SYS_openat,
	SYS_creat,
	SYS_eventfd,
	SYS_eventfd2,
	SYS_memfd_create,
	SYS_timerfd_create,
	SYS_inotify_init1,
	SYS_epoll_create,
	SYS_epoll_create1,
	SYS_bind,
	SYS_connect,
	SYS_shutdown,
	SYS_getsockopt,
	SYS_getsockname,
	SYS_getpeername,
	SYS_ioctl,
	SYS_epoll_ctl,
	SYS_epoll_wait,
	SYS_epoll_pwait,
	SYS_epoll_pwait2,
	SYS_poll,
	SYS_ppoll,
	SYS_select,
	SYS_pselect6,
	SYS_getrlimit,
	SYS_setrlimit,
	SYS_prlimit64,
};


/* Read n bytes of the program's memory as the kernel would: false where
 * it would meet EFAULT (we must not fault where it would not). */
static bool user_read(void *dst, const void *src, size_t n)
{
	struct iovec local = { dst, n }, remote = { (void *)src, n };
	int saved = errno;
	long got = KP_REAL(syscall)(SYS_process_vm_readv, (long)getpid(), (long)&local, 1L,
				    (long)&remote, 1L, 0L);
	if (got < 0 && errno != EFAULT) /* the call refused (a sandbox): read it ourselves */
		memcpy(dst, src, n), got = (long)n;
	errno = saved;
	return got == (long)n;
}

static bool user_write(void *dst, const void *src, size_t n)
{
	struct iovec local = { (void *)src, n }, remote = { dst, n };
	int saved = errno;
	long got = KP_REAL(syscall)(SYS_process_vm_writev, (long)getpid(), (long)&local, 1L,
				    (long)&remote, 1L, 0L);
	errno = saved;
	return got == (long)n;
}

/*
 * Kernel AIO (io_submit; libaio calls syscall() for it): the kernel reads
 * and writes the socket when it takes the iocb, past every wrapper.  On a
 * connection of ours each iocb is set up as the program alone would see
 * it (docs/replay.md, "Writes we cannot see"): a write that must not reach
 * the server (the first after the owed EOF) is pointed at /dev/null for
 * the submission, so the kernel completes it with its whole count as a
 * closed server's socket takes a first write (and our FIN is out: the
 * next one fails with EPIPE); any other write makes the connection
 * unpoolable; a read gets kp_aio_before (the owed EOF as the kernel's own,
 * else the framing given up) and ends any replay.  An iocb naming a pooled
 * socket ends the batch there (EBADF for the first, as the kernel's fget).
 */
#define KAIO_MAX 64
long kp_io_submit_slow(const long a[6])
{
	long nr = a[1];
	struct iocb **list = (struct iocb **)a[2];
	struct {
		struct iocb *at;
		__u32 fd;
	} moved[KAIO_MAX];
	int n_moved = 0, devnull = -1;
	for (long i = 0; i < nr && i < KAIO_MAX; i++) {
		struct iocb *p, cb;
		if (!user_read(&p, &list[i], sizeof(p)) || !user_read(&cb, p, sizeof(cb)))
			break; /* the kernel stops there too (EFAULT) */
		struct kp_conn *c = kp_fd_conn((int)cb.aio_fildes);
		if (!c)
			continue;
		if (c == KP_POOLED) {
			if (i == 0) {
				errno = EBADF;
				return -1;
			}
			nr = i;
			break;
		}
		int fd = (int)cb.aio_fildes;
		if (cb.aio_lio_opcode == IOCB_CMD_PREAD || cb.aio_lio_opcode == IOCB_CMD_PREADV) {
			kp_aio_before(c, fd, false);
			continue;
		}
		if (cb.aio_lio_opcode != IOCB_CMD_PWRITE && cb.aio_lio_opcode != IOCB_CMD_PWRITEV)
			continue;
		size_t len = (size_t)cb.aio_nbytes;
		if (cb.aio_lio_opcode == IOCB_CMD_PWRITEV) {
			len = 0;
			for (__u64 k = 0; k < cb.aio_nbytes && k < 1024; k++) {
				struct iovec v;
				if (!user_read(&v, (const struct iovec *)cb.aio_buf + k, sizeof(v)))
					break;
				len += v.iov_len;
			}
		}
		if (!kp_unseen_write(c, fd, len ? len : 1))
			continue;
		if (devnull < 0)
			devnull = KP_REAL(open)("/dev/null", O_WRONLY | O_CLOEXEC);
		__u32 to = (__u32)devnull;
		if (devnull >= 0 && n_moved < KAIO_MAX &&
		    user_write(&p->aio_fildes, &to, sizeof(to))) {
			moved[n_moved].at = p;
			moved[n_moved++].fd = cb.aio_fildes;
		} else {
			KP_REAL(shutdown)(fd, SHUT_WR); /* no way to drop them: EPIPE */
		}
	}
	long r = KP_REAL(syscall)(SYS_io_submit, a[0], nr, a[2], a[3], a[4], a[5]);
	int saved = errno;
	/* the kernel copied each iocb it took: the program's own are restored */
	for (int i = 0; i < n_moved; i++)
		user_write(&moved[i].at->aio_fildes, &moved[i].fd, sizeof(moved[i].fd));
	if (devnull >= 0)
		KP_REAL(close)(devnull);
	errno = saved;
	return r;
}

/* The size of the kernel's sigset_t, which glibc's wrappers pass: a raw
 * call with another one is the kernel's (its EINVAL). */
#define KERNEL_SIGSET_SIZE 8

static bool timespec_valid(const struct timespec *t)
{
	return t->tv_sec >= 0 && t->tv_nsec >= 0 && t->tv_nsec < 1000000000;
}

/* A raw ppoll or pselect6 writes what is left of its timeout back to the
 * program's timespec (the kernel's poll_select_finish; glibc's wrappers
 * hand it a copy so that it cannot).  Ours waits on a copy, then this
 * writes the rest as the kernel would: nothing for a zero timeout, a
 * write it cannot make ignored, as the kernel ignores it. */
static void left_written_back(long user_ts, const struct timespec *was, const struct timespec *start)
{
	if (!was->tv_sec && !was->tv_nsec)
		return;
	struct timespec now;
	int saved = errno;
	clock_gettime(CLOCK_MONOTONIC, &now);
	long long spent = (now.tv_sec - start->tv_sec) * 1000000000LL + (now.tv_nsec - start->tv_nsec);
	long long left = was->tv_sec * 1000000000LL + was->tv_nsec - spent;
	struct timespec rest = { 0, 0 };
	if (left > 0)
		rest = (struct timespec){ (time_t)(left / 1000000000LL), (long)(left % 1000000000LL) };
	user_write((void *)user_ts, &rest, sizeof(rest));
	errno = saved;
}

/* ppoll (fds, n, ts, mask, size) and pselect6 (nfds, rd, wr, ex, ts,
 * {mask, size}) through our wrappers: false for the kernel's own call (an
 * unreadable or invalid argument: its EFAULT or EINVAL). */
static bool timed_wait(long number, const long a[6], long *r)
{
	long user_ts = number == SYS_ppoll ? a[2] : a[4];
	const sigset_t *mask = (const sigset_t *)a[3];
	size_t size = (size_t)a[4];
	if (number == SYS_pselect6) {
		struct {
			const sigset_t *mask;
			size_t size;
		} sig = { NULL, KERNEL_SIGSET_SIZE };
		if (a[5] && !user_read(&sig, (const void *)a[5], sizeof(sig)))
			return false;
		mask = sig.mask, size = sig.size;
	}
	if (mask && size != KERNEL_SIGSET_SIZE)
		return false;
	struct timespec ts, start;
	if (user_ts && (!user_read(&ts, (const void *)user_ts, sizeof(ts)) || !timespec_valid(&ts)))
		return false;
	clock_gettime(CLOCK_MONOTONIC, &start);
	if (number == SYS_ppoll)
		*r = ppoll((struct pollfd *)a[0], (nfds_t)a[1], user_ts ? &ts : NULL, mask);
	else
		*r = pselect((int)a[0], (fd_set *)a[1], (fd_set *)a[2], (fd_set *)a[3], user_ts ? &ts : NULL,
			     mask);
	if (user_ts)
		left_written_back(user_ts, &ts, &start);
	return true;
}

/* syscall_named's numbers through their wrappers: false for the kernel's
 * own call (and for any other number) */
bool kp_syscall_by_name(long number, const long a[6], long *r)
{
	switch (number) {
	case SYS_socket:
		return *r = socket((int)a[0], (int)a[1], (int)a[2]), true;
	case SYS_socketpair:
		return *r = socketpair((int)a[0], (int)a[1], (int)a[2], (int *)a[3]), true;
	case SYS_accept:
		return *r = accept((int)a[0], (struct sockaddr *)a[1], (socklen_t *)a[2]), true;
	case SYS_accept4:
		return *r = accept4((int)a[0], (struct sockaddr *)a[1], (socklen_t *)a[2], (int)a[3]), true;
	case SYS_pipe:
		return *r = pipe((int *)a[0]), true;
	case SYS_pipe2:
		return *r = pipe2((int *)a[0], (int)a[1]), true;
	case SYS_open:
		return *r = open((const char *)a[0], (int)a[1], (mode_t)a[2]), true;
	case SYS_openat:
		return *r = openat((int)a[0], (const char *)a[1], (int)a[2], (mode_t)a[3]), true;
	case SYS_creat:
		return *r = creat((const char *)a[0], (mode_t)a[1]), true;
	case SYS_eventfd: /* the old call: no flags */
		return *r = eventfd((unsigned)a[0], 0), true;
	case SYS_eventfd2:
		return *r = eventfd((unsigned)a[0], (int)a[1]), true;
	case SYS_memfd_create:
		return *r = memfd_create((const char *)a[0], (unsigned)a[1]), true;
	case SYS_timerfd_create:
		return *r = timerfd_create((int)a[0], (int)a[1]), true;
	case SYS_inotify_init1:
		return *r = inotify_init1((int)a[0]), true;
	case SYS_epoll_create:
		return *r = epoll_create((int)a[0]), true;
	case SYS_epoll_create1:
		return *r = epoll_create1((int)a[0]), true;
	case SYS_bind:
		return *r = bind((int)a[0], (const struct sockaddr *)a[1], (socklen_t)a[2]), true;
	case SYS_connect:
		return *r = connect((int)a[0], (const struct sockaddr *)a[1], (socklen_t)a[2]), true;
	case SYS_shutdown:
		return *r = shutdown((int)a[0], (int)a[1]), true;
	case SYS_getsockopt:
		return *r = getsockopt((int)a[0], (int)a[1], (int)a[2], (void *)a[3], (socklen_t *)a[4]), true;
	case SYS_getsockname:
		return *r = getsockname((int)a[0], (struct sockaddr *)a[1], (socklen_t *)a[2]), true;
	case SYS_getpeername:
		return *r = getpeername((int)a[0], (struct sockaddr *)a[1], (socklen_t *)a[2]), true;
	case SYS_ioctl:
		return *r = ioctl((int)a[0], (unsigned long)a[1], (void *)a[2]), true;
	case SYS_epoll_ctl:
		return *r = epoll_ctl((int)a[0], (int)a[1], (int)a[2], (struct epoll_event *)a[3]), true;
	case SYS_epoll_wait:
		return *r = epoll_wait((int)a[0], (struct epoll_event *)a[1], (int)a[2], (int)a[3]), true;
	case SYS_epoll_pwait:
		if (a[4] && a[5] != KERNEL_SIGSET_SIZE)
			return false;
		return *r = epoll_pwait((int)a[0], (struct epoll_event *)a[1], (int)a[2], (int)a[3],
					(const sigset_t *)a[4]),
		       true;
	case SYS_epoll_pwait2:
		if (a[4] && a[5] != KERNEL_SIGSET_SIZE)
			return false;
		return *r = epoll_pwait2((int)a[0], (struct epoll_event *)a[1], (int)a[2],
					 (const struct timespec *)a[3], (const sigset_t *)a[4]),
		       true;
	case SYS_poll:
		return *r = poll((struct pollfd *)a[0], (nfds_t)a[1], (int)a[2]), true;
	case SYS_ppoll:
	case SYS_pselect6:
		return timed_wait(number, a, r);
	case SYS_select: /* the kernel's and glibc's both write the rest of tv back */
		return *r = select((int)a[0], (fd_set *)a[1], (fd_set *)a[2], (fd_set *)a[3],
				   (struct timeval *)a[4]),
		       true;
	case SYS_getrlimit:
		return *r = getrlimit((int)a[0], (struct rlimit *)a[1]), true;
	case SYS_setrlimit:
		return *r = setrlimit((int)a[0], (const struct rlimit *)a[1]), true;
	case SYS_prlimit64:
		return *r = prlimit((pid_t)a[0], (int)a[1], (const struct rlimit *)a[2], (struct rlimit *)a[3]),
		       true;
	default:
		return false;
	}
}

/* ------------------------------------------------------------ syscall */

/* Programs that bypass libc for an fd's life: libuv (Node) closes its
 * sockets with syscall(SYS_close).  Those numbers go through the same
 * logic as the libc calls; everything else straight through.  Every
 * syscall argument is a long (the kernel ABI), so six are forwarded. */

/* The numbers syscall_slow looks at (with syscall_named's). */
static const unsigned short syscall_ours[] = {
	SYS_close,
	SYS_read,
	SYS_readv,
	SYS_recvfrom,
	SYS_recvmsg,
	SYS_recvmmsg,
	SYS_write,
	SYS_writev,
	SYS_sendto,
	SYS_preadv2,
	SYS_pwritev2,
	SYS_sendfile,
	SYS_splice,
	SYS_close_range,
#ifdef SYS_dup2
	SYS_dup2,
#endif
	SYS_dup3,
	SYS_sendmsg,
	SYS_sendmmsg,
	SYS_dup,
	SYS_fcntl,
	SYS_setsockopt,
	SYS_pidfd_getfd,
	SYS_execve,
	SYS_execveat,
	SYS_fork,
	SYS_vfork,
	SYS_clone,
	SYS_clone3,
	SYS_setuid,
	SYS_setreuid,
	SYS_setresuid,
	SYS_setgid,
	SYS_setregid,
	SYS_setresgid,
	SYS_setgroups,
	SYS_setfsuid,
	SYS_setfsgid,
	SYS_capset,
	SYS_unshare,
	SYS_setns,
	SYS_io_submit,
	SYS_io_uring_setup,
	SYS_seccomp,
	SYS_prctl,
};

/* Which listed numbers concern us for these arguments: an fd we know
 * nothing of gets the kernel's call, as glibc's syscall() makes it (the
 * libc wrappers are cancellation points, and its fcntl turns F_GETOWN into
 * F_GETOWN_EX).  recvmsg and sendmsg may carry fds in SCM_RIGHTS on any
 * socket (and their message is the kernel's to read), the rest are rare:
 * always ours. */
static bool syscall_concerns(long number, const long a[6])
{
	switch (number) {
	case SYS_close:
	case SYS_read:
	case SYS_readv:
	case SYS_recvfrom:
	case SYS_write:
	case SYS_writev:
	case SYS_sendto:
	case SYS_preadv2:
	case SYS_pwritev2:
	case SYS_sendfile:
	case SYS_setsockopt:
		return kp_fd_known((int)a[0]);
	case SYS_splice:
		return kp_fd_known((int)a[0]) || kp_fd_known((int)a[2]);
	case SYS_io_submit: /* an iocb may name a connection */
		return kp_fd_any_live();
	case SYS_bind:
	case SYS_connect:
	case SYS_shutdown:
	case SYS_getsockopt:
	case SYS_getsockname:
	case SYS_getpeername:
	case SYS_ioctl:
		return kp_fd_known((int)a[0]);
	case SYS_epoll_ctl:
		return kp_fd_known((int)a[0]) || kp_fd_known((int)a[2]);
	/* the waits: only where our readiness may differ (as their wrappers'
	 * own fast paths), else the kernel's call exactly (ppoll's rest) */
	case SYS_poll:
	case SYS_ppoll:
		return kp_fd_any_live();
	case SYS_select: /* past FD_SETSIZE: nfds cut short of our fds (hooks_wait.c) */
	case SYS_pselect6:
		return kp_fd_any_live() || (int)a[0] > FD_SETSIZE;
	case SYS_epoll_wait:
	case SYS_epoll_pwait:
	case SYS_epoll_pwait2:
		return __atomic_load_n(&kp_watch_count, __ATOMIC_ACQUIRE) != 0;
#ifdef SYS_dup2
	case SYS_dup2:
#endif
	case SYS_dup3:
		return kp_fd_known((int)a[0]) || kp_fd_known((int)a[1]);
	case SYS_fcntl:
		switch ((int)a[1]) {
		case F_DUPFD:
		case F_DUPFD_CLOEXEC:
			return true; /* a number short of our hidden fds: fcntl_slow */
		case F_SETFL:
		case F_SETFD:
			return kp_fd_known((int)a[0]);
		default:
			return false;
		}
	default:
		return true;
	}
}

static long syscall_dispatch(long number, const long a[6]);

/* A raw system call is no cancellation point, and the libc calls our
 * wrappers make are: a thread with a cancellation pending would end
 * inside syscall() where alone it went on.  So none is acted on during
 * the dispatch (a pending one waits for the program's next cancellation
 * point, as alone). */
static KP_SLOW long syscall_slow(long number, const long a[6])
{
	if (!syscall_concerns(number, a))
		return KP_REAL(syscall)(number, a[0], a[1], a[2], a[3], a[4], a[5]);
	int cancel_was;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_was);
	long r = syscall_dispatch(number, a);
	int saved = errno;
	pthread_setcancelstate(cancel_was, NULL);
	errno = saved;
	return r;
}

static long syscall_dispatch(long number, const long a[6])
{
	long named_r;
	if (kp_syscall_by_name(number, a, &named_r))
		return named_r;
	switch (number) {
	case SYS_close:
		return close((int)a[0]);
	/* a read of a connection past the wrappers would miss the EOF
	 * we owe after a response we had rewritten (docs/hold.md) */
	case SYS_read:
		return read((int)a[0], (void *)a[1], (size_t)a[2]);
	case SYS_readv:
		return readv((int)a[0], (const struct iovec *)a[1], (int)a[2]);
	case SYS_recvfrom:
		return recvfrom((int)a[0], (void *)a[1], (size_t)a[2], (int)a[3],
				(struct sockaddr *)a[4], (socklen_t *)a[5]);
	case SYS_recvmsg:
		return recvmsg((int)a[0], (struct msghdr *)a[1], (int)a[2]);
	case SYS_recvmmsg:
		return recvmmsg((int)a[0], (struct mmsghdr *)a[1], (unsigned)a[2], (int)a[3],
				(struct timespec *)a[4]);
	case SYS_write:
		return write((int)a[0], (const void *)a[1], (size_t)a[2]);
	case SYS_writev:
		return writev((int)a[0], (const struct iovec *)a[1], (int)a[2]);
	case SYS_sendto:
		return sendto((int)a[0], (const void *)a[1], (size_t)a[2], (int)a[3],
			      (const struct sockaddr *)a[4], (socklen_t)a[5]);
	case SYS_preadv2:
		if (a[3] == -1)
			return preadv2((int)a[0], (const struct iovec *)a[1], (int)a[2], -1, (int)a[5]);
		break;
	case SYS_pwritev2:
		if (a[3] == -1)
			return pwritev2((int)a[0], (const struct iovec *)a[1], (int)a[2], -1, (int)a[5]);
		break;
	case SYS_sendfile:
		return sendfile((int)a[0], (int)a[1], (off_t *)a[2], (size_t)a[3]);
	case SYS_splice:
		return splice((int)a[0], (loff_t *)a[1], (int)a[2], (loff_t *)a[3], (size_t)a[4],
			      (unsigned)a[5]);
	case SYS_close_range:
		return close_range((unsigned)a[0], (unsigned)a[1], (int)a[2]);
#ifdef SYS_dup2 /* not on aarch64 */
	case SYS_dup2:
		return dup2((int)a[0], (int)a[1]);
#endif
	case SYS_dup3:
		return dup3((int)a[0], (int)a[1], (int)a[2]);
	case SYS_sendmsg:
		return sendmsg((int)a[0], (const struct msghdr *)a[1], (int)a[2]);
	case SYS_sendmmsg:
		return sendmmsg((int)a[0], (struct mmsghdr *)a[1], (unsigned)a[2], (int)a[3]);
	case SYS_dup:
		return dup((int)a[0]);
	case SYS_fcntl:
		return fcntl((int)a[0], (int)a[1], (void *)a[2]);
	case SYS_setsockopt:
		return setsockopt((int)a[0], (int)a[1], (int)a[2], (const void *)a[3],
				  (socklen_t)a[4]);
	case SYS_pidfd_getfd:
		return pidfd_getfd((int)a[0], (int)a[1], (unsigned)a[2]);
	case SYS_io_submit:
		return kp_io_submit_slow(a);
	case SYS_io_uring_setup: /* before the ring exists: default deny */
		kp_uring_note();
		kp_uring_divide();
		break;
	case SYS_seccomp:
	case SYS_prctl:
		return kp_sandbox_syscall(number, a);
	case SYS_execve:
	case SYS_execveat:
		kp_conn_handoff_all(true, KP_HANDOFF_INHERIT, "exec");
		break;
	case SYS_fork:
	case SYS_vfork:
	case SYS_clone:
	case SYS_clone3:
		return kp_raw_fork(number, a);
	/* credentials, raw (one thread's only): as the libc calls */
	case SYS_setuid:
	case SYS_setreuid:
	case SYS_setresuid:
	case SYS_setgid:
	case SYS_setregid:
	case SYS_setresgid:
	case SYS_setgroups:
	case SYS_setfsuid:
	case SYS_setfsgid:
	case SYS_capset:
	case SYS_unshare:
	case SYS_setns: {
		kp_conn_cred_change(true);
		long r = KP_REAL(syscall)(number, a[0], a[1], a[2], a[3], a[4], a[5]);
		if (r >= 0)
			kp_conn_cred_change(true);
		return r;
	}
	}
	return KP_REAL(syscall)(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* syscall_ours as a bitmap, filled at start-up: a compare, a load and a
 * bit test (the switch compiles to a tree of compares) */
#define KP_SYSCALL_BITS 512
KP_HIDDEN uint64_t kp_syscall_bits[KP_SYSCALL_BITS / 64];

/* (a constructor of its own: hooks_conn.c calls nothing here; until it
 * runs, and with no fd table, every number goes straight to libc) */
__attribute__((constructor)) static void syscall_init(void)
{
	for (size_t i = 0; i < sizeof(syscall_ours) / sizeof(syscall_ours[0]); i++)
		if (syscall_ours[i] < KP_SYSCALL_BITS)
			kp_syscall_bits[syscall_ours[i] / 64] |= 1ull << (syscall_ours[i] % 64);
	for (size_t i = 0; i < sizeof(syscall_named) / sizeof(syscall_named[0]); i++)
		if (syscall_named[i] < KP_SYSCALL_BITS)
			kp_syscall_bits[syscall_named[i] / 64] |= 1ull << (syscall_named[i] % 64);
}

static inline bool syscall_listed(long number)
{
	return (unsigned long)number < KP_SYSCALL_BITS &&
	       (kp_syscall_bits[(unsigned long)number / 64] >> ((unsigned long)number % 64) & 1);
}

#if defined(__x86_64__)
/* syscall() is variadic, but the x86-64 ABI passes variadic integer
 * arguments exactly as fixed ones (six registers, the seventh on the
 * stack), and every argument of syscall() is a long.  So the exported
 * entry is five instructions of assembly that leave the registers and
 * the stack as the caller made them: a number of no interest (Rust's std
 * wakes futexes this way) is a compare, a bit test and the jump to libc's
 * syscall(); a listed one jumps to kp_syscall_listed, a C function that
 * reads the same registers as fixed arguments.  Written in C, the same
 * test cost 13 instructions: GCC reloads and stores back the seventh
 * argument for the tail call, and sets %al for a variadic one. */
KP_HIDDEN long kp_syscall_listed(long number, long a0, long a1, long a2, long a3, long a4,
				 long a5);
static KP_SLOW long syscall_slow_regs(long number, long a0, long a1, long a2, long a3, long a4,
				      long a5)
{
	const long a[6] = { a0, a1, a2, a3, a4, a5 };
	return syscall_slow(number, a);
}

long kp_syscall_listed(long number, long a0, long a1, long a2, long a3, long a4, long a5)
{
	if (kp_fdtab_len)
		return syscall_slow_regs(number, a0, a1, a2, a3, a4, a5);
	return KP_REAL(syscall)(number, a0, a1, a2, a3, a4, a5);
}

/* (extended asm in a function that is never called, for the constants) */
__attribute__((used)) static void syscall_entry_asm(void)
{
	__asm__(".pushsection .text.kp_syscall, \"ax\", @progbits\n"
		".globl syscall\n"
		".type syscall, @function\n"
		".p2align 4\n"
		"syscall:\n"
		"\tcmpq $%c[last], %%rdi\n"
		"\tja 1f\n"
		"\tbtq %%rdi, kp_syscall_bits(%%rip)\n"
		"\tjc kp_syscall_listed\n"
		"1:\tjmp *kp_real+%c[real](%%rip)\n"
		".size syscall, .-syscall\n"
		".popsection"
		:
		: [last] "i"(KP_SYSCALL_BITS - 1),
		  [real] "i"(offsetof(struct kp_real_table, syscall)));
}
#else
KP_EXPORT long syscall(long number, ...)
{
	va_list ap;
	va_start(ap, number);
	long a[6];
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (syscall_listed(number) && kp_fdtab_len)
		return syscall_slow(number, a);
	return KP_REAL(syscall)(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
#endif
