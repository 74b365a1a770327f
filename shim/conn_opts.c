/*
 * conn_opts.c - the connection core's side of socket options and
 * O_NONBLOCK: takes the connection's lock, asks sockopts.c for a verdict
 * and acts on it (a routing option keeps the socket out of the pool for
 * good; one that cannot be carried makes the connection unpoolable).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>

#include "conn_internal.h"
#include "fdtable.h"
#include "real.h"
#include "sockopts.h"

/* The program decides its own segments: no push of ours past Nagle
 * (send.c nagle_after_write).  Caller holds c->lock. */
static void note_nagle_own(struct kp_conn *c, int level, int name)
{
	if (level == IPPROTO_TCP && (name == TCP_NODELAY || name == TCP_CORK))
		__atomic_store_n(&c->nagle_own, true, __ATOMIC_RELAXED);
}

/* A handed-out connection under which a fresh one may still be made (a
 * replay, a request we do not follow): an option we do not carry, set
 * now, is recorded for it (docs/replay.md "Options set on a handed-out
 * connection").  Caller holds c->lock. */
static void note_late(struct kp_conn *c, int level, int name, const void *val, socklen_t len)
{
	/* (one that does not fit, set before the first request, moved the fd
	 * to a fresh connection first: kp_sockopt_before; after it, the
	 * fresh one of a replay goes without it) */
	if (c->reused && c->first != KP_FIRST_DONE)
		(void)kp_sockopts_record_late(&c->so, level, name, val, len);
}

/* kp_note_sockopt without a lock: an option we could not follow; the
 * socket is never ours (a connection of ours is never pooled again). */
static void note_raw(int fd)
{
	if (!kp_fd_valid(fd) || !kp_conn_raw(kp_fd_conn(fd)))
		return;
	if (!kp_fd_conn(fd))
		kp_fl_or(fd, KP_FD_SHARED);
}

bool kp_sockopt_already(struct kp_conn *c, int fd, int level, int name, const void *val,
			socklen_t len)
{
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return false;
	/* (a value the kernel refuses: its EFAULT, not our read's SIGSEGV) */
	if (c == KP_POOLED || !c->so.n_pending || !kp_readable(val, len))
		return false;
	if (!conn_lock(c, fd))
		return false;
	note_nagle_own(c, level, name);
	enum kp_opt_verdict v;
	bool same = kp_sockopts_claim(&c->so, level, name, val, len, &v);
	if (v != KP_OPT_KEPT)
		unpool(c, "too many socket options to carry");
	kp_unlock(&c->lock);
	return same;
}

void kp_before_getsockopt(struct kp_conn *c, int fd)
{
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return;
	if (c == KP_POOLED || !c->so.n_pending)
		return;
	int saved = errno;
	if (conn_lock(c, fd)) {
		conn_flush_opts(c, fd);
		kp_unlock(&c->lock);
	}
	errno = saved;
}

void kp_note_nonblock(int fd, bool on)
{
	if (!kp_fd_valid(fd))
		return;
	if (on)
		kp_fl_or(fd, KP_FD_NONBLOCK);
	else
		kp_fl_clear(fd, KP_FD_NONBLOCK);
	struct kp_conn *c = kp_fd_conn(fd);
	if (c && c != KP_POOLED)
		c->nonblock = on; /* O_NONBLOCK belongs to the description all dups share */
}

/* The options of conn.h no_rewrite, by name */
static bool rewrite_option(int level, int name)
{
	if (level != SOL_SOCKET)
		return false;
	switch (name) {
	case SO_RCVLOWAT:
#ifdef SO_ZEROCOPY
	case SO_ZEROCOPY:
#endif
#ifdef SO_TIMESTAMPING_OLD
	case SO_TIMESTAMPING_OLD:
#endif
#ifdef SO_TIMESTAMPING_NEW
	case SO_TIMESTAMPING_NEW:
#endif
		return true;
	}
	return false;
}

/* ... and by value: SO_RCVLOWAT only above 1, its default (val unread
 * where len is short, as the kernel would refuse it) */
static bool rewrite_shows(int level, int name, const void *val, socklen_t len)
{
	if (!rewrite_option(level, name))
		return false;
	if (name != SO_RCVLOWAT)
		return true;
	int v = 0;
	if (!val || len < (socklen_t)sizeof(v))
		return false;
	memcpy(&v, val, sizeof(v));
	return v > 1;
}

void kp_note_sockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return note_raw(fd);
	if (!kp_fd_valid(fd))
		return;
	kp_fdfl fl = kp_fl(fd);
	struct kp_conn *c = kp_fd_conn(fd);
	if (kp_sockopt_routes(level, name)) {
		/* the fd's mark, tracked or not: a connection made on it later
		 * is not pooled either */
		kp_fl_or(fd, KP_FD_ROUTED);
		if (c && c != KP_POOLED && conn_lock(c, fd)) {
			unpool(c, "a routing socket option");
			note_late(c, level, name, val, len);
			kp_unlock(&c->lock);
		}
		return;
	}
	if (c == KP_POOLED)
		return;
	if (!c) {
		/* only unconnected TCP sockets can become ours */
		if (!(fl & KP_FD_TCP) || (fl & KP_FD_CONNECTED))
			return;
		c = kp_conn_track(fd);
		if (!c)
			return;
	}
	if (!conn_lock(c, fd))
		return;
	if (rewrite_shows(level, name, val, len))
		c->no_rewrite = true;
	note_nagle_own(c, level, name);
	switch (kp_sockopts_record(&c->so, level, name, val, len)) {
	case KP_OPT_KEPT:
		break;
	case KP_OPT_ROUTES: /* answered above */
	case KP_OPT_UNCARRIED:
		unpool(c, "a socket option we cannot carry");
		note_late(c, level, name, val, len);
		break;
	}
	kp_unlock(&c->lock);
}

/* An option of conn.h no_rewrite (its value read only where the kernel
 * could: a value it refuses changes nothing), set on a handed-out
 * connection before its first request: that connection is never parked
 * again, and a fresh one
 * would be made under the program's fd if the request needed one
 * (unvouch: a request not followed; a replay), and the fresh socket
 * would lack the option (SO_ZEROCOPY: the program's zerocopy sends
 * report nothing, and it waits forever).  So the fresh connection is
 * made now, before the option goes to the kernel, and the option lands
 * on the socket the program keeps (docs/hold.md "Sends the kernel
 * counts"). */
void kp_sockopt_before(struct kp_conn *c, int fd, int level, int name, const void *val, socklen_t len)
{
	if (kp_reentered() || c == KP_POOLED ||
	    __atomic_load_n(&c->first, __ATOMIC_ACQUIRE) != KP_FIRST_UNSENT ||
	    kp_sockopt_carried(level, name))
		return;
	/* one a fresh connection made later could not be given (too long a
	 * value to keep, or no room: note_late) moves the fd now too */
	bool shows = rewrite_option(level, name) && kp_readable(val, len) &&
		     rewrite_shows(level, name, val, len);
	if (!shows && kp_sockopts_late_fits(&c->so, level, name, len))
		return;
	int saved = errno;
	if (conn_lock(c, fd)) {
		if (c->state == KP_ACTIVE && c->first == KP_FIRST_UNSENT &&
		    (shows || !kp_sockopts_late_fits(&c->so, level, name, len)))
			unvouch(c, fd, "a socket option we cannot carry, on a handed-out connection");
		kp_unlock(&c->lock);
	}
	errno = saved;
}
