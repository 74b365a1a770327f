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
#include "fdlimit.h"
#include "fdtable.h"
#include "alias.h"
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
		kp_conn_waits(c, fds[i].fd);
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
			fds[i].revents |= (short)((fds[i].events & (POLLIN | POLLRDNORM | POLLRDHUP)) &
						  ~(kp_conn_data_only(fds[i].fd) ? POLLRDHUP : 0));
		if (fds[i].revents)
			r++;
	}
	return r;
}

/* A timeout in whole milliseconds, rounded up; -1 for none (NULL).
 * Capped at MS_CAP_S seconds, where an int of milliseconds ends: a longer
 * ppoll or epoll_pwait2 is waited in pieces (in_pieces). */
#define MS_CAP_S 1000000
static int ms_ceil(time_t sec, long nsec)
{
	if (sec > MS_CAP_S)
		return MS_CAP_S * 1000;
	return (int)(sec * 1000 + (nsec + 999999) / 1000000);
}

static int ms_of(const struct timespec *ts)
{
	return ts ? ms_ceil(ts->tv_sec, ts->tv_nsec) : -1;
}

/* A timeout the kernel refuses (EINVAL) before it looks at any fd: the
 * call is then the kernel's alone, whatever we owe (an owed EOF reported
 * where alone the call failed; a negative one read as no timeout).  For
 * ppoll, pselect and epoll_pwait2: poll_select_set_timeout's test; for
 * select's timeval, the same after the kernel folds whole seconds out of
 * tv_usec (kern_select). */
static bool ts_refused(const struct timespec *ts)
{
	return ts && (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000);
}

static bool tv_refused(const struct timeval *tv)
{
	return tv && (tv->tv_sec + tv->tv_usec / 1000000 < 0 || tv->tv_usec % 1000000 < 0);
}

/* A reused connection that may still be replayed: its readiness is not
 * yet the program's (kp_conn_ready_settle).  A load and a compare. */
static struct kp_conn *unsettled(int fd)
{
	struct kp_conn *c = kp_fd_conn(fd);
	return c && c != KP_POOLED && __atomic_load_n(&c->first, __ATOMIC_RELAXED) != KP_FIRST_DONE
		       ? c
		       : NULL;
}

/* Settle c's readiness (kp_conn_ready_settle where dead was reported, else
 * kp_conn_read_settle); a TLS state from another process held until the
 * program's SSL_connect is kp_conn_held_settle's.  True: ask again. */
static bool settle(struct kp_conn *c, int fd, bool dead)
{
	if (__builtin_expect(__atomic_load_n(&c->tls_held, __ATOMIC_RELAXED) != NULL, 0))
		return kp_conn_held_settle(c, fd);
	return dead ? kp_conn_ready_settle(c, fd) : kp_conn_read_settle(c, fd);
}

/* What a dead connection reports and a program may give up on.  A FIN
 * alone reports POLLIN: the program reads, and the read replays; so only
 * these cost the peek of kp_conn_ready_settle. */
#define POLL_DEAD (POLLERR | POLLHUP | POLLRDHUP)
#define EPOLL_DEAD (EPOLLERR | EPOLLHUP | EPOLLRDHUP)

/* After the kernel answered r > 0: every fd reported dead whose connection
 * was replayed (or replaced) just now is asked again, alone, without
 * waiting.  Returns the new count. */
static int poll_settle(struct pollfd *fds, nfds_t n, int r)
{
	for (nfds_t i = 0; i < n; i++) {
		struct kp_conn *c;
		if (!(fds[i].revents & (POLL_DEAD | POLLIN)) || !(c = unsettled(fds[i].fd)))
			continue;
		/* readable alone: a FIN under its first request reads so, and
		 * the program's read would replay it and wait for the fresh
		 * one's answer past its own timeout (docs/replay.md
		 * "Readable, and the FIN") */
		if (!settle(c, fds[i].fd, fds[i].revents & POLL_DEAD))
			continue;
		struct pollfd one = { .fd = fds[i].fd, .events = fds[i].events };
		if (KP_REAL(poll)(&one, 1, 0) < 0)
			one.revents = 0;
		r -= !one.revents;
		fds[i].revents = one.revents;
	}
	return r;
}

static int poll_wait(struct pollfd *fds, nfds_t n, const struct timespec *ts, int timeout,
		     const sigset_t *mask, bool is_ppoll);

/* After a wait that began at start, what is left of timeout ms (negative:
 * none): false when it is spent, else timeout and *left updated. */
static bool timeout_left(uint64_t start, int *timeout, struct timespec *left)
{
	if (*timeout >= 0) {
		uint64_t spent = kp_now_ms() - start;
		if (spent >= (uint64_t)*timeout)
			return false;
		*timeout -= (int)spent;
	}
	left->tv_sec = *timeout / 1000;
	left->tv_nsec = (long)(*timeout % 1000) * 1000000;
	return true;
}

/* What is left of timeout ms (negative: none) after a wait that began at
 * start: the bound of a replay made while settling (kp_wait_left_ms). */
static int left_of(int timeout, uint64_t start)
{
	if (timeout < 0)
		return -1;
	uint64_t spent = kp_now_ms() - start;
	return spent >= (uint64_t)timeout ? 0 : timeout - (int)spent;
}

/* poll/ppoll: the kernel's answer with our readiness folded in, and with
 * no report of a connection replayed meanwhile: if nothing else is left
 * to report, wait on for the rest of the program's timeout. */
static KP_SLOW int poll_common(struct pollfd *fds, nfds_t n, const struct timespec *ts, int timeout,
				const sigset_t *mask, bool is_ppoll)
{
	struct timespec left;
	for (;;) {
		uint64_t start = kp_now_ms();
		int r = poll_wait(fds, n, ts, timeout, mask, is_ppoll);
		if (r <= 0)
			return r;
		kp_wait_left_ms = left_of(timeout, start);
		r = poll_settle(fds, n, r);
		kp_wait_left_ms = KP_NOT_WAITING;
		if (r > 0)
			return r;
		if (!timeout_left(start, &timeout, &left))
			return 0;
		if (ts)
			ts = &left;
	}
}

/* poll/ppoll with our readiness folded in: when one of our decisions falls
 * due before the program's timeout, wait only that long and look again. */
static int poll_wait(struct pollfd *fds, nfds_t n, const struct timespec *ts, int timeout,
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

/* With no connection among the program's fds (kp_fd_live), each of
 * these is a load, a test and a tail jump; the rest out of line. */
static inline bool wait_untouched(void)
{
	return !kp_fd_any_live();
}

/* The program's array, which we read before the kernel does: false where
 * the kernel would refuse it (EFAULT; or EINVAL, past any fd limit): the
 * call is then the kernel's alone (docs/limits.md "A pointer the kernel
 * refuses"). */
static bool fds_readable(const struct pollfd *fds, nfds_t n)
{
	return n <= (1u << 20) && kp_readable(fds, n * sizeof(*fds));
}

static KP_SLOW int poll_slow(struct pollfd *fds, nfds_t n, int timeout)
{
	if (!fds_readable(fds, n))
		return KP_REAL(poll)(fds, n, timeout);
	return poll_common(fds, n, NULL, timeout, NULL, false);
}

KP_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	if (wait_untouched())
		return KP_REAL(poll)(fds, n, timeout);
	return poll_slow(fds, n, timeout);
}

/* A wait whose timeout (valid, not NULL) passes ms_ceil's cap: waited in
 * pieces of the cap, each the program's call with that timeout, until one
 * ends before its timeout or the whole is spent (a piece that returns 0
 * waited its whole timeout).  The cap is 11.6 days: no program sees a
 * piece end. */
struct piece_wait {
	int (*wait)(const struct piece_wait *w, const struct timespec *piece);
	struct pollfd *fds;
	nfds_t n;
	int epfd, max;
	struct epoll_event *evs;
	const sigset_t *mask;
};

static int in_pieces(const struct piece_wait *w, const struct timespec *ts)
{
	struct timespec left = *ts;
	for (;;) {
		bool last = left.tv_sec <= MS_CAP_S;
		struct timespec piece = last ? left : (struct timespec){ MS_CAP_S, 0 };
		int r = w->wait(w, &piece);
		if (r != 0 || last)
			return r;
		left.tv_sec -= MS_CAP_S;
	}
}

static int ppoll_piece(const struct piece_wait *w, const struct timespec *piece)
{
	return poll_common(w->fds, w->n, piece, ms_of(piece), w->mask, true);
}

static KP_SLOW int ppoll_slow(struct pollfd *fds, nfds_t n, const struct timespec *ts,
			      const sigset_t *mask)
{
	if (!fds_readable(fds, n) || (ts && !kp_readable(ts, sizeof(*ts))) || ts_refused(ts))
		return KP_REAL(ppoll)(fds, n, ts, mask);
	if (ts && ts->tv_sec > MS_CAP_S) {
		struct piece_wait w = { .wait = ppoll_piece, .fds = fds, .n = n, .mask = mask };
		return in_pieces(&w, ts);
	}
	return poll_common(fds, n, ts, ms_of(ts), mask, true);
}

KP_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	if (wait_untouched())
		return KP_REAL(ppoll)(fds, n, ts, mask);
	return ppoll_slow(fds, n, ts, mask);
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

/* select()'s sets are the program's, as long as nfds says: a program may
 * size them to nfds (smaller than an fd_set) or past FD_SETSIZE (larger).
 * So they are read only up to nfds and copied by that length, on the
 * stack (select is async-signal-safe); past SELECT_NFDS_MAX, the kernel's
 * call. */
#define SELECT_NFDS_MAX 65536
static size_t set_bytes(int nfds)
{
	return ((size_t)nfds + 8 * sizeof(unsigned long) - 1) / (8 * sizeof(unsigned long)) *
	       sizeof(unsigned long);
}
#define SET_WORDS(nfds) (set_bytes(nfds) / sizeof(unsigned long) + 1)

/* Like poll_due_ms, over select()'s read set. */
static int select_due_ms(int nfds, const fd_set *rd)
{
	int due = -1;
	if (!rd)
		return -1;
	for (int fd = 0; fd < nfds; fd++) {
		if (!FD_ISSET(fd, rd))
			continue;
		struct kp_conn *c = kp_fd_conn(fd);
		if (c)
			kp_conn_waits(c, fd);
		int ms = c ? kp_conn_wait_ms(c) : -1;
		if (ms >= 0 && (due < 0 || ms < due))
			due = ms;
	}
	return due;
}

/* Is any fd in select()'s sets a connection that may still be replayed? */
static bool select_unsettled(int nfds, const fd_set *rd, const fd_set *wr, const fd_set *ex)
{
	for (int fd = 0; fd < nfds; fd++)
		if (((rd && FD_ISSET(fd, rd)) || (wr && FD_ISSET(fd, wr)) || (ex && FD_ISSET(fd, ex))) &&
		    unsettled(fd))
			return true;
	return false;
}

/* As poll_settle, over select()'s sets; rd0, wr0, ex0: what the program
 * asked.  Returns the new count.  An fd reported writable or exceptional
 * is settled as poll's dead ones; one reported readable alone only where
 * TCP's state says the FIN came (kp_conn_read_settle: one TCP_INFO), else
 * a blocking read after it would replay and wait for the fresh one's
 * answer past the program's timeout. */
static int select_settle(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const fd_set *rd0,
			 const fd_set *wr0, const fd_set *ex0, int r)
{
	for (int fd = 0; fd < nfds; fd++) {
		bool in_rd = rd && FD_ISSET(fd, rd), in_wr = wr && FD_ISSET(fd, wr),
		     in_ex = ex && FD_ISSET(fd, ex);
		struct kp_conn *c;
		if (!(in_rd || in_wr || in_ex) || !(c = unsettled(fd)) ||
		    !settle(c, fd, in_wr || in_ex))
			continue;
		struct pollfd one = { .fd = fd };
		if (rd && FD_ISSET(fd, rd0))
			one.events |= POLLIN;
		if (wr && FD_ISSET(fd, wr0))
			one.events |= POLLOUT;
		if (ex && FD_ISSET(fd, ex0))
			one.events |= POLLPRI;
		if (KP_REAL(poll)(&one, 1, 0) < 0)
			one.revents = 0;
		/* select's own mapping of poll bits (fs/select.c) */
		bool now_rd = (one.events & POLLIN) && (one.revents & (POLLIN | POLLHUP | POLLERR));
		bool now_wr = (one.events & POLLOUT) && (one.revents & (POLLOUT | POLLERR));
		bool now_ex = (one.events & POLLPRI) && (one.revents & POLLPRI);
		r += (now_rd - in_rd) + (now_wr - in_wr) + (now_ex - in_ex);
		if (rd && !now_rd)
			FD_CLR(fd, rd);
		if (wr && !now_wr)
			FD_CLR(fd, wr);
		if (ex && !now_ex)
			FD_CLR(fd, ex);
	}
	return r;
}

static int select_owed(int nfds, fd_set *rd, fd_set *wr, fd_set *ex)
{
	unsigned long want_words[SET_WORDS(nfds)];
	fd_set *want = (fd_set *)want_words;
	memcpy(want, rd, set_bytes(nfds));
	struct timeval zero = { 0, 0 };
	int r = KP_REAL(select)(nfds, rd, wr, ex, &zero);
	if (r < 0)
		return r;
	r = 0;
	for (int fd = 0; fd < nfds; fd++) {
		if (FD_ISSET(fd, want) && owes(fd))
			FD_SET(fd, rd);
		r += FD_ISSET(fd, rd) + (wr && FD_ISSET(fd, wr)) + (ex && FD_ISSET(fd, ex));
	}
	return r;
}

static int select_wait(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, int timeout,
		       const sigset_t *mask, bool is_pselect, struct timeval *tv,
		       const struct timespec *ts);

/* select/pselect: as poll_common. */
static int select_common(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, int timeout,
			 const sigset_t *mask, bool is_pselect, struct timeval *tv,
			 const struct timespec *ts)
{
	size_t nb = set_bytes(nfds);
	unsigned long rd0w[SET_WORDS(nfds)], wr0w[SET_WORDS(nfds)], ex0w[SET_WORDS(nfds)];
	fd_set *rd0 = (fd_set *)rd0w, *wr0 = (fd_set *)wr0w, *ex0 = (fd_set *)ex0w;
	if (rd)
		memcpy(rd0, rd, nb);
	if (wr)
		memcpy(wr0, wr, nb);
	if (ex)
		memcpy(ex0, ex, nb);
	struct timespec left;
	for (;;) {
		uint64_t start = kp_now_ms();
		int r = select_wait(nfds, rd, wr, ex, timeout, mask, is_pselect, tv, ts);
		if (r <= 0)
			return r;
		kp_wait_left_ms = left_of(timeout, start);
		r = select_settle(nfds, rd, wr, ex, rd0, wr0, ex0, r);
		kp_wait_left_ms = KP_NOT_WAITING;
		if (r > 0)
			return r;
		if (!timeout_left(start, &timeout, &left))
			return 0;
		if (ts)
			ts = &left;
		if (rd)
			memcpy(rd, rd0, nb);
		if (wr)
			memcpy(wr, wr0, nb);
		if (ex)
			memcpy(ex, ex0, nb);
	}
}

/* select/pselect with our readiness folded in, as poll_wait does. */
static int select_wait(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, int timeout,
		       const sigset_t *mask, bool is_pselect, struct timeval *tv,
		       const struct timespec *ts)
{
	size_t nb = set_bytes(nfds);
	unsigned long rd0w[SET_WORDS(nfds)], wr0w[SET_WORDS(nfds)], ex0w[SET_WORDS(nfds)];
	fd_set *rd0 = (fd_set *)rd0w, *wr0 = (fd_set *)wr0w, *ex0 = (fd_set *)ex0w;
	if (rd)
		memcpy(rd0, rd, nb);
	if (wr)
		memcpy(wr0, wr, nb);
	if (ex)
		memcpy(ex0, ex, nb);
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
			memcpy(rd, rd0, nb);
		if (wr)
			memcpy(wr, wr0, nb);
		if (ex)
			memcpy(ex, ex0, nb);
	}
}

static int ms_of_tv(const struct timeval *tv)
{
	return tv ? ms_ceil(tv->tv_sec, (long)tv->tv_usec * 1000) : -1;
}

/* select(getdtablesize(), ...) over FD_SETSIZE sets, a classic idiom:
 * alone the kernel reads and writes the sets only up to its fd table's
 * size, which a program with few fds keeps at or under FD_SETSIZE.  Our
 * hidden fds (numbered from 1024, or above the soft limit: docs/limits.md)
 * grow that table, and the kernel, and our scans, would then read and
 * write past the program's sets.  So past FD_SETSIZE, once a number of
 * ours was ever given, nfds is cut to just past the program's own highest
 * fd, rounded up as the kernel's table is: never less than alone (set
 * bits for fds not open there, a program's bug, are then not EBADF).
 * Without /proc, the numbers are probed (fdlimit.c); unknown (no /proc
 * and nfds past the probes' bound): as the program asked. */
static KP_SLOW int select_nfds(int nfds)
{
	if (kp_fd_high() < 0)
		return nfds;
	int high = kp_fd_program_high(nfds);
	if (high == -2)
		return nfds;
	int words = (high + 1 + 63) / 64;
	int cut = (words ? words : 1) * 64;
	return cut < nfds ? cut : nfds;
}

/* As fds_readable, for select's sets (as long as nfds says) and its
 * timeout. */
static bool sets_readable(int nfds, const fd_set *rd, const fd_set *wr, const fd_set *ex,
			  const void *timeout, size_t timeout_len)
{
	size_t nb = set_bytes(nfds);
	return (!rd || kp_readable(rd, nb)) && (!wr || kp_readable(wr, nb)) && (!ex || kp_readable(ex, nb)) &&
	       (!timeout || kp_readable(timeout, timeout_len));
}

static KP_SLOW int select_slow(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
	if (nfds <= 0 || nfds > SELECT_NFDS_MAX || !sets_readable(nfds, rd, wr, ex, tv, sizeof(*tv)) ||
	    tv_refused(tv) || (select_due_ms(nfds, rd) < 0 && !select_unsettled(nfds, rd, wr, ex)))
		return KP_REAL(select)(nfds, rd, wr, ex, tv);
	return select_common(nfds, rd, wr, ex, ms_of_tv(tv), NULL, false, tv, NULL);
}

KP_EXPORT int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
	if (__builtin_expect(nfds > FD_SETSIZE, 0))
		nfds = select_nfds(nfds);
	if (wait_untouched())
		return KP_REAL(select)(nfds, rd, wr, ex, tv);
	return select_slow(nfds, rd, wr, ex, tv);
}

static KP_SLOW int pselect_slow(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *ts,
				const sigset_t *mask)
{
	if (nfds <= 0 || nfds > SELECT_NFDS_MAX || !sets_readable(nfds, rd, wr, ex, ts, sizeof(*ts)) ||
	    ts_refused(ts) || (select_due_ms(nfds, rd) < 0 && !select_unsettled(nfds, rd, wr, ex)))
		return KP_REAL(pselect)(nfds, rd, wr, ex, ts, mask);
	return select_common(nfds, rd, wr, ex, ms_of(ts), mask, true, NULL, ts);
}

KP_EXPORT int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *ts,
		      const sigset_t *mask)
{
	if (__builtin_expect(nfds > FD_SETSIZE, 0))
		nfds = select_nfds(nfds);
	if (wait_untouched())
		return KP_REAL(pselect)(nfds, rd, wr, ex, ts, mask);
	return pselect_slow(nfds, rd, wr, ex, ts, mask);
}

/* ours, or a TCP socket not yet connected: it may become ours */
static inline bool ep_watched(int fd)
{
	if (!kp_fd_valid(fd))
		return false;
	struct kp_conn *c = kp_fd_conn(fd);
	kp_fdfl fl = kp_fl(fd);
	return (c && c != KP_POOLED) || ((fl & KP_FD_TCP) && !(fl & KP_FD_CONNECTED));
}

static KP_SLOW int epoll_ctl_slow(int epfd, int op, int fd, struct epoll_event *ev)
{
	int r = KP_REAL(epoll_ctl)(epfd, op, fd, ev);
	if (r < 0 || !ep_watched(fd))
		return r;
	int saved = errno;
	kp_watch_ctl(epfd, op, fd, ev);
	errno = saved;
	return r;
}

KP_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	if (kp_fd_pooled(fd) || kp_fd_pooled(epfd)) {
		errno = EBADF; /* a hidden fd of ours: not the program's */
		return -1;
	}
	if (ep_watched(fd))
		return epoll_ctl_slow(epfd, op, fd, ev);
	return KP_REAL(epoll_ctl)(epfd, op, fd, ev);
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

/* Drop from evs the events of connections replayed just now (see
 * poll_settle): the fresh socket is registered in their place (watch.c
 * kp_watch_renew) and reports for itself, level, edge or one-shot as the
 * program registered it.  A readable report is settled too where TCP's
 * state says the FIN came (kp_conn_read_settle, as poll_settle): events
 * name the program's data, not the fd, so any readable report looks the
 * set's records up (a lock and a scan of our watches; no system call
 * unless the fd's connection may still be replayed).  Returns the new
 * count. */
static int ep_settle(int epfd, struct epoll_event *evs, int n)
{
	int d = 0;
	while (d < n && !(evs[d].events & (EPOLL_DEAD | EPOLLIN)))
		d++;
	if (d == n)
		return n; /* nothing reported dead or readable */
	struct kp_watch_hit hits[16];
	int nh = kp_watch_hits(epfd, evs, n, hits, 16);
	bool dropped = false;
	for (int i = 0; i < nh; i++) {
		uint32_t got = evs[hits[i].index].events;
		struct kp_conn *c;
		if (!(got & (EPOLL_DEAD | EPOLLIN)) || !(c = unsettled(hits[i].fd)))
			continue;
		if (settle(c, hits[i].fd, got & EPOLL_DEAD)) {
			evs[hits[i].index].events = 0;
			dropped = true;
		}
	}
	if (!dropped)
		return n;
	int k = 0;
	for (int j = 0; j < n; j++)
		if (evs[j].events)
			evs[k++] = evs[j];
	return k;
}

/* epoll_wait and friends with our readiness folded in (watch.c): when one
 * of our decisions falls due before the program's timeout, wait only that
 * long and look again; and no report of a replayed connection.  timeout:
 * ms, -1 for none. */
/* for watch.c: when fd's owed EOF falls due (0 now, -1 never).  Connection
 * objects are never freed (conn.h): a stale one only answers for a moment */
/* fds whose connection holds an unfinished head (or a close_notify owed),
 * seen by conn_due_ms
 * under the watch lock: kp_conn_waits takes the connection's lock, which
 * comes before the watch's (kp_lock.h), so ep_common calls it after */
#define EP_HELD_MAX 8
static __thread int ep_held[EP_HELD_MAX];
static __thread int n_ep_held;

static int conn_due_ms(int fd, bool *data_only)
{
	struct kp_conn *c = kp_fd_conn(fd);
	if (!c || c == KP_POOLED)
		return -1;
	kp_fin_owed_now(fd, "waited on"); /* a forked child's copy (conn_child.c) */
	if ((kp_conn_holds(c) || kp_conn_tls_owes_notify(c)) && n_ep_held < EP_HELD_MAX)
		ep_held[n_ep_held++] = fd;
	*data_only = kp_conn_data_only(fd);
	return kp_conn_wait_ms(c);
}

/* The program waits on epfd: held heads of the fds it watches go out
 * first (kp_conn_waits), then when our decisions fall due. */
static void ep_due(int epfd, int *due)
{
	n_ep_held = 0;
	kp_watch_fold(epfd, NULL, 0, 0, conn_due_ms, due);
	if (!n_ep_held)
		return;
	for (int i = 0; i < n_ep_held; i++) {
		struct kp_conn *c = kp_fd_conn(ep_held[i]);
		if (c)
			kp_conn_waits(c, ep_held[i]);
	}
	n_ep_held = 0;
	kp_watch_fold(epfd, NULL, 0, 0, conn_due_ms, due);
}

static int ep_common(enum ep_kind kind, int epfd, struct epoll_event *evs, int max, int timeout,
		     const sigset_t *mask)
{
	if (max <= 0)
		return ep_real(kind, epfd, evs, max, timeout, mask);
	for (;;) {
		int due;
		uint64_t start = kp_now_ms();
		ep_due(epfd, &due);
		int t = timeout;
		if (due >= 0 && (t < 0 || due < t))
			t = due;
		int n = ep_real(kind, epfd, evs, max, t, mask);
		if (n < 0)
			return n;
		int saved = errno;
		kp_wait_left_ms = left_of(timeout, start);
		n = ep_settle(epfd, evs, n);
		kp_wait_left_ms = KP_NOT_WAITING;
		n = kp_watch_fold(epfd, evs, n, max, conn_due_ms, &due);
		errno = saved;
		if (n > 0 || timeout == 0)
			return n;
		if (timeout > 0) {
			uint64_t spent = kp_now_ms() - start;
			if (spent >= (uint64_t)timeout)
				return 0;
			timeout -= (int)spent;
		}
	}
}

/* as poll_slow(), for the epoll family */
static KP_SLOW int ep_slow(enum ep_kind kind, int epfd, struct epoll_event *evs, int max,
			   int timeout, const sigset_t *mask)
{
	return ep_common(kind, epfd, evs, max, timeout, mask);
}

static inline bool ep_untouched(void)
{
	return !__atomic_load_n(&kp_watch_count, __ATOMIC_ACQUIRE);
}

KP_EXPORT int epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
	if (ep_untouched())
		return KP_REAL(epoll_wait)(epfd, evs, max, timeout);
	return ep_slow(EP_WAIT, epfd, evs, max, timeout, NULL);
}

KP_EXPORT int epoll_pwait(int epfd, struct epoll_event *evs, int max, int timeout,
			  const sigset_t *mask)
{
	if (ep_untouched())
		return KP_REAL(epoll_pwait)(epfd, evs, max, timeout, mask);
	return ep_slow(EP_PWAIT, epfd, evs, max, timeout, mask);
}

static int epoll_pwait2_piece(const struct piece_wait *w, const struct timespec *piece)
{
	return ep_slow(EP_PWAIT2, w->epfd, w->evs, w->max, ms_of(piece), w->mask);
}

KP_EXPORT int epoll_pwait2(int epfd, struct epoll_event *evs, int max, const struct timespec *ts,
			   const sigset_t *mask)
{
	/* an older libc without it: ENOSYS, as that libc would say (real.c) */
	if (ep_untouched() || (ts && !kp_readable(ts, sizeof(*ts))) || ts_refused(ts))
		return KP_REAL(epoll_pwait2)(epfd, evs, max, ts, mask);
	if (ts && ts->tv_sec > MS_CAP_S) {
		struct piece_wait w = {
			.wait = epoll_pwait2_piece, .epfd = epfd, .max = max, .evs = evs, .mask = mask
		};
		return in_pieces(&w, ts);
	}
	return ep_slow(EP_PWAIT2, epfd, evs, max, ms_of(ts), mask);
}

/* glibc's second names of poll and select (hooks_conn.c, the names a
 * program binds) */
KP_ALIAS(__poll, poll);
KP_ALIAS(__select, select);
