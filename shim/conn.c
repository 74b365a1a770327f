/*
 * conn.c - one connection's life: fresh or reused -> in use -> EOF owed ->
 * parked or closed.
 *
 * The rules (docs/design.md): reuse only what we framed completely; rewrite a
 * request's "Connection: close" so the server keeps the connection, and
 * then owe the program the EOF it expects right after the last byte of the
 * final response; on anything unusual step aside (passthrough) and really
 * close.  Every real call goes through kp_real; errno is preserved.
 *
 * Here, in this order: connect() and hand-out, close(), dup and shutdown,
 * the read side, HTTPS, hand-off, credentials, fork.  The core's
 * other files share conn_internal.h, each calling only those below it
 * (docs/structure.md):
 *   send.c         the program's writes, and conn_opts.c, the program's
 *                  socket options carried onto a pooled socket (sockopts.c
 *                  decides): above this file (the hooks call them);
 *   conn_replay.c  the first use of a reused connection, fresh
 *                  connections and replay (docs/design.md §4), give_up;
 *   wire.c         a request's bytes out: the socket call, the held
 *                  buffer, a torn head, what was sent, the tx watch;
 *   hidden.c       the pool's ops, twins, the fd budget, the objects,
 *                  the finished list, park.
 */
#include "poll_until.h"
#include "conn_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif
#include <sys/resource.h>
#include <sys/single_threaded.h>
#include <time.h>
#include <unistd.h>

#include "broker_check.h"
#include "broker_client.h"
#include "config.h"
#include "fdlimit.h"
#include "fdtable.h"
#include "real.h"
#include "replay.h"
#include "sigwait.h"
#include "tls.h"
#include "tls_held.h"
#include "watch.h"

/* ------------------------------------------------------------ connect */

/* Is fd a socket we may make a connection of ours on, to key?  Only one
 * whose socket() we saw (a socket made before we were loaded was
 * inherited, or made where we cannot see who else holds it), of key's
 * family (a pooled socket of the other family dup'ed onto it would change
 * its SO_DOMAIN, and the kernel answers EINVAL or EAFNOSUPPORT), not
 * bound, routed, connected before, nor shared (docs/owner.md), nor
 * wrapped in a FILE already (docs/hold.md). */
static bool ours_to_connect(int fd, const struct pool_key *key)
{
	kp_fdfl fl = kp_fl(fd);
	if (!(fl & KP_FD_TCP) ||
	    (fl & (KP_FD_BOUND | KP_FD_ROUTED | KP_FD_CONNECTED | KP_FD_SHARED | KP_FD_STDIO)))
		return false;
	return key->family == ((fl & KP_FD_INET6) ? AF_INET6 : AF_INET);
}

/* fd's connection stops being ours (a connect() that dissolves or moves
 * its association): what was held goes out as written, it is never
 * pooled nor rewritten again, and fd is the kernel's from now on.  Other
 * fds of the same socket keep the (passthrough) object until they close.
 * fin: our FIN stands for the server's close the program is owed (not on
 * a socket already connected anew elsewhere). */
static void disown(int fd, struct kp_conn *c, const char *why, bool fin)
{
	if (conn_lock(c, fd)) {
		if (fin)
			owed_close_fin(c, fd);
		c->handed_off = true;
		c->first = KP_FIRST_DONE;
		go_passthrough(c, why);
		kp_unlock(&c->lock);
	}
	kp_debug("fd %d: no longer ours: %s", fd, why);
	struct kp_conn *old = kp_fd_swap(fd, NULL);
	if (old && old != KP_POOLED)
		conn_unref(old);
	kp_watch_forget_fd(fd);
	finished_forget(fd, NULL);
	kp_fl_or(fd, KP_FD_CONNECTED | KP_FD_SHARED);
}

/* A connect() on a socket already connected through us.  Ruby's second
 * connect() after EINPROGRESS (same destination) is the same connection;
 * AF_UNSPEC dissolves the association (TCP allows it): the socket is no
 * longer ours.  A connect to another destination is the kernel's to
 * answer: on a connected socket it fails (EISCONN) and nothing changed,
 * so the socket stays ours, and what it owes the program (the server's
 * close, the first write after it taken) stays as alone (docs/replay.md
 * "Found by the second review", 2); one that connects (a socket a reset
 * had closed) is a new connection, never ours, and gets no FIN of ours. */
static int connect_again(int fd, struct kp_conn *c, const struct sockaddr *addr, socklen_t len)
{
	struct pool_key key;
	if (kp_sockaddr_readable(addr, len) && pool_key_from_sockaddr(addr, len, &key) &&
	    pool_key_same_peer(&key, &c->key)) {
		if (c->reused) { /* we answered for the kernel: it is connected */
			/* after our EINPROGRESS the kernel's next answer is 0 */
			if (c->connect_owed) {
				c->connect_owed = false;
				return 0;
			}
			errno = EISCONN;
			return -1;
		}
		return KP_REAL(connect)(fd, addr, len);
	}
	int saved = errno;
	if (len >= sizeof(sa_family_t) && kp_readable(addr, 2) && addr->sa_family == AF_UNSPEC) {
		disown(fd, c, "connect(AF_UNSPEC) dissolved its association", true);
		errno = saved;
		return KP_REAL(connect)(fd, addr, len);
	}
	int r = KP_REAL(connect)(fd, addr, len);
	if (r < 0 && errno != EINPROGRESS)
		return -1; /* refused, nothing changed: still ours */
	int err = errno;
	disown(fd, c, "connected again to another destination", false);
	errno = r < 0 ? err : saved;
	return r;
}

/* Hand pooled socket p (the local pool's, or the broker's) to the
 * program's fd as its connection.  p is closed, or kept as c's twin when
 * it is a hidden fd of ours (local).  Returns 0 when fd now holds it, -1
 * when it could not be adopted (dropped). */
static int hand_out(int fd, struct kp_conn *c, int p, const struct pool_meta *meta, uint64_t now,
		    bool local)
{
	kp_fd_swap(p, NULL);
	struct kp_tls *t = kp_tls_unpark(p); /* a whole TLS connection */
	/* its SSL went back to its program (SSL_clear) */
	int ok = t && kp_tls_dead(t) ? (errno = ESTALE, -1) : adopt_pooled(fd, p, c, meta, local);
	if (ok == 0 && local && twin_keep(c, p))
		kp_fd_swap(p, KP_POOLED);
	else
		KP_REAL(close)(p);
	if (ok == 0) {
		c->state = KP_ACTIVE;
		/* handed to the program's SSL at its handshake, if it matches */
		c->tls_pending = t != NULL;
		__atomic_store_n(&c->tls, t, __ATOMIC_RELEASE);
		handed_record(c, meta, now);
		kp_debug("fd %d: reused a pooled connection (%u requests served)", fd, meta->requests);
		return 0;
	}
	if (t)
		kp_tls_put(t);
	kp_count(dropped);
	kp_debug("fd %d: could not adopt pooled socket: %s", fd, strerror(errno));
	return -1;
}

/* connect() handed a pooled connection answers as the kernel does for a
 * fresh one: 0 when blocking; EINPROGRESS when non-blocking (even on
 * loopback), the socket then writable at once with SO_ERROR 0, and the
 * next connect() 0 (connect_again). */
static int handed_answer(struct kp_conn *c, int saved)
{
	if (!c->nonblock) {
		errno = saved;
		return 0;
	}
	c->connect_owed = true;
	errno = EINPROGRESS;
	return -1;
}

/* A connect() or close() of ours in progress on this thread counts as
 * inside (kp_lock.h), locked or not: a signal handler that interrupted it,
 * or any locked path of ours, and calls connect() or close() itself (both
 * async-signal-safe in libc) must not wait for the locks the interrupted
 * code holds (the pool's, a connection's, malloc's): it gets the kernel's
 * call, and that socket is never ours. */

static int connect_reentered(int fd, const struct sockaddr *addr, socklen_t len)
{
	if (kp_fd_valid(fd))
		kp_fl_or(fd, KP_FD_CONNECTED | KP_FD_SHARED);
	return KP_REAL(connect)(fd, addr, len);
}

static int connect_locked(int fd, const struct sockaddr *addr, socklen_t len);
static int connect_pinned(int fd, struct kp_conn *c, const struct pool_key *keyp,
			  const struct sockaddr *addr, socklen_t len, int saved);

int kp_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	if (kp_reentered())
		return connect_reentered(fd, addr, len);
	kp_call_enter();
	int r = connect_locked(fd, addr, len);
	kp_call_leave();
	return r;
}

static int connect_locked(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct kp_conn *c = kp_fd_conn(fd);
	struct pool_key key;
	int saved = errno;

	if (c == KP_POOLED) { /* a hidden fd of ours, not the program's */
		errno = EBADF;
		return -1;
	}
	if (c && c->state != KP_PRECONNECT)
		return connect_again(fd, c, addr, len);
	if (!kp_fd_valid(fd) || !(kp_fl(fd) & KP_FD_TCP) || !kp_sockaddr_readable(addr, len) ||
	    !pool_key_from_sockaddr(addr, len, &key) || !kp_port_enabled(key.port) ||
	    !ours_to_connect(fd, &key) || (c && (!c->poolable || !one_owner(c)))) {
		if (c && kp_fd_drop_if(fd, c))
			conn_unref(c);
		kp_watch_forget_fd(fd); /* never ours: the kernel's alone */
		errno = saved;
		int r = KP_REAL(connect)(fd, addr, len);
		if (kp_fd_valid(fd))
			kp_fl_or(fd, KP_FD_CONNECTED);
		return r;
	}
	kp_count(connects);
	if (kp_cfg.observe) { /* KEEPALIVE_OBSERVE: counted, then the kernel's alone */
		if (c && kp_fd_drop_if(fd, c))
			conn_unref(c);
		kp_watch_forget_fd(fd);
		kp_fl_or(fd, KP_FD_CONNECTED); /* a second connect() (Ruby's) is not counted */
		errno = saved;
		int r = KP_REAL(connect)(fd, addr, len);
		if (r == 0 || errno == EINPROGRESS)
			kp_count(fresh);
		return r;
	}
	if (!c) {
		c = conn_new();
		if (!c) {
			errno = saved;
			return KP_REAL(connect)(fd, addr, len);
		}
		kp_fd_swap(fd, c);
	}
	/* pinned for the call: another thread may close fd while it waits */
	if (!conn_lock(c, fd)) {
		errno = saved;
		return KP_REAL(connect)(fd, addr, len);
	}
	c->refs++;
	kp_unlock(&c->lock);
	int r = connect_pinned(fd, c, &key, addr, len, saved);
	saved = errno;
	conn_unref(c);
	errno = saved;
	return r;
}

/* fd's description is O_NONBLOCK (its connect never waits) */
static bool desc_nonblock(int fd)
{
	if (kp_fl(fd) & KP_FD_TCP)
		return kp_fl(fd) & KP_FD_NONBLOCK;
	int fl = KP_REAL(fcntl)(fd, F_GETFL);
	return fl >= 0 && (fl & O_NONBLOCK);
}

/* connect_locked's own connection c, pinned: one reference of the call's
 * own beside fd's.  Another thread's close while the kernel's connect
 * waits (a blocking connect to a server slow to accept) takes fd's
 * reference and closes the socket; the pin keeps the object from being
 * recycled under us, and what the call learns then is dropped with it
 * (docs/hold.md "A close during a connect"). */
static int connect_pinned(int fd, struct kp_conn *c, const struct pool_key *keyp,
			  const struct sockaddr *addr, socklen_t len, int saved)
{
	struct pool_key key = *keyp;
	c->key = key;

	struct pool_meta meta;
	int p = -1;
	uint64_t now = kp_now_ms();
	/* a pooled socket replaces the program's socket under fd alone: with
	 * other fds of the same socket (a dup before connect) the program's
	 * own socket is connected, as those fds expect (the pin is one) */
	bool alone = __atomic_load_n(&c->refs, __ATOMIC_RELAXED) == 2;
	/* a description with signals or flags connects its own: docs/hold.md */
	alone = alone && (!handout_possible() || kp_desc_plain(fd));
	while (alone && ((p = pool_checkout(&key, now, &meta)) >= 0 ||
	       (take_finished(&key) && (p = pool_checkout(&key, now, &meta)) >= 0))) {
		if (hand_out(fd, c, p, &meta, now, true) == 0)
			return handed_answer(c, saved);
	}
	/* the local pool stays first: only a miss asks the broker */
	if (alone && (p = kp_broker_get(&key, &meta)) >= 0) {
		if (kp_fd_conn(p)) /* a number whose close went past us */
			kp_forget_fd(p, false);
		/* a number received over the broker's socket: the lowest free
		 * one, the program's to have back at once */
		if (hand_out(fd, c, p, &meta, now, false) == 0)
			return handed_answer(c, saved);
	}
	/* HTTPS across processes: a TLS connection by destination alone, its
	 * state held until the program's SSL_connect (conn_held.c) */
	if (alone && p < 0 && !kp_broker_cut) {
		struct kp_held *h = kp_held_take(&key, &p);
		c->tls_held_asked = kp_tls_across_at_connect(); /* (asked, or a miss) */
		if (h && kp_fd_conn(p)) /* a number whose close went past us */
			kp_forget_fd(p, false);
		if (h && held_hand_out(fd, c, h, p, now) == 0)
			return handed_answer(c, saved);
		p = -1;
	}
	/* the program's alarm ended our wait on the broker: its blocking
	 * connect begins and ends as alone: done at once (loopback), 0 or
	 * its error; else EINTR, the connection going on (docs/broker.md
	 * "A signal in the wait") */
	bool cut = alone && p < 0 && kp_broker_cut && !desc_nonblock(fd);
	errno = saved;
	int r = cut ? kp_connect_cut(fd, addr, len) : KP_REAL(connect)(fd, addr, len);
	saved = errno;
	bool begun = r == 0 || saved == EINPROGRESS;
	if (cut && begun && r < 0)
		saved = EINTR;
	if (kp_fd_conn(fd) != c) { /* closed meanwhile: the connection is no more */
		errno = saved;
		return r;
	}
	if (begun) {
		c->state = KP_ACTIVE;
		c->nonblock = desc_nonblock(fd);
		kp_count(fresh);
	} else if (kp_fd_drop_if(fd, c)) {
		conn_unref(c);
	}
	errno = saved;
	return r;
}

/* ------------------------------------------------------------ close */

void kp_stdio_watch(struct kp_conn *c, int fd)
{
	if (c == KP_POOLED || !conn_lock(c, fd))
		return;
	tx_watch_start(c, fd);
	kp_unlock(&c->lock);
}

/* Why c is not parked: every real close is explained in the debug log. */
static const char *close_why(const struct kp_conn *c)
{
	if (!one_owner(c))
		return "it may have another owner (shared, or made under other credentials)";
	if (!c->poolable)
		return c->unpooled ? c->unpooled : "not reusable";
	if (c->n_reqs || c->resp_started)
		return "a response not read to its end";
	if (c->req_mode != KP_REQ_HEAD || c->held_len)
		return "a request not fully written";
	if (!c->served)
		return "no response was completed";
	if (c->ka_max >= 0 && c->served >= (uint32_t)c->ka_max)
		return "the server's Keep-Alive max reached";
	return "the pool could not take it (fd limit or caps)";
}

/* When a connection about to be parked went idle: now, or for one handed
 * out and given back unused, when it was parked before (its age goes on). */
static uint64_t idle_since(const struct kp_conn *c)
{
	return c->reused && c->first == KP_FIRST_UNSENT ? c->parked_ms : 0;
}

/* The last fd of c is going away: park it if allowed and possible (fd is
 * then closed) and say so. */
static bool settle_last(int fd, struct kp_conn *c)
{
	bool parked = !read_under_way(c) && parkable(c) && park(fd, c, true, idle_since(c)) >= 0;
	if (parked) {
		kp_count(parked);
		kp_debug("fd %d: parked after %u requests", fd, c->served);
	} else if (c->state != KP_PRECONNECT) {
		kp_count(closed);
		kp_debug("fd %d: really closed after %u requests: %s", fd, c->served,
			 close_why(c));
	}
	return parked;
}

/* The last fd of c, a TLS connection, is going away unparked, its server
 * asked to end it and the response read: if it is not known how that
 * server ends, its socket stays, hidden, for the TLS engine to read that
 * end (shim/tls_engine.c kp_tls_learn, docs/tls.md "Ragged closes"),
 * inside the pool's share of the fd budget.  True: c->tls and the socket
 * are the engine's now (fd then closed). */
static bool learn_end(int fd, struct kp_conn *c)
{
	if (!c->tls || c->tls_pending || !c->server_closing || c->n_reqs || !c->served ||
	    c->state != KP_ACTIVE || !one_owner(c))
		return false;
	kp_tls_keep_session(c->tls, &c->key);
	if (!hidden_room())
		return false;
	int hidden = kp_fd_hide_planned(fd);
	if (hidden < 0)
		return false;
	if (!kp_fd_valid(hidden)) {
		KP_REAL(close)(hidden);
		return false;
	}
	kp_fd_swap(hidden, KP_POOLED);
	if (!kp_tls_learn(c->tls, hidden, &c->key, __atomic_load_n(&c->close_kind, __ATOMIC_ACQUIRE))) {
		kp_fd_swap(hidden, NULL);
		KP_REAL(close)(hidden);
		return false;
	}
	__atomic_store_n(&c->tls, NULL, __ATOMIC_RELEASE);
	kp_debug("fd %d: kept to learn how the server ends TLS", fd);
	return true;
}

static int close_locked(int fd, struct kp_conn *c);

int kp_close(int fd, struct kp_conn *c)
{
	if (kp_reentered()) /* (see connect_reentered): the kernel's close; what
			       we knew of fd goes with its next socket() */
		return KP_REAL(close)(fd);
	kp_call_enter();
	int r = close_locked(fd, c);
	kp_call_leave();
	return r;
}

static int close_locked(int fd, struct kp_conn *c)
{
	int saved = errno;
	if (c == KP_POOLED) {
		/* The program closes a number it never had (closing every fd
		 * before exec, say): the pool loses that socket, and the program
		 * hears what it would have heard without us. */
		kp_fd_swap(fd, NULL);
		if (pool_owns_fd(fd, true) || twin_forget_fd(fd) || kp_tls_learner_forget(fd))
			KP_REAL(close)(fd);
		errno = EBADF;
		return -1;
	}
	c = kp_fd_swap(fd, NULL);
	if (!c || c == KP_POOLED) { /* raced with another close */
		errno = saved;
		return KP_REAL(close)(fd);
	}
	kp_fl_set(fd, 0);
	/* A parked socket stays open under its hidden fd, and the kernel drops
	 * an epoll registration only when the last fd of a socket closes: the
	 * program's set would go on reporting the pooled socket. */
	kp_watch_detach(fd);
	kp_watch_forget_fd(fd);
	finished_forget(fd, NULL);
	if (!conn_lock_any(c)) {
		/* another call holds it across a send that may never end (or
		 * a signal handler interrupted one on this thread): the
		 * kernel's close, at once, as alone; c is raw, never parked,
		 * and its reference goes when that call is over */
		conn_unref(c);
		errno = saved;
		return KP_REAL(close)(fd);
	}
	int left = --c->refs;
	if (!left && c->held_len) /* the kernel would send them before its FIN */
		give_up(c, fd, "closed with a request head unfinished");
	if (!left) /* a request sent and closed on: lost with a dead reused one */
		close_replay(c, fd);
	/* a close it asked for that the library took away (rewritten): alone
	 * the server ended the connection, with its close_notify; the library
	 * that ends it in its place does so with ours, never a bare FIN, which
	 * a strict server reads as a truncation (docs/tls.md "The
	 * close_notify owed") */
	if (!left && c->tls && one_owner(c) && __atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE))
		kp_tls_owe_notify(c->tls);
	bool parked = !left && settle_last(fd, c);
	if (!left && !parked && !__atomic_load_n(&c->inflight, __ATOMIC_SEQ_CST))
		learn_end(fd, c); /* (not while a read is under way: it is the read's) */
	/* closed for good here: the close_notify its program was told it
	 * sent goes first (docs/tls.md "The close_notify owed") */
	if (!left && !parked && c->tls && one_owner(c))
		kp_tls_goodbye(c->tls, fd);
	kp_unlock(&c->lock);
	if (!left)
		conn_free(c);
	errno = saved;
	return parked ? 0 : KP_REAL(close)(fd);
}

void kp_forget_fd(int fd, bool may_park)
{
	struct kp_conn *c = kp_fd_swap(fd, NULL);
	if (kp_fd_valid(fd))
		kp_fl_set(fd, 0);
	if (!c)
		return;
	if (c == KP_POOLED) {
		/* the kernel is about to close it */
		if (!pool_owns_fd(fd, true) && !twin_forget_fd(fd))
			kp_tls_learner_forget(fd);
		return;
	}
	int saved = errno;
	if (may_park)
		kp_watch_detach(fd); /* as kp_close */
	kp_watch_forget_fd(fd);
	finished_forget(fd, NULL);
	if (!conn_lock_any(c)) { /* busy (as close_locked): never parked */
		conn_unref(c);
		errno = saved;
		return;
	}
	int left = --c->refs;
	if (!left && c->held_len) /* the kernel would send them before its FIN */
		give_up(c, fd, "closed with a request head unfinished");
	if (!left && may_park && !read_under_way(c) && parkable(c)) {
		/* dup2 onto our last fd would close the socket: park a copy, and
		 * leave fd open: dup2 replaces it atomically, where closing it
		 * here would let another thread's open() take the number first */
		if (park(fd, c, false, idle_since(c)) >= 0)
			kp_count(parked);
	} else if (!left && c->state != KP_PRECONNECT) {
		kp_count(closed);
	}
	kp_unlock(&c->lock);
	if (!left)
		conn_free(c);
	errno = saved;
}

void kp_dup_to(struct kp_conn *c, int oldfd, int newfd)
{
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return (void)kp_conn_raw(c), kp_forget_fd_raw(newfd);
	if (c == KP_POOLED)
		return;
	if (!kp_fd_valid(newfd)) {
		/* a copy beyond our table (the hard limit was raised after we
		 * sized it): we cannot count it, so it may outlive every fd we
		 * know of */
		if (conn_lock(c, oldfd)) {
			c->shared = true; /* a copy at a number beyond our table */
			kp_unlock(&c->lock);
		}
		return;
	}
	if (!conn_lock(c, oldfd)) {
		/* oldfd was closed meanwhile: newfd is a socket we never framed */
		struct kp_conn *old = kp_fd_swap(newfd, NULL);
		if (old && old != KP_POOLED)
			conn_unref(old);
		return;
	}
	c->refs++;
	kp_held_taint(c->tls_held); /* a copy: never given back */
	/* onto stdin, stdout or stderr: stdio's own FILEs may write to it */
	if (newfd <= 2)
		tx_watch_start(c, oldfd);
	kp_unlock(&c->lock);
	struct kp_conn *old = kp_fd_swap(newfd, c);
	if (old == KP_POOLED && !pool_owns_fd(newfd, true)) { /* closed behind our back: forget it */
		if (!twin_forget_fd(newfd))
			kp_tls_learner_forget(newfd);
	}
	else if (old)
		conn_unref(old);
	/* onto stdin: its FILE (fread, fgets, scanf) may read the response
	 * past us, as if fdopen'ed for reading: our EOF could never reach
	 * it, so the server's must (docs/hold.md) */
	if (newfd == 0)
		kp_note_fdopen(c, oldfd, false);
}

bool kp_shutdown(struct kp_conn *c, int fd, int how)
{
	if (kp_reentered()) { /* a signal handler inside our locks (kp_lock.h) */
		if (kp_conn_raw(c) && !__atomic_load_n(&c->tls, __ATOMIC_ACQUIRE) &&
		    (__atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE) ||
		     __atomic_load_n(&c->fin_for_server, __ATOMIC_ACQUIRE))) {
			/* the server has closed, as the program sees it: a
			 * shutdown succeeds, even where our FIN has gone out
			 * and the kernel would say ENOTCONN */
			int saved = errno;
			if (KP_REAL(shutdown)(fd, how) == 0 || errno == ENOTCONN) {
				errno = saved;
				return true;
			}
		}
		return false;
	}
	if (!conn_lock(c, fd))
		return false;
	int saved = errno;
	if (how != SHUT_RD && c->tls && one_owner(c) && kp_tls_goodbye(c->tls, fd)) {
		/* its FIN after the close_notify its SSL_shutdown was told it
		 * sent (held for the pool): both go now, as alone, and the
		 * connection is its program's (docs/tls.md "The close_notify
		 * owed") */
		unpool(c, "shutdown after SSL_shutdown");
		go_passthrough(c, "shutdown");
		kp_unlock(&c->lock);
		errno = saved;
		return false;
	}
	bool quiet = c->state == KP_ACTIVE && c->req_mode == KP_REQ_HEAD && !c->held_len &&
		     !c->lost && !c->shut_how;
	bool swallow = false;
	if (quiet && !c->n_reqs && c->eof_owed) {
		/* all answered, EOF shown: nothing the kernel would add (Node
		 * ends every socket this way before closing it) */
		swallow = true;
	} else if (quiet && c->n_reqs && how == SHUT_WR) {
		/* requests out, each with its EOF owed by us: we frame on and
		 * show that EOF, but the FIN goes out now (a server that reads
		 * to it before answering would never answer: docs/hold.md) */
		bool owed = true;
		for (unsigned i = 0; i < c->n_reqs; i++)
			owed &= c->reqs[i].app_close && c->reqs[i].rewritten;
		if ((swallow = owed && KP_REAL(shutdown)(fd, how) == 0))
			unpool(c, "shutdown(SHUT_WR) with the answer owed");
	}
	if (swallow || (how == SHUT_WR && !c->fin_for_server && (swallow = first_shut_wr(c, fd)))) {
		c->shut_how = (int8_t)(how + 1);
		kp_debug("fd %d: shutdown(%d) answered without the kernel", fd, how);
	} else if (c->fin_for_server) {
		/* the server has closed, as the program sees it: its socket
		 * takes a shutdown, where after our FIN and the server's the
		 * kernel says ENOTCONN */
		__atomic_store_n(&c->fin_for_server, false, __ATOMIC_RELEASE);
		swallow = KP_REAL(shutdown)(fd, how) == 0 || errno == ENOTCONN;
		go_passthrough(c, "shutdown");
	} else {
		/* the server sees our FIN and closes after answering: nothing to owe;
		 * a SHUT_RD sends none, so ours goes where a close is owed */
		unvouch(c, fd, "shutdown");
		flush_held(c, fd, 0);
		if (how == SHUT_RD)
			owed_close_fin(c, fd);
		go_passthrough(c, "shutdown");
	}
	kp_unlock(&c->lock);
	errno = saved;
	return swallow;
}

/* ------------------------------------------------------------ read side */

bool kp_conn_data_only(int fd)
{
	struct kp_conn *c = kp_fd_conn(fd);
	return c && c != KP_POOLED && __atomic_load_n(&c->rx_extra_len, __ATOMIC_ACQUIRE) &&
	       !__atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE);
}

bool kp_conn_holds(const struct kp_conn *c)
{
	return c != KP_POOLED && (__atomic_load_n(&c->held_len, __ATOMIC_ACQUIRE) ||
				  __atomic_load_n(&c->req_mode, __ATOMIC_ACQUIRE) == KP_REQ_HEAD_PART);
}

bool kp_conn_tls_owes_notify(struct kp_conn *c)
{
	struct kp_tls *t = c && c != KP_POOLED ? __atomic_load_n(&c->tls, __ATOMIC_ACQUIRE) : NULL;
	return t && !kp_outside && !__atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE) && kp_tls_notify_owed(t);
}

/* The program waits for input on a TLS connection whose SSL_shutdown was
 * answered with our close_notify held for the pool (a raw read or a wait
 * after SSL_free, a poll before its second SSL_shutdown): alone the
 * server has it and answers now, where a server never asked to close
 * answers nothing until its idle timeout.  The close_notify goes out and
 * the connection is never parked (docs/tls.md "The close_notify owed").
 * A read libssl makes inside a call of ours (kp_outside) is not the
 * program's.  Caller holds no lock of ours. */
static void tls_waits(struct kp_conn *c, int fd)
{
	struct kp_tls *t = __atomic_load_n(&c->tls, __ATOMIC_ACQUIRE);
	if (!t || kp_outside || __atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE) || !kp_tls_notify_owed(t))
		return;
	int saved = errno;
	if (conn_lock(c, fd)) {
		if (c->tls == t && one_owner(c) && kp_tls_goodbye(t, fd))
			unpool(c, "a wait for the server's end after SSL_shutdown");
		kp_unlock(&c->lock);
	}
	errno = saved;
}

void kp_conn_waits(struct kp_conn *c, int fd)
{
	if (__builtin_expect(kp_fd_valid(fd) && (kp_fl(fd) & KP_FD_FIN_OWED), 0)) /* a forked child's copy */
		kp_fin_owed_now(fd, "read or waited on");
	if (kp_reentered())
		return;
	tls_waits(c, fd);
	kp_replay_rest(c, fd); /* (cut in a wait: the rest waits for the next call) */
	if (!kp_conn_holds(c))
		return;
	int saved = errno;
	if (conn_lock(c, fd)) {
		/* (TLS: a torn head's program waits after its WANT_WRITE, as
		 * OpenSSL asks, and calls again: docs/hold.md "HTTPS") */
		if (c->state == KP_ACTIVE && ((c->req_mode == KP_REQ_HEAD && c->held_len) ||
					      (c->req_mode == KP_REQ_HEAD_PART && !c->tls && part_debt(c))))
			give_up(c, fd, "the program waits with a request head unfinished");
		kp_unlock(&c->lock);
	}
	errno = saved;
}

/* flags: the call's (MSG_DONTWAIT bounds its wait) */
static bool recv_intercept(struct kp_conn *c, int fd, int flags, ssize_t *ret)
{
	if (__atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE)) {
		kp_count(eofs);
		*ret = 0;
		return true;
	}
	if (c->lost) {
		int saved = errno, err = 0;
		if (lost_quiet(c, fd, flags, &err)) {
			__atomic_store_n(&c->eof_owed, true, __ATOMIC_RELEASE);
			kp_count(eofs);
			kp_debug("fd %d: framing lost; EOF after %llu ms of quiet", fd,
				 (unsigned long long)kp_cfg.quiet_ms);
			*ret = 0;
			errno = saved;
			return true;
		}
		errno = err ? err : saved;
		if (err) /* the read's own bound ran out first: its answer */
			return (void)(*ret = -1), true;
	}
	return false;
}

/* kp_forget_fd without a lock: fd's connection is marked raw and keeps
 * the reference this number held (never freed: freeing takes locks). */
void kp_forget_fd_raw(int fd)
{
	if (!kp_fd_valid(fd))
		return;
	struct kp_conn *c = kp_fd_conn(fd);
	if (c == KP_POOLED)
		return;
	if (c)
		kp_conn_raw(kp_fd_swap(fd, NULL));
	kp_fl_set(fd, 0);
}

bool kp_conn_raw(struct kp_conn *c)
{
	if (c == KP_POOLED)
		return false;
	if (c)
		__atomic_store_n(&c->raw, true, __ATOMIC_RELEASE);
	return true;
}

bool kp_conn_raw_eof(struct kp_conn *c)
{
	if (c && c != KP_POOLED && __atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE))
		return true;
	kp_conn_raw(c);
	return false;
}

ssize_t kp_conn_raw_write(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt)
{
	size_t total = iov_total(iov, iovcnt);
	if (!kp_conn_raw(c) || !c || total > SSIZE_MAX || __atomic_load_n(&c->tls, __ATOMIC_ACQUIRE))
		return -1;
	/* as send_intercept: what a socket the server closed takes (0 bytes,
	 * and the first write), where after our FIN the kernel says EPIPE */
	if (__atomic_load_n(&c->fin_for_server, __ATOMIC_ACQUIRE)) {
		if (total)
			__atomic_store_n(&c->fin_for_server, false, __ATOMIC_RELEASE);
		return (ssize_t)total;
	}
	if (!__atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE))
		return -1;
	if (total)
		KP_REAL(shutdown)(fd, SHUT_WR);
	return (ssize_t)total;
}

bool kp_conn_raw_fd(int fd)
{
	return kp_conn_raw(kp_fd_conn(fd));
}

/* A call went past us on c (kp_conn_raw): what we know of its exchange
 * may be wrong, so we step aside as for any byte read or written unseen
 * (give_up: our FIN if we owe an EOF). */
void raw_settle(struct kp_conn *c, int fd)
{
	if (__builtin_expect(!__atomic_load_n(&c->raw, __ATOMIC_ACQUIRE), 1) || !conn_lock(c, fd))
		return;
	int saved = errno;
	if (c->state == KP_ACTIVE)
		give_up(c, fd, "a signal handler's call went past us");
	kp_unlock(&c->lock);
	errno = saved;
}

size_t kp_recv_extra(struct kp_conn *c, int fd, char *buf, size_t cap, bool peek)
{
	if (c == KP_POOLED || !__atomic_load_n(&c->rx_extra_len, __ATOMIC_ACQUIRE))
		return 0;
	int saved = errno;
	if (!conn_lock(c, fd))
		return 0;
	size_t n = c->rx_extra_len < cap ? c->rx_extra_len : cap;
	memcpy(buf, c->rx_extra, n);
	if (!peek) {
		memmove(c->rx_extra, c->rx_extra + n, c->rx_extra_len - n);
		__atomic_store_n(&c->rx_extra_len, (uint8_t)(c->rx_extra_len - n), __ATOMIC_RELEASE);
	}
	kp_unlock(&c->lock);
	errno = saved;
	return n;
}

/* The bytes a close line pushed past the program's last read go first
 * (a read returns what it has, as a socket read does). */
static bool extra_into(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt, int flags,
		       ssize_t *ret)
{
	char tmp[sizeof(c->rx_extra)];
	size_t n = kp_recv_extra(c, fd, tmp, sizeof(tmp) < iov_total(iov, iovcnt) ? sizeof(tmp)
										: iov_total(iov, iovcnt),
				 flags & MSG_PEEK);
	if (!n)
		return false;
	size_t done = 0;
	for (int i = 0; i < iovcnt && done < n; i++) {
		size_t l = iov[i].iov_len < n - done ? iov[i].iov_len : n - done;
		memcpy(iov[i].iov_base, tmp + done, l);
		done += l;
	}
	*ret = (ssize_t)n;
	return true;
}

bool kp_recv_intercept(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt, int flags,
		       ssize_t *ret)
{
	/* TLS: its owed EOF is a TLS EOF, answered by the SSL_* wrappers */
	if (c == KP_POOLED)
		return false;
	/* urgent data is outside the stream we frame and owe the EOF of: the
	 * kernel answers (EINVAL where none came, as alone) */
	if (flags & MSG_OOB)
		return false;
	raw_settle(c, fd);
	/* a read (or a peek) on a TLS connection from another process before
	 * the program's SSL_connect: its bytes are no program's; it gets a
	 * fresh connection first, the state going back (conn_held.c) */
	if (__builtin_expect(__atomic_load_n(&c->tls_held, __ATOMIC_ACQUIRE) != NULL, 0))
		(void)kp_conn_tls_start(fd, NULL);
	if (__atomic_load_n(&c->tls, __ATOMIC_ACQUIRE) && !kp_outside) {
		/* the program's own read of its socket, past libssl: the
		 * server's close we took away ends it as alone, the EOF (the
		 * server's close_notify record, read raw alone where libssl did
		 * not read it, is not made: docs/tls.md "The close_notify
		 * owed") */
		if (__atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE)) {
			kp_count(eofs);
			*ret = 0;
			return true;
		}
		tls_waits(c, fd);
		return false;
	}
	if (__atomic_load_n(&c->tls, __ATOMIC_ACQUIRE))
		return false;
	if (iov && extra_into(c, fd, iov, iovcnt, flags, ret))
		return true;
	if (kp_replay_rest(c, fd)) /* (kp_conn_waits: not in a read, kp_inside) */
		return (void)(*ret = -1), true; /* EINTR */
	kp_conn_waits(c, fd);
	return recv_intercept(c, fd, flags, ret);
}


/* The program reaches past TLS to its socket (sendfile, splice, stdio: kTLS
 * at most): nothing we can follow.  True when c carries TLS. */
bool tls_bypassed(struct kp_conn *c, int fd)
{
	if (!__atomic_load_n(&c->tls, __ATOMIC_ACQUIRE))
		return false;
	if (conn_lock(c, fd)) {
		unpool(c, "TLS bytes written past OpenSSL");
		kp_unlock(&c->lock);
	}
	return true;
}

void kp_note_fdopen(struct kp_conn *c, int fd, bool write_only)
{
	if (c == KP_POOLED || tls_bypassed(c, fd))
		return;
	/* stdio's writes go through us (hooks_stdio.c); its reads do not */
	if (write_only) {
		kp_stdio_watch(c, fd);
		return;
	}
	int saved = errno;
	if (!conn_lock(c, fd))
		return;
	unvouch(c, fd, "stdio");
	flush_held(c, fd, 0);
	/* Our EOF cannot reach stdio's reads, so the server's must: it closes
	 * after answering once it sees our FIN (once the request is whole).
	 * A stream that also writes ("r+") too: alone the server's close
	 * would end its writes as well. */
	owed_close_fin(c, fd);
	go_passthrough(c, "fdopen: stdio reads go past us");
	kp_unlock(&c->lock);
	errno = saved;
}

/* The program may have read response bytes, an EOF or an error where we
 * could not see: a replay (or a fresh socket swapped in) after them would
 * add to what it already has (docs/replay.md, "Reads we cannot follow").
 * Caller holds c->lock. */
void first_seen(struct kp_conn *c)
{
	c->first = KP_FIRST_DONE;
	c->replay_len = 0;
}

void kp_recv_unseen(struct kp_conn *c, int fd, ssize_t n)
{
	if (c == KP_POOLED || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) ||
	    tls_bypassed(c, fd))
		return;
	int saved = errno;
	if (!conn_lock(c, fd))
		return;
	first_seen(c);
	if (n == 0) {
		unpool(c, "EOF read unseen");
	} else if (n < 0) {
		unpool(c, "a read failed unseen");
	} else {
		if (c->state == KP_ACTIVE)
			unseen_read_fin(c, fd); /* (its next read too: the server's EOF) */
		c->last_rx_ms = kp_now_ms();
	}
	kp_unlock(&c->lock);
	errno = saved;
}

/* Bytes after a response to a request that asked to close (we owe EOF
 * there) that begin a 408: the server's idle timer on the connection we
 * kept open, which without us it had closed (a program that reads its
 * response late, after a sleep, say).  Not the program's to see (docs/hold.md).
 * Any other stray bytes are the server's own: the program sees them. */
static bool idle_408(const char *p, size_t n)
{
	return n >= 12 && !memcmp(p, "HTTP/1.", 7) && !memcmp(p + 8, " 408", 4);
}

/* Frame n response bytes.  Caller holds c->lock.  Returns how many of
 * them follow a response after which we owe the program EOF. */
/* Our FIN, now.  Caller holds c->lock. */
static void handoff_fin(struct kp_conn *c, int fd)
{
	c->fin_due = false;
	if (KP_REAL(shutdown)(fd, SHUT_WR) == 0)
		__atomic_store_n(&c->fin_for_server, true, __ATOMIC_RELEASE);
	if (c->fin_for_server)
		kp_debug("fd %d: handed off with an exchange we rewrote: FIN sent, the server closes", fd);
}

/* The answer our FIN waited for (fin_at_end) is whole: the server has
 * sent it all, so the FIN cancels nothing.  Caller holds c->lock. */
static void fin_at_answer_end(struct kp_conn *c, int fd)
{
	if (c->fin_at_end && !c->fin_for_server)
		handoff_fin(c, fd);
	c->fin_at_end = false;
}

static size_t feed_response(struct kp_conn *c, int fd, char *p, size_t n, size_t *ins)
{
	char *start = p;
	while (n && c->state == KP_ACTIVE) {
		if (!c->n_reqs) {
			/* bytes nobody asked for (or a response ahead of its request) */
			give_up(c, fd, "unsolicited response bytes");
			return 0;
		}
		if (!c->resp_started) {
			/* the mask only where we changed the request: a close that
			 * reached the server as it was gets the server's own answer */
			frm_resp_begin(&c->resp, c->reqs[0].method, c->reqs[0].rewritten);
			c->resp.insert_close = c->reqs[0].rewritten && c->reqs[0].app_close;
			c->resp_started = true;
		}
		enum frm_resp_event ev;
		size_t used = frm_resp_feed(&c->resp, p, n, &ev);
		p += used;
		n -= used;
		switch (ev) {
		case FRM_EV_NONE:
		case FRM_EV_INTERIM:
			break;
		case FRM_EV_INSERT:
			*ins = (size_t)(p - start);
			break;
		case FRM_EV_DONE: {
			/* docs/design.md §3.8: a final response that ends before its request
			 * was fully written (413/417/401 during an upload).  Not a
			 * 100 Continue: that one is the server asking for the body. */
			if (c->n_reqs == 1 && c->req_mode != KP_REQ_HEAD)
				unpool(c, "a response before its request was fully written");
			struct kp_request done = c->reqs[0];
			memmove(c->reqs, c->reqs + 1, (c->n_reqs - 1) * sizeof(c->reqs[0]));
			c->n_reqs--;
			c->resp_started = false;
			c->served++;
			if (c->resp.ka_timeout >= 0)
				c->ka_timeout = c->resp.ka_timeout;
			/* max=M: M more requests after this one (Apache counts down) */
			if (c->resp.ka_max >= 0)
				c->ka_max = c->resp.ka_max + (int32_t)c->served;
			if (!frm_resp_reusable(&c->resp))
				unpool(c, resp_why(&c->resp));
			/* an answer a server gives before reading the body: the
			 * body may wait in its buffer for the next request
			 * (docs/replay.md "A request with a body answered early") */
			if (done.body && kp_body_maybe_unread(c->resp.status))
				unpool(c, "an error or redirect answered a request with a body");
			__atomic_store_n(&c->server_closing,
					 c->resp.server_close || (done.app_close && !done.rewritten),
					 __ATOMIC_RELEASE);
			if (done.app_close && !done.rewritten) {
				/* its "close" reached the server (pipelined behind a head
				 * we rewrote, or not rewritable): the server closes */
				unpool(c, "the request's close reached the server");
			} else if (done.app_close && (!c->resp.server_close || !c->resp.close_token)) {
				/* the program expects the server's FIN now (an HTTP/1.0
				 * answer without keep-alive too: the server may keep
				 * the connection our rewrite asked to keep: docs/hold.md
				 * "A child that reads an inherited socket") */
				__atomic_store_n(&c->eof_owed, true, __ATOMIC_RELEASE);
				fin_at_answer_end(c, fd);
				if (n || c->n_reqs)
					unpool(c, "bytes or requests after the response owed EOF");
				else if (fd >= 0 && c->refs == 1 && parkable(c) && !c->tls && c->nonblock)
					finished_add(fd, c); /* (only these are taken: take_finished) */
				return n;
			}
			break;
		}
		case FRM_EV_CLOSE_BODY:
			go_passthrough(c, "close-delimited response");
			return 0;
		case FRM_EV_UPGRADE:
			go_passthrough(c, "protocol switched");
			return 0;
		case FRM_EV_ERROR:
			lost_response(c, fd);
			return 0;
		}
	}
	return 0;
}

/* A peek shows the program bytes it will read again: they get, from a
 * copy of the framer, the mask and the close line the read will give them
 * (the program never sees keep-alive); the read frames them for real.  The
 * mask lies in the head, which the first event ends; what the line pushes
 * past the buffer is not shown (the read shows it next).  Returns the
 * peek's new count.  Caller holds c->lock. */
static size_t mask_peeked(const struct kp_conn *c, const struct iovec *iov, int iovcnt, size_t n)
{
	struct frm_resp r;
	enum frm_resp_event ev = FRM_EV_NONE;
	size_t left = n, off = 0;
	if (c->state != KP_ACTIVE || !c->n_reqs || !c->reqs[0].rewritten)
		return n;
	if (c->resp_started) {
		r = c->resp;
	} else {
		frm_resp_begin(&r, c->reqs[0].method, true);
		r.insert_close = c->reqs[0].app_close;
	}
	for (int i = 0; i < iovcnt && left; i++) {
		size_t l = iov[i].iov_len < left ? iov[i].iov_len : left, done = 0;
		while (done < l) {
			done += frm_resp_feed(&r, (char *)iov[i].iov_base + done, l - done, &ev);
			if (ev == FRM_EV_INSERT) {
				char extra[FRM_CLOSE_LINE_LEN];
				uint8_t extra_len;
				return kp_close_line_in(iov, iovcnt, n, off + done, extra, &extra_len);
			}
			if (ev == FRM_EV_INTERIM) /* the final head follows */
				continue;
			if (ev != FRM_EV_NONE) /* past the head: nothing more to show */
				return n;
		}
		off += l;
		left -= l;
	}
	return n;
}

/* Lock c for the end of a read on fd that began on it.  Another thread
 * may have closed fd (or dup2'd over it) meanwhile: the read was on c's
 * socket all the same (the kernel kept the file for it), so a counted
 * read (kp_read_begin kept c) frames its bytes with c's state, close line
 * included, and *gone says the number is not to be touched. */
static bool recv_lock(struct kp_conn *c, int fd, bool counted, bool *gone)
{
	*gone = false;
	if (conn_lock(c, fd))
		return true;
	struct kp_conn *now = kp_fd_conn(fd);
	if (!counted || now == c || !conn_lock_any(c))
		return false;
	/* (the number may be a new connection's, read by a race of the
	 * program's: never reused on doubt) */
	if (now && now != KP_POOLED)
		kp_conn_raw(now);
	*gone = true;
	return true;
}

static bool recv_done(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt, ssize_t *retp,
		      int flags, bool counted)
{
	ssize_t ret = *retp;
	int saved = errno;
	bool gone;
	if (!recv_lock(c, fd, counted, &gone))
		return false;
	if (gone)
		fd = -1; /* (give_up, our FIN, the quick ACK: none on the number) */
	/* response bytes before any request we saw (one written where we
	 * cannot see): the socket is never swapped under them any more */
	if (ret > 0 && c->first == KP_FIRST_UNSENT)
		c->first = KP_FIRST_DONE;
	kp_call_nowait = flags & MSG_DONTWAIT;
	bool unseen = !gone && (ret == 0 || (ret < 0 && (saved == ECONNRESET || saved == EPIPE))) &&
		      iov_total(iov, iovcnt) > 0 && read_unseen_end(c, fd);
	kp_call_nowait = false;
	if (unseen) {
		kp_read_swaps = c->swaps; /* (the read made again is on this socket) */
		kp_unlock(&c->lock);
		errno = saved;
		return true;
	}
	if (c->first == KP_FIRST_SENT && c->state == KP_ACTIVE && replay_shut_ok(c) && !gone &&
	    iov_total(iov, iovcnt) > 0) { /* a read of 0 bytes returns 0: no EOF */
		bool again = false;
		if (ret == 0 || (ret < 0 && (errno == ECONNRESET || errno == EPIPE)))
			again = replay(c, fd, ret == 0 ? KP_DIED_EOF : KP_DIED_RESET);
		else if (ret > 0 && answered_408(iov, iovcnt, ret)) {
			c->first_read_len = flags & MSG_PEEK ? 0 : (uint32_t)ret;
			again = replay(c, fd, KP_DIED_408);
		}
		else if (ret > 0) {
			c->first = KP_FIRST_DONE; /* the server answers: vouched for */
			c->replay_len = 0;
			pool_note_alive(&c->key, c->sent_ms - c->parked_ms, c->served_at_checkout,
					c->sent_ms);
		}
		if (again) {
			kp_unlock(&c->lock);
			errno = saved;
			return true;
		}
	}
	if (ret > 0) /* the server answers: what went before is acknowledged */
		__atomic_store_n(&c->writes_since_rx, 0, __ATOMIC_RELAXED);
	if (ret < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			unpool(c, "a read failed");
	} else if (ret == 0) {
		if (iov_total(iov, iovcnt) > 0)
			unpool(c, "the server closed");
	} else if (flags & MSG_PEEK) {
		*retp = (ssize_t)mask_peeked(c, iov, iovcnt, (size_t)ret);
	} else {
		c->last_rx_ms = kp_now_ms();
		if (flags & MSG_TRUNC) {
			give_up(c, fd, "MSG_TRUNC read");
		} else {
			size_t left = (size_t)ret, off = 0, ins = SIZE_MAX;
			for (int i = 0; i < iovcnt && left && c->state == KP_ACTIVE; i++) {
				size_t l = iov[i].iov_len < left ? iov[i].iov_len : left;
				size_t at = SIZE_MAX;
				size_t extra = feed_response(c, fd, iov[i].iov_base, l, &at);
				if (at != SIZE_MAX && ins == SIZE_MAX)
					ins = off + at;
				left -= l;
				off += l;
				if (idle_408((const char *)iov[i].iov_base + (l - extra), extra)) {
					/* the read ends where the server would have closed */
					*retp = ret - (ssize_t)(left + extra);
					break;
				}
			}
			if (ins != SIZE_MAX && ins <= (size_t)*retp)
				*retp = (ssize_t)kp_close_line_in(iov, iovcnt, (size_t)*retp, ins,
							       c->rx_extra, &c->rx_extra_len);
			/* a pooled connection's answer under way: the ACK a fresh
			 * one gives at once, once an answer (docs/cost.md "A
			 * response in two writes") */
			if (c->reused && c->n_reqs && c->quickacked != c->served + 1 && !gone) {
				c->quickacked = c->served + 1;
				kp_tcp_quickack(fd);
			}
		}
	}
	kp_unlock(&c->lock);
	errno = saved;
	return false;
}

bool kp_recv_done(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt, ssize_t *ret,
		  int flags)
{
	if (*ret < 0 && iov_total(iov, iovcnt) == 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
	    errno != EINTR)
		/* a receive of nothing took the socket's pending error
		 * (tcp_recvmsg), which the replay's proof reads: the program
		 * has met the failure itself, as by SO_ERROR (docs/replay.md
		 * "An error taken by a read of nothing").  Plain or TLS: an
		 * engine never reads nothing. */
		return dead_seen(c, fd);
	if (c == KP_POOLED || __atomic_load_n(&c->tls, __ATOMIC_ACQUIRE))
		return false; /* ciphertext */
	if (flags & MSG_OOB)
		return false; /* not the stream's bytes */
	bool again = recv_done(c, fd, iov, iovcnt, ret, flags, true);
	conn_reap(c); /* (a replay's sends are busy) */
	if (!kp_replay_interrupted)
		return again;
	kp_replay_interrupted = false; /* a signal ended the replay: the call says so */
	errno = EINTR;
	return (void)(*ret = -1), false;
}

/* ------------------------------------------------------------ HTTPS */

/* A TLS connection from another process for the program's ssl on fd
 * (docs/tls-across.md "The hand-out in another process"), its socket put
 * in fd's place as a pooled one at connect (adopt_pooled); the program's
 * own connection, not yet used, closed by that dup3.  True: handed;
 * false: nothing changed.  c locked. */
static bool tls_taken_across(struct kp_conn *c, int fd, void *ssl)
{
	struct pool_meta meta = { 0 };
	int p;
	struct kp_tls *t = kp_tls_across_take(ssl, &c->key, fd, &p, &meta);
	if (!t)
		return false;
	int ok = kp_desc_plain(fd) ? adopt_pooled(fd, p, c, &meta, false) : (errno = EPERM, -1);
	KP_REAL(close)(p);
	if (ok < 0) {
		kp_debug("fd %d: a TLS connection from another process could not be adopted: %s", fd, strerror(errno));
		kp_tls_across_drop(t, ssl);
		return false;
	}
	handed_record(c, &meta, kp_now_ms());
	conn_tls_handed(c, ssl, t);
	kp_across_note("fd %d: a TLS connection from another process handed to the program's SSL (%u requests served)", fd,
		meta.requests);
	return true;
}

int kp_conn_tls_start(int fd, void *ssl)
{
	struct kp_conn *c = kp_fd_conn(fd);
	if (!c || c == KP_POOLED || !conn_lock(c, fd))
		return KP_TLS_NONE;
	int saved = errno, r = KP_TLS_NONE;
	if (c->state != KP_ACTIVE)
		goto out;
	if (c->tls_held && held_start(c, fd, ssl)) {
		r = KP_TLS_HANDED;
		goto out;
	}
	if (c->tls && !c->tls_pending) {
		/* a second SSL on a socket whose TLS we follow: no longer ours */
		if (ssl && ssl != c->tls_ssl)
			unpool(c, "a second SSL on the socket");
		goto out;
	}
	if (c->tls) {
		if (ssl && kp_tls_handout(c->tls, ssl, fd) == 0) {
			conn_tls_handed(c, ssl, c->tls);
			kp_debug("fd %d: a pooled TLS connection handed to the program's SSL", fd);
			r = KP_TLS_HANDED;
			goto out;
		}
		/* not for this program (or not TLS at all): the pooled connection
		 * goes back, fd gets a fresh one */
		first_request_fresh(c, fd, ssl ? "the pooled TLS connection does not match"
					       : "plain bytes on a pooled TLS connection");
		if (c->tls) { /* no fresh connection: the program's bytes meet it */
			kp_tls_put(c->tls);
			__atomic_store_n(&c->tls, NULL, __ATOMIC_RELEASE);
			unpool(c, "plain bytes on a pooled TLS connection");
		}
		c->tls_pending = false;
	}
	if (!ssl)
		goto out;
	if (c->reused && c->first == KP_FIRST_UNSENT) /* a plain pooled connection */
		first_request_fresh(c, fd, "TLS");
	if (c->reused || c->n_reqs || c->served || c->req_mode != KP_REQ_HEAD || c->held_len)
		goto out; /* TLS after plain HTTP (a CONNECT tunnel, say): not ours */
	/* (where connect() asked the broker, nothing is asked again here) */
	bool asked = c->tls_held_asked;
	c->tls_held_asked = true; /* (a write deferred for it waits no more) */
	if (!asked && tls_taken_across(c, fd, ssl)) {
		r = KP_TLS_HANDED;
		goto out;
	}
	kp_tls_offer_session(ssl, &c->key);
	struct kp_tls *t = kp_tls_bind(ssl, fd);
	if (t) {
		c->tls_ssl = ssl;
		c->tls_handed = false;
		__atomic_store_n(&c->tls, t, __ATOMIC_RELEASE);
		r = KP_TLS_FRESH;
	}
out:
	kp_unlock(&c->lock);
	errno = saved;
	return r;
}

/* c carries TLS and fd still maps to it: locked */
static bool tls_lock(struct kp_conn *c, int fd)
{
	if (!conn_lock(c, fd))
		return false;
	if (c->tls && !c->tls_pending)
		return true;
	kp_unlock(&c->lock);
	return false;
}

bool kp_conn_tls_eof(struct kp_conn *c, int fd, bool pending)
{
	ssize_t r;
	if (__atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE) || (!pending && c->lost))
		return recv_intercept(c, fd, 0, &r) && r == 0; /* (a bound: SSL_read's own) */
	return false;
}

bool kp_conn_tls_recv_done(struct kp_conn *c, int fd, void *buf, size_t n, ssize_t *ret, int flags)
{
	struct iovec iov = { buf, n };
	/* (unlocked: a hint for the poll of this thread, tls_ready_settle) */
	__atomic_store_n(&c->tls_thread, kp_this_thread(), __ATOMIC_RELAXED);
	bool again = recv_done(c, fd, &iov, 1, ret, flags, false);
	conn_reap(c);
	return again;
}

bool kp_conn_tls_at_end(struct kp_conn *c, int fd)
{
	if (!tls_lock(c, fd))
		return false;
	bool end = __atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE) || parkable(c);
	kp_unlock(&c->lock);
	return end;
}

bool kp_conn_tls_server_closing(struct kp_conn *c, int fd)
{
	if (!tls_lock(c, fd))
		return false;
	bool closing = c->server_closing && !c->n_reqs && c->served && c->state == KP_ACTIVE;
	kp_unlock(&c->lock);
	return closing;
}

void kp_conn_tls_spoil(struct kp_conn *c, int fd, const char *why)
{
	if (!conn_lock(c, fd))
		return;
	if (c->poolable)
		kp_debug("fd %d: %s: not pooled", fd, why);
	unpool(c, why);
	kp_unlock(&c->lock);
}

/* ------------------------------------------------------------ hand-off */

/*
 * A child process that reads the program's connection (subprocess.run
 * with stdin=sock; fork, dup2 onto stdin, exec sed) runs a copy of the
 * library that never saw the request we rewrote to keep-alive: it cannot
 * show the EOF we owe, and would wait for the server's idle timeout.  Our
 * FIN (shutdown(SHUT_WR)) makes the server close as it would have without
 * us; but a FIN before the answer is whole is a client that gave up, to a
 * server that cancels on it (nginx as a proxy: 499, the program reads
 * nothing).  When and whether it goes: handoff_locked.  Such a connection
 * is never pooled, its later requests are not rewritten, and its first
 * request is not replayed (the reader may be the child).
 */

/* Whether the program is owed the server's close, which our rewriting
 * took away: a request we rewrote is out, an answer was read with its EOF
 * owed, or the connection was lost with one.  Caller holds c->lock. */
static bool owes_close(const struct kp_conn *c)
{
	if (c->tls)
		return false;
	bool owed = (c->state == KP_ACTIVE || c->lost) && (c->eof_owed || c->lost);
	for (unsigned i = 0; c->state == KP_ACTIVE && i < c->n_reqs; i++)
		owed |= c->reqs[i].rewritten;
	return owed;
}

/* c stops being followed (passthrough, or its fd no longer ours) while the
 * program may be owed the server's close: only our FIN can make the server
 * close now, once the request being written is whole (handoff_fin_if_due).
 * Then nothing the program writes after the owed EOF reaches the server,
 * and a read past us ends where it would alone (docs/replay.md "Nothing
 * added").  Call before go_passthrough.  Caller holds c->lock. */
void owed_close_fin(struct kp_conn *c, int fd)
{
	if (c->fin_due || c->fin_for_server || !owes_close(c))
		return;
	kp_debug("fd %d: no longer followed, the server's close owed: our FIN", fd);
	c->fin_due = true;
	handoff_fin_if_due(c, fd);
}

/* The server's first word on a reused connection decides whether its
 * request must be replayed; the child cannot replay.  An idle-closed
 * connection answers with a reset within a round trip: so wait only as
 * long as the replay rule waits for one (kp_replay_settle_ms), never for
 * the server's work - fork(), system() and exec must not wait on the
 * server (docs/replay.md).  A death seen in that time is replayed now,
 * under the same fd.  Caller holds c->lock. */
static void handoff_verdict(struct kp_conn *c, int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct kp_tcp_view v;
	int bound = (int)kp_replay_settle_ms(kp_tcp_view(fd, &v) == 0 ? v.srtt_us : 0);
	if (kp_poll_until(&p, kp_now_ms() + (uint64_t)bound) > 0 && ready_settle(c, fd))
		kp_debug("fd %d: replayed before leaving our hands", fd);
}

/* Whatever else happens, the socket may have another owner now: it can
 * never change owner again (one_owner), and nothing of it is rewritten or
 * replayed.  A socket merely inherited (fork, exec, system, spawn) is most
 * often read by the program, or a forked copy, through our wrappers: our
 * FIN waits for our framing to reach the answer's end (fin_at_end), and
 * goes at once only when no answer is outstanding.  One moved where
 * another reads it past us (a child's stdin) gets it once the request is
 * whole (docs/replay.md "After our FIN stood in").  Caller holds c->lock. */
static void handoff_locked(struct kp_conn *c, int fd, enum kp_handoff how, const char *why)
{
	if (!c->shared)
		kp_debug("fd %d: may have another owner from now on (%s)", fd, why);
	kp_held_taint(c->tls_held); /* never given back (docs/tls-across.md) */
	/* (before c->shared: the pooled socket goes back to the pool) */
	if (!c->handed_off && c->first == KP_FIRST_UNSENT && fd >= 0)
		handoff_fresh(c, fd);
	/* bytes of an unfinished head we held were promised as sent: they go
	 * before anything the other owner writes, and what follows them is
	 * no longer ours to frame (docs/hold.md "A held head at a hand-off").
	 * Plain only: a TLS record begun is the writing thread's to finish
	 * (sent from here, in the middle of its SSL_write, it cut the stream:
	 * tests/hang.bats, the HTTPS fork cell) */
	if (fd >= 0 && c->state == KP_ACTIVE && !c->tls && (c->held_len || c->req_mode == KP_REQ_HEAD_PART))
		give_up(c, fd, "a hand-off with request bytes held");
	/* the close_notify its SSL_shutdown was told it sent goes out while
	 * the connection is still one owner's: alone it went before the fork
	 * or spawn (docs/tls.md "The close_notify owed").  Not from a vfork
	 * child, whose pid is not the one the library last saw */
	if (fd >= 0 && c->tls && one_owner(c) && kp_tls_notify_owed(c->tls) && getpid() == kp_conn_pid &&
	    kp_tls_goodbye(c->tls, fd))
		unpool(c, "its close_notify sent as it left our hands");
	c->shared = true; /* one_owner() says no for the rest of its life */
	bool owed = owes_close(c);
	if (!c->handed_off) {
		/* a reused connection's first request: a replay is still
		 * ours to make, under the same fd, before it leaves */
		if (owed && c->first == KP_FIRST_SENT && c->state == KP_ACTIVE)
			handoff_verdict(c, fd);
		c->handed_off = true;
		c->first = KP_FIRST_DONE;
		owed = owes_close(c);
	}
	if (!owed || c->fin_due || c->fin_for_server)
		return; /* nothing of ours to owe: the program's own requests speak */
	kp_debug("fd %d: leaves our hands (%s)", fd, why);
	if (how == KP_HANDOFF_INHERIT && c->state == KP_ACTIVE && c->n_reqs && !c->lost)
		return (void)(c->fin_at_end = true); /* fin_at_answer_end */
	c->fin_due = true;
	handoff_fin_if_due(c, fd);
}

/* Our FIN once the request being written is whole (a FIN now would cut
 * off the rest of its head or body).  Caller holds c->lock. */
void handoff_fin_if_due(struct kp_conn *c, int fd)
{
	if (c->fin_due && (c->state != KP_ACTIVE || (c->req_mode == KP_REQ_HEAD && !c->held_len)))
		handoff_fin(c, fd);
}

void kp_conn_handoff_fd(int fd, enum kp_handoff how, const char *why)
{
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return (void)kp_conn_raw_fd(fd);
	struct kp_conn *c = kp_fd_conn(fd);
	if (!c || c == KP_POOLED)
		return;
	int saved = errno;
	if (conn_lock(c, fd)) {
		handoff_locked(c, fd, how, why);
		kp_unlock(&c->lock);
	}
	errno = saved;
}

void kp_conn_handoff_all(bool inherited_only, enum kp_handoff how, const char *why)
{
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return;
	int high = kp_fd_high();
	int saved = errno;
	for (int fd = 0; fd <= high; fd++) {
		struct kp_conn *c = kp_fd_conn(fd);
		if (c == KP_POOLED || (!c && !(kp_fl(fd) & KP_FD_TCP)))
			continue;
		if (inherited_only) {
			int fl = KP_REAL(fcntl)(fd, F_GETFD);
			if (fl < 0 || (fl & FD_CLOEXEC))
				continue;
		}
		/* a forked child's copy read past us for certain */
		if (how == KP_HANDOFF_READER)
			kp_fin_owed_now(fd, "spawned onto a reader");
		/* a TCP socket not connected yet: a connection made on it
		 * later would have another holder too */
		if (!c)
			kp_fl_or(fd, KP_FD_SHARED);
		else
			kp_conn_handoff_fd(fd, how, why);
	}
	errno = saved;
}

bool kp_conn_passing_fd(int fd)
{
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return kp_conn_raw_fd(fd);
	struct kp_conn *c = kp_fd_conn(fd);
	if (c == KP_POOLED)
		return false;
	if (c)
		kp_conn_handoff_fd(fd, KP_HANDOFF_READER, "passed in SCM_RIGHTS");
	else if (kp_fd_valid(fd) && (kp_fl(fd) & KP_FD_TCP))
		kp_fl_or(fd, KP_FD_SHARED);
	return true;
}

/* ------------------------------------------------------------ fork */

/* fork() from a signal handler that interrupted one of our locked paths
 * (kp_lock.h): the locks cannot be taken (the thread that holds them is
 * this one), so nothing is; the parent goes on as it was, and the child,
 * whose copy of our state may be half-changed, steps aside for good (every
 * wrapper then makes the kernel's call; its copies of pooled sockets stay
 * open, unused, until it execs: they are close-on-exec). */
static __thread bool fork_inside;

/* Held across fork() so the child finds every structure whole, in the
 * order of kp_lock.h. */
void kp_conn_before_fork(void)
{
	__atomic_add_fetch(&kp_held_forks, 1, __ATOMIC_ACQ_REL); /* (tls_held.h) */
	if (kp_reentered()) {
		fork_inside = true;
		return;
	}
	/* the child may read any of them (and exec what reads them) */
	kp_conn_handoff_all(false, KP_HANDOFF_INHERIT, "fork");
	hidden_lock_objects();
	kp_sockopts_before_fork();
	kp_watch_before_fork();
	pool_before_fork();
	kp_tls_before_fork(); /* after the pool's: the pool's close takes it */
	hidden_lock_twins();
	kp_limits_before_fork(); /* the child copies the program's limit */
}

void kp_conn_after_fork_parent(void)
{
	if (fork_inside) {
		fork_inside = false;
		return;
	}
	kp_limits_after_fork_parent();
	hidden_unlock_twins();
	kp_tls_after_fork_parent();
	pool_after_fork_parent();
	kp_watch_after_fork_parent();
	kp_sockopts_after_fork_parent();
	hidden_unlock_objects();
}

void kp_conn_after_fork_child(void)
{
	kp_conn_pid = getpid();
	if (fork_inside) {
		fork_inside = false;
		__atomic_store_n(&kp_fdtab_len, 0, __ATOMIC_RELEASE);
		return;
	}
	kp_tls_after_fork_child();
	/* The child's copies of tracked fds are the parent's connections: the
	 * child uses them raw, and never parks them.  Its copies of pooled
	 * sockets are closed (the parent's stay open). */
	hidden_child_objects();
	kp_sockopts_after_fork_child();
	kp_watch_after_fork_child();
	/* the child's copies are never ours; one whose answer we owe and
	 * have not framed yet keeps that fact, under an object of the
	 * child's, for its first read, wait or move (conn_child.c) */
	int high = kp_fd_high();
	for (int fd = 0; fd <= high; fd++)
		kp_fin_owed_child_mark(fd, kp_fd_conn(fd));
	kp_fdtab_after_fork_child();
	kp_fin_owed_child_track();
	pool_after_fork_child();
	hidden_child_twins();
	kp_limits_after_fork_child();
	/* the locks kp_conn_before_fork took are new, not released */
	kp_inside = 0;
}
