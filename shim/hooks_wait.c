/*
 * hooks_wait.c - readiness: poll, ppoll, select, pselect, the fortified
 * __poll_chk/__ppoll_chk, and epoll_ctl/epoll_wait/epoll_pwait/epoll_pwait2.  A connection that owes the program its EOF has
 * nothing left in the kernel to wake anyone up, so these report it
 * readable themselves; everything else is the kernel's answer.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "conn.h"
#include "fdtable.h"
#include "real.h"
#include "watch.h"

#define KP_EXPORT __attribute__((visibility("default")))

/* glibc declares poll()'s array write-only (access attribute): we read the
 * events the program asked for, which it did initialise. */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define POLL_READ (POLLIN | POLLRDNORM | POLLRDHUP)

static bool owes(int fd)
{
	struct kp_conn *c = kp_fd_conn(fd);
	return c && kp_conn_wait_ms(c) == 0;
}

/* The soonest our own readiness decision falls due for any fd polled for
 * reading: 0 now, n ms, or -1 never (then the kernel alone decides). */
static int poll_due_ms(const struct pollfd *fds, nfds_t n)
{
	int due = -1;
	for (nfds_t i = 0; i < n; i++) {
		struct kp_conn *c = kp_fd_conn(fds[i].fd);
		if (!c || !(fds[i].events & POLL_READ))
			continue;
		int ms = kp_conn_wait_ms(c);
		if (ms >= 0 && (due < 0 || ms < due))
			due = ms;
	}
	return due;
}

/* The kernel's answer right now (timeout 0) plus our EOFs. */
static int poll_owed(struct pollfd *fds, nfds_t n)
{
	int r = KP_REAL(poll)(fds, n, 0);
	if (r < 0)
		return r;
	r = 0;
	for (nfds_t i = 0; i < n; i++) {
		if ((fds[i].events & POLL_READ) && owes(fds[i].fd))
			fds[i].revents |= (short)((fds[i].events & (POLLIN | POLLRDNORM | POLLRDHUP)));
		if (fds[i].revents)
			r++;
	}
	return r;
}

/* A timeout in whole milliseconds, rounded up; -1 for none (NULL). */
static int ms_ceil(time_t sec, long nsec)
{
	if (sec > 1000000)
		return 1000000000;
	return (int)(sec * 1000 + (nsec + 999999) / 1000000);
}

static int ms_of(const struct timespec *ts)
{
	return ts ? ms_ceil(ts->tv_sec, ts->tv_nsec) : -1;
}

/* poll/ppoll with our readiness folded in: when one of our decisions falls
 * due before the program's timeout, wait only that long and look again. */
static int poll_common(struct pollfd *fds, nfds_t n, const struct timespec *ts, int timeout,
		       const sigset_t *mask, bool is_ppoll)
{
	struct timespec left;
	for (;;) {
		int due = poll_due_ms(fds, n);
		if (due == 0)
			return poll_owed(fds, n);
		if (due < 0 || (timeout >= 0 && timeout <= due))
			return is_ppoll ? KP_REAL(ppoll)(fds, n, ts, mask) : KP_REAL(poll)(fds, n, timeout);
		int r;
		if (is_ppoll) {
			struct timespec t = { due / 1000, (long)(due % 1000) * 1000000 };
			r = KP_REAL(ppoll)(fds, n, &t, mask);
		} else {
			r = KP_REAL(poll)(fds, n, due);
		}
		if (r != 0)
			return r;
		if (timeout > 0)
			timeout -= due;
		if (ts) {
			left.tv_sec = timeout / 1000;
			left.tv_nsec = (long)(timeout % 1000) * 1000000;
			ts = &left;
		}
	}
}

KP_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	if (!kp_fdtab_len)
		return KP_REAL(poll)(fds, n, timeout);
	return poll_common(fds, n, NULL, timeout, NULL, false);
}

KP_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	if (!kp_fdtab_len)
		return KP_REAL(ppoll)(fds, n, ts, mask);
	return poll_common(fds, n, ts, ms_of(ts), mask, true);
}

KP_EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	extern void __chk_fail(void) __attribute__((noreturn));
	if (fdslen / sizeof(*fds) < n)
		__chk_fail();
	return poll(fds, n, timeout);
}

KP_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts,
			  const sigset_t *mask, size_t fdslen)
{
	extern void __chk_fail(void) __attribute__((noreturn));
	if (fdslen / sizeof(*fds) < n)
		__chk_fail();
	return ppoll(fds, n, ts, mask);
}

/* Like poll_due_ms, over select()'s read set. */
static int select_due_ms(int nfds, const fd_set *rd)
{
	int due = -1;
	if (!rd)
		return -1;
	if (nfds > FD_SETSIZE)
		nfds = FD_SETSIZE;
	for (int fd = 0; fd < nfds; fd++) {
		if (!FD_ISSET(fd, rd))
			continue;
		struct kp_conn *c = kp_fd_conn(fd);
		int ms = c ? kp_conn_wait_ms(c) : -1;
		if (ms >= 0 && (due < 0 || ms < due))
			due = ms;
	}
	return due;
}

static int select_owed(int nfds, fd_set *rd, fd_set *wr, fd_set *ex)
{
	fd_set want = *rd;
	struct timeval zero = { 0, 0 };
	int r = KP_REAL(select)(nfds, rd, wr, ex, &zero);
	if (r < 0)
		return r;
	if (nfds > FD_SETSIZE)
		nfds = FD_SETSIZE;
	r = 0;
	for (int fd = 0; fd < nfds; fd++) {
		if (FD_ISSET(fd, &want) && owes(fd))
			FD_SET(fd, rd);
		r += FD_ISSET(fd, rd) + (wr && FD_ISSET(fd, wr)) + (ex && FD_ISSET(fd, ex));
	}
	return r;
}

/* select/pselect with our readiness folded in, as poll_common does. */
static int select_common(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, int timeout,
			 const sigset_t *mask, bool is_pselect, struct timeval *tv,
			 const struct timespec *ts)
{
	fd_set rd0, wr0, ex0;
	if (rd)
		rd0 = *rd;
	if (wr)
		wr0 = *wr;
	if (ex)
		ex0 = *ex;
	for (;;) {
		int due = select_due_ms(nfds, rd);
		if (due == 0)
			return select_owed(nfds, rd, wr, ex);
		if (due < 0 || (timeout >= 0 && timeout <= due)) {
			if (is_pselect) {
				struct timespec left = { timeout / 1000, (long)(timeout % 1000) * 1000000 };
				return KP_REAL(pselect)(nfds, rd, wr, ex, ts ? &left : NULL, mask);
			}
			if (tv && timeout >= 0) {
				tv->tv_sec = timeout / 1000;
				tv->tv_usec = (timeout % 1000) * 1000;
			}
			return KP_REAL(select)(nfds, rd, wr, ex, tv);
		}
		int r;
		if (is_pselect) {
			struct timespec t = { due / 1000, (long)(due % 1000) * 1000000 };
			r = KP_REAL(pselect)(nfds, rd, wr, ex, &t, mask);
		} else {
			struct timeval t = { due / 1000, (due % 1000) * 1000 };
			r = KP_REAL(select)(nfds, rd, wr, ex, &t);
		}
		if (r != 0)
			return r;
		if (timeout > 0)
			timeout -= due;
		/* select cleared the sets: ask the same question again */
		if (rd)
			*rd = rd0;
		if (wr)
			*wr = wr0;
		if (ex)
			*ex = ex0;
	}
}

static int ms_of_tv(const struct timeval *tv)
{
	return tv ? ms_ceil(tv->tv_sec, (long)tv->tv_usec * 1000) : -1;
}

KP_EXPORT int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
	if (!kp_fdtab_len || select_due_ms(nfds, rd) < 0)
		return KP_REAL(select)(nfds, rd, wr, ex, tv);
	return select_common(nfds, rd, wr, ex, ms_of_tv(tv), NULL, false, tv, NULL);
}

KP_EXPORT int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *ts,
		      const sigset_t *mask)
{
	if (!kp_fdtab_len || select_due_ms(nfds, rd) < 0)
		return KP_REAL(pselect)(nfds, rd, wr, ex, ts, mask);
	return select_common(nfds, rd, wr, ex, ms_of(ts), mask, true, NULL, ts);
}

/* ------------------------------------------------------------ epoll */

KP_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	int r = KP_REAL(epoll_ctl)(epfd, op, fd, ev);
	if (r < 0 || !kp_fd_valid(fd))
		return r;
	struct kp_conn *c = kp_fd_conn(fd);
	uint8_t fl = kp_fl(fd);
	/* ours, or a TCP socket not yet connected: it may become ours */
	if ((c && c != KP_POOLED) || ((fl & KP_FD_TCP) && !(fl & KP_FD_CONNECTED))) {
		int saved = errno;
		kp_watch_ctl(epfd, op, fd, ev);
		errno = saved;
	}
	return r;
}

enum ep_kind { EP_WAIT, EP_PWAIT, EP_PWAIT2 };

static int ep_real(enum ep_kind kind, int epfd, struct epoll_event *evs, int max, int ms,
		   const sigset_t *mask)
{
	if (kind == EP_WAIT)
		return KP_REAL(epoll_wait)(epfd, evs, max, ms);
	if (kind == EP_PWAIT)
		return KP_REAL(epoll_pwait)(epfd, evs, max, ms, mask);
	struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000 };
	return KP_REAL(epoll_pwait2)(epfd, evs, max, ms < 0 ? NULL : &t, mask);
}

/* epoll_wait and friends with our readiness folded in (watch.c): when one
 * of our decisions falls due before the program's timeout, wait only that
 * long and look again.  timeout: ms, -1 for none. */
static int ep_common(enum ep_kind kind, int epfd, struct epoll_event *evs, int max, int timeout,
		     const sigset_t *mask)
{
	if (max <= 0)
		return ep_real(kind, epfd, evs, max, timeout, mask);
	for (;;) {
		int due;
		kp_watch_fold(epfd, NULL, 0, 0, &due);
		int t = timeout;
		if (due >= 0 && (t < 0 || due < t))
			t = due;
		int n = ep_real(kind, epfd, evs, max, t, mask);
		if (n < 0)
			return n;
		int saved = errno;
		n = kp_watch_fold(epfd, evs, n, max, &due);
		errno = saved;
		if (n > 0 || t == timeout)
			return n;
		if (timeout > 0)
			timeout -= t;
	}
}

KP_EXPORT int epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
	if (!__atomic_load_n(&kp_watch_count, __ATOMIC_ACQUIRE))
		return KP_REAL(epoll_wait)(epfd, evs, max, timeout);
	return ep_common(EP_WAIT, epfd, evs, max, timeout, NULL);
}

KP_EXPORT int epoll_pwait(int epfd, struct epoll_event *evs, int max, int timeout,
			  const sigset_t *mask)
{
	if (!__atomic_load_n(&kp_watch_count, __ATOMIC_ACQUIRE))
		return KP_REAL(epoll_pwait)(epfd, evs, max, timeout, mask);
	return ep_common(EP_PWAIT, epfd, evs, max, timeout, mask);
}

KP_EXPORT int epoll_pwait2(int epfd, struct epoll_event *evs, int max, const struct timespec *ts,
			   const sigset_t *mask)
{
	kp_real_bind();
	if (!kp_real.epoll_pwait2) { /* an older libc: as it would say */
		errno = ENOSYS;
		return -1;
	}
	if (!__atomic_load_n(&kp_watch_count, __ATOMIC_ACQUIRE))
		return kp_real.epoll_pwait2(epfd, evs, max, ts, mask);
	return ep_common(EP_PWAIT2, epfd, evs, max, ms_of(ts), mask);
}
