/*
 * conn_replay.c - the first use of a connection taken from the pool
 * (docs/replay.md): the part of replay that makes syscalls.  replay.c decides
 * (pure: may this request ride the reused connection, may it be sent
 * again); here that is carried out on the connection: the copy kept of
 * the first request, the liveness probe before a non-idempotent one, a
 * fresh connection put under the program's fd in place of the reused one
 * (swap_fresh), the replay itself, and the same found out early, where
 * the program asks for readiness or an error (ready_settle,
 * kp_conn_dead_seen), a read meets the server's close, or the connection
 * leaves our hands before its first request (read_unseen_end,
 * handoff_fresh).  Called from send.c's and conn.c's paths, with
 * c->lock held, through conn_internal.h; also give_up and account_sent.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "conn_internal.h"
#include "fdtable.h"
#include "real.h"
#include "replay.h"
#include "sigwait.h"
#include "tls.h"
#include "tls_held.h"
#include "watch.h"
#include "wbuf.h"

/*
 * docs/replay.md.  A pooled connection may have been closed by the server
 * while it sat idle, and the program, believing its connect() fresh, will
 * not retry.  So the first request on a reused connection either may be
 * replayed (a copy is kept until the first response byte; EOF, a reset or
 * a 408 before it sends the copy again on a fresh connection, once) or it
 * goes on a fresh connection in the first place and the pooled one goes
 * back unused.  Which, and whether the copy may really go out again, is
 * replay.h's: an idempotent request always; any other only on proof that
 * no server program read it (settle_facts gathers what the kernel shows).
 */

/* The program believes it is connected already, so the handshake is
 * waited for, boundedly: one round trip where it goes well. */
#define FRESH_CONNECT_MS 30000

__thread bool kp_replay_interrupted;
__thread bool kp_call_nowait;
__thread bool kp_call_write;


/*
 * How long the fresh connection a replay needs may be waited for: within
 * the program's own call (docs/replay.md, "The program's bounds").  In
 * poll/select/epoll, what is left of that call's timeout; on an
 * O_NONBLOCK socket, or in a MSG_DONTWAIT call, not at all (a loopback
 * connect is done by the first poll; a remote one fails a replay, and
 * before the first request goes under the fd still connecting); else the
 * socket's SO_RCVTIMEO or SO_SNDTIMEO when set; at most FRESH_CONNECT_MS.
 */
static int fresh_bound_ms(const struct kp_conn *c, int fd)
{
	if (kp_wait_left_ms != KP_NOT_WAITING)
		return kp_wait_left_ms < 0 || kp_wait_left_ms > FRESH_CONNECT_MS ? FRESH_CONNECT_MS
										 : kp_wait_left_ms;
	if (c->nonblock || kp_call_nowait)
		return 0;
	struct timeval tv;
	socklen_t l = sizeof(tv);
	if (KP_REAL(getsockopt)(fd, SOL_SOCKET, kp_call_timeo, &tv, &l) == 0 &&
	    (tv.tv_sec || tv.tv_usec) && tv.tv_sec < FRESH_CONNECT_MS / 1000)
		return (int)(tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000);
	return FRESH_CONNECT_MS;
}

/* The wait of ms for the fresh connection (p) within the program's call
 * on fd: a handler that ran ends it (EINTR) where it would end that call
 * (kp_sigwait): any in the program's poll/select/epoll or under its
 * SO_RCVTIMEO or SO_SNDTIMEO, which the kernel never restarts; else one
 * without SA_RESTART, the call going on after the others (signal(7)).
 * A loopback connect is complete at the first look: the signals are
 * looked at only when it is not. */
static int fresh_wait(int fd, struct pollfd *p, int ms)
{
	int r = KP_REAL(poll)(p, 1, 0);
	if (r != 0 || ms == 0)
		return r;
	bool restartable = kp_call_restarts(fd);
	struct kp_sigwait sw;
	kp_sigwait_begin(&sw);
	uint64_t end = kp_now_ms() + (uint64_t)ms;
	for (;;) {
		uint64_t now = kp_now_ms();
		r = kp_sigwait_poll(&sw, p, 1, now >= end ? 0 : (int)(end - now));
		if (r >= 0 || errno != EINTR || !restartable || !sw.restarts)
			break;
	}
	kp_sigwait_end(&sw);
	return r;
}

/* A new connection to c's destination with the program's socket options
 * and O_NONBLOCK, waited for within fresh_bound_ms().  Returns the socket,
 * or -1 with errno (EINTR: a signal ended the wait, as it would have ended
 * the program's call).  may_connect: nothing is to be sent on it by us
 * (before the first request, no TLS to carry), so a connect not complete
 * within the bound is returned still connecting: under the program's fd
 * it is what the program's own slow connect() shows (docs/replay.md
 * "Before the first request": EAGAIN, no readiness until it connects, a
 * blocking call waiting for it in the kernel), where failing made every
 * caller give the program the dead connection. */
static int connect_fresh(struct kp_conn *c, int fd, bool may_connect)
{
	struct sockaddr_storage ss;
	socklen_t sl = pool_key_to_sockaddr(&c->key, &ss);
	int s = KP_REAL(socket)(c->key.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0 && kp_fds_short())
		s = KP_REAL(socket)(c->key.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return -1;
	for (unsigned i = 0; i < c->so.n_opts; i++) {
		const struct kp_sockopt *o = &c->so.opts[i];
		if (KP_REAL(setsockopt)(s, kp_opt_levels[o->level], o->name, o->val, o->len) == 0)
			continue;
		if (!o->late)
			goto fail;
		/* set after connect by the program, refused before ours (a
		 * TCP_ULP): the fresh connection without it, not none */
		kp_debug("fd %d: option %d/%d the program set is refused before connect: the "
			 "fresh connection goes without it", fd, kp_opt_levels[o->level], o->name);
	}
	if (KP_REAL(connect)(s, (struct sockaddr *)&ss, sl) < 0) {
		if (errno != EINPROGRESS)
			goto fail;
		struct pollfd pfd = { .fd = s, .events = POLLOUT };
		int r, err = 0;
		socklen_t el = sizeof(err);
		/* inside the program's poll/select/epoll (or a hand-off's
		 * bound), one that may stay connecting is not waited for: the
		 * program's own wait goes on over it (and over its other fds,
		 * which a wait here would hold up: an event loop's other
		 * connections, its timers) */
		bool in_wait = kp_wait_left_ms != KP_NOT_WAITING;
		r = fresh_wait(fd, &pfd, may_connect && in_wait ? 0 : fresh_bound_ms(c, fd));
		if (r < 0 && errno == EINTR)
			kp_replay_interrupted = true;
		if (r == 0 && may_connect) {
			kp_debug("fd %d: the fresh connection is not complete within the call: it goes "
				 "under the fd still connecting", fd);
			goto connecting;
		}
		if (r == 0)
			errno = (c->nonblock || kp_call_nowait) && !in_wait ? EAGAIN : ETIMEDOUT;
		if (r <= 0 || KP_REAL(getsockopt)(s, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
			goto fail;
		if (err) {
			errno = err;
			goto fail;
		}
	}
connecting:
	if (!c->nonblock && KP_REAL(fcntl)(s, F_SETFL, 0) < 0)
		goto fail;
	return s;
fail:;
	int err = errno;
	KP_REAL(close)(s);
	errno = err;
	return -1;
}

static int swap_fresh_in(struct kp_conn *c, int fd, bool repark);
static bool fin_came_first(const struct kp_conn *c, const struct kp_tcp_view *v);

/* The program's SSL could not make its handshake on the fresh connection
 * swap_fresh put under its fd (within the call's bound): a replay that
 * needs it fails. */
static __thread bool fresh_tls_failed, fresh_tls_under_way;

/* The deadline of the program's call for our waits in it (a fresh TLS
 * handshake, the replay's records): fresh_bound_ms; on an O_NONBLOCK
 * socket, outside poll, a few round trips of the dead connection
 * (kp_replay_settle_ms), what the server's TLS stack needs to answer,
 * never its program's work.  docs/replay.md "The program's bounds". */
static uint64_t call_end_ms(const struct kp_conn *c, int fd)
{
	int ms = fresh_bound_ms(c, fd);
	if (ms == 0) {
		struct kp_tcp_view v;
		ms = (int)kp_replay_settle_ms(kp_tcp_view(fd, &v) == 0 ? v.srtt_us : 0);
	}
	return kp_now_ms() + (uint64_t)ms;
}

/* Put a fresh connection under the program's fd in place of the reused
 * one, which goes back to the pool when repark (it was never used), else
 * is closed.  Caller holds c->lock.  Returns 0, or -1 with errno and fd
 * untouched. */
int swap_fresh(struct kp_conn *c, int fd, bool repark)
{
	fresh_tls_failed = fresh_tls_under_way = false;
	uint64_t outer = kp_tls_wait_end_ms;
	if (!outer)
		kp_tls_wait_end_ms = call_end_ms(c, fd);
	int r = swap_fresh_in(c, fd, repark);
	kp_tls_wait_end_ms = outer;
	return r;
}

static int swap_fresh_in(struct kp_conn *c, int fd, bool repark)
{
	/* every fd of the program that holds the old socket (dup family) */
	int fds[16], n = 0;
	if (c->refs == 1) {
		fds[n++] = fd;
	} else {
		int high = kp_fd_high();
		for (int i = 0; i <= high && n < 16; i++)
			if (kp_fd_conn(i) == c)
				fds[n++] = i;
		if (n != c->refs) {
			errno = EBUSY;
			return -1;
		}
	}
	int fdfl = KP_REAL(fcntl)(fd, F_GETFD);
	/* Before the first request the program's other threads wait for the
	 * fresh connection (c->lock, not busy): to the program the fd is one
	 * fresh connection, and a write that stepped aside went to the dead
	 * socket under the dup3 to come, while the program read the fresh one
	 * (docs/replay.md "Before the first request").  The connect is bounded
	 * (fresh_bound_ms), never the server's work, and one not done within
	 * it goes under fd still connecting, as the program's own would be,
	 * but not over TLS (the program's SSL would need a handshake: as
	 * before, no fresh connection); a state from another process held
	 * for the program's SSL_connect goes back before any handshake, and
	 * the program's own handshake meets the connect as alone.  A
	 * replay's stays busy: its request is out, and what it waits on
	 * includes a handshake */
	bool unsent = c->first == KP_FIRST_UNSENT && !c->tls_handed;
	int s = fdfl < 0 ? -1
		: unsent ? connect_fresh(c, fd, !c->tls)
			 : BUSY(c, connect_fresh(c, fd, false));
	/* what the program's description carries, its signals above all, is
	 * the fresh socket's too (docs/hold.md "What the description
	 * carries") */
	if (s >= 0 && kp_desc_carry(fd, s) < 0) {
		int err = errno;
		KP_REAL(close)(s);
		errno = err;
		s = -1;
	}
	if (s < 0)
		return -1;
	for (int i = 0; i < n; i++)
		kp_watch_detach(fds[i]); /* else epoll follows the old socket (kept in the pool) */
	/* a TLS state from the broker (c->tls_held): its socket kept aside,
	 * given back once the fresh one is under fd (tls_held.c) */
	int hidden = c->tls_held ? KP_REAL(fcntl)(fd, F_DUPFD_CLOEXEC, 0) : repark ? park(fd, c, false, c->parked_ms) : -1;
	for (int i = 0; i < n; i++) {
		int cl = i == 0 ? fdfl : KP_REAL(fcntl)(fds[i], F_GETFD);
		if (cl >= 0 && KP_REAL(dup3)(s, fds[i], (cl & FD_CLOEXEC) ? O_CLOEXEC : 0) >= 0)
			continue;
		int err = errno;
		if (i == 0) { /* nothing moved: all back as it was */
			if (hidden >= 0 && c->tls_held)
				KP_REAL(close)(hidden);
			else if (hidden >= 0 && pool_owns_fd(hidden, true)) /* one owner only */
				hidden_close(hidden);
			KP_REAL(close)(s);
			for (int k = 0; k < n; k++)
				kp_watch_renew(fds[k]);
			errno = err;
			return -1;
		}
		unpool(c, "a dup left on the old socket: never again");
	}
	KP_REAL(close)(s);
	/* (after the dup3s: a read that began before sees the count move) */
	__atomic_add_fetch(&c->swaps, 1, __ATOMIC_RELEASE);
	twin_drop(c); /* the old socket's (unless park took it) */
	for (int i = 0; i < n; i++)
		kp_watch_renew(fds[i]); /* the program's registrations, on the new socket */
	c->reused = false;
	c->first = KP_FIRST_DONE;
	c->served = 0;
	c->ka_timeout = c->ka_max = -1;
	c->so.n_pending = 0; /* a new socket has no previous owner's options */
	if (c->tx_watch) { /* the count starts again with the new socket */
		c->tx_watch = false;
		c->tx = 0;
		tx_watch_start(c, fd);
	}
	kp_count(fresh);
	c->tls_pending = false;
	if (c->tls_held) {
		/* fd and its dups hold the fresh socket: hidden is the old one's
		 * last holder here, unless the state was ever shared */
		if (hidden >= 0)
			kp_held_back(c->tls_held, hidden, &c->key, repark && n == c->refs && one_owner(c),
				     !held_opts_set(c));
		else
			kp_held_free(c->tls_held);
		c->tls_held = NULL;
		if (hidden >= 0)
			KP_REAL(close)(hidden);
	}
	if (c->tls_handed) {
		/* the program's SSL was speaking through the pooled engine: it
		 * makes its own handshake on the fresh connection now */
		c->tls_handed = false;
		int hs = BUSY(c, kp_tls_rehandshake(&c->tls, fd, c->tls_ssl));
		if (hs < 0) {
			fresh_tls_failed = true;
			unpool(c, "TLS handshake after a replay failed");
		}
		/* under way: the program's SSL goes on with it at its next
		 * call, as with its own handshake */
		fresh_tls_under_way = hs > 0;
	} else if (c->tls) { /* a pending engine that was not handed out */
		kp_tls_put(c->tls);
		__atomic_store_n(&c->tls, NULL, __ATOMIC_RELEASE);
	}
	return 0;
}

/* A fresh connect() that failed with the far end's answer, not with our
 * own trouble (descriptors, our bound on the program's call, a signal). */
static bool fresh_was_answered(int err)
{
	return err == ECONNREFUSED || err == ECONNRESET || err == ENETUNREACH || err == EHOSTUNREACH ||
	       err == ENETDOWN || err == EHOSTDOWN;
}

/* The first request on a reused connection may not be replayed: it goes
 * on a fresh connection.  If none can be made, it goes on the reused one
 * after all (fail open: the program gets what that connection gives). */
void first_request_fresh(struct kp_conn *c, int fd, const char *why)
{
	if (swap_fresh(c, fd, true) < 0) {
		int err = errno;
		c->first = KP_FIRST_DONE;
		if (!c->tls && fresh_was_answered(err)) {
			/* the server (or the network) answered the connect: alone
			 * the program's own connect() had failed so, and its
			 * request was never executed.  The reused socket serves a
			 * server that takes no new connection (a drain): nothing
			 * goes on it, never pooled again, ended both ways. */
			c->fresh_refused = err;
			unpool(c, "the fresh connection a first request needs was refused");
			KP_REAL(shutdown)(fd, SHUT_RDWR);
			kp_debug("fd %d: %s, and the fresh connection was refused (%s): the program's send "
				 "fails so", fd, why, strerror(err));
			errno = err;
			return;
		}
		kp_debug("fd %d: %s, but no fresh connection (%s): sent on the reused one", fd, why,
			 strerror(err));
		errno = err;
		return;
	}
	kp_count(unvouched);
	kp_debug("fd %d: %s: sent on a fresh connection, the pooled one put back", fd, why);
}

/* About to step aside (passthrough) before the first request on a reused
 * connection went out: what follows can neither be seen nor replayed, so
 * it goes on a fresh connection. */
void unvouch(struct kp_conn *c, int fd, const char *why)
{
	if (c->first != KP_FIRST_UNSENT)
		return;
	/* bytes waiting may be the answer to a request written where we
	 * cannot see (wide stdio, pwritev2, io_uring): once any response byte
	 * exists the socket is never swapped, only given up on */
	int inq = 0;
	if (KP_REAL(ioctl)(fd, FIONREAD, &inq) == 0 && inq > 0) {
		c->first = KP_FIRST_DONE;
		return;
	}
	first_request_fresh(c, fd, why);
}

__thread unsigned kp_read_swaps;

static __thread char thread_mark;

const void *kp_this_thread(void)
{
	return &thread_mark;
}

/*
 * A read met an EOF or a reset that the program alone, on its own fresh
 * connection, would not have met (docs/replay.md "Before the first
 * request"): true when its call is to be made again on fd, which holds a
 * fresh connection now.  Either the read began before another thread put
 * a fresh connection under fd (c->swaps moved) and its end was the
 * replaced socket's (the one under fd now is still ESTABLISHED: a read
 * returns 0, or a reset, only once its own FIN or reset is in); or c is
 * a reused connection whose first request has not gone, and the server
 * closed it while idle: a fresh one goes under fd now, every other
 * thread's call on fd waiting for it (swap_fresh).  Caller holds c->lock.
 */
bool read_unseen_end(struct kp_conn *c, int fd)
{
	struct kp_tcp_view v;
	if (c->state != KP_ACTIVE || c->shut_how || kp_tcp_view(fd, &v) < 0)
		return false;
	/* TLS: only a handed-out connection, read by the program's SSL
	 * through the pooled engine (a pending engine's bytes are ciphertext
	 * the program reads raw).  A read that began before another thread's
	 * swap does not arise: an SSL is one thread's at a time, and the
	 * engine's socket reads do not note the count (kp_read_swaps). */
	if (c->tls && !c->tls_handed)
		return false;
	if (!c->tls && kp_read_swaps != c->swaps) /* (SYN_SENT: swapped in still connecting) */
		return v.state == TCP_ESTABLISHED || v.state == TCP_SYN_SENT;
	if (c->first != KP_FIRST_UNSENT || !c->reused || v.state == TCP_ESTABLISHED)
		return false; /* (ESTABLISHED: the program's own SHUT_RD) */
	if (c->tls && (c->n_reqs || c->held_len))
		return false; /* (as kp_conn_tls_remake: nothing of a request begun) */
	conn_note_dead(c, 0);
	kp_count(probed_dead);
	if (swap_fresh(c, fd, false) < 0) {
		kp_debug("fd %d: a reused connection closed before its first request, no fresh "
			 "connection (%s)", fd, strerror(errno));
		return false;
	}
	kp_debug("fd %d: a reused connection closed before its first request, met by a read: a "
		 "fresh one", fd);
	return true;
}

/* A reused connection whose first request has not gone leaves our hands
 * (fork, exec, spawn, system): after this no probe or replay can be made
 * for it (the other holder may write or read it past us, and a socket
 * swapped under one process's fd is not under the other's), so it gets
 * a fresh connection now, before the call, as a fresh connection is what
 * the program believes it has: parent and child share it, and whatever
 * either sends or reads meets what it would alone.  The pooled one goes
 * back unused.  The connect is not waited for (fork() must not wait on
 * the server): one not complete at once goes under the fd still
 * connecting, for parent and child (connect_fresh's may_connect; the
 * bound set here, handoff_verdict's few round trips, is what a swap that
 * may not stay connecting would wait: docs/replay.md "Before the first
 * request").  Not over TLS (the program's SSL would need a handshake
 * inside fork()), nor in a vfork child, whose fd table is its own: our
 * swap would move its fd, not the parent's.  Caller holds c->lock. */
void handoff_fresh(struct kp_conn *c, int fd)
{
	if (c->state != KP_ACTIVE || !c->reused || c->tls || getpid() != kp_conn_pid)
		return;
	/* (bytes waiting: an answer to a request written where we cannot
	 * see, as in unvouch: never swapped) */
	int inq = 0;
	if (KP_REAL(ioctl)(fd, FIONREAD, &inq) < 0 || inq > 0)
		return;
	struct kp_tcp_view v;
	int outer = kp_wait_left_ms;
	kp_wait_left_ms = (int)kp_replay_settle_ms(kp_tcp_view(fd, &v) == 0 ? v.srtt_us : 0);
	/* (not first_request_fresh: a refused fresh connect ends nothing
	 * here, the program has not asked to send yet) */
	if (swap_fresh(c, fd, true) == 0) {
		kp_count(unvouched);
		kp_debug("fd %d: a hand-off before the first request: a fresh connection, the pooled "
			 "one put back", fd);
	} else {
		kp_debug("fd %d: a hand-off before the first request, no fresh connection (%s): the "
			 "reused one stays", fd, strerror(errno));
	}
	kp_wait_left_ms = outer;
}

static const char *died_str(enum kp_died how)
{
	switch (how) {
	case KP_DIED_EOF:
		return "EOF";
	case KP_DIED_RESET:
		return "reset";
	case KP_DIED_408:
		return "408";
	case KP_DIED_SEND_EPIPE:
		return "EPIPE";
	case KP_DIED_SEND_RESET:
		return "reset at a send";
	}
	return "?";
}

/* One wait of the replay's proof (settle_facts), under kp_sigwait: a
 * handler that would end the program's call (kp_call_restarts) does not
 * end the proof, whose bound is a few round trips of the kernel's own
 * settling (kp_replay_settle_ms: 10 ms on loopback, at most 1 s), never
 * the server's work: the proof is finished, the replay (or not) made,
 * and then the call says EINTR (kp_replay_interrupted; in the program's
 * poll the poll goes on).  docs/hold.md "Signals during the library's
 * waits". */
static int proof_poll(struct kp_sigwait *sw, bool restartable, struct pollfd *p, int ms)
{
	int r = kp_sigwait_poll(sw, p, 1, ms);
	if (r < 0 && errno == EINTR && !(restartable && sw->restarts) &&
	    kp_wait_left_ms == KP_NOT_WAITING)
		kp_replay_interrupted = true;
	return r < 0 && errno == EINTR ? 1 : r; /* (looked at again: the state says) */
}

/*
 * What the kernel shows of the reused connection that died under c's first
 * request (docs/replay.md, "Measured"): was the server's FIN first, and
 * then how did the kernel settle our bytes?  Never consumes the socket's
 * pending error the program may still have to read, except where the order
 * cannot be seen otherwise and the answer is then ours to give anyway.
 * Waits at most kp_replay_settle_ms() for a reset after the FIN.  Caller
 * holds c->lock.
 */
static void settle_facts(struct kp_conn *c, int fd, enum kp_died how, struct kp_death *d)
{
	memset(d, 0, sizeof(*d));
	struct kp_tcp_view v;
	if (c->first_plan != KP_PLAN_PROVE || !c->acked_known || kp_tcp_view(fd, &v) < 0 ||
	    !v.acked_ok)
		return; /* idempotent (no facts needed), or nothing to read them */
	d->count_known = true;
	uint64_t end = kp_now_ms() + kp_replay_settle_ms(v.srtt_us);
	int inq = 0;
	if (!c->tls && how != KP_DIED_EOF && KP_REAL(ioctl)(fd, FIONREAD, &inq) == 0 && inq > 0)
		d->response = true; /* the server's answer waits unread */
	switch (how) {
	case KP_DIED_EOF:
		/* plain: the kernel returns 0 from a read only once the FIN is
		 * in (tcp_recvmsg checks SOCK_DONE before the pending error), and
		 * no FIN is taken after a reset; a reset's error consumed by the
		 * program's own SO_ERROR ends the replay there
		 * (kp_conn_dead_seen).  TLS: the SSL layer's EOF says nothing of
		 * TCP's order: read from the state below. */
		d->fin_first = !c->tls;
		break;
	case KP_DIED_SEND_EPIPE:
		/* a send fails with EPIPE only after a reset (CLOSE_WAIT
		 * allows sends), and the reset's error is EPIPE only when the
		 * FIN came first (tcp_reset in CLOSE_WAIT); ECONNRESET else */
		d->fin_first = d->reset_after = true;
		break;
	case KP_DIED_RESET:
	case KP_DIED_SEND_RESET:
		return; /* a reset with no FIN before it: never proof */
	case KP_DIED_408:
		break; /* the server's notice of its close: see the FIN below */
	}
	struct kp_sigwait sw;
	bool restartable = kp_call_restarts(fd);
	kp_sigwait_begin(&sw);
	if (!d->fin_first && !d->response) {
		/* wait (within the bound) for the FIN behind a 408 or a
		 * close_notify, then tell its order from the state */
		while (v.state == TCP_ESTABLISHED) {
			int64_t left = (int64_t)(end - kp_now_ms());
			struct pollfd p = { .fd = fd, .events = POLLRDHUP };
			if (left <= 0 || proof_poll(&sw, restartable, &p, (int)left) == 0 ||
			    kp_tcp_view(fd, &v) < 0)
				break;
		}
		if (v.state == TCP_CLOSE_WAIT) {
			d->fin_first = true;
		} else if (v.state == TCP_CLOSE && !c->tls) {
			/* plain, a 408 read and nothing waiting: TCP's count is
			 * the 408's bytes, and one more for a FIN before the
			 * reset; read from it, the reset's error stays the
			 * program's next read's (a peek would take it: the
			 * program met an EOF where alone ECONNRESET) */
			d->fin_first = v.received == c->received_at_first + c->first_read_len + 1;
			d->reset_after = d->fin_first;
		} else if (v.state == TCP_CLOSE) {
			/* TLS: the engine's reads are not counted here.  A peek
			 * answers 0 when the FIN came first, leaving the reset's
			 * EPIPE pending; otherwise it takes the error of a reset
			 * before any FIN (docs/replay.md "A 408", left) */
			char b;
			d->fin_first = KP_REAL(recv)(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
			d->reset_after = d->fin_first;
		}
	}
	/* the FIN is in: now the kernel settles our bytes, a reset (they met
	 * a closed socket) or their acknowledgment, or neither in time */
	while (d->fin_first && !d->reset_after && v.acked == c->acked_at_first) {
		if (v.state == TCP_CLOSE) {
			d->reset_after = true;
			break;
		}
		int64_t left = (int64_t)(end - kp_now_ms());
		if (left <= 0)
			break;
		/* events 0: woken by the reset (POLLERR/POLLHUP) alone; an
		 * acknowledgment wakes nothing, so look again every 2 ms */
		struct pollfd p = { .fd = fd, .events = 0 };
		proof_poll(&sw, restartable, &p, left < 2 ? (int)left : 2);
		if (kp_tcp_view(fd, &v) < 0)
			break;
	}
	kp_sigwait_end(&sw);
	d->acked = v.acked != c->acked_at_first;
}

/* The reused connection died under its first request, before any response
 * byte: learn from it, and send the request again on a fresh connection
 * under the same fd where kp_replay_verdict() allows.  Caller holds
 * c->lock.  True when fd now holds the fresh connection (the program's
 * call is to be made again). */
static bool replay_proved(struct kp_conn *c, int fd, enum kp_died how);

bool replay_decide(struct kp_conn *c, int fd, enum kp_died how)
{
	c->first = KP_FIRST_DONE;
	conn_note_dead(c, c->sent_ms);
	if (!replay_proved(c, fd, how)) {
		/* the program meets an error a fresh connection would not have
		 * given it: not twice (docs/replay.md, "The residual risk") */
		pool_note_killed(&c->key, c->served_at_checkout, kp_now_ms());
		unpool(c, "died under its first request, not replayed");
		c->replay_len = 0;
		return false;
	}
	return true;
}

/* The copy did not all go within the program's call: a signal ended the
 * wait for room on the fresh connection (send_all; intr: the call says
 * EINTR: kp_recv_done, the send paths; in a poll the poll goes on), or the
 * call is a non-blocking write and the socket took what fitted (the call
 * says EAGAIN).  The rest goes before anything of the program's: at its
 * next write, first (replay_rest_first), or its next read or wait
 * (kp_replay_rest).  Never a request left half-sent by us, nor a wait
 * past the signal, nor a non-blocking call that waits on the server
 * (docs/replay.md "The copy's rest"). */
static bool replay_cut(struct kp_conn *c, int fd, enum kp_died how, size_t sent, bool intr)
{
	c->replay_rest = true;
	c->replay_off = sent;
	c->resp_started = false;
	if (intr && kp_wait_left_ms == KP_NOT_WAITING)
		kp_replay_interrupted = true;
	kp_debug("fd %d: %s on a reused connection: its copy sent again in part (%zu of %zu) when "
		 "%s", fd, died_str(how), sent, c->replay_len,
		 intr ? "a signal ended the program's call" : "the non-blocking socket was full");
	return true;
}

/* The rest of the copy (replay_rest), within the program's call: a
 * non-blocking one (O_NONBLOCK, or MSG_DONTWAIT in flags) takes what fits
 * and never waits; a blocking one waits as its own send would, a signal
 * that would end it ending this (send_all's cut).  0: nothing of the copy
 * waits any more (all out, or the send failed: the connection unpooled,
 * the program's own call then meets the kernel's answer); -1 with errno
 * EINTR or EAGAIN: the rest still waits, and nothing of the program's may
 * go.  Caller holds c->lock. */
int replay_rest_first(struct kp_conn *c, int fd, int flags)
{
	if (!c->replay_rest)
		return 0;
	int saved = errno;
	if (c->state == KP_ACTIVE && !c->tls) {
		bool nowait = c->nonblock || (flags & MSG_DONTWAIT);
		size_t sent = 0;
		ssize_t r = send_all(c, fd, c->replay + c->replay_off, c->replay_len - c->replay_off,
				     MSG_NOSIGNAL | (nowait ? MSG_DONTWAIT : 0), true, &sent);
		c->replay_off += sent;
		if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
			int err = errno;
			kp_debug("fd %d: the rest of the replay's copy waits (%zu of %zu sent): %s", fd,
				 c->replay_off, c->replay_len, strerror(err));
			errno = err;
			return -1;
		}
		if (r >= 0) {
			kp_count(replayed);
			kp_debug("fd %d: the rest of the replay's copy sent", fd);
		} else {
			unpool(c, "resending the request failed");
		}
	}
	c->replay_rest = false;
	c->replay_len = c->replay_off = 0;
	errno = saved;
	return 0;
}

bool kp_replay_rest(struct kp_conn *c, int fd)
{
	if (c == KP_POOLED || !__atomic_load_n(&c->replay_rest, __ATOMIC_ACQUIRE))
		return false;
	if (!conn_lock(c, fd))
		return false;
	int saved = errno;
	/* (a non-blocking socket: what fits; the rest at the next call) */
	bool cut = replay_rest_first(c, fd, 0) < 0 && errno == EINTR;
	errno = cut ? EINTR : saved;
	kp_unlock(&c->lock);
	return cut;
}

bool replay(struct kp_conn *c, int fd, enum kp_died how)
{
	kp_call_timeo = how == KP_DIED_SEND_EPIPE || how == KP_DIED_SEND_RESET ? SO_SNDTIMEO : SO_RCVTIMEO;
	if (!replay_decide(c, fd, how)) {
		kp_call_timeo = SO_SNDTIMEO;
		return false;
	}
	/* the fresh connection, its handshake and the copy's records within
	 * the program's call (docs/replay.md "The program's bounds") */
	kp_tls_wait_end_ms = call_end_ms(c, fd);
	int swapped = swap_fresh(c, fd, false);
	if (swapped < 0) {
		kp_call_timeo = SO_SNDTIMEO;
		kp_tls_wait_end_ms = 0;
		kp_debug("fd %d: %s on a reused connection; no replay: %s", fd, died_str(how),
			 strerror(errno));
		unpool(c, "a replay found no fresh connection");
		return false;
	}
	if (fresh_tls_under_way && !fresh_tls_failed) {
		/* the handshake did not end within the program's call (a
		 * non-blocking one ends at once): the copy follows it at the
		 * program's next call on its SSL, which is told WANT_READ or
		 * WANT_WRITE meanwhile, as by its own handshake; never a read
		 * that waits for a request never sent (docs/replay.md "The
		 * program's bounds") */
		kp_tls_wait_end_ms = 0;
		kp_call_timeo = SO_SNDTIMEO;
		if (kp_tls_wait_cut && kp_wait_left_ms == KP_NOT_WAITING)
			kp_replay_interrupted = true; /* kp_conn_replay_cut */
		c->replay_async = true;
		c->replay_off = 0;
		c->resp_started = false;
		kp_debug("fd %d: %s on a reused connection before any response byte: sent again "
			 "once the fresh TLS handshake ends", fd, died_str(how));
		return true;
	}
	size_t sent = 0;
	/* in a non-blocking write, what fits: the rest at its next call,
	 * before its bytes (replay_rest_first); never a wait on the server */
	bool nowait = kp_call_write && (c->nonblock || kp_call_nowait) && !c->tls;
	bool resent = !fresh_tls_failed &&
		      send_all(c, fd, c->replay, c->replay_len,
			       MSG_NOSIGNAL | (nowait ? MSG_DONTWAIT : 0), true, &sent) >= 0;
	kp_call_timeo = SO_SNDTIMEO;
	kp_tls_wait_end_ms = 0;
	if (!resent && !c->tls && (errno == EINTR || (nowait && (errno == EAGAIN || errno == EWOULDBLOCK))))
		return replay_cut(c, fd, how, sent, errno == EINTR);
	if (!resent) {
		/* the program's SSL could not make its handshake or send the
		 * copy within its call, or the fresh socket did not take the
		 * whole copy (its bound, or it failed): no replay; the program
		 * meets what the dead connection gave it (as when no fresh
		 * connection can be made), never a read that waits for a
		 * request never sent.  A torn copy on the fresh socket is
		 * ended by our FIN: nothing the program writes after (its
		 * retry of the same body) can complete it into a request */
		kp_debug("fd %d: %s on a reused connection; the copy did not go within the "
			 "program's call (%zu of %zu bytes): not replayed", fd, died_str(how), sent,
			 c->replay_len);
		if (sent && !c->tls)
			KP_REAL(shutdown)(fd, SHUT_WR);
		c->replay_len = 0;
		give_up(c, fd, "a replay's copy did not go in time");
		return false;
	}
	if (c->shut_how == SHUT_WR + 1 && KP_REAL(shutdown)(fd, SHUT_WR) == 0)
		kp_debug("fd %d: the program's shutdown(SHUT_WR) made again on the fresh one", fd);
	c->replay_len = 0;
	c->resp_started = false;
	kp_count(replayed);
	kp_debug("fd %d: %s on a reused connection before any response byte: sent again on a "
		 "fresh one", fd, died_str(how));
	return true;
}

bool kp_conn_replay_cut(void)
{
	if (!kp_replay_interrupted)
		return false;
	kp_replay_interrupted = false;
	return true;
}

int kp_conn_tls_replay_step(struct kp_conn *c, int fd)
{
	if (!__atomic_load_n(&c->replay_async, __ATOMIC_ACQUIRE) || !conn_lock(c, fd))
		return 1;
	int r = 1;
	if (c->replay_async && c->tls) {
		r = BUSY(c, kp_tls_replay_step(c->tls, c->replay, c->replay_len, &c->replay_off));
		if (r > 0) {
			kp_count(replayed);
			kp_debug("fd %d: the fresh TLS handshake ended: the request sent again", fd);
		} else if (r < 0) {
			/* the program's SSL says why, as its own handshake would */
			give_up(c, fd, "a replay's TLS handshake failed");
		}
	}
	if (r != 0) {
		c->replay_async = false;
		c->replay_len = c->replay_off = 0;
	}
	kp_unlock(&c->lock);
	return r;
}

/* May the first request be replayed after the program's shutdown() on its
 * connection?  Before any: yes.  After its shutdown(SHUT_WR) (our FIN went
 * out, made by the kernel: first_shut_wr, or the owed answer's in
 * kp_shutdown): yes, plain, and the replay makes it again on the fresh
 * connection, after the copy, as the program made it after its request
 * (docs/replay.md "After the program's shutdown(SHUT_WR)").  Not TLS: the
 * copy there goes inside the program's next SSL call, possibly after a
 * handshake, and the FIN would have to wait for it (left). */
bool replay_shut_ok(const struct kp_conn *c)
{
	return !c->shut_how || (c->shut_how == SHUT_WR + 1 && !c->tls);
}

/* The program's shutdown(SHUT_WR) after the first request on a reused
 * connection, none of its answer read (first == KP_FIRST_SENT), where
 * kp_shutdown would step aside (passthrough: a request not rewritten, so
 * no close owed by us): the FIN goes out now, made by the kernel, and the
 * connection stays followed (never pooled), so a death before any
 * response byte is replayed under the rule, the shutdown made again on
 * the fresh connection (replay).  A kernel that says ENOTCONN (a reset in
 * already: the server closed the reused connection) is answered 0, as the
 * program's own fresh connection would: the read then meets the death and
 * the rule decides.  Caller holds c->lock; true when answered. */
bool first_shut_wr(struct kp_conn *c, int fd)
{
	if (c->first != KP_FIRST_SENT || c->state != KP_ACTIVE || c->tls || c->shut_how ||
	    c->req_mode != KP_REQ_HEAD || c->held_len || c->lost || c->handed_off)
		return false;
	int saved = errno;
	if (KP_REAL(shutdown)(fd, SHUT_WR) < 0 && errno != ENOTCONN)
		return false;
	errno = saved;
	unpool(c, "shutdown(SHUT_WR) under the first request");
	return true;
}

/* The program closes the last fd of a reused connection under its first
 * request, none of the answer read (a beacon, a webhook: send, close).
 * Alone its fresh connection carried the request to the server; here, if
 * the server closed the reused one as the request landed, it is lost.
 * What the kernel already shows decides, with no wait (a wait at every
 * such close, alive or not, would cost each beacon a few round trips:
 * docs/replay.md "Closed under the first request"): the server's FIN or
 * a reset in, nothing to read, and the rule allows it (a GET; a POST on
 * the proof, the reset after the FIN already in with none of our bytes
 * acknowledged).  Then the copy goes on a fresh connection, within
 * handoff_verdict's bound, and that socket is closed as the program
 * closes its own: what the server gets is what it got alone.  A copy the
 * fresh socket does not take whole at once is cut off by a reset (the
 * server never reads a part as a request).  A request not whole (the
 * program closed inside its body: alone the server got a part) is left.
 * Caller holds c->lock; the caller closes fd. */
void close_replay(struct kp_conn *c, int fd)
{
	if (c->first != KP_FIRST_SENT || c->state != KP_ACTIVE || c->tls || !c->reused ||
	    !c->replay_len || c->req_mode != KP_REQ_HEAD || c->held_len || c->shared || c->handed_off || !replay_shut_ok(c) ||
	    getpid() != kp_conn_pid || __atomic_load_n(&c->inflight, __ATOMIC_SEQ_CST))
		return;
	struct kp_tcp_view v;
	int inq = 0;
	if (kp_tcp_view(fd, &v) < 0 || KP_REAL(ioctl)(fd, FIONREAD, &inq) < 0 || inq > 0)
		return;
	/* ESTABLISHED, or ours alone (FIN_WAIT: the program's SHUT_WR): the
	 * server has said nothing yet */
	if (v.state == TCP_ESTABLISHED || v.state == TCP_FIN_WAIT1 || v.state == TCP_FIN_WAIT2)
		return;
	struct kp_death d = { .count_known = c->acked_known && v.acked_ok };
	d.fin_first = v.state != TCP_CLOSE || fin_came_first(c, &v);
	d.reset_after = d.fin_first && v.state == TCP_CLOSE;
	d.acked = v.acked != c->acked_at_first;
	enum kp_replay_verdict verdict = kp_replay_verdict(c->first_plan, &d);
	c->first = KP_FIRST_DONE;
	conn_note_dead(c, c->sent_ms);
	unpool(c, "died under its first request");
	if (!kp_replay_allowed(verdict)) {
		kp_debug("fd %d: closed, its first request dead before any answer: %s", fd,
			 kp_replay_verdict_str(verdict));
		return;
	}
	int outer = kp_wait_left_ms;
	kp_wait_left_ms = (int)kp_replay_settle_ms(v.srtt_us);
	int s = connect_fresh(c, fd, false);
	kp_wait_left_ms = outer;
	kp_replay_interrupted = false; /* (a signal ends this wait, not close()) */
	if (s < 0) {
		kp_debug("fd %d: closed, its first request dead: no fresh connection (%s)", fd,
			 strerror(errno));
		return;
	}
	ssize_t n = KP_REAL(send)(s, c->replay, c->replay_len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n != (ssize_t)c->replay_len) {
		struct linger l = { 1, 0 };
		KP_REAL(setsockopt)(s, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	} else {
		if (c->shut_how)
			KP_REAL(shutdown)(s, SHUT_WR);
		kp_count(replayed);
	}
	KP_REAL(close)(s);
	kp_debug("fd %d: closed, its first request dead before any answer (%s): %s on a fresh "
		 "connection", fd, kp_replay_verdict_str(verdict),
		 n == (ssize_t)c->replay_len ? "sent again" : "not taken whole, reset");
	c->replay_len = 0;
}

/* Keep a copy of request bytes sent on a reused connection. */
bool replay_keep(struct kp_conn *c, const char *p, size_t n)
{
	if (c->replay_len + n > c->replay_cap) {
		char *b = kp_wbuf_grow(c->replay, &c->replay_cap, c->replay_len + n);
		if (!b)
			return false;
		c->replay = b;
	}
	memcpy(c->replay + c->replay_len, p, n);
	c->replay_len += n;
	return true;
}

/* Sent twice, harmless by its method alone.  An Idempotency-Key header is
 * not enough: a server that ignores it (most do) applies a POST twice, and
 * nothing the client sees says which kind it is; such a request is
 * replayed on proof only, as any other (docs/replay.md, "The rule"). */
static bool replayable(const struct frm_req_head *h)
{
	bool idempotent = h->method == FRM_M_GET || h->method == FRM_M_HEAD ||
			  h->method == FRM_M_OPTIONS || h->method == FRM_M_TRACE;
	bool bodiless = h->body_kind == FRM_BODY_NONE ||
			(h->body_kind == FRM_BODY_LENGTH && h->body_len == 0);
	return idempotent && bodiless && !h->upgrade;
}

/* Keep a copy of n request bytes at byte offset off of iov. */
bool replay_keep_iov(struct kp_conn *c, const struct iovec *iov, int iovcnt, size_t off,
		     size_t n)
{
	for (int i = 0; i < iovcnt && n; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		size_t l = iov[i].iov_len - off < n ? iov[i].iov_len - off : n;
		if (!replay_keep(c, (const char *)iov[i].iov_base + off, l))
			return false;
		n -= l;
		off = 0;
	}
	return true;
}

/* The request met a dead reused connection before any response byte: may
 * it go out again?  The method alone, or else the proof of
 * kp_replay_verdict() from what the kernel shows (settle_facts).  Read
 * before the socket is swapped; says why in the log either way. */
static bool replay_proved(struct kp_conn *c, int fd, enum kp_died how)
{
	struct kp_death d;
	settle_facts(c, fd, how, &d);
	enum kp_replay_verdict v = kp_replay_verdict(c->first_plan, &d);
	if (kp_replay_allowed(v)) {
		if (c->first_plan == KP_PLAN_PROVE)
			kp_count(replayed_unacked);
		kp_debug("fd %d: %s before any response byte; may be sent again: %s", fd,
			 died_str(how), kp_replay_verdict_str(v));
		return true;
	}
	kp_count(not_replayed);
	kp_debug("fd %d: %s on a reused connection before any response byte: %s; the program "
		 "sees the %s", fd, died_str(how), kp_replay_verdict_str(v), died_str(how));
	return false;
}

/* Right before a non-idempotent request's first byte on a reused
 * connection (docs/design.md §4): the program may have spent a while between its
 * connect() and this write.  False when the server closed it meanwhile. */
static bool still_alive(struct kp_conn *c, int fd)
{
#ifdef KP_TEST_NO_PROBE
	/* test build (tests/methods.bats): the request meets the dead socket,
	 * and only the proof by TCP's count can save it */
	return true;
#endif
	if (c->tls) {
		/* ciphertext waiting (a session ticket) is no sign of death; a
		 * close_notify with its FIN, or a reset, is */
		struct pollfd pfd = { .fd = fd, .events = POLLIN | POLLRDHUP };
		return KP_REAL(poll)(&pfd, 1, 0) <= 0 ||
		       !(pfd.revents & (POLLRDHUP | POLLHUP | POLLERR));
	}
	return pool_alive_fd(fd);
}

/* May a death under c be settled now, for the program (ready_settle,
 * tls_pipelined_settle)?  Only on a connection in use, where a replay
 * after the program's shutdown is allowed (replay_shut_ok), and never
 * once its fd left our hands (fork, exec). */
static bool settle_may(const struct kp_conn *c)
{
	return c->state == KP_ACTIVE && replay_shut_ok(c) && !c->handed_off;
}

/* A request pipelined behind the first on a handed-out TLS connection,
 * none of its answer read, whose server's FIN or reset is in: settled as
 * the program's read would settle it (recv_done), before this request is
 * written into the dead connection (docs/replay.md "What the program
 * observes", TLS): nothing waiting, the FIN (EOF) or the reset; or only a
 * close_notify, read through the engine (an EOF).  An answer, or anything
 * less sure, stays the read's to meet.  Where the rule allows, the first
 * goes again on a fresh connection and this one follows it there; a
 * handshake under way there makes the caller's write wait (the copy
 * first).  Only in the thread of the SSL's calls (tls_ready_settle). */
static void tls_pipelined_settle(struct kp_conn *c, int fd)
{
	struct kp_tcp_view v;
	int inq = 0;
	if (!settle_may(c) || c->resp_started ||
	    c->tls_thread != kp_this_thread() || kp_tcp_view(fd, &v) < 0 || v.state == TCP_ESTABLISHED ||
	    KP_REAL(ioctl)(fd, FIONREAD, &inq) < 0)
		return;
	enum kp_died how = KP_DIED_EOF;
	char b[1024]; /* a 408's whole head */
	size_t peeked = 0;
	if (!inq && v.state != TCP_CLOSE_WAIT) {
		how = KP_DIED_RESET;
	} else if (inq && !BUSY(c, kp_tls_ends_unanswered(c->tls, fd, inq, b, sizeof(b), &peeked))) {
		/* the server's idle 408 that closes, and its end: as plain
		 * (ready_settle) */
		struct iovec iov = { b, peeked };
		if (!peeked || !answered_408(&iov, 1, (ssize_t)peeked))
			return;
		how = KP_DIED_408;
	}
	replay(c, fd, how);
}

/* The first request on a reused connection, its head whole and none of it
 * sent: how it goes out (replay.h kp_replay_plan).  True when it rides the
 * reused connection with a copy kept (the plan, and TCP's count for the
 * proof, noted in c); false when it goes on a fresh connection, or is not
 * replayable at all.  extra: bytes in the call after the head.  Caller
 * holds c->lock. */
bool first_request_plan(struct kp_conn *c, int fd, const struct frm_req_head *h,
			size_t extra)
{
	if (c->first == KP_FIRST_SENT) {
		/* pipelined behind the first, which a server's close may have
		 * met already: settled first, as a read would (replayed where
		 * the rule allows, and this one follows it on the fresh
		 * socket), never written into the dead one (docs/replay.md
		 * "What the program observes"); no replay for this one */
		if (c->tls)
			tls_pipelined_settle(c, fd);
		else
			ready_settle(c, fd);
		c->first = KP_FIRST_DONE;
		return false;
	}
	struct kp_req_facts f = {
		.idempotent = replayable(h),
		.framable = !h->upgrade && !h->doubt && h->method != FRM_M_CONNECT &&
			    (h->body_kind == FRM_BODY_NONE || h->body_kind == FRM_BODY_LENGTH),
		.body_len = h->body_kind == FRM_BODY_LENGTH ? h->body_len : 0,
		.extra = extra,
	};
	/* the rewrite adds a few bytes to the head: the bound is about memory */
	f.bytes = h->head_len + f.body_len;
	struct kp_tcp_view tv = { 0 };
	bool known = !f.idempotent && kp_tcp_view(fd, &tv) == 0 && tv.acked_ok;
	enum kp_first_plan plan = kp_replay_plan(&f, known, kp_cfg.any_method, kp_cfg.replay_max);
	if (plan == KP_PLAN_FRESH) {
		first_request_fresh(c, fd, "a request that may not be replayed");
		return false;
	}
	/* (a GET is not probed again: the hand-out's probe was a moment ago,
	 * and a dead connection under it is replayed anyway) */
	if (plan == KP_PLAN_PROVE && !still_alive(c, fd)) {
		conn_note_dead(c, 0);
		kp_count(probed_dead);
		if (swap_fresh(c, fd, false) == 0) {
			kp_debug("fd %d: the reused connection died before the request's first byte: "
				 "sent on a fresh one", fd);
		} else {
			int err = errno;
			kp_debug("fd %d: the reused connection died before the request's first byte, "
				 "no fresh connection (%s)", fd, strerror(err));
			c->first = KP_FIRST_DONE;
			unpool(c, "dead before the first byte, no fresh connection");
			if (!c->tls && fresh_was_answered(err))
				c->fresh_refused = err; /* as first_request_fresh */
		}
		return false;
	}
	c->first_plan = (uint8_t)plan;
	c->acked_known = known;
	c->acked_at_first = tv.acked;
	c->received_at_first = tv.received;
	c->fin_before_first = tv.state == TCP_CLOSE_WAIT;
	return true;
}

/* The program's send failed with EPIPE where we had added MSG_NOSIGNAL
 * to handle a dead connection ourselves, and it is not replayed: the
 * signal the kernel would have sent with the program's own flags, on the
 * calling thread (docs/replay.md, "Nothing added": the same signals). */
__thread bool kp_tls_quiet;
__thread bool kp_tls_epipe;

void sigpipe_as_kernel(int flags)
{
	if (!(flags & MSG_NOSIGNAL)) {
		int saved = errno;
		pthread_kill(pthread_self(), SIGPIPE);
		errno = saved;
	}
}

/* A write into the body of the first request on a reused connection
 * (KP_FIRST_SENT): its bytes join the copy, and a connection found dead
 * under them (EPIPE, reset) gets the request again on a fresh one where
 * replay_proved() allows; then this call's bytes follow there.  Caller
 * holds c->lock; released here.  Returns as kp_send_intercept. */
bool first_body_send(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt,
		     int flags, ssize_t *ret)
{
	int saved = errno;
	if (c->shut_how) { /* the ordinary path makes the kernel say EPIPE */
		c->first = KP_FIRST_DONE;
		kp_unlock(&c->lock);
		return false;
	}
	/* a rewritten close request whose body ends in this write: only the
	 * body goes out (after_close, as send_body_end) */
	size_t total = iov_total(iov, iovcnt), n = total;
	struct iovec small[8], *v = (struct iovec *)iov;
	size_t v_cap = 0;
	int nv = iovcnt;
	if (after_close(c) && (n = body_span(c->req_body, iov, iovcnt, 0)) < total) {
		v = iovcnt <= 8 ? small : kp_wbuf_grow(NULL, &v_cap, (size_t)iovcnt * sizeof(*v));
		if (!v) {
			v = (struct iovec *)iov; /* sent whole, as before the Connection mask */
			n = total;
		} else {
			nv = 0;
			for (size_t left = n; left && nv < iovcnt; nv++) {
				v[nv] = iov[nv];
				if (v[nv].iov_len > left)
					v[nv].iov_len = left;
				left -= v[nv].iov_len;
			}
		}
	} else {
		n = total;
	}
	struct msghdr m = { .msg_iov = v, .msg_iovlen = (size_t)nv };
	ssize_t r;
	for (;;) {
		/* (the kernel's EINTR is the program's: a handler that would
		 * end its own send ended ours, nothing of it gone; TLS: the
		 * program's WANT_WRITE) */
		r = conn_sendmsg(c, fd, &m, flags | MSG_NOSIGNAL);
		if (r >= 0 || c->first != KP_FIRST_SENT || (errno != EPIPE && errno != ECONNRESET))
			break;
		int err = errno;
		kp_call_write = true;
		kp_call_nowait = flags & MSG_DONTWAIT;
		bool again = replay(c, fd, err == EPIPE ? KP_DIED_SEND_EPIPE : KP_DIED_SEND_RESET);
		kp_call_write = kp_call_nowait = false;
		if (again && c->replay_rest) {
			/* the copy did not all go within this call (a signal,
			 * or a non-blocking socket full): none of this call's
			 * bytes after a part of it; the program's retry sends
			 * the rest first (replay_rest_first) */
			err = kp_replay_interrupted ? EINTR : EAGAIN;
			kp_replay_interrupted = false;
			r = -1;
			errno = err;
			break;
		}
		if (again && c->replay_async) {
			/* the copy waits for the fresh handshake: this call's
			 * bytes after it, never before (the server read them as
			 * the start of a request).  Nothing of them taken: the
			 * program's SSL says what the handshake wants, and its
			 * retry of the same bytes goes on the copy's heels
			 * (docs/replay.md "The program's bounds") */
			err = kp_replay_interrupted ? EINTR : EAGAIN;
			kp_replay_interrupted = false;
			kp_tls_push_fail(kp_tls_want(c->tls));
			r = -1;
			errno = err;
			break;
		}
		if (kp_replay_interrupted) {
			/* a signal ended the replay, or came in its proof: the
			 * program's send says so, none of its bytes gone */
			kp_replay_interrupted = false;
			errno = EINTR;
			break;
		}
		if (!again) {
			errno = err;
			break;
		}
	}
	int err = errno;
	if (r < 0 && err == EPIPE)
		sigpipe_as_kernel(flags);
	if (v != iov && v != small)
		kp_wbuf_free(v, v_cap);
	if (r > 0 && (size_t)r == n && n < total) {
		after_close_drop(fd, total - n);
	}
	if (r > 0) {
		/* every byte that went joins the copy, a request pipelined
		 * after the body in this write too: a replay of the body alone
		 * lost it (docs/replay.md "A request pipelined in a body's
		 * write"); the proof that allows a replay covers every byte
		 * sent (none of them was read) */
		if (c->first == KP_FIRST_SENT && !replay_keep_iov(c, iov, iovcnt, 0, (size_t)r))
			c->first = KP_FIRST_DONE;
		account_sent(c, iov, iovcnt, 0, (size_t)r);
	} else if (r < 0 && err != EAGAIN && err != EWOULDBLOCK && err != EINTR) {
		unpool(c, "a write failed");
	}
	kp_unlock(&c->lock);
	/* the program is told the bytes after the body were taken */
	*ret = r > 0 && (size_t)r == n ? (ssize_t)total : r;
	errno = r < 0 ? err : saved;
	return true;
}

bool answered_408(const struct iovec *iov, int iovcnt, ssize_t ret)
{
	if (iovcnt < 1 || ret < 12)
		return false;
	size_t n = iov[0].iov_len < (size_t)ret ? iov[0].iov_len : (size_t)ret;
	return kp_replay_408_closes(iov[0].iov_base, n);
}

/* The program read a pending error (SO_ERROR), or ENOTCONN, of fd.  Before
 * its first request: a fresh connection in its place.  After it: the
 * program has met the failure itself, so nothing is replayed any more (the
 * proof reads the kernel's order of FIN and reset, and the error it took
 * was part of it: docs/replay.md). */
bool kp_conn_dead_seen(struct kp_conn *c, int fd)
{
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return false;
	return dead_seen(c, fd);
}

/* kp_conn_dead_seen inside a wrapper's marks (a read's: kp_enter). */
bool dead_seen(struct kp_conn *c, int fd)
{
	if (c == KP_POOLED || __atomic_load_n(&c->first, __ATOMIC_RELAXED) == KP_FIRST_DONE)
		return false;
	int saved = errno;
	bool swapped = false;
	if (conn_lock(c, fd)) {
		if (c->first == KP_FIRST_SENT) {
			c->first = KP_FIRST_DONE;
			c->replay_len = 0;
			unpool(c, "the program read the connection's error under its first request");
		} else if (c->first == KP_FIRST_UNSENT && c->state == KP_ACTIVE && c->reused) {
			conn_note_dead(c, 0);
			swapped = swap_fresh(c, fd, false) == 0;
			kp_debug("fd %d: a reused connection found reset before its first request: %s", fd,
				 swapped ? "a fresh one" : "no fresh one");
		}
		kp_unlock(&c->lock);
	}
	errno = saved;
	return swapped;
}

int kp_conn_wait_ms(struct kp_conn *c)
{
	if (c == KP_POOLED)
		return -1;
	if (__atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&c->rx_extra_len, __ATOMIC_ACQUIRE))
		return 0;
	if (!c->lost || c->last_rx_ms < c->lost_ms)
		return -1; /* no response byte since: the server has the word */
	uint64_t quiet = kp_now_ms() - c->last_rx_ms;
	return quiet >= kp_cfg.quiet_ms ? 0 : (int)(kp_cfg.quiet_ms - quiet);
}

/* The framing was lost after we had rewritten a request: the server will
 * not close, so a program reading to EOF would wait for the server's idle
 * timeout.  Once the connection has been quiet for KEEPALIVE_QUIET_MS after
 * its last byte we show EOF (and really close at close()).
 *
 * That wait is ours, but the read's bounds are the program's, and it
 * never outlasts them (alone the read would end at the server's close, or
 * at its bound if that came first): O_NONBLOCK and MSG_DONTWAIT do not
 * wait (the program waits in its poll, which kp_conn_wait_ms wakes);
 * SO_RCVTIMEO, read only once a wait is due (never on the fast path),
 * ends it with EAGAIN, the kernel's timed-out read; a signal ends it with
 * EINTR where it would end the kernel's read (kp_sigwait: a handler
 * without SA_RESTART, or under SO_RCVTIMEO any, signal(7)); after one
 * with SA_RESTART alone the read would go on, and so does the wait.
 * Never an EOF sooner than the quiet period: the bytes on the wire are
 * all we know (docs/hold.md).  *err: the bound that ended the wait, 0 if
 * none. */
/* SO_RCVTIMEO in ms, or -1 for none */
static int64_t rcvtimeo_ms(int fd)
{
	struct timeval tv = { 0, 0 };
	socklen_t len = sizeof(tv);
	if (KP_REAL(getsockopt)(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &len) < 0 || (!tv.tv_sec && !tv.tv_usec))
		return -1;
	return (int64_t)tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000;
}

bool lost_quiet(struct kp_conn *c, int fd, int flags, int *err)
{
	uint64_t deadline = 0; /* of SO_RCVTIMEO, once read; UINT64_MAX: none */
	struct kp_sigwait sw;
	bool masked = false, quiet = false;
	for (;;) {
		int ms = kp_conn_wait_ms(c);
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (ms < 0)
			break;
		if (ms == 0) { /* quiet long enough, unless bytes wait unread */
			quiet = KP_REAL(poll)(&pfd, 1, 0) == 0;
			break;
		}
		if (c->nonblock || (flags & MSG_DONTWAIT))
			break; /* the program waits in poll: kp_conn_wait_ms */
		if (!deadline) {
			int64_t t = rcvtimeo_ms(fd);
			deadline = t < 0 ? UINT64_MAX : kp_now_ms() + (uint64_t)t;
		}
		uint64_t now = kp_now_ms();
		if (now >= deadline) { /* the read's SO_RCVTIMEO ran out */
			*err = EAGAIN;
			break;
		}
		if (deadline - now < (uint64_t)ms)
			ms = (int)(deadline - now);
		if (!masked) /* no handler runs unseen between two waits */
			kp_sigwait_begin(&sw);
		masked = true;
		int r = kp_sigwait_poll(&sw, &pfd, 1, ms);
		if (r < 0 && errno == EINTR) {
			if (sw.restarts && deadline == UINT64_MAX)
				continue;
			*err = EINTR;
			break;
		}
		if (r != 0)
			break; /* data, or an error the real read will report */
	}
	if (masked)
		kp_sigwait_end(&sw);
	return quiet;
}

/* ready_settle for a TLS connection: one handed out to the program's SSL
 * whose first request has not gone, and whose server ended it while it
 * waited (its idle close: close_notify and FIN, a bare FIN, a reset),
 * reports readable (or an error) where the program's own connection, just
 * made, has nothing to say: it gets a fresh connection now, the program's
 * SSL its own handshake on it (swap_fresh, as the write path does when the
 * request meets the dead socket), and the kernel is asked again there.
 * Bytes waiting are no answer to anything: the server's close_notify (a
 * request written past the engine would have broken the records).  Only
 * once TCP says the server's FIN or reset is in: a close_notify alone
 * stays the program's read's to meet (read_unseen_end then decides).
 * docs/replay.md "Before the first request", TLS.  Caller holds c->lock. */
static bool tls_ready_settle(struct kp_conn *c, int fd)
{
	struct kp_tcp_view v;
	if (!c->tls_handed || c->first != KP_FIRST_UNSENT || !c->reused || c->n_reqs || c->held_len ||
	    kp_tcp_view(fd, &v) < 0 || v.state == TCP_ESTABLISHED)
		return false;
	/* The swap makes the program's handshake with its SSL: only in the
	 * thread of the SSL's last call we saw.  Another thread's poll (an
	 * I/O thread that watches while a worker makes the SSL calls under
	 * the program's own lock) could run it beside that worker's call;
	 * there the report stands, and the program's read meets the end and
	 * swaps in its own call (read_unseen_end). */
	if (c->tls_thread != kp_this_thread())
		return false;
	conn_note_dead(c, 0);
	kp_count(probed_dead);
	if (swap_fresh(c, fd, false) < 0)
		return false;
	kp_debug("fd %d: a handed-out TLS connection ended before its first request: a fresh one", fd);
	return true;
}

/* The server's FIN came before anything else under c's first request,
 * which needs the proof: in already when the request went, or the one
 * byte TCP has received since (no response byte: the caller saw none
 * waiting, and one read would have ended the first-request state).  A
 * reset adds nothing to the count.  docs/replay.md "What the program
 * observes". */
static bool fin_came_first(const struct kp_conn *c, const struct kp_tcp_view *v)
{
	if (c->first_plan != KP_PLAN_PROVE || !c->acked_known || !v->acked_ok)
		return false;
	return c->fin_before_first || v->received == c->received_at_first + 1;
}

/*
 * Readiness (poll, select, epoll) is about to tell the program something
 * of fd.  A reused connection the server closed or reset under its first
 * request reports POLLERR|POLLHUP (or EOF) there, and a program that
 * trusts it gives up (ab counts an exception and never reads, and its
 * counts never meet) where its read would have met our replay.  So settle
 * it here: what the read would do, done now, from TCP's state and without
 * consuming the socket's pending error (docs/replay.md): a reset the
 * request is not replayed under stays the program's to read.  Caller holds
 * c->lock.
 */
bool ready_settle(struct kp_conn *c, int fd)
{
	if (!settle_may(c))
		return false;
	if (c->tls)
		return tls_ready_settle(c, fd);
	struct kp_tcp_view v;
	int inq = 0;
	if (kp_tcp_view(fd, &v) < 0 || KP_REAL(ioctl)(fd, FIONREAD, &inq) < 0)
		return false;
	if (inq > 0) {
		/* bytes wait: peeking at data takes no error */
		char b[1024]; /* a 408's whole head */
		ssize_t r = KP_REAL(recv)(fd, b, sizeof(b), MSG_PEEK | MSG_DONTWAIT);
		struct iovec iov = { b, sizeof(b) };
		if (c->first == KP_FIRST_SENT && r > 0 && answered_408(&iov, 1, r))
			return replay(c, fd, KP_DIED_408);
		/* an answer, or (before any request we saw) stray bytes the
		 * probe before the first request finds, or the answer to a
		 * request written where we cannot see: never swapped here */
		return false;
	}
	if (v.state == TCP_ESTABLISHED)
		return false; /* nothing yet: the kernel's answer stands */
	if (c->first == KP_FIRST_UNSENT) {
		/* dead before the program wrote a byte: a fresh one in its place */
		conn_note_dead(c, 0);
		if (swap_fresh(c, fd, false) < 0)
			return false;
		kp_debug("fd %d: a reused connection died before its first request: a fresh one", fd);
		return true;
	}
	if (v.state == TCP_CLOSE_WAIT) /* the FIN alone: a read returns 0 */
		return replay(c, fd, KP_DIED_EOF);
	if (v.state == TCP_CLOSE && c->first_plan == KP_PLAN_IDEMPOTENT)
		return replay(c, fd, KP_DIED_RESET); /* any failure: the error is ours */
	/* a reset under a request that needs the proof: the FIN before it
	 * shows in TCP's count of bytes received (a read of 0 would say the
	 * same, and leave the reset's EPIPE pending: settle_facts); with no
	 * FIN before it, never proof: the socket and its error stay the
	 * program's, untouched (a peek would take the error) */
	if (v.state == TCP_CLOSE && fin_came_first(c, &v))
		return replay(c, fd, KP_DIED_EOF);
	return false;
}

bool kp_conn_ready_settle(struct kp_conn *c, int fd)
{
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return false;
	if (c == KP_POOLED || __atomic_load_n(&c->first, __ATOMIC_RELAXED) == KP_FIRST_DONE)
		return false;
	int saved = errno;
	bool swapped = false;
	if (conn_lock(c, fd)) {
		if (c->first != KP_FIRST_DONE)
			swapped = ready_settle(c, fd);
		kp_unlock(&c->lock);
	}
	errno = saved;
	return swapped;
}

bool kp_conn_read_settle(struct kp_conn *c, int fd)
{
	struct kp_tcp_view v;
	/* (TLS: only a handed-out connection before its first request,
	 * tls_ready_settle; a replay's is the read's to make) */
	if (c == KP_POOLED ||
	    (__atomic_load_n(&c->tls, __ATOMIC_ACQUIRE) &&
	     __atomic_load_n(&c->first, __ATOMIC_RELAXED) != KP_FIRST_UNSENT) ||
	    kp_tcp_view(fd, &v) < 0 || v.state == TCP_ESTABLISHED)
		return false;
	return kp_conn_ready_settle(c, fd);
}

void kp_conn_observe(struct kp_conn *c, int fd)
{
	if (c == KP_POOLED || __atomic_load_n(&c->first, __ATOMIC_RELAXED) == KP_FIRST_DONE)
		return;
	int saved = errno;
	kp_conn_read_settle(c, fd);
	errno = saved;
}

/* Step aside in the middle of things: bytes we held from an unfinished head
 * were promised to the program as sent, so they go out first; and if a
 * rewritten request is still waiting for its response, nobody will close
 * the connection for the program: let the quiet period end it (lost).
 * fd < 0: no held bytes can be pending here.  Caller holds c->lock. */
void give_up(struct kp_conn *c, int fd, const char *why)
{
	if (fd >= 0)
		unvouch(c, fd, why);
	flush_held(c, fd, 0);
	for (unsigned i = 0; i < c->n_reqs && !c->lost; i++) {
		if (c->reqs[i].rewritten) {
			c->lost = true;
			/* the quiet clock starts with the response: a response under
			 * way was last heard from now (it is what we gave up on); else
			 * wait for the server's first byte, however late it comes */
			c->lost_ms = c->resp_started ? c->last_rx_ms : kp_now_ms();
		}
	}
	go_passthrough(c, why);
}

/* Framing given up under a request the program asked to close and we
 * rewrote: with that request whole, our FIN goes out, so the server closes
 * once it has answered, as it would have for the program's own close.
 * true if it went.  Caller holds c->lock, has called give_up. */
static bool fin_for_rewritten(struct kp_conn *c, int fd, bool rewritten, bool whole)
{
	if (fd < 0 || !rewritten || !whole || c->shut_how || KP_REAL(shutdown)(fd, SHUT_WR) < 0)
		return false;
	__atomic_store_n(&c->fin_for_server, true, __ATOMIC_RELEASE);
	return true;
}

static bool rewritten_any(const struct kp_conn *c)
{
	bool rewritten = false;
	for (unsigned i = 0; i < c->n_reqs; i++)
		rewritten |= c->reqs[i].rewritten;
	return rewritten;
}

/* A read no wrapper sees (AIO's, preadv2's with bits we do not route) of a
 * response under way: the framing is given up, and the EOF we owe can
 * never reach that read; so, as for stdio's reads (kp_note_fdopen), the
 * server's must: with the request we rewrote complete, our FIN goes out
 * and the server closes once it has answered.  Caller holds c->lock. */
void unseen_read_fin(struct kp_conn *c, int fd)
{
	bool rewritten = rewritten_any(c), whole = c->req_mode == KP_REQ_HEAD && !c->held_len;
	give_up(c, fd, "a read we cannot see");
	fin_for_rewritten(c, fd, rewritten, whole);
}

/* A response our framer refuses (a head a lenient client reads: "HTTP/1.1
 * 200 OK" with two spaces, a space before a colon): the framing is given
 * up.  A plain request we rewrote, whole: our FIN, and the server's close
 * ends the answer, however slow its body (the quiet period read a 3 s
 * pause as the end: a body cut short, docs/replay.md "A response that
 * cannot end").  Otherwise the quiet period's EOF (give_up).  Caller holds
 * c->lock. */
void lost_response(struct kp_conn *c, int fd)
{
	bool rewritten = rewritten_any(c), whole = c->req_mode == KP_REQ_HEAD && !c->held_len;
	give_up(c, fd, "unparsable response");
	if (!c->tls && fin_for_rewritten(c, fd, rewritten, whole))
		c->lost = false; /* the server's close is the end, not a quiet period */
}

void account_sent(struct kp_conn *c, const struct iovec *iov, int iovcnt, size_t off, size_t n)
{
	const char *why = wire_account(c, iov, iovcnt, off, n);
	if (why)
		give_up(c, -1, why);
}

/* ------------------------------------------------------------ HTTPS (from conn.c) */

int kp_conn_tls_remake(int fd, void *ssl, bool watched)
{
	struct kp_conn *c = kp_fd_conn(fd);
	if (!c || c == KP_POOLED || !conn_lock(c, fd))
		return -1;
	int saved = errno, r = -1;
	/* (the pooled connection is not put back: its engine answered the
	 * program until now, and the program's handshake replaces it) */
	if (c->state == KP_ACTIVE && c->tls_handed && c->tls_ssl == ssl && c->first == KP_FIRST_UNSENT &&
	    !c->n_reqs && !c->held_len)
		r = swap_fresh(c, fd, false);
	/* and its callbacks see its end as their own: the server's close, its
	 * own close_notify (a close request not rewritten, never pooled) */
	if (r == 0 && watched) {
		unpool(c, "a callback that watches the connection");
		c->handed_off = true; /* (what it means to the send path) */
	}
	kp_unlock(&c->lock);
	errno = saved;
	return r;
}

void kp_conn_tls_watched(int fd)
{
	struct kp_conn *c = kp_fd_conn(fd);
	if (!c || c == KP_POOLED || !conn_lock(c, fd))
		return;
	unpool(c, "a callback that watches set after the connection carried bytes");
	c->handed_off = true; /* (what it means to the send path) */
	kp_unlock(&c->lock);
}
