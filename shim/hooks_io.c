/*
 * hooks_io.c - exported wrappers for the write family (write, writev, send,
 * sendto, sendmsg, sendfile) and the read family (read, readv, recv,
 * recvfrom, recvmsg and the fortified __read_chk, __recv_chk,
 * __recvfrom_chk).  For an fd that is not ours each costs one array load
 * and a tail jump (KP_FAST below); everything else is in its out-of-line
 * name_slow().
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "clock.h"
#include "iov.h"
#include "conn.h"
#include "fdtable.h"
#include "alias.h"
#include "real.h"
#include "sigwait.h"

#define KP_EXPORT __attribute__((visibility("default")))

/* The whole of an exported wrapper for an fd that is not ours: a bounds
 * check, a load, a test and a tail jump to libc (eight instructions).
 * kp_real needs no check: on x86-64 its pointers start
 * at lazy binding stubs, elsewhere they are bound before the constructor
 * gives the table its length (real.h).  Calls before that, or on fds
 * beyond the table, and tracked fds take name_slow(), out of line. */
#define KP_FAST(fd, name, ...)                                                \
	do {                                                                     \
		if (__builtin_expect((unsigned)(fd) >= kp_fdtab_len, 0))         \
			return name##_slow(NULL, __VA_ARGS__);                   \
		struct kp_conn *c_ = __atomic_load_n(&kp_fdtab[fd], __ATOMIC_ACQUIRE); \
		if (__builtin_expect(c_ != NULL, 0))                             \
			return name##_slow(c_, __VA_ARGS__);                     \
		return KP_REAL_BOUND(name)(__VA_ARGS__);                         \
	} while (0)

/* A hidden fd of ours (a pooled socket, a twin) is not the program's: to
 * the program the number is not open (docs/owner.md). */
static ssize_t not_yours(void)
{
	errno = EBADF;
	return -1;
}

/* The program's array of n iovecs, which we read before the kernel does
 * (to frame, to trim): false where the kernel would refuse it (EFAULT, or
 * EINVAL/EMSGSIZE past IOV_MAX).  The call is then the kernel's alone: it
 * fails before any byte moves, and its answer is the program's
 * (docs/limits.md "A pointer the kernel refuses"). */
static bool iov_readable(const struct iovec *iov, size_t n)
{
	return n <= 1024 && kp_readable(iov, n * sizeof(*iov));
}

/* The same for a msghdr and the iovec it names. */
static bool msg_readable(const struct msghdr *msg)
{
	return kp_readable(msg, sizeof(*msg)) && iov_readable(msg->msg_iov, msg->msg_iovlen);
}

/* ------------------------------------------------------------ write */

static ssize_t write_inside(struct kp_conn *c, int fd, const void *buf, size_t n)
{
	struct iovec iov = { (void *)buf, n };
	ssize_t r;
	if (kp_send_intercept(c, fd, &iov, 1, 0, &r))
		return r;
	if (__builtin_expect(kp_tls_quiet, 0)) {
		/* the engine's socket BIO inside the program's SSL call: its
		 * signal is the program's BIO's to give (conn.h kp_tls_quiet) */
		r = KP_REAL(send)(fd, buf, n, MSG_NOSIGNAL);
		if (r < 0 && errno == EPIPE)
			kp_tls_epipe = true;
	} else {
		r = KP_REAL(write)(fd, buf, n);
	}
	kp_send_done(c, fd, &iov, 1, r, 0);
	return r;
}

static KP_SLOW ssize_t write_slow(struct kp_conn *c, int fd, const void *buf, size_t n)
{
	if (c == KP_POOLED)
		return not_yours();
	if (!c)
		return KP_REAL(write)(fd, buf, n);
	if (kp_reentered()) { /* a signal handler inside our locks (kp_lock.h) */
		struct iovec v_ = { (void *)buf, n };
		ssize_t taken_ = kp_conn_raw_write(c, fd, &v_, 1);
		return taken_ >= 0 ? taken_ : KP_REAL(write)(fd, buf, n);
	}
	/* inside until our bookkeeping of the kernel's answer is done: a
	 * handler's call meanwhile steps aside (kp_lock.h) */
	kp_call_enter();
	ssize_t r_ = write_inside(c, fd, buf, n);
	kp_call_leave();
	return r_;
}

KP_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	KP_FAST(fd, write, fd, buf, n);
}

/* glibc exports write under this name too: a program may bind it */
KP_EXPORT ssize_t __write(int fd, const void *buf, size_t n) __attribute__((alias("write")));

static ssize_t writev_inside(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt)
{
	ssize_t r;
	if (iovcnt > 0 && kp_send_intercept(c, fd, iov, iovcnt, 0, &r))
		return r;
	r = KP_REAL(writev)(fd, iov, iovcnt);
	kp_send_done(c, fd, iov, iovcnt, r, 0);
	return r;
}

static KP_SLOW ssize_t writev_slow(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt)
{
	if (c == KP_POOLED)
		return not_yours();
	if (!c || !iov_readable(iov, (size_t)iovcnt))
		return KP_REAL(writev)(fd, iov, iovcnt);
	if (kp_reentered()) { /* a signal handler inside our locks (kp_lock.h) */
		ssize_t taken_ = kp_conn_raw_write(c, fd, iov, iovcnt);
		return taken_ >= 0 ? taken_ : KP_REAL(writev)(fd, iov, iovcnt);
	}
	/* inside until our bookkeeping of the kernel's answer is done: a
	 * handler's call meanwhile steps aside (kp_lock.h) */
	kp_call_enter();
	ssize_t r_ = writev_inside(c, fd, iov, iovcnt);
	kp_call_leave();
	return r_;
}

KP_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	KP_FAST(fd, writev, fd, iov, iovcnt);
}

static ssize_t send_inside(struct kp_conn *c, int fd, const void *buf, size_t n, int flags)
{
	struct iovec iov = { (void *)buf, n };
	ssize_t r;
	if (kp_send_intercept(c, fd, &iov, 1, flags, &r))
		return r;
	r = KP_REAL(send)(fd, buf, n, flags);
	kp_send_done(c, fd, &iov, 1, r, flags);
	return r;
}

static KP_SLOW ssize_t send_slow(struct kp_conn *c, int fd, const void *buf, size_t n, int flags)
{
	if (c == KP_POOLED)
		return not_yours();
	if (!c)
		return KP_REAL(send)(fd, buf, n, flags);
	if (kp_reentered()) { /* a signal handler inside our locks (kp_lock.h) */
		struct iovec v_ = { (void *)buf, n };
		ssize_t taken_ = kp_conn_raw_write(c, fd, &v_, 1);
		return taken_ >= 0 ? taken_ : KP_REAL(send)(fd, buf, n, flags);
	}
	/* inside until our bookkeeping of the kernel's answer is done: a
	 * handler's call meanwhile steps aside (kp_lock.h) */
	kp_call_enter();
	ssize_t r_ = send_inside(c, fd, buf, n, flags);
	kp_call_leave();
	return r_;
}

KP_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	KP_FAST(fd, send, fd, buf, n, flags);
}

KP_EXPORT ssize_t __send(int fd, const void *buf, size_t n, int flags) __attribute__((alias("send")));

/* Bytes the program sends past the write path that must never reach the
 * server (kp_send_bypass): taken from where they come from, as a send
 * would take them - a file's bytes from its offset (or its position), a
 * pipe's as it holds them - and dropped. */
static ssize_t drain(int in_fd, off_t *offset, size_t count)
{
	char buf[16384];
	size_t done = 0;
	while (done < count) {
		size_t want = count - done < sizeof(buf) ? count - done : sizeof(buf);
		ssize_t r = offset ? pread(in_fd, buf, want, *offset + (off_t)done)
				   : KP_REAL(read)(in_fd, buf, want);
		if (r < 0 && !done)
			return -1;
		if (r <= 0)
			break;
		done += (size_t)r;
		if ((size_t)r < want)
			break; /* what it had: a send takes no more either */
	}
	if (offset)
		*offset += (off_t)done;
	return (ssize_t)done;
}

/* sendmsg of the first len bytes of msg's iovec only */
static ssize_t sendmsg_prefix(int fd, const struct msghdr *msg, int flags, size_t len)
{
	struct iovec v[64];
	int n = 0;
	for (size_t i = 0; i < msg->msg_iovlen && len && n < 64; i++) {
		size_t l = msg->msg_iov[i].iov_len < len ? msg->msg_iov[i].iov_len : len;
		v[n].iov_base = msg->msg_iov[i].iov_base;
		v[n++].iov_len = l;
		len -= l;
	}
	struct msghdr m = *msg;
	m.msg_iov = v;
	m.msg_iovlen = (size_t)n;
	return KP_REAL(sendmsg)(fd, &m, flags);
}

static ssize_t sendto_inside(struct kp_conn *c, int fd, const void *buf, size_t n, int flags, const struct sockaddr *to,
			 socklen_t tolen)
{
	struct iovec iov = { (void *)buf, n };
	ssize_t r;
	/* on a connected TCP socket the address is ignored (or EISCONN, which
	 * the program would get anyway: let the kernel say it) */
	if (!to && kp_send_intercept(c, fd, &iov, 1, flags, &r))
		return r;
	size_t len = n;
	if (to && !kp_send_bypass(c, fd, &len))
		return (ssize_t)n; /* taken, never sent (kp_send_bypass) */
	r = KP_REAL(sendto)(fd, buf, len, flags, to, tolen);
	kp_send_done(c, fd, &iov, 1, r, flags);
	return r;
}

static KP_SLOW ssize_t sendto_slow(struct kp_conn *c, int fd, const void *buf, size_t n, int flags, const struct sockaddr *to,
			 socklen_t tolen)
{
	if (c == KP_POOLED)
		return not_yours();
	if (!c)
		return KP_REAL(sendto)(fd, buf, n, flags, to, tolen);
	if (kp_reentered()) { /* a signal handler inside our locks (kp_lock.h) */
		struct iovec v_ = { (void *)buf, to ? 0 : n };
		ssize_t taken_ = kp_conn_raw_write(c, fd, &v_, 1);
		return taken_ >= 0 ? taken_ : KP_REAL(sendto)(fd, buf, n, flags, to, tolen);
	}
	/* inside until our bookkeeping of the kernel's answer is done: a
	 * handler's call meanwhile steps aside (kp_lock.h) */
	kp_call_enter();
	ssize_t r_ = sendto_inside(c, fd, buf, n, flags, to, tolen);
	kp_call_leave();
	return r_;
}

KP_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *to,
			 socklen_t tolen)
{
	KP_FAST(fd, sendto, fd, buf, n, flags, to, tolen);
}

static ssize_t sendmsg_inside(struct kp_conn *c, int fd, const struct msghdr *msg, int flags)
{
	ssize_t r;
	bool plain = !msg->msg_name && !msg->msg_controllen && msg->msg_iovlen <= 1024;
	if (plain && msg->msg_iovlen > 0 &&
	    kp_send_intercept(c, fd, msg->msg_iov, (int)msg->msg_iovlen, flags, &r))
		return r;
	size_t len = iov_total(msg->msg_iov, (int)msg->msg_iovlen), all = len;
	if (!plain && !kp_send_bypass(c, fd, &len))
		return (ssize_t)all; /* taken, never sent (kp_send_bypass) */
	if (len < all) /* a close request's body ends here: the rest is not sent */
		return sendmsg_prefix(fd, msg, flags, len);
	r = KP_REAL(sendmsg)(fd, msg, flags);
	kp_send_done(c, fd, msg->msg_iov, (int)msg->msg_iovlen, r, flags);
	return r;
}

static KP_SLOW ssize_t sendmsg_slow(struct kp_conn *c, int fd, const struct msghdr *msg, int flags)
{
	if (c == KP_POOLED)
		return not_yours();
	if (!c || !msg_readable(msg))
		return KP_REAL(sendmsg)(fd, msg, flags);
	if (kp_reentered()) { /* a signal handler inside our locks (kp_lock.h) */
		ssize_t taken_ = kp_conn_raw_write(c, fd, msg->msg_iov, msg->msg_name ? 0 : (int)msg->msg_iovlen);
		return taken_ >= 0 ? taken_ : KP_REAL(sendmsg)(fd, msg, flags);
	}
	/* inside until our bookkeeping of the kernel's answer is done: a
	 * handler's call meanwhile steps aside (kp_lock.h) */
	kp_call_enter();
	ssize_t r_ = sendmsg_inside(c, fd, msg, flags);
	kp_call_leave();
	return r_;
}

/* The fds an SCM_RIGHTS message passes (n of them at *fds, unaligned),
 * for each control message of msg; false stops the walk.  The walk stays
 * inside msg_controllen, whatever the headers claim. */
static bool each_passed_fd(const struct msghdr *msg, bool (*fn)(int fd))
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm; cm = CMSG_NXTHDR((struct msghdr *)msg, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
		    cm->cmsg_len < CMSG_LEN(0))
			continue;
		const unsigned char *end = (const unsigned char *)msg->msg_control + msg->msg_controllen;
		const unsigned char *p = CMSG_DATA(cm);
		size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n && p + sizeof(int) <= end; i++, p += sizeof(int)) {
			int fd;
			memcpy(&fd, p, sizeof(fd));
			if (!fn(fd))
				return false;
		}
	}
	return true;
}

/* A message that carries control data may pass fds to another process:
 * each of our connections it passes may have two owners from now on
 * (conn.c); a hidden fd of ours is not the program's to pass (EBADF, as
 * for a number that is not open, and nothing is sent). */
static KP_SLOW ssize_t sendmsg_control(int fd, const struct msghdr *msg, int flags)
{
	struct kp_conn *c = kp_fd_conn(fd);
	if (!c && kp_fd_valid(fd) && (kp_fl(fd) & KP_FD_TCP))
		return KP_REAL(sendmsg)(fd, msg, flags); /* a TCP socket passes no fd */
	if (!kp_readable(msg, sizeof(*msg)) || !kp_readable(msg->msg_control, msg->msg_controllen))
		return KP_REAL(sendmsg)(fd, msg, flags); /* EFAULT, nothing passed */
	int saved = errno;
	bool ok = each_passed_fd(msg, kp_reentered() ? kp_conn_raw_fd : kp_conn_passing_fd);
	errno = saved;
	if (!ok)
		return not_yours();
	return sendmsg_slow(c, fd, msg, flags);
}

/* Could a number the program names be one of ours: a connection, or a
 * hidden fd?  Until then, no fd a message passes can be, and a wrapper
 * leaves the program's pointers to the kernel (with the library off, the
 * table is empty: never).  Two loads and two branches. */
static inline bool ours_anywhere(void)
{
	return kp_fd_any_live() ||
	       __builtin_expect(__atomic_load_n(&kp_fd_pooled_low, __ATOMIC_RELAXED) != INT_MAX, 0);
}

KP_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	if (ours_anywhere())
		return sendmsg_control(fd, msg, flags);
	KP_FAST(fd, sendmsg, fd, msg, flags);
}

/* The most one zero-copy call sends through the write path (a short
 * count, which sendfile and splice may answer) */
#define KP_COPY_MAX 65536

/* n bytes at buf through the write path, as send(fd, buf, n, 0) (SIGPIPE
 * included): what went, or -1 with errno */
static ssize_t send_as_write(struct kp_conn *c, int fd, const void *buf, size_t n)
{
	struct iovec iov = { (void *)buf, n };
	ssize_t r;
	if (kp_send_intercept(c, fd, &iov, 1, 0, &r))
		return r;
	size_t len = n;
	if (!kp_send_bypass(c, fd, &len))
		return (ssize_t)n; /* taken, never sent (kp_send_bypass) */
	r = KP_REAL(sendto)(fd, buf, len, 0, NULL, 0);
	kp_send_done(c, fd, &iov, 1, r, 0);
	return r;
}

/* sendfile() from a regular file on a connection whose bytes the write
 * path must see (kp_conn_copying): the file's bytes read here and sent
 * through it, the offset (or the file's position) moved by what went, as
 * the kernel's would.  False: not such a file or no memory; the kernel's
 * call then (docs/replay.md "Zero-copy sends on a reused connection"). */
static bool sendfile_as_write(struct kp_conn *c, int fd, int in_fd, off_t *offset, size_t count, ssize_t *ret)
{
	struct stat st;
	if (fstat(in_fd, &st) || !S_ISREG(st.st_mode))
		return false;
	size_t n = count < KP_COPY_MAX ? count : KP_COPY_MAX;
	char *buf = n ? malloc(n) : NULL;
	if (n && !buf)
		return false;
	int saved = errno;
	ssize_t got = !n ? 0 : offset ? pread(in_fd, buf, n, *offset) : KP_REAL(read)(in_fd, buf, n);
	if (got < 0) {
		free(buf);
		errno = saved;
		return false; /* the kernel's own answer */
	}
	ssize_t r = got ? send_as_write(c, fd, buf, (size_t)got) : 0;
	int err = errno;
	free(buf);
	size_t went = r > 0 ? (size_t)r : 0;
	if (offset)
		*offset += (off_t)went;
	else if ((size_t)got > went)
		lseek(in_fd, -(off_t)((size_t)got - went), SEEK_CUR);
	errno = r < 0 ? err : saved;
	*ret = r;
	return true;
}

KP_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	struct kp_conn *c = kp_fd_conn(out_fd);
	if (c == KP_POOLED || kp_fd_conn(in_fd) == KP_POOLED)
		return not_yours();
	if (c && kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return kp_conn_raw(c), KP_REAL(sendfile)(out_fd, in_fd, offset, count);
	ssize_t r;
	if (kp_conn_copying(c) && sendfile_as_write(c, out_fd, in_fd, offset, count, &r))
		return r;
	if (c && !kp_send_bypass(c, out_fd, &count))
		return drain(in_fd, offset, count); /* taken, never sent */
	r = KP_REAL(sendfile)(out_fd, in_fd, offset, count);
	if (c)
		kp_sendfile_done(c, out_fd, r);
	return r;
}

KP_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off_t *offset, size_t count)
	__attribute__((alias("sendfile")));

/* splice()'s flags (SPLICE_F_ALL, the kernel's: any other bit is EINVAL) */
#define SPLICE_FLAGS (SPLICE_F_MOVE | SPLICE_F_NONBLOCK | SPLICE_F_MORE | SPLICE_F_GIFT)
/* The most one splice() from a connection takes (a stream's short count) */
#define SPLICE_CHUNK 8192

/* Would the kernel's splice(fd_in, NULL, pfd, NULL, len, flags) from a
 * socket read it?  Only into a pipe open for writing, not O_APPEND, with
 * no offsets and known flags (fs/splice.c); otherwise it fails (or, len
 * 0, returns 0) before reading: the kernel's own call answers. */
static bool splice_reads(loff_t *off_in, int pfd, loff_t *off_out, size_t len, unsigned int flags)
{
	struct stat st;
	int saved = errno, fl = KP_REAL(fcntl)(pfd, F_GETFL);
	bool ok = !off_in && !off_out && len && !(flags & ~SPLICE_FLAGS) && fl >= 0 &&
		  (fl & O_ACCMODE) != O_RDONLY && !(fl & O_APPEND) && fstat(pfd, &st) == 0 &&
		  S_ISFIFO(st.st_mode);
	errno = saved;
	return ok;
}

/* Room in the pipe, as splice() waits for it before it reads the socket
 * (fs/splice.c wait_for_space): a pipe with no reader is the kernel's
 * EPIPE and SIGPIPE (*kernel: its own call, which reads nothing); a full
 * one EAGAIN when the call may not wait (SPLICE_F_NONBLOCK, or an
 * O_NONBLOCK pipe: do_splice), and then *n is cut to a page, which a pipe
 * with room takes whole.  A call that may wait waits in the write. */
static bool splice_room(int pfd, unsigned int flags, size_t *n, bool *kernel)
{
	struct pollfd p = { .fd = pfd, .events = POLLOUT };
	int saved = errno;
	bool nowait = (flags & SPLICE_F_NONBLOCK) || (KP_REAL(fcntl)(pfd, F_GETFL) & O_NONBLOCK);
	*kernel = false;
	if (KP_REAL(poll)(&p, 1, 0) == 1 && (p.revents & POLLERR)) {
		*kernel = true;
		errno = saved;
		return false;
	}
	errno = saved;
	if (!nowait)
		return true;
	if (!(p.revents & POLLOUT)) {
		errno = EAGAIN;
		return false;
	}
	if (*n > 4096)
		*n = 4096;
	return true;
}

static ssize_t recv_inside(struct kp_conn *c, int fd, void *buf, size_t n, int flags);

/* splice() from a plain connection of ours into a pipe, read as read()
 * reads it (docs/replay.md "splice() from a connection"): the bytes are
 * peeked through the read path (the EOF we owe, a replay, a lost
 * framing's quiet period, the mask and the close line), cut where the
 * framing needs a read to end (kp_conn_peek_take), written to the pipe,
 * and as many as it took are then read for real and framed: three copies
 * of a head's bytes.  A body's are the kernel's splice, zero-copy, framed
 * from the peek's copy. */
static ssize_t splice_read(struct kp_conn *c, int fd, int pfd, size_t len, unsigned int flags,
			   bool *kernel)
{
	char buf[SPLICE_CHUNK], raw[SPLICE_CHUNK];
	size_t n = len < sizeof(buf) ? len : sizeof(buf);
	if (!splice_room(pfd, flags, &n, kernel))
		return -1;
	/* bytes a close line pushed past the last read were framed then */
	bool framed = __atomic_load_n(&c->rx_extra_len, __ATOMIC_ACQUIRE) != 0;
	ssize_t r = recv_inside(c, fd, buf, n, MSG_PEEK);
	if (r <= 0)
		return r;
	bool as_sent = false;
	size_t take = framed ? (size_t)r : kp_conn_peek_take(c, fd, raw, (size_t)r, &as_sent);
	if (as_sent) {
		/* a body's bytes: the kernel's own splice moves them (zero-copy),
		 * the framer gets raw's copy of those it moved */
		ssize_t s = KP_REAL(splice)(fd, NULL, pfd, NULL, take, flags);
		struct iovec iov = { raw, s > 0 ? (size_t)s : 0 };
		if (s > 0)
			kp_recv_done(c, fd, &iov, 1, &s, 0);
		return s;
	}
	ssize_t w = KP_REAL(write)(pfd, buf, take);
	if (w > 0) {
		int saved = errno;
		recv_inside(c, fd, raw, (size_t)w, 0); /* the bytes the pipe took */
		errno = saved;
	}
	return w;
}

/* Has a read on c anything to frame or answer?  A passthrough connection
 * (nothing to frame, no EOF we owe or will owe, no bytes kept) is read by
 * the kernel's own splice, zero-copy (kp_recv_unseen: only the EOF or an
 * error unpools, as the read path does there). */
static bool splice_framed(const struct kp_conn *c)
{
	return __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) != KP_PASSTHROUGH ||
	       __atomic_load_n(&c->lost, __ATOMIC_ACQUIRE) ||
	       __atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE) ||
	       __atomic_load_n(&c->rx_extra_len, __ATOMIC_ACQUIRE);
}

static ssize_t splice_counted(struct kp_conn *c, int fd_in, int fd_out, size_t len, unsigned int flags)
{
	bool kernel = false;
	ssize_t r;
	if (!kp_read_begin(c, fd_in))
		return splice(fd_in, NULL, fd_out, NULL, len, flags); /* fd_in changed hands */
	kp_call_enter();
	r = splice_read(c, fd_in, fd_out, len, flags, &kernel);
	kp_call_leave();
	kp_read_end(c);
	return kernel ? KP_REAL(splice)(fd_in, NULL, fd_out, NULL, len, flags) : r;
}

/* splice() from a pipe into a connection whose bytes the write path must
 * see (kp_conn_copying): the pipe's bytes looked at by tee() into a pipe
 * of ours, sent through the write path, and only what went taken from the
 * program's pipe, as the kernel's splice takes what the socket took.
 * False: not a pipe, offsets, or no memory or pipe; the kernel's call
 * then (docs/replay.md "Zero-copy sends on a reused connection"). */
static bool splice_as_write(struct kp_conn *c, int fd, int pipe_in, size_t len, unsigned int flags,
			    ssize_t *ret)
{
	struct stat st;
	if (fstat(pipe_in, &st) || !S_ISFIFO(st.st_mode))
		return false;
	size_t n = len < KP_COPY_MAX ? len : KP_COPY_MAX;
	int saved = errno, p[2];
	char *buf = n ? malloc(n) : NULL;
	if (!buf || KP_REAL(pipe2)(p, O_CLOEXEC | O_NONBLOCK)) {
		free(buf);
		errno = saved;
		return false;
	}
	/* (our pipe holds 64 KiB: the copy never waits on it) */
	ssize_t got = tee(pipe_in, p[1], n, flags & SPLICE_F_NONBLOCK);
	int err = errno;
	if (got > 0 && KP_REAL(read)(p[0], buf, (size_t)got) != got)
		got = -1, err = EIO; /* (never: tee filled it) */
	KP_REAL(close)(p[0]);
	KP_REAL(close)(p[1]);
	if (got < 0 && err == EIO) {
		free(buf);
		errno = saved;
		return false;
	}
	ssize_t r = got;
	if (got > 0) {
		r = send_as_write(c, fd, buf, (size_t)got);
		err = errno;
		if (r > 0) /* (tee showed them: they are there, unless another reader took them) */
			(void)KP_REAL(read)(pipe_in, buf, (size_t)r);
	}
	free(buf);
	errno = r < 0 ? err : saved;
	*ret = r;
	return true;
}

KP_EXPORT ssize_t splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len,
			 unsigned int flags)
{
	struct kp_conn *in = kp_fd_conn(fd_in), *out = kp_fd_conn(fd_out);
	if (!in && !out)
		return KP_REAL(splice)(fd_in, off_in, fd_out, off_out, len, flags);
	if (in == KP_POOLED || out == KP_POOLED)
		return not_yours();
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return kp_conn_raw(in), kp_conn_raw(out),
		       KP_REAL(splice)(fd_in, off_in, fd_out, off_out, len, flags);
	ssize_t r;
	if (in && !out && !__atomic_load_n(&in->tls, __ATOMIC_ACQUIRE) && splice_framed(in) &&
	    splice_reads(off_in, fd_out, off_out, len, flags))
		return splice_counted(in, fd_in, fd_out, len, flags);
	if (in && !out) {
		/* TLS (kp_recv_unseen: past OpenSSL), passthrough, or a call
		 * the kernel fails before reading */
		char extra[FRM_CLOSE_LINE_LEN];
		size_t n = kp_recv_extra(in, fd_in, extra, len < sizeof(extra) ? len : sizeof(extra), true);
		if (n) {
			r = KP_REAL(write)(fd_out, extra, n);
			if (r > 0)
				kp_recv_extra(in, fd_in, extra, (size_t)r, false);
			return r;
		}
	}
	/* (SPLICE_F_NONBLOCK is the pipe's: a socket's read blocks unless
	 * the socket is O_NONBLOCK, tests/failopen.bats) */
	if (in && kp_recv_intercept(in, fd_in, NULL, 0, 0, &r))
		return r;
	if (!in && !off_in && !off_out && kp_conn_copying(out) && splice_as_write(out, fd_out, fd_in, len, flags, &r))
		return r;
	if (out && !kp_send_bypass(out, fd_out, &len))
		return drain(fd_in, (off_t *)off_in, len); /* taken, never sent (fd_in: a pipe) */
	r = KP_REAL(splice)(fd_in, off_in, fd_out, off_out, len, flags);
	if (in)
		kp_recv_unseen(in, fd_in, r);
	if (out)
		kp_sendfile_done(out, fd_out, r);
	return r;
}

/* The messages from the first vec[i] on whose iovec the kernel would
 * refuse: all n when none. */
static unsigned int mmsg_readable(const struct mmsghdr *vec, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		if (!iov_readable(vec[i].msg_hdr.msg_iov, vec[i].msg_hdr.msg_iovlen))
			return i;
	return n;
}

/* Messages taken, never sent (kp_send_bypass): each counted whole. */
static int sendmmsg_taken(struct kp_conn *c, int fd, struct mmsghdr *vec, unsigned int n, int flags)
{
	unsigned int ok = mmsg_readable(vec, n);
	if (ok < n && !ok) {
		errno = EFAULT; /* the kernel's answer to the first message */
		return -1;
	}
	n = ok; /* the kernel's count: the messages before the one it refuses */
	if (__atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE) && n > 1) {
		/* after the owed EOF, as a closed server's kernel: the first
		 * message taken, the next meets its reset (our FIN is out: the
		 * kernel's EPIPE and SIGPIPE, the program's flags), and the
		 * count says one */
		vec[0].msg_len = (unsigned int)iov_total(vec[0].msg_hdr.msg_iov, (int)vec[0].msg_hdr.msg_iovlen);
		int saved = errno;
		int more = KP_REAL(sendmmsg)(fd, vec + 1, n - 1, flags);
		errno = saved;
		return more > 0 ? 1 + more : 1;
	}
	for (unsigned int i = 0; i < n; i++)
		vec[i].msg_len = (unsigned int)iov_total(vec[i].msg_hdr.msg_iov, (int)vec[i].msg_hdr.msg_iovlen);
	return (int)n;
}

/* sendmmsg() on a connection whose bytes the write path must see
 * (kp_conn_copying): each message as the program's sendmsg, the count as
 * the kernel's (the messages sent, -1 only when the first failed; docs/replay.md
 * "Zero-copy sends on a reused connection"). */
static int sendmmsg_as_writes(struct kp_conn *c, int fd, struct mmsghdr *vec, unsigned int n, int flags)
{
	int saved = errno;
	for (unsigned int i = 0; i < n; i++) {
		ssize_t r = sendmsg_inside(c, fd, &vec[i].msg_hdr, flags);
		if (r < 0) {
			if (!i)
				return -1;
			errno = saved;
			return (int)i;
		}
		vec[i].msg_len = (unsigned int)r;
	}
	return (int)n;
}

static KP_SLOW int sendmmsg_slow(int fd, struct mmsghdr *vec, unsigned int n, int flags)
{
	struct kp_conn *c = kp_fd_conn(fd);
	if (!c && kp_fd_valid(fd) && (kp_fl(fd) & KP_FD_TCP))
		return KP_REAL(sendmmsg)(fd, vec, n, flags); /* a TCP socket passes no fd */
	/* (the kernel takes at most UIO_MAXIOV messages) */
	if (n > 1024)
		n = 1024;
	if (!kp_readable(vec, n * sizeof(*vec)))
		return KP_REAL(sendmmsg)(fd, vec, n, flags); /* EFAULT, nothing sent */
	int saved = errno;
	for (unsigned int i = 0; i < n; i++) {
		const struct msghdr *m = &vec[i].msg_hdr;
		if (!m->msg_controllen)
			continue;
		if (!kp_readable(m->msg_control, m->msg_controllen)) {
			n = i; /* the kernel stops there, or fails at the first */
			if (!n)
				return KP_REAL(sendmmsg)(fd, vec, 1, flags);
			break;
		}
		if (!each_passed_fd(m, kp_reentered() ? kp_conn_raw_fd : kp_conn_passing_fd))
			return (int)not_yours();
	}
	errno = saved;
	if (c == KP_POOLED)
		return (int)not_yours();
	if (c && kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return kp_conn_raw(c), KP_REAL(sendmmsg)(fd, vec, n, flags);
	if (n && kp_conn_copying(c))
		return sendmmsg_as_writes(c, fd, vec, n, flags);
	size_t any = SIZE_MAX;
	if (c && n && !kp_send_bypass(c, fd, &any))
		return sendmmsg_taken(c, fd, vec, n, flags);
	int r = KP_REAL(sendmmsg)(fd, vec, n, flags);
	/* never rewritten (a head may span messages): followed for facts */
	for (int i = 0; c && i < r; i++)
		kp_send_done(c, fd, vec[i].msg_hdr.msg_iov, (int)vec[i].msg_hdr.msg_iovlen,
			     (ssize_t)vec[i].msg_len, flags);
	return r;
}

KP_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int n, int flags)
{
	if (ours_anywhere())
		return sendmmsg_slow(fd, vec, n, flags);
	return KP_REAL(sendmmsg)(fd, vec, n, flags);
}

/* ------------------------------------------------------------ read */

/* The tracked half of a read wrapper: the read is counted on c while it
 * is under way (conn.h kp_read_begin: a close meanwhile does not park the
 * socket, and the read ends with c's framing; docs/hold.md "A read under
 * way when another thread closes"), inside our marks (kp_lock.h: a
 * handler's call meanwhile steps aside).  When fd changed hands before
 * the count, the program's call is made again from the table (again). */
#define KP_READ_COUNTED(c, fd, again, inside)          \
	do {                                             \
		if (__builtin_expect(!kp_read_begin(c, fd), 0)) \
			return again;                    \
		kp_call_enter();                              \
		__typeof__(inside) r_ = (inside);        \
		kp_call_leave();                              \
		kp_read_end(c);                          \
		return r_;                               \
	} while (0)

static ssize_t read_inside(struct kp_conn *c, int fd, void *buf, size_t n)
{
	ssize_t r;
	struct iovec iov = { buf, n };
	if (kp_recv_intercept(c, fd, &iov, 1, 0, &r))
		return r;
	do
		r = KP_REAL(read)(fd, buf, n);
	while (kp_recv_done(c, fd, &iov, 1, &r, 0));
	return r;
}

static KP_SLOW ssize_t read_slow(struct kp_conn *c, int fd, void *buf, size_t n)
{
	if (c == KP_POOLED)
		return not_yours();
	if (!c)
		return KP_REAL(read)(fd, buf, n);
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return kp_conn_raw_eof(c) ? 0 : KP_REAL(read)(fd, buf, n);
	KP_READ_COUNTED(c, fd, read(fd, buf, n), read_inside(c, fd, buf, n));
}

KP_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	KP_FAST(fd, read, fd, buf, n);
}

static ssize_t readv_inside(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt)
{
	ssize_t r;
	if (kp_recv_intercept(c, fd, iov, iovcnt, 0, &r))
		return r;
	do
		r = KP_REAL(readv)(fd, iov, iovcnt);
	while (kp_recv_done(c, fd, iov, iovcnt, &r, 0));
	return r;
}

static KP_SLOW ssize_t readv_slow(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt)
{
	if (c == KP_POOLED)
		return not_yours();
	if (!c || !iov_readable(iov, (size_t)iovcnt))
		return KP_REAL(readv)(fd, iov, iovcnt);
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return kp_conn_raw_eof(c) ? 0 : KP_REAL(readv)(fd, iov, iovcnt);
	KP_READ_COUNTED(c, fd, readv(fd, iov, iovcnt), readv_inside(c, fd, iov, iovcnt));
}

KP_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	KP_FAST(fd, readv, fd, iov, iovcnt);
}

/*
 * recv(MSG_WAITALL) blocked in the kernel waits for n bytes or the
 * server's close; the EOF we owe a program that asked to close is no
 * close the kernel knows of, so it would wait for the server's idle
 * timeout.  Split: read without MSG_WAITALL, each piece framed, until n
 * bytes, the owed EOF, the real EOF, an error or a signal; partial data
 * first, as the kernel answers (docs/replay.md).
 */
/* The bounds of the one kernel call a split MSG_WAITALL read stands for:
 * SO_RCVTIMEO counts over the whole call, and a signal ends it once it
 * has data, even under SA_RESTART.  Each piece is a call of its own (its
 * own timeout, restarted after a handler), so a piece after the first
 * waits here first, in poll (never restarted), for what is left of the
 * call's time; false: the call ends with what it has. */
/* A handler that ran between two pieces, where no call of ours was in
 * the kernel, ended the call alone but went unseen: the next piece's
 * wait went on past it (a keep-alive server sends nothing more).  A
 * handler that ran as a piece returned, likewise.  So a waiting call blocks the
 * thread's signals for its whole length (kp_sigwait_begin), and waits
 * only in kp_sigwait_poll under the program's own mask: every handler
 * runs inside it, which answers EINTR and whether the handlers that ran
 * restart (a ppoll that answers readiness leaves a signal pending,
 * blocked, for the next; a handler that ran before any byte, where the
 * kernel's call restarts, ends the call after the bytes already there).
 * The pieces then never wait in the kernel (MSG_DONTWAIT); the mask is
 * the program's again at the call's end. */
struct waitall {
	bool nowait, bounded, masked, cut;
	uint64_t end_ms;
	struct kp_sigwait sw;
};

static void waitall_begin(const struct kp_conn *c, int fd, int flags, struct waitall *w)
{
	w->nowait = (flags & MSG_DONTWAIT) || __atomic_load_n(&c->nonblock, __ATOMIC_RELAXED);
	w->bounded = w->masked = w->cut = false;
	struct timeval tv;
	socklen_t l = sizeof(tv);
	if (!w->nowait && KP_REAL(getsockopt)(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &l) == 0 &&
	    (tv.tv_sec || tv.tv_usec)) {
		w->bounded = true;
		w->end_ms = kp_now_ms() + (uint64_t)tv.tv_sec * 1000 + ((uint64_t)tv.tv_usec + 999) / 1000;
	}
}

/* Wait for the next piece; false: the call ends, with what it has, or
 * with nothing and errno as the kernel's call would end (EAGAIN at
 * SO_RCVTIMEO's end; EINTR after a handler, but without SO_RCVTIMEO where
 * the handlers that ran restart: the kernel's call would go on, so does
 * ours).
 * true also when the EOF we owe after a quiet time may be due
 * (kp_conn_wait_ms): the caller goes round and its intercept says. */
static bool waitall_more(struct kp_conn *c, int fd, struct waitall *w, size_t got)
{
	if (w->nowait)
		return true; /* the read answers at once */
	int saved = errno, err;
	if (w->cut && got)
		return false;
	if (!w->masked) {
		kp_sigwait_begin(&w->sw);
		w->masked = true;
	}
	for (;;) {
		int ms = -1;
		if (w->bounded) {
			uint64_t now = kp_now_ms();
			if (now >= w->end_ms) {
				err = EAGAIN;
				break;
			}
			ms = (int)(w->end_ms - now);
		}
		int quiet = kp_conn_wait_ms(c);
		bool quiet_first = quiet >= 0 && (ms < 0 || quiet < ms);
		if (quiet_first)
			ms = quiet;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int r = kp_sigwait_poll(&w->sw, &p, 1, ms);
		if (r > 0 || (r == 0 && quiet_first) || (r < 0 && errno != EINTR)) {
			errno = saved; /* the piece's read tells */
			return true;
		}
		if (r == 0)
			continue; /* SO_RCVTIMEO's end: the check above */
		if (got || w->bounded || !w->sw.restarts) {
			err = EINTR;
			break;
		}
		/* restarted; but bytes there already: the kernel's call had
		 * taken them when it saw the signal, and ended with them */
		p.revents = 0;
		if (KP_REAL(poll)(&p, 1, 0) > 0) {
			w->cut = true;
			errno = saved;
			return true;
		}
	}
	errno = got ? saved : err;
	return false;
}

/* A piece's flags: once the signals are blocked, it never waits in the
 * kernel (a wait there could not be cut by the program's handlers): it
 * waits in waitall_more, and a piece that finds nothing goes round. */
static inline int waitall_flags(const struct waitall *w, int flags)
{
	return w->masked ? flags | MSG_DONTWAIT : flags;
}

static inline bool waitall_round(const struct waitall *w, ssize_t r)
{
	return r < 0 && w->masked && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* The program's mask back (a signal held since the last wait runs its
 * handler now, as one that came just after the call would); errno kept. */
static void waitall_end(struct waitall *w)
{
	if (w->masked) {
		kp_sigwait_end(&w->sw);
		w->masked = false;
	}
}

static ssize_t recv_pieces(struct kp_conn *c, int fd, char *buf, size_t n, int flags,
			   struct sockaddr *from, socklen_t *fromlen, struct waitall *w)
{
	size_t got = 0;
	flags &= ~MSG_WAITALL;
	while (got < n) {
		ssize_t r;
		int piece = waitall_flags(w, flags);
		struct iovec iov = { buf + got, n - got };
		if (kp_recv_intercept(c, fd, &iov, 1, piece, &r)) {
			if (r <= 0)
				return got ? (ssize_t)got : r;
			got += (size_t)r; /* a close line's bytes (conn.h rx_extra) */
			continue;
		}
		if (!waitall_more(c, fd, w, got))
			return got ? (ssize_t)got : -1;
		piece = waitall_flags(w, flags);
		do
			r = from ? KP_REAL(recvfrom)(fd, buf + got, n - got, piece, from, fromlen)
				 : KP_REAL(recv)(fd, buf + got, n - got, piece);
		while (kp_recv_done(c, fd, &iov, 1, &r, piece));
		if (waitall_round(w, r))
			continue;
		if (r <= 0)
			return got ? (ssize_t)got : r;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

static ssize_t recv_waitall(struct kp_conn *c, int fd, char *buf, size_t n, int flags,
			    struct sockaddr *from, socklen_t *fromlen)
{
	struct waitall w;
	waitall_begin(c, fd, flags, &w);
	ssize_t r = recv_pieces(c, fd, buf, n, flags, from, fromlen, &w);
	waitall_end(&w);
	return r;
}

/* recv(MSG_PEEK|MSG_WAITALL) waits in the kernel for n bytes queued or
 * the server's close, as recv(MSG_WAITALL) does, and a peek cannot be
 * split into reads.  So it is asked without waiting (our peek: the close
 * line shown, the owed EOF) until it has n bytes, or the queue holds the
 * end of an answer after which we owe the EOF (kp_conn_peek_ends: alone
 * the server's close comes next), or the EOF, an error, the call's bound
 * or a signal.  Meanwhile it waits in waitall_more with SO_RCVLOWAT set
 * one past what is queued (poll honours it), the program's value back
 * after each wait (docs/replay.md "recv(MSG_WAITALL)"). */
typedef ssize_t (*peek_fn)(struct kp_conn *c, int fd, void *arg, int flags);

static bool peek_wait_more(struct kp_conn *c, int fd, struct waitall *w, size_t queued, size_t got)
{
	int old = 1, lowat = queued < INT_MAX ? (int)queued + 1 : INT_MAX, saved = errno;
	socklen_t l = sizeof(old);
	bool set = KP_REAL(getsockopt)(fd, SOL_SOCKET, SO_RCVLOWAT, &old, &l) == 0 &&
		   KP_REAL(setsockopt)(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat)) == 0;
	errno = saved;
	bool more = waitall_more(c, fd, w, got);
	if (set) {
		saved = errno;
		KP_REAL(setsockopt)(fd, SOL_SOCKET, SO_RCVLOWAT, &old, sizeof(old));
		errno = saved;
	}
	return more;
}

static ssize_t peek_waitall(struct kp_conn *c, int fd, size_t n, int flags, peek_fn peek, void *arg)
{
	struct waitall w;
	waitall_begin(c, fd, flags, &w);
	int piece = (flags & ~MSG_WAITALL) | MSG_DONTWAIT;
	ssize_t r;
	for (;;) {
		r = peek(c, fd, arg, piece);
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && !w.nowait) {
			if (!waitall_more(c, fd, &w, 0))
				break;
			continue;
		}
		size_t queued;
		if (r <= 0 || (size_t)r >= n || w.nowait || kp_conn_peek_ends(c, fd, &queued))
			break;
		if (!peek_wait_more(c, fd, &w, queued, (size_t)r)) {
			r = r > 0 ? r : -1;
			break;
		}
	}
	waitall_end(&w);
	return r;
}

/* recv(MSG_TRUNC) on TCP takes up to n bytes and copies none of them:
 * the framer must see them all the same, or the response is given up and
 * the EOF we owe comes only after the quiet time (docs/replay.md).  So
 * they are read into a buffer of ours, framed, and counted; a short count
 * is a stream's right (MSG_WAITALL still waits for n). */
#define TRUNC_CHUNK 4096

static inline bool trunc_read(struct kp_conn *c, int flags)
{
	return __builtin_expect((flags & (MSG_TRUNC | MSG_PEEK)) == MSG_TRUNC, 0) && c != KP_POOLED &&
	       !__atomic_load_n(&c->tls, __ATOMIC_ACQUIRE);
}

static ssize_t recv_inside(struct kp_conn *c, int fd, void *buf, size_t n, int flags);

static ssize_t recv_trunc(struct kp_conn *c, int fd, size_t n, int flags)
{
	char tmp[TRUNC_CHUNK];
	size_t got = 0;
	ssize_t r = 0;
	struct waitall w = { .nowait = true };
	if (flags & MSG_WAITALL)
		waitall_begin(c, fd, flags, &w);
	flags &= ~MSG_TRUNC;
	do {
		if (!waitall_more(c, fd, &w, got)) {
			r = -1;
			break;
		}
		r = recv_inside(c, fd, tmp, n - got < sizeof(tmp) ? n - got : sizeof(tmp),
				waitall_flags(&w, flags & ~MSG_WAITALL));
		if (waitall_round(&w, r))
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	} while ((flags & MSG_WAITALL) && got < n);
	waitall_end(&w);
	return got ? (ssize_t)got : r;
}

struct peek_args {
	void *buf;
	size_t n;
	struct sockaddr *from;
	socklen_t *fromlen;
	struct msghdr *msg;
};

static ssize_t recvfrom_inside(struct kp_conn *c, int fd, void *buf, size_t n, int flags, struct sockaddr *from,
			       socklen_t *fromlen);

static ssize_t peek_recvfrom(struct kp_conn *c, int fd, void *arg, int flags)
{
	struct peek_args *a = arg;
	return recvfrom_inside(c, fd, a->buf, a->n, flags, a->from, a->fromlen);
}

static inline bool peek_waitall_read(const struct kp_conn *c, int flags)
{
	return __builtin_expect((flags & (MSG_WAITALL | MSG_PEEK)) == (MSG_WAITALL | MSG_PEEK), 0) &&
	       c != KP_POOLED && !__atomic_load_n(&c->tls, __ATOMIC_ACQUIRE);
}

static ssize_t recv_inside(struct kp_conn *c, int fd, void *buf, size_t n, int flags)
{
	if (trunc_read(c, flags))
		return recv_trunc(c, fd, n, flags);
	if (peek_waitall_read(c, flags)) {
		struct peek_args a = { .buf = buf, .n = n };
		return peek_waitall(c, fd, n, flags, peek_recvfrom, &a);
	}
	if ((flags & (MSG_WAITALL | MSG_PEEK)) == MSG_WAITALL && c != KP_POOLED &&
	    !__atomic_load_n(&c->tls, __ATOMIC_ACQUIRE))
		return recv_waitall(c, fd, buf, n, flags, NULL, NULL);
	ssize_t r;
	struct iovec iov = { buf, n };
	if (kp_recv_intercept(c, fd, &iov, 1, flags, &r))
		return r;
	do
		r = KP_REAL(recv)(fd, buf, n, flags);
	while (kp_recv_done(c, fd, &iov, 1, &r, flags));
	return r;
}

static KP_SLOW ssize_t recv_slow(struct kp_conn *c, int fd, void *buf, size_t n, int flags)
{
	if (c == KP_POOLED)
		return not_yours();
	if (!c)
		return KP_REAL(recv)(fd, buf, n, flags);
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return kp_conn_raw_eof(c) ? 0 : KP_REAL(recv)(fd, buf, n, flags);
	KP_READ_COUNTED(c, fd, recv(fd, buf, n, flags), recv_inside(c, fd, buf, n, flags));
}

KP_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	KP_FAST(fd, recv, fd, buf, n, flags);
}

static ssize_t recvfrom_inside(struct kp_conn *c, int fd, void *buf, size_t n, int flags, struct sockaddr *from,
			   socklen_t *fromlen)
{
	if (trunc_read(c, flags)) {
		if (fromlen)
			*fromlen = 0; /* TCP names no sender */
		return recv_trunc(c, fd, n, flags);
	}
	if (peek_waitall_read(c, flags)) {
		struct peek_args a = { .buf = buf, .n = n, .from = from, .fromlen = fromlen };
		return peek_waitall(c, fd, n, flags, peek_recvfrom, &a);
	}
	if ((flags & (MSG_WAITALL | MSG_PEEK)) == MSG_WAITALL && c != KP_POOLED &&
	    !__atomic_load_n(&c->tls, __ATOMIC_ACQUIRE))
		return recv_waitall(c, fd, buf, n, flags, from, fromlen);
	ssize_t r;
	struct iovec iov = { buf, n };
	if (kp_recv_intercept(c, fd, &iov, 1, flags, &r))
		return r;
	do
		r = KP_REAL(recvfrom)(fd, buf, n, flags, from, fromlen);
	while (kp_recv_done(c, fd, &iov, 1, &r, flags));
	return r;
}

static KP_SLOW ssize_t recvfrom_slow(struct kp_conn *c, int fd, void *buf, size_t n, int flags, struct sockaddr *from,
			   socklen_t *fromlen)
{
	if (c == KP_POOLED)
		return not_yours();
	if (!c)
		return KP_REAL(recvfrom)(fd, buf, n, flags, from, fromlen);
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return kp_conn_raw_eof(c) ? 0 : KP_REAL(recvfrom)(fd, buf, n, flags, from, fromlen);
	KP_READ_COUNTED(c, fd, recvfrom(fd, buf, n, flags, from, fromlen), recvfrom_inside(c, fd, buf, n, flags, from, fromlen));
}

KP_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *from,
			   socklen_t *fromlen)
{
	KP_FAST(fd, recvfrom, fd, buf, n, flags, from, fromlen);
}

/* recvmsg(MSG_WAITALL): split as recv_waitall, the program's iovec
 * trimmed by what each piece filled; ancillary data only from the first
 * piece that reaches the kernel (a TCP socket's, timestamps say, come
 * with the first bytes).  A piece reads into a window of at most
 * WAITALL_IOV_MAX of the program's iovecs from byte got on: a longer
 * iovec takes more pieces, never the kernel's unsplit wait. */
#define WAITALL_IOV_MAX 64
static ssize_t recvmsg_pieces(struct kp_conn *c, int fd, struct msghdr *msg, int flags, struct waitall *w)
{
	struct iovec iov[WAITALL_IOV_MAX];
	size_t got = 0, control = msg->msg_controllen;
	int out_flags = 0;
	bool first = true;
	flags &= ~MSG_WAITALL;
	for (;;) {
		/* the program's iovec from byte got on */
		size_t skip = got;
		int n = 0;
		for (size_t i = 0; i < msg->msg_iovlen && n < WAITALL_IOV_MAX; i++) {
			size_t l = msg->msg_iov[i].iov_len;
			if (skip >= l) {
				skip -= l;
				continue;
			}
			iov[n].iov_base = (char *)msg->msg_iov[i].iov_base + skip;
			iov[n++].iov_len = l - skip;
			skip = 0;
		}
		if (!n)
			break;
		ssize_t r;
		if (kp_recv_intercept(c, fd, iov, n, waitall_flags(w, flags), &r)) {
			if (r <= 0)
				break;
			got += (size_t)r; /* a close line's bytes (conn.h rx_extra) */
			continue;
		}
		if (!waitall_more(c, fd, w, got)) {
			if (!got) {
				msg->msg_controllen = 0;
				msg->msg_flags = 0;
				return -1;
			}
			break;
		}
		struct msghdr m = *msg;
		m.msg_iov = iov;
		m.msg_iovlen = (size_t)n;
		if (!first) {
			m.msg_control = NULL;
			m.msg_controllen = 0;
		}
		int piece = waitall_flags(w, flags);
		do
			r = KP_REAL(recvmsg)(fd, &m, piece);
		while (kp_recv_done(c, fd, iov, n, &r, piece));
		if (waitall_round(w, r))
			continue;
		if (first && r >= 0) {
			control = m.msg_controllen;
			first = false;
		}
		if (r <= 0) {
			if (!got) {
				msg->msg_controllen = first ? 0 : control;
				msg->msg_flags = m.msg_flags;
				return r;
			}
			break;
		}
		out_flags = m.msg_flags;
		got += (size_t)r;
	}
	msg->msg_controllen = first ? 0 : control;
	msg->msg_flags = out_flags;
	return (ssize_t)got;
}

static ssize_t recvmsg_waitall(struct kp_conn *c, int fd, struct msghdr *msg, int flags)
{
	struct waitall w;
	waitall_begin(c, fd, flags, &w);
	ssize_t r = recvmsg_pieces(c, fd, msg, flags, &w);
	waitall_end(&w);
	return r;
}

static ssize_t recvmsg_inside(struct kp_conn *c, int fd, struct msghdr *msg, int flags);

static ssize_t peek_recvmsg(struct kp_conn *c, int fd, void *arg, int flags)
{
	return recvmsg_inside(c, fd, ((struct peek_args *)arg)->msg, flags);
}

static ssize_t recvmsg_inside(struct kp_conn *c, int fd, struct msghdr *msg, int flags)
{
	if (trunc_read(c, flags) && !msg->msg_controllen) {
		msg->msg_namelen = 0;
		msg->msg_flags = 0;
		return recv_trunc(c, fd, iov_total(msg->msg_iov, (int)msg->msg_iovlen), flags);
	}
	if ((flags & (MSG_WAITALL | MSG_PEEK)) == MSG_WAITALL && !__atomic_load_n(&c->tls, __ATOMIC_ACQUIRE))
		return recvmsg_waitall(c, fd, msg, flags);
	if (peek_waitall_read(c, flags)) {
		struct peek_args a = { .msg = msg };
		return peek_waitall(c, fd, iov_total(msg->msg_iov, (int)msg->msg_iovlen), flags, peek_recvmsg, &a);
	}
	ssize_t r;
	if (kp_recv_intercept(c, fd, msg->msg_iov, (int)msg->msg_iovlen, flags, &r)) {
		msg->msg_flags = 0;
		msg->msg_controllen = 0; /* no ancillary data came with the EOF */
		return r;
	}
	do
		r = KP_REAL(recvmsg)(fd, msg, flags);
	while (kp_recv_done(c, fd, msg->msg_iov, (int)msg->msg_iovlen, &r, flags));
	return r;
}

static KP_SLOW ssize_t recvmsg_slow(struct kp_conn *c, int fd, struct msghdr *msg, int flags)
{
	if (c == KP_POOLED)
		return not_yours();
	if (!c || !msg_readable(msg))
		return KP_REAL(recvmsg)(fd, msg, flags);
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return kp_conn_raw(c), KP_REAL(recvmsg)(fd, msg, flags);
	KP_READ_COUNTED(c, fd, recvmsg(fd, msg, flags), recvmsg_inside(c, fd, msg, flags));
}

/* An fd received in SCM_RIGHTS: a number the kernel just handed out.
 * What we knew of a socket once there (closed past us) is forgotten, and
 * the received socket is never ours (another process may hold it: we
 * know only what we made). */
static bool received_fd(int fd)
{
	if (kp_fd_valid(fd) && (kp_fd_conn(fd) || kp_fl(fd)))
		kp_forget_fd(fd, false);
	return true;
}

static bool received_fd_raw(int fd)
{
	kp_forget_fd_raw(fd);
	return true;
}

static KP_SLOW void recvmsg_passed(struct msghdr *msg)
{
	int saved = errno;
	each_passed_fd(msg, kp_reentered() ? received_fd_raw : received_fd);
	errno = saved;
}

/* The program's msghdr is read only after the call: an answer r >= 0 is
 * the kernel's, which wrote msg_controllen back (so msg is there), or
 * ours on a connection, whose msg recvmsg_slow checked first.  Not a tail
 * jump, so an untracked call costs the load and the test after it too;
 * an fd past the table (or the library off: an empty table) is the
 * kernel's alone. */
KP_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	if (__builtin_expect((unsigned)fd >= kp_fdtab_len, 0))
		return recvmsg_slow(NULL, fd, msg, flags);
	struct kp_conn *c = __atomic_load_n(&kp_fdtab[fd], __ATOMIC_ACQUIRE);
	ssize_t r = __builtin_expect(c != NULL, 0) ? recvmsg_slow(c, fd, msg, flags)
						   : KP_REAL_BOUND(recvmsg)(fd, msg, flags);
	if (__builtin_expect(r >= 0 && msg->msg_controllen, 0))
		recvmsg_passed(msg);
	return r;
}

static int recvmmsg_inside(struct kp_conn *c, int fd, struct mmsghdr *vec, unsigned int n, int flags, struct timespec *ts)
{
	ssize_t r0;
	if (n > 0 && (flags & (MSG_WAITALL | MSG_PEEK)) == MSG_WAITALL &&
	    !__atomic_load_n(&c->tls, __ATOMIC_ACQUIRE)) {
		/* each message's MSG_WAITALL waits in the kernel as recv's
		 * would: its one message split as recvmsg_waitall; MSG_WAITFORONE
		 * is no flag of recvmsg's (a message is all we read anyway) */
		r0 = recvmsg_waitall(c, fd, &vec[0].msg_hdr, flags & ~MSG_WAITFORONE);
		if (r0 < 0)
			return -1;
		vec[0].msg_len = (unsigned)r0;
		if (r0 > 0)
			return 1;
		for (unsigned int i = 1; i < n; i++) { /* at EOF: every message of length 0 */
			vec[i].msg_len = 0;
			vec[i].msg_hdr.msg_flags = 0;
			vec[i].msg_hdr.msg_controllen = 0;
		}
		return (int)n;
	}
	if (n > 0 && kp_recv_intercept(c, fd, vec[0].msg_hdr.msg_iov, (int)vec[0].msg_hdr.msg_iovlen,
				       flags, &r0)) {
		if (r0 > 0) { /* a close line's bytes (conn.h rx_extra) */
			vec[0].msg_len = (unsigned)r0;
			vec[0].msg_hdr.msg_flags = 0;
			vec[0].msg_hdr.msg_controllen = 0;
			return 1;
		}
		/* what the kernel reports at a TCP EOF: every message of
		 * length 0 */
		for (unsigned int i = 0; i < n; i++) {
			vec[i].msg_len = 0;
			vec[i].msg_hdr.msg_flags = 0;
			vec[i].msg_hdr.msg_controllen = 0;
		}
		return (int)n;
	}
	int r;
	bool again;
	do {
		/* one message at a time: a second one would wait in the kernel
		 * for an end the server never sends (the EOF we owe comes
		 * from us), as recv(MSG_WAITALL) would (recv_waitall) */
		r = KP_REAL(recvmmsg)(fd, vec, n > 1 ? 1 : n, flags, ts);
		int saved = errno;
		again = false;
		/* a replay can only come with the first message */
		for (int i = 0; i < r && !again; i++) {
			ssize_t len = (ssize_t)vec[i].msg_len;
			again = kp_recv_done(c, fd, vec[i].msg_hdr.msg_iov,
					     (int)vec[i].msg_hdr.msg_iovlen, &len, flags);
			vec[i].msg_len = (unsigned)len;
		}
		if (r < 0) {
			ssize_t neg = -1;
			again = kp_recv_done(c, fd, NULL, 0, &neg, flags);
		}
		errno = saved;
	} while (again);
	return r;
}

static KP_SLOW int recvmmsg_slow(struct kp_conn *c, int fd, struct mmsghdr *vec, unsigned int n, int flags, struct timespec *ts)
{
	if (c == KP_POOLED)
		return (int)not_yours();
	/* (the kernel takes at most UIO_MAXIOV messages) */
	if (!c || !kp_readable(vec, (n < 1024 ? n : 1024) * sizeof(*vec)) ||
	    (n && !iov_readable(vec[0].msg_hdr.msg_iov, vec[0].msg_hdr.msg_iovlen)))
		return KP_REAL(recvmmsg)(fd, vec, n, flags, ts);
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return kp_conn_raw(c), KP_REAL(recvmmsg)(fd, vec, n, flags, ts);
	KP_READ_COUNTED(c, fd, recvmmsg(fd, vec, n, flags, ts), recvmmsg_inside(c, fd, vec, n, flags, ts));
}

KP_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int n, int flags, struct timespec *ts)
{
	KP_FAST(fd, recvmmsg, fd, vec, n, flags, ts);
}

/* preadv2/pwritev2 with offset -1 are readv/writev on a socket (any other
 * offset is ESPIPE), and so are the flags a socket ignores (RWF_HIPRI,
 * RWF_DSYNC, RWF_SYNC, RWF_APPEND: the kernel drops them for a socket's
 * read_iter/write_iter): on a connection of ours they take our read and
 * write paths, so the owed EOF and the writes after it are the same
 * (docs/replay.md).  RWF_NOWAIT (a non-blocking call) is recvmsg/sendmsg
 * with MSG_DONTWAIT, as the socket reads it; unknown bits go to the kernel
 * (EOPNOTSUPP): a read is then one we cannot follow (kp_recv_unseen), a
 * write gets kp_send_bypass's verdict. */
#define RWF_SOCKET_IGNORES (RWF_HIPRI | RWF_DSYNC | RWF_SYNC | RWF_APPEND)

KP_EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int iovcnt, off_t off, int flags)
{
	struct kp_conn *c = kp_fd_conn(fd);
	if (__builtin_expect(c != NULL, 0) && off == -1 && !(flags & ~RWF_SOCKET_IGNORES))
		return readv_slow(c, fd, iov, iovcnt);
	if (c == KP_POOLED)
		return not_yours();
	if (c && off == -1 && !(flags & ~(RWF_SOCKET_IGNORES | RWF_NOWAIT)) && iovcnt >= 0) {
		/* sock_read_iter reads an RWF_NOWAIT call as MSG_DONTWAIT */
		struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
		return recvmsg_slow(c, fd, &m, MSG_DONTWAIT);
	}
	ssize_t r = KP_REAL(preadv2)(fd, iov, iovcnt, off, flags);
	if (c && !kp_reentered())
		kp_recv_unseen(c, fd, r); /* a read we cannot follow: never replayed after it */
	return r;
}

KP_EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int iovcnt, off_t off, int flags)
{
	struct kp_conn *c = kp_fd_conn(fd);
	if (__builtin_expect(c != NULL, 0) && off == -1 && !(flags & ~RWF_SOCKET_IGNORES))
		return writev_slow(c, fd, iov, iovcnt);
	if (c == KP_POOLED)
		return not_yours();
	if (c && off == -1 && !(flags & ~(RWF_SOCKET_IGNORES | RWF_NOWAIT)) && iovcnt >= 0) {
		/* sock_write_iter: MSG_DONTWAIT, and SIGPIPE as any write */
		struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
		return sendmsg_slow(c, fd, &m, MSG_DONTWAIT);
	}
	size_t len = iov_total(iov, iovcnt);
	if (c && off == -1 && !kp_reentered() && !kp_send_bypass(c, fd, &len))
		return (ssize_t)len; /* taken, never sent (kp_send_bypass) */
	return KP_REAL(pwritev2)(fd, iov, iovcnt, off, flags);
}

/* POSIX AIO: glibc's helper thread reads and writes with libc's internal
 * calls, past every wrapper; on a connection of ours the kernel is set up
 * first to answer them as the program alone would see them
 * (kp_aio_before, docs/replay.md "Nothing added").  Not a hot path: an
 * fd that is not ours costs a table load. */
static void aio_check(const struct aiocb *cb, bool write)
{
	if (!cb)
		return;
	struct kp_conn *c = kp_fd_conn(cb->aio_fildes);
	if (c && c != KP_POOLED)
		kp_aio_before(c, cb->aio_fildes, write);
}

static int aio_rw(struct aiocb *cb, bool write)
{
	aio_check(cb, write);
	return write ? KP_REAL(aio_write)(cb) : KP_REAL(aio_read)(cb);
}

static int lio(int mode, struct aiocb *const list[], int n, struct sigevent *sig)
{
	for (int i = 0; list && i < n; i++)
		if (list[i] && list[i]->aio_lio_opcode != LIO_NOP)
			aio_check(list[i], list[i]->aio_lio_opcode == LIO_WRITE);
	return KP_REAL(lio_listio)(mode, list, n, sig);
}

KP_EXPORT int aio_read(struct aiocb *cb)
{
	return aio_rw(cb, false);
}

KP_EXPORT int aio_write(struct aiocb *cb)
{
	return aio_rw(cb, true);
}

KP_EXPORT int lio_listio(int mode, struct aiocb *const list[], int n, struct sigevent *sig)
{
	return lio(mode, list, n, sig);
}

#if __WORDSIZE == 64 /* the LFS names: the same structure, the same calls */
KP_EXPORT int aio_read64(struct aiocb64 *cb)
{
	return aio_rw((struct aiocb *)cb, false);
}

KP_EXPORT int aio_write64(struct aiocb64 *cb)
{
	return aio_rw((struct aiocb *)cb, true);
}

KP_EXPORT int lio_listio64(int mode, struct aiocb64 *const list[], int n, struct sigevent *sig)
{
	return lio(mode, (struct aiocb *const *)list, n, sig);
}
#endif

/* _FORTIFY_SOURCE versions: same checks as glibc, then our logic. */
extern void __chk_fail(void) __attribute__((noreturn));

KP_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		__chk_fail();
	return read(fd, buf, n);
}

KP_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
	if (n > buflen)
		__chk_fail();
	return recv(fd, buf, n, flags);
}

KP_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
				 struct sockaddr *from, socklen_t *fromlen)
{
	if (n > buflen)
		__chk_fail();
	return recvfrom(fd, buf, n, flags, from, fromlen);
}

/* glibc's second names (hooks_conn.c, the names a program binds): __read,
 * and the LFS names preadv2 and pwritev2 take under _FILE_OFFSET_BITS=64
 * (off_t is off64_t here) */
KP_ALIAS(__read, read);
KP_ALIAS(preadv64v2, preadv2);
KP_ALIAS(pwritev64v2, pwritev2);
