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
 * Here, in this order: pool ops, twins, the fd budget, connection
 * objects, the finished list, connect() and hand-out, close() and park,
 * the write side, the read side, HTTPS, hand-off, fork, exit.  Beside it,
 * sharing conn_internal.h: the program's socket options carried onto a
 * pooled socket (sockopts.c), and the first use of a reused connection,
 * fresh connections and replay (conn_replay.c, docs/design.md §4).
 */
#include "conn_internal.h"
#include "aio_scan.h"

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
#include "kp_mem.h"
#include "real.h"
#include "replay.h"
#include "tls.h"
#include "watch.h"
#include "wbuf.h"

/* ------------------------------------------------------------ pool ops */

static int pool_close_fd(int fd)
{
	struct kp_tls *t = kp_tls_unpark(fd);
	if (t)
		kp_tls_put(t);
	kp_fd_swap(fd, NULL); /* before the number can be reused */
	kp_count(dropped);
	return KP_REAL(close)(fd);
}

/* An idle socket is alive when reading would block: no EOF, no error, and
 * no unsolicited bytes (a 408 or garbage means the server is done with it). */
int pool_alive_fd(int fd)
{
	char c;
	ssize_t r = KP_REAL(recv)(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* A live socket the local caps push out goes to the broker, if there is
 * one, rather than to close(): another process may want it.  A TLS one
 * cannot leave (its state is ours): the pool closes it. */
static int pool_evicted_fd(int fd, const struct pool_key *key, const struct pool_meta *meta)
{
	int link = -1;
	if (!kp_broker_enabled() || kp_tls_is_parked(fd) || kp_broker_put(&link, key, fd, meta) < 0) {
		kp_broker_close(link);
		return -1;
	}
	kp_broker_close(link);
	kp_fd_swap(fd, NULL);
	KP_REAL(close)(fd);
	return 0;
}

/* ------------------------------------------------------------ twins */

/*
 * A connection handed out from the pool keeps the hidden fd it was parked
 * at (its twin) while the program uses it: the hand-out is then one dup3
 * (no close of the hidden fd) and the next park no F_DUPFD, so a reused
 * request costs the program's own syscalls and no more.  A
 * twin is the pool's to answer for, as a parked socket is: CLOEXEC (exec
 * drops it), marked KP_POOLED in the table (the program's calls on that
 * number see EBADF), closed in a forked child, kept out of close_range,
 * given back on EMFILE, and counted with the pooled sockets against the
 * pool's share of the fd table.  It is closed before the program's fd
 * whenever the connection is really closed, so the program's close() is
 * still the last one of the socket (FIN, SO_LINGER) and it drops the
 * socket's epoll registrations as it would.
 */
#define KP_MAX_TWINS 64

static struct twin {
	int fd;
	struct kp_conn *c;
} twins[KP_MAX_TWINS];
static unsigned n_twins;
static unsigned twin_cap; /* the pool's share of the fd table (pool_fd_plan) */
static kp_mutex_t twin_lock = KP_MUTEX_INITIALIZER;

/* Keep p, the hidden fd c's socket was handed out from, as c's twin.
 * False when the fd budget has no room for it (the caller closes p). */
static bool twin_keep(struct kp_conn *c, int p)
{
	size_t pooled = pool_size();
	bool kept = false;
	kp_lock(&twin_lock);
	if (__atomic_load_n(&c->twin, __ATOMIC_RELAXED) < 0 && n_twins < KP_MAX_TWINS &&
	    pooled + n_twins < __atomic_load_n(&twin_cap, __ATOMIC_RELAXED)) {
		twins[n_twins++] = (struct twin){ p, c };
		__atomic_store_n(&c->twin, p, __ATOMIC_RELAXED);
		kept = true;
	}
	kp_unlock(&twin_lock);
	return kept;
}

static void twin_unlist(unsigned i)
{
	twins[i] = twins[--n_twins];
}

/* Take c's twin away from the registry: the caller owns the fd now (it
 * is still marked KP_POOLED).  -1 when c has none. */
static int twin_take(struct kp_conn *c)
{
	if (__atomic_load_n(&c->twin, __ATOMIC_RELAXED) < 0)
		return -1;
	int fd = -1;
	kp_lock(&twin_lock);
	for (unsigned i = 0; i < n_twins; i++) {
		if (twins[i].c == c) {
			fd = twins[i].fd;
			twin_unlist(i);
			break;
		}
	}
	__atomic_store_n(&c->twin, -1, __ATOMIC_RELAXED);
	kp_unlock(&twin_lock);
	return fd;
}

/* c's socket is leaving (really closed, or replaced under the program's
 * fd): close its twin first. */
void twin_drop(struct kp_conn *c)
{
	int fd = twin_take(c);
	if (fd < 0)
		return;
	kp_fd_swap(fd, NULL); /* before the number can be reused */
	KP_REAL(close)(fd);
}

/* The program closes (or dup2s onto) a number it never had, which is a
 * twin: its connection forgets it; the caller closes it or lets the
 * kernel.  True when fd was a twin. */
static bool twin_forget_fd(int fd)
{
	bool found = false;
	kp_lock(&twin_lock);
	for (unsigned i = 0; i < n_twins; i++) {
		if (twins[i].fd == fd) {
			__atomic_store_n(&twins[i].c->twin, -1, __ATOMIC_RELAXED);
			twin_unlist(i);
			found = true;
			break;
		}
	}
	kp_unlock(&twin_lock);
	return found;
}

/* Out of fds: every twin is closed (their connections go on without). */
static unsigned twins_drain(void)
{
	int fds[KP_MAX_TWINS];
	unsigned n;
	kp_lock(&twin_lock);
	n = n_twins;
	for (unsigned i = 0; i < n; i++) {
		fds[i] = twins[i].fd;
		__atomic_store_n(&twins[i].c->twin, -1, __ATOMIC_RELAXED);
	}
	n_twins = 0;
	kp_unlock(&twin_lock);
	for (unsigned i = 0; i < n; i++) {
		kp_fd_swap(fds[i], NULL);
		KP_REAL(close)(fds[i]);
	}
	return n;
}

size_t kp_hidden_count(void)
{
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return 0;
	size_t n = pool_size();
	kp_lock(&twin_lock);
	n += n_twins;
	kp_unlock(&twin_lock);
	return n + kp_tls_learners();
}

static int int_cmp(const void *a, const void *b)
{
	return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

size_t kp_hidden_fds(int *fds, size_t cap)
{
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return 0;
	size_t n = pool_fds(fds, cap);
	kp_lock(&twin_lock);
	for (unsigned i = 0; i < n_twins && n < cap; i++)
		fds[n++] = twins[i].fd;
	kp_unlock(&twin_lock);
	n += kp_tls_learner_fds(fds + n, cap - n);
	qsort(fds, n, sizeof(*fds), int_cmp);
	return n;
}

/* Every hand-out is probed (pool_config.unprobed_ms 0), however recently
 * the socket was parked: one recv(MSG_PEEK) a reuse is the price of
 * handing out neither a socket whose server has just gone (the program
 * would meet at its read what a fresh connect() refuses) nor one with a
 * stray response waiting, which would be read as the next request's
 * answer (docs/replay.md, "Hand-out and park"). */
void kp_conn_init(void)
{
	kp_mem_reserve(); /* the pool's objects and small write buffers */
	struct pool_config pc = {
		.idle_ms = kp_cfg.idle_ms,
		.max_per_dest = kp_cfg.max_idle_per_dest,
		.max_total = kp_cfg.max_idle_total,
		.unprobed_ms = 0,
	};
	struct pool_ops ops = { .close = pool_close_fd, .alive = pool_alive_fd,
				.evicted = pool_evicted_fd };
	pool_init(&pc, &ops);
	kp_broker_init();
}

void conn_flush_opts(struct kp_conn *c, int fd)
{
	if (!kp_sockopts_flush(&c->so, fd))
		unpool(c, "a socket option of the previous owner could not be reset");
}

/* ------------------------------------------------------------ fd budget */

/* Where our hidden fds live: fdlimit.c, docs/limits.md. */
static uint64_t fd_soft; /* the soft RLIMIT_NOFILE the plan was made for */

static void plan_fds(const struct rlimit *rl, bool changed)
{
	uint64_t soft = rl->rlim_cur == RLIM_INFINITY ? 1u << 20 : rl->rlim_cur;
	uint64_t was = __atomic_exchange_n(&fd_soft, soft, __ATOMIC_RELAXED);
	if (changed && soft == was && kp_limits_fresh(rl))
		return;
	unsigned cap;
	int base;
	pool_fd_plan(soft, kp_cfg.max_idle_total, &cap, &base);
	if (kp_limits_plan(rl, kp_cfg.max_idle_total + 2)) {
		cap = kp_cfg.max_idle_total;
		base = (int)soft;
	}
	/* pooled sockets placed for the old limit: beyond a lowered one, or
	 * inside a raised one (costing the program numbers): a few
	 * reconnects, where keeping them would cost the program fds */
	if (changed) {
		pool_drain();
		twins_drain();
	}
	kp_fd_set_hidden_base(base);
	__atomic_store_n(&twin_cap, cap, __ATOMIC_RELAXED);
	pool_set_max_total(cap);
	kp_debug("fd budget: soft limit %llu, up to %u pooled sockets from fd %d%s",
		 (unsigned long long)soft, cap, base, kp_limits_above() ? " (above the limit)" : "");
}

void kp_conn_fd_limits(bool changed)
{
	struct rlimit rl;
	if (kp_sys_prlimit(0, RLIMIT_NOFILE, NULL, &rl) == 0)
		plan_fds(&rl, changed);
}

void kp_conn_fd_limits_from(const struct rlimit *rl)
{
	plan_fds(rl, false);
}

bool kp_fds_short(void)
{
	int err = errno;
	if (err != EMFILE && err != ENFILE)
		return false;
	kp_conn_fd_limits(true); /* the program may have changed its limit */
	/* above the limit our fds cost the program none: nothing to give */
	unsigned n = err == EMFILE && kp_limits_above() ? 0 : pool_drain() + twins_drain() + kp_tls_learners_drain();
	if (n)
		kp_debug("out of fds (%s): %u pooled sockets (or twins) closed, the call made again",
			 strerror(err), n);
	errno = err;
	return n > 0;
}

/* A copy of fd at a hidden number; a limit changed behind us (EINVAL): a
 * new plan, and one more try. */
int kp_fd_hide_planned(int fd)
{
	int h = kp_fd_hide(fd);
	if (h < 0 && errno == EINVAL) {
		kp_conn_fd_limits(true);
		h = kp_fd_hide(fd);
	}
	return h;
}

/* ------------------------------------------------------------ objects */

/* Connection objects are recycled, never freed (conn.h): a wrapper that
 * raced with the close of its fd may still hold a pointer, and must find a
 * valid mutex behind it and, once it holds it, a table that no longer maps
 * its fd to the object (conn_lock). */
static struct kp_conn *free_conns;
static kp_mutex_t free_lock = KP_MUTEX_INITIALIZER;

/* Bumped by every change of the process's credentials (before and after
 * the call): what was made under an older value belongs to another
 * identity (kp_conn_cred_change). */
static uint32_t cred_epoch;
/* A thread changed its own identity or namespace (unshare, setns, capset,
 * a raw set*id) while others ran: from now on the process's threads may
 * be different owners, and nothing ever changes owner again. */
static bool divided;

/*
 * The one question every park, hand-out and hand-over to the broker asks
 * (docs/owner.md): may this connection change owner?  Only while we know
 * its single owner: we connected it ourselves (kp_connect: a socket whose
 * socket() we saw, of the address's family, never shared before), every
 * duplication of it went through us, it never crossed a fork, spawn,
 * exec or SCM_RIGHTS (shared: for life), and the process's credentials
 * are still those it was made under.  Caller holds c->lock.
 */
static bool one_owner(const struct kp_conn *c)
{
	return !c->shared && !__atomic_load_n(&c->raw, __ATOMIC_ACQUIRE) && c->cred_epoch == __atomic_load_n(&cred_epoch, __ATOMIC_ACQUIRE) &&
	       !__atomic_load_n(&divided, __ATOMIC_RELAXED);
}

/* The same question for a socket in the pool: parked by one_owner's
 * leave, under the credentials of its tag. */
static bool pooled_one_owner(const struct kp_tag *tag)
{
	return tag->cred_epoch == __atomic_load_n(&cred_epoch, __ATOMIC_ACQUIRE) &&
	       !__atomic_load_n(&divided, __ATOMIC_RELAXED);
}

/* Connection objects come from mmap'd slabs, never malloc: connect() is
 * async-signal-safe, and a handler may interrupt the program inside
 * malloc (calloc there corrupted the arena or deadlocked on its lock).
 * Objects are recycled, never unmapped.  Caller holds free_lock. */
static struct kp_conn *slab_refill(void)
{
	size_t per = 4096 / sizeof(struct kp_conn) + 1;
	void *m = mmap(NULL, per * sizeof(struct kp_conn), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
#ifdef __SANITIZE_ADDRESS__
	/* what the objects point to (held heads, replay copies) is reachable */
	__lsan_register_root_region(m, per * sizeof(struct kp_conn));
#endif
	struct kp_conn *objs = m;
	for (size_t i = 1; i < per; i++) {
		kp_mutex_init(&objs[i].lock);
		objs[i].next_free = free_conns;
		free_conns = &objs[i];
	}
	kp_mutex_init(&objs[0].lock);
	return &objs[0];
}

struct kp_conn *conn_new(void)
{
	kp_lock(&free_lock);
	struct kp_conn *c = free_conns;
	if (c)
		free_conns = c->next_free;
	else
		c = slab_refill();
	kp_unlock(&free_lock);
	if (!c)
		return NULL;
	kp_lock(&c->lock);
	/* the buffers a recycled object kept (conn_free) */
	char *held = c->held, *replay = c->replay;
	size_t held_cap = c->held_cap, replay_cap = c->replay_cap;
	memset((char *)c + offsetof(struct kp_conn, next_free), 0,
	       sizeof(*c) - offsetof(struct kp_conn, next_free));
	c->held = held;
	c->held_cap = held_cap;
	c->replay = replay;
	c->replay_cap = replay_cap;
	c->refs = 1;
	c->cred_epoch = __atomic_load_n(&cred_epoch, __ATOMIC_ACQUIRE);
	__atomic_store_n(&c->twin, -1, __ATOMIC_RELAXED);
	c->poolable = true;
	c->ka_timeout = -1;
	c->ka_max = -1;
	kp_unlock(&c->lock);
	return c;
}

struct kp_conn *kp_conn_track(int fd)
{
	struct kp_conn *c = conn_new();
	if (!c)
		return NULL;
	struct kp_conn *old = kp_fd_swap(fd, c);
	if (old && old != KP_POOLED)
		conn_unref(old);
	return c;
}

static void finished_forget(int fd, const struct kp_conn *c);

static void conn_free(struct kp_conn *c)
{
	twin_drop(c); /* before the program's fd, whose close is then the last */
	finished_forget(-1, c);
	kp_lock(&c->lock);
	if (c->tls) { /* its socket is gone */
		kp_tls_put(c->tls);
		__atomic_store_n(&c->tls, NULL, __ATOMIC_RELEASE);
	}
	/* small buffers stay for the object's next use (wbuf.h) */
	if (c->held_cap > KP_WBUF_KEEP) {
		kp_wbuf_free(c->held, c->held_cap);
		c->held = NULL;
		c->held_cap = 0;
	}
	if (c->replay_cap > KP_WBUF_KEEP) {
		kp_wbuf_free(c->replay, c->replay_cap);
		c->replay = NULL;
		c->replay_cap = 0;
	}
	if (c->part) { /* conn_new clears the pointer: not kept */
		kp_wbuf_free(c->part, c->part_cap);
		c->part = NULL;
		c->part_cap = 0;
	}
	c->held_len = c->replay_len = 0;
	c->state = KP_PASSTHROUGH;
	kp_unlock(&c->lock);
	kp_lock(&free_lock);
	c->next_free = free_conns;
	free_conns = c;
	kp_unlock(&free_lock);
}

/* Drop one fd's reference; the last one frees.  Caller does not hold lock. */
void conn_unref(struct kp_conn *c)
{
	kp_lock(&c->lock);
	int left = --c->refs;
	kp_unlock(&c->lock);
	if (!left)
		conn_free(c);
}

static void give_up(struct kp_conn *c, int fd, const char *why);
static void raw_settle(struct kp_conn *c, int fd);
static int flush_held(struct kp_conn *c, int fd, int flags);
static void handoff_fin_if_due(struct kp_conn *c, int fd);

/* why a complete response leaves its connection unreusable */
static const char *resp_why(const struct frm_resp *r)
{
	if (r->server_close)
		return "the server closes (Connection: close, or HTTP/1.0)";
	if (r->conn_bound)
		return "NTLM or Negotiate binds the connection";
	if (r->doubt)
		return "the response was framed only leniently";
	return "the response's framing is not reusable";
}

/* Step aside for good.  Caller holds c->lock. */
static void go_passthrough(struct kp_conn *c, const char *why)
{
	if (c->state != KP_PASSTHROUGH) {
		kp_debug("passthrough: %s", why);
		kp_count(passthrough);
	}
	c->state = KP_PASSTHROUGH;
	unpool(c, why);
}

/* ------------------------------------------------------------ finished */

/*
 * A program that opens its next connection before it closes the last one
 * (Node ends a response, starts the next request, and closes the old
 * socket a loop turn later) would find the pool empty every time.  But a
 * connection whose exchange is complete and whose EOF the program is owed
 * is, as the program sees it, already closed by the server.  So a connect()
 * that misses the pool takes such a connection's socket for the pool, and
 * leaves in its place what the program would hold after the server's
 * close: a socket that reads EOF and refuses writes.
 */
#define MAX_FINISHED 64
static struct finished {
	int fd;
	struct kp_conn *c;
} finished[MAX_FINISHED];
static unsigned n_finished;
static kp_mutex_t finished_lock = KP_MUTEX_INITIALIZER;

/* Caller holds finished_lock; n_finished is read without it. */
static void finished_drop(unsigned i)
{
	unsigned n = n_finished - 1;
	finished[i] = finished[n];
	__atomic_store_n(&n_finished, n, __ATOMIC_RELEASE);
}

/* Caller holds c->lock. */
static void finished_add(int fd, struct kp_conn *c)
{
	kp_lock(&finished_lock);
	if (n_finished < MAX_FINISHED) {
		finished[n_finished].fd = fd;
		finished[n_finished].c = c;
		__atomic_store_n(&n_finished, n_finished + 1, __ATOMIC_RELEASE);
	}
	kp_unlock(&finished_lock);
}

/* Forget entries for fd (fd >= 0) or for c (c != NULL). */
static void finished_forget(int fd, const struct kp_conn *c)
{
	if (!__atomic_load_n(&n_finished, __ATOMIC_ACQUIRE))
		return;
	kp_lock(&finished_lock);
	for (unsigned i = 0; i < n_finished;) {
		if ((fd >= 0 && finished[i].fd == fd) || (c && finished[i].c == c))
			finished_drop(i);
		else
			i++;
	}
	kp_unlock(&finished_lock);
}

static bool parkable(const struct kp_conn *c);

/* Move a finished connection to key into the pool, if there is one.
 * Returns true when one was moved. */
static bool take_finished(const struct pool_key *key)
{
	if (!__atomic_load_n(&n_finished, __ATOMIC_ACQUIRE))
		return false;
	int fd = -1;
	struct kp_conn *c = NULL;
	kp_lock(&finished_lock);
	for (unsigned i = 0; i < n_finished; i++) {
		if (!memcmp(&finished[i].c->key, key, sizeof(*key))) {
			fd = finished[i].fd;
			c = finished[i].c;
			finished_drop(i);
			break;
		}
	}
	kp_unlock(&finished_lock);
	if (!c || !conn_lock(c, fd))
		return false;
	bool moved = false;
	int dead[2] = { -1, -1 };
	int fdfl = KP_REAL(fcntl)(fd, F_GETFD);
	/* only event-loop programs (non-blocking sockets) open their next
	 * connection before closing the last: a blocking program's fd is left
	 * a TCP socket to the end */
	/* (a close line's bytes not read yet: the program is not done) */
	if (c->eof_owed && c->nonblock && c->refs == 1 && parkable(c) && fdfl >= 0 &&
	    !c->rx_extra_len &&
	    KP_REAL(socketpair)(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (c->nonblock ? SOCK_NONBLOCK : 0),
				0, dead) == 0) {
		KP_REAL(close)(dead[1]); /* reads: EOF; writes: EPIPE */
		kp_watch_detach(fd); /* or epoll would follow the socket */
		int hidden = park(fd, c, false, 0);
		if (hidden >= 0 &&
		    KP_REAL(dup3)(dead[0], fd, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) >= 0) {
			moved = true;
		} else if (hidden >= 0 && pool_owns_fd(hidden, true)) {
			kp_fd_swap(hidden, NULL); /* one owner only */
			KP_REAL(close)(hidden);
		}
		KP_REAL(close)(dead[0]);
		kp_watch_renew(fd); /* the program's registrations, on what fd is now */
	}
	if (moved) {
		/* fd is no longer a connection of ours: the kernel answers.  A
		 * close racing in another thread may have taken fd's reference
		 * already (it swapped the table first): then it is its to drop,
		 * and it must not park what fd holds now. */
		c->state = KP_PASSTHROUGH;
		unpool(c, "its fd was taken over");
		bool ours = kp_fd_swap(fd, NULL) == c;
		if (ours)
			c->refs--;
		kp_fl_set(fd, 0);
		kp_count(parked);
		kp_debug("fd %d: finished connection moved to the pool for a new connect()", fd);
		/* (not ours: the racing close drops the reference and frees c) */
		if (ours)
			kp_watch_forget_fd(fd);
		bool free_it = ours && !c->refs;
		kp_unlock(&c->lock);
		if (free_it)
			conn_free(c);
		return true;
	}
	kp_unlock(&c->lock);
	return false;
}

/* ------------------------------------------------------------ connect */

static bool make_key(const struct sockaddr *addr, socklen_t len, struct pool_key *key)
{
	memset(key, 0, sizeof(*key));
	if (!addr)
		return false;
	if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const void *)addr;
		key->family = AF_INET;
		key->port = ntohs(in->sin_port);
		memcpy(key->addr, &in->sin_addr, 4);
		return true;
	}
	if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const void *)addr;
		key->family = AF_INET6;
		key->port = ntohs(in6->sin6_port);
		key->scope = in6->sin6_scope_id;
		memcpy(key->addr, &in6->sin6_addr, 16);
		return true;
	}
	return false;
}

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

static bool same_destination(const struct pool_key *a, const struct pool_key *b)
{
	return a->family == b->family && a->port == b->port && a->scope == b->scope &&
	       !memcmp(a->addr, b->addr, sizeof(a->addr));
}

/* fd's connection stops being ours (a connect() that dissolves or moves
 * its association): what was held goes out as written, it is never
 * pooled nor rewritten again, and fd is the kernel's from now on.  Other
 * fds of the same socket keep the (passthrough) object until they close. */
static void disown(int fd, struct kp_conn *c, const char *why)
{
	if (conn_lock(c, fd)) {
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
 * AF_UNSPEC dissolves the association (TCP allows it) and a connect to
 * another destination is the kernel's to answer: either way the socket is
 * no longer ours, and the kernel's answer stands. */
static int connect_again(int fd, struct kp_conn *c, const struct sockaddr *addr, socklen_t len)
{
	struct pool_key key;
	if (make_key(addr, len, &key) && same_destination(&key, &c->key)) {
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
	disown(fd, c,
	       addr && len >= sizeof(sa_family_t) && addr->sa_family == AF_UNSPEC
		       ? "connect(AF_UNSPEC) dissolved its association"
		       : "connected again to another destination");
	errno = saved;
	return KP_REAL(connect)(fd, addr, len);
}

/* Put pooled socket p in the program's fd, as if connect() had just
 * succeeded on the program's own socket.  Returns 0 or -1 (fd untouched
 * unless the dup3 succeeded). */
static int adopt_pooled(int fd, int p, struct kp_conn *c, const struct pool_meta *meta, bool local)
{
	kp_fdfl fl = kp_fl(fd);
	bool nonblock, cloexec;
	if (fl & KP_FD_TCP) { /* we saw socket() and every flag change since */
		nonblock = fl & KP_FD_NONBLOCK;
		cloexec = fl & KP_FD_CLOEXEC;
	} else {
		int sfl = KP_REAL(fcntl)(fd, F_GETFL), dfl = KP_REAL(fcntl)(fd, F_GETFD);
		if (sfl < 0 || dfl < 0)
			return -1;
		nonblock = sfl & O_NONBLOCK;
		cloexec = dfl & FD_CLOEXEC;
	}
	struct kp_tag prev;
	if (meta->tag_len != sizeof(prev))
		return -1;
	memcpy(&prev, meta->tag, sizeof(prev));
	/* (a tag from the broker carries another process's epoch: the broker
	 * is not used after a change of credentials, kp_conn_cred_change) */
	if (local && !pooled_one_owner(&prev)) {
		errno = EPERM;
		return -1;
	}
	if (kp_sockopts_transfer(&c->so, fd, p, prev.opts, prev.n_opts) < 0)
		return -1;
	/* O_NONBLOCK lives in the open file description that dup3 makes fd
	 * share: make it the program's.  FD_CLOEXEC is per fd: dup3 sets it. */
	if (!prev.nonblock != !nonblock && KP_REAL(fcntl)(p, F_SETFL, nonblock ? O_NONBLOCK : 0) < 0)
		return -1;
	/* registrations made before connect() follow the fd to its new socket */
	kp_watch_detach(fd);
	int r = KP_REAL(dup3)(p, fd, cloexec ? O_CLOEXEC : 0);
	int err = errno;
	kp_watch_renew(fd);
	if (r < 0) {
		errno = err;
		return -1;
	}
	c->nonblock = nonblock;
	return 0;
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
		c->reused = true;
		c->first = KP_FIRST_UNSENT;
		c->parked_ms = meta->parked_ms;
		c->sent_ms = now; /* the first request follows at once, as a rule */
		c->served_at_checkout = meta->requests;
		c->served = meta->requests;
		c->ka_timeout = meta->ka_timeout;
		c->ka_max = meta->ka_max;
		kp_count(reused);
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

int kp_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	if (kp_reentered())
		return connect_reentered(fd, addr, len);
	kp_enter();
	int r = connect_locked(fd, addr, len);
	kp_leave();
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
	if (!kp_fd_valid(fd) || !make_key(addr, len, &key) || !kp_port_enabled(key.port) ||
	    !ours_to_connect(fd, &key) || (c && (!c->poolable || !one_owner(c)))) {
		if (c)
			conn_unref(kp_fd_swap(fd, NULL));
		kp_watch_forget_fd(fd); /* never ours: the kernel's alone */
		errno = saved;
		int r = KP_REAL(connect)(fd, addr, len);
		if (kp_fd_valid(fd))
			kp_fl_or(fd, KP_FD_CONNECTED);
		return r;
	}
	kp_count(connects);
	if (kp_cfg.observe) { /* KEEPALIVE_OBSERVE: counted, then the kernel's alone */
		if (c)
			conn_unref(kp_fd_swap(fd, NULL));
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
	c->key = key;

	struct pool_meta meta;
	int p = -1;
	uint64_t now = kp_now_ms();
	/* a pooled socket replaces the program's socket under fd alone: with
	 * other fds of the same socket (a dup before connect) the program's
	 * own socket is connected, as those fds expect */
	bool alone = __atomic_load_n(&c->refs, __ATOMIC_RELAXED) == 1;
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
	errno = saved;
	int r = KP_REAL(connect)(fd, addr, len);
	if (r == 0 || errno == EINPROGRESS) {
		c->state = KP_ACTIVE;
		if (kp_fl(fd) & KP_FD_TCP) {
			c->nonblock = kp_fl(fd) & KP_FD_NONBLOCK;
		} else {
			int sfl = KP_REAL(fcntl)(fd, F_GETFL);
			c->nonblock = sfl >= 0 && (sfl & O_NONBLOCK);
		}
		kp_count(fresh);
	} else {
		saved = errno;
		conn_unref(kp_fd_swap(fd, NULL));
		errno = saved;
	}
	return r;
}

/* ------------------------------------------------------------ close */

/* The kernel's count of bytes written to fd's socket, plus one for the
 * SYN: those it acknowledged, and those still in its send queue. */
static int kernel_tx(int fd, uint64_t *w)
{
	uint64_t acked;
	int outq;
	if (kp_tcp_bytes_acked(fd, &acked) < 0 || KP_REAL(ioctl)(fd, SIOCOUTQ, &outq) < 0 || outq < 0)
		return -1;
	*w = acked + (uint64_t)outq;
	return 0;
}

/* Caller holds c->lock. */
void tx_watch_start(struct kp_conn *c, int fd)
{
	if (c->tx_watch || c->state != KP_ACTIVE || c->tls)
		return;
	int saved = errno;
	if (kernel_tx(fd, &c->tx_kernel0) == 0) {
		c->tx_watch = true;
		c->tx0 = c->tx;
	} else {
		unpool(c, "stdio on a socket the kernel gives no byte count for");
	}
	errno = saved;
}

/* Did the socket take bytes that never went through us since the watch
 * began?  A count we cannot read is a doubt: yes.  Caller holds c->lock. */
static bool tx_unseen(struct kp_conn *c, int fd)
{
	if (!c->tx_watch)
		return false;
	int saved = errno;
	uint64_t w;
	bool unseen = kernel_tx(fd, &w) < 0 || w - c->tx_kernel0 != c->tx - c->tx0;
	errno = saved;
	return unseen;
}

void kp_stdio_watch(struct kp_conn *c, int fd)
{
	if (c == KP_POOLED || !conn_lock(c, fd))
		return;
	tx_watch_start(c, fd);
	kp_unlock(&c->lock);
}

static bool parkable(const struct kp_conn *c)
{
	return c->state == KP_ACTIVE && c->poolable && one_owner(c) && !c->n_reqs && c->req_mode == KP_REQ_HEAD &&
	       !c->held_len && !c->resp_started && c->served > 0 &&
	       (c->ka_max < 0 || c->served < (uint32_t)c->ka_max);
}

/* Move the connection behind fd into the pool.  Returns the hidden fd it
 * is parked at (fd then closed if close_fd), -1 when not (fd untouched).
 * parked_ms: when it went idle, for one handed back unused; 0: now. */
int park(int fd, struct kp_conn *c, bool close_fd, uint64_t parked_ms)
{
	if (!one_owner(c))
		return -1;
	int inq = 0;
	if (!c->tls && KP_REAL(ioctl)(fd, FIONREAD, &inq) == 0 && inq > 0) {
		/* bytes after a complete response (a stray second response, a
		 * Content-Length that undercounts): they would be read as the
		 * next request's answer; a real close (docs/replay.md) */
		unpool(c, "bytes wait unread after the response");
		kp_debug("fd %d: %d bytes unread after the response: not parked", fd, inq);
		return -1;
	}
	if (tx_unseen(c, fd)) {
		unpool(c, "bytes reached the socket behind our back (stdio)");
		kp_debug("fd %d: the kernel took bytes we never saw: not parked", fd);
		return -1;
	}
	int hidden = twin_take(c); /* the hidden fd it came from, still open */
	if (hidden < 0)
		hidden = kp_fd_hide_planned(fd);
	if (hidden < 0)
		return -1;
	if (!kp_fd_valid(hidden)) {
		KP_REAL(close)(hidden);
		return -1;
	}
	struct pool_meta meta = {
		.parked_ms = parked_ms,
		.requests = c->served,
		.ka_timeout = c->ka_timeout,
		.ka_max = c->ka_max,
		.tag_len = sizeof(struct kp_tag),
	};
	struct kp_tag tag = { .nonblock = c->nonblock, .n_opts = c->so.n_opts,
			      .cred_epoch = c->cred_epoch };
	memcpy(tag.opts, c->so.opts, c->so.n_opts * sizeof(c->so.opts[0]));
	for (unsigned i = 0; i < c->so.n_pending; i++) {
		if (tag.n_opts == KP_MAX_OPTS) {
			kp_fd_swap(hidden, NULL); /* a twin's mark */
			KP_REAL(close)(hidden);
			return -1;
		}
		tag.opts[tag.n_opts++] = c->so.pending[i];
	}
	memcpy(meta.tag, &tag, sizeof(tag));
	/* a TLS connection goes with its socket, detached from the program */
	if (c->tls && !kp_tls_park(c->tls, hidden, c->tls_ssl, &c->key)) {
		kp_fd_swap(hidden, NULL);
		KP_REAL(close)(hidden);
		return -1;
	}
	kp_fd_swap(hidden, KP_POOLED);
	if (pool_checkin(&c->key, hidden, &meta, kp_now_ms()) < 0) {
		kp_fd_swap(hidden, NULL);
		struct kp_tls *t = kp_tls_unpark(hidden);
		if (t)
			kp_tls_put(t);
		__atomic_store_n(&c->tls, NULL, __ATOMIC_RELEASE);
		KP_REAL(close)(hidden);
		return -1;
	}
	__atomic_store_n(&c->tls, NULL, __ATOMIC_RELEASE); /* the pool holds it now */
	if (close_fd)
		KP_REAL(close)(fd);
	return hidden;
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
	bool parked = parkable(c) && park(fd, c, true, idle_since(c)) >= 0;
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
 * server ends, its socket stays, hidden, for tls.c to read that end
 * (docs/tls.md "Ragged closes"), inside the pool's share of the fd
 * budget.  True: c->tls and the socket are tls.c's now (fd then closed). */
static bool learn_end(int fd, struct kp_conn *c)
{
	if (!c->tls || c->tls_pending || !c->server_closing || c->n_reqs || !c->served ||
	    c->state != KP_ACTIVE || !one_owner(c))
		return false;
	kp_lock(&twin_lock);
	bool room = pool_size() + n_twins + kp_tls_learners() < __atomic_load_n(&twin_cap, __ATOMIC_RELAXED);
	kp_unlock(&twin_lock);
	if (!room)
		return false;
	int hidden = kp_fd_hide_planned(fd);
	if (hidden < 0)
		return false;
	if (!kp_fd_valid(hidden)) {
		KP_REAL(close)(hidden);
		return false;
	}
	kp_fd_swap(hidden, KP_POOLED);
	if (!kp_tls_learn(c->tls, hidden, &c->key)) {
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
	kp_enter();
	int r = close_locked(fd, c);
	kp_leave();
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
	kp_lock(&c->lock);
	int left = --c->refs;
	if (!left && c->held_len) /* the kernel would send them before its FIN */
		give_up(c, fd, "closed with a request head unfinished");
	bool parked = !left && settle_last(fd, c);
	if (!left && !parked)
		learn_end(fd, c);
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
	kp_lock(&c->lock);
	int left = --c->refs;
	if (!left && c->held_len) /* the kernel would send them before its FIN */
		give_up(c, fd, "closed with a request head unfinished");
	if (!left && may_park && parkable(c)) {
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
		kp_note_fdopen(c, oldfd, true, false);
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
	bool quiet = c->state == KP_ACTIVE && c->req_mode == KP_REQ_HEAD && !c->held_len &&
		     !c->lost && !c->shut_how;
	bool swallow = false;
	if (quiet && !c->n_reqs && c->eof_owed) {
		/* all answered, EOF shown: nothing the kernel would add (Node
		 * ends every socket this way before closing it) */
		swallow = true;
	} else if (quiet && c->n_reqs && how == SHUT_WR) {
		/* requests out, each with its EOF owed by us: the server's close
		 * after our FIN would come exactly where our EOF will */
		swallow = true;
		for (unsigned i = 0; i < c->n_reqs; i++)
			swallow &= c->reqs[i].app_close && c->reqs[i].rewritten;
	}
	if (swallow) {
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
		/* the server sees our FIN and closes after answering: nothing to owe */
		unvouch(c, fd, "shutdown");
		flush_held(c, fd, 0);
		go_passthrough(c, "shutdown");
	}
	kp_unlock(&c->lock);
	errno = saved;
	return swallow;
}

/* ------------------------------------------------------------ write side */

/* Append up to max bytes of iov starting at byte off to c->held. */
static int held_append(struct kp_conn *c, const struct iovec *iov, int n, size_t off, size_t max)
{
	size_t want = iov_total(iov, n) - off;
	if (want > max)
		want = max;
	if (c->held_len + want > c->held_cap) {
		char *b = kp_wbuf_grow(c->held, &c->held_cap, c->held_len + want);
		if (!b)
			return -1;
		c->held = b;
	}
	for (int i = 0; i < n && want; i++) {
		size_t l = iov[i].iov_len;
		if (off >= l) {
			off -= l;
			continue;
		}
		size_t take = l - off < want ? l - off : want;
		memcpy(c->held + c->held_len, (const char *)iov[i].iov_base + off, take);
		c->held_len += take;
		want -= take;
		off = 0;
	}
	return 0;
}

/* The program's request bytes go out: on the socket, or through the TLS
 * connection it carries (which never answers EAGAIN: a TLS record begun
 * must be finished, so kp_tls_xmit waits, boundedly). */
ssize_t conn_sendmsg(struct kp_conn *c, int fd, const struct msghdr *m, int flags)
{
	if (c->tls)
		return kp_tls_xmit(c->tls, fd, m->msg_iov, (int)m->msg_iovlen);
	ssize_t r = KP_REAL(sendmsg)(fd, m, flags);
	if (r > 0)
		c->tx += (uint64_t)r;
	return r;
}

/* Send all of buf.  A non-blocking socket is waited for (bounded), except
 * when nothing at all was sent and fail_clean is set: then -1/EAGAIN, and
 * the caller reports EAGAIN to the program exactly as the kernel would.
 * Only for bytes the program was already told went out (held bytes, a
 * replay): a head written now never waits here (part_pump). */
ssize_t send_all(struct kp_conn *c, int fd, const char *buf, size_t len, int flags,
		 bool fail_clean, size_t *sent)
{
	int waited_ms = 0;
	*sent = 0;
	if (c->tls) {
		struct iovec v = { (void *)buf, len };
		ssize_t r = kp_tls_xmit(c->tls, fd, &v, 1);
		if (r > 0)
			*sent = (size_t)r;
		return r;
	}
	while (*sent < len) {
		ssize_t r = KP_REAL(send)(fd, buf + *sent, len - *sent, flags);
		if (r > 0) {
			*sent += (size_t)r;
			c->tx += (uint64_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (!*sent && fail_clean)
				return -1;
			if (waited_ms >= 30000 || (flags & MSG_DONTWAIT))
				return -1;
			struct pollfd pfd = { .fd = fd, .events = POLLOUT };
			KP_REAL(poll)(&pfd, 1, 100);
			waited_ms += 100;
			continue;
		}
		return -1;
	}
	return (ssize_t)len;
}

/* ------------------------------------------------------------ a torn head
 *
 * The socket took part of a head (docs/hold.md, "A head the socket took in
 * part"): the program is told which of its own bytes went out (headmap.h),
 * nothing is waited for, and the program's next write, which must offer
 * the rest of its head again, sends the rest of the head as we sent it. */

/* Bytes of R the program was told went out that the server lacks: held
 * bytes of earlier calls when this call's send was torn before them. */
static size_t part_debt(const struct kp_conn *c)
{
	size_t need = kp_headmap_fwd(&c->part_map, c->part_pos);
	return need > c->part_k ? need - c->part_k : 0;
}

/* The program's own send would block: a blocking socket, no MSG_DONTWAIT. */
static bool send_blocks(int fd, int flags)
{
	if (flags & MSG_DONTWAIT)
		return false;
	int fl = KP_REAL(fcntl)(fd, F_GETFL);
	return fl >= 0 && !(fl & O_NONBLOCK);
}

/* Keep R (the head as it goes out) and O (the program's), the server
 * having k bytes of R and the program having been told pos bytes of O. */
static bool part_begin(struct kp_conn *c, const char *r, size_t rl, const char *o, size_t ol,
		       size_t k, size_t pos)
{
	if (rl + ol > c->part_cap) {
		char *b = kp_wbuf_grow(c->part, &c->part_cap, rl + ol);
		if (!b)
			return false;
		c->part = b;
	}
	memcpy(c->part, r, rl);
	memcpy(c->part + rl, o, ol);
	kp_headmap_init(&c->part_map, c->part, rl, c->part + rl, ol);
	c->part_k = k;
	c->part_pos = pos;
	return true;
}

/* The program offers O[pos0, pos0 + n): sends what of R they stand for
 * (never more, never a byte after the head: a body follows with the
 * program's next write, told of a short count); returns how many of the
 * program's bytes of this call went out, or -1 with errno (none did).
 * sent_once: that send was made already (part_k counts it).  A send that
 * took only bytes of R's span, which stand for none of the program's,
 * answers as the kernel does when none of a call's bytes went: EAGAIN on a
 * non-blocking socket, EINTR on a blocking one (whose send returns short
 * only when a signal, or SO_SNDTIMEO, interrupted it).  Never waits.
 * Caller holds c->lock. */
static ssize_t part_pump(struct kp_conn *c, int fd, size_t pos0, size_t n, int flags,
			 bool sent_once)
{
	const struct kp_headmap *m = &c->part_map;
	size_t target = kp_headmap_target(m, c->part_k, pos0, n);
	if (!sent_once && target > c->part_k) {
		ssize_t r = KP_REAL(send)(fd, c->part + c->part_k, target - c->part_k, flags);
		if (r < 0)
			return -1;
		c->tx += (uint64_t)r;
		c->part_k += (size_t)r;
	}
	c->part_pos = kp_headmap_told(m, pos0, n, c->part_k, target);
	if (c->part_pos > pos0)
		return (ssize_t)(c->part_pos - pos0);
	errno = send_blocks(fd, flags) ? EINTR : EAGAIN;
	return -1;
}

/* The head is whole as the program sees it: on to its body, or the next
 * request.  Caller holds c->lock. */
static void part_end(struct kp_conn *c)
{
	c->req_mode = c->part_next;
	kp_debug("torn head: finished");
}

static bool iov_equal(const struct iovec *iov, int iovcnt, const char *p, size_t n)
{
	for (int i = 0; i < iovcnt && n; i++) {
		size_t l = iov[i].iov_len < n ? iov[i].iov_len : n;
		if (memcmp(iov[i].iov_base, p, l))
			return false;
		p += l;
		n -= l;
	}
	return true;
}

/* A write after a torn head: the program must offer the rest of its head
 * again (it was told those bytes did not go out).  True when handled
 * (*ret set); false: the caller sends the program's bytes as they are.
 * Caller holds c->lock. */
static bool part_continue(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt,
			  int flags, ssize_t *ret)
{
	size_t total = iov_total(iov, iovcnt);
	size_t left = c->part_map.ol - c->part_pos;
	size_t n = total < left ? total : left;
	if (!total)
		return false;
	if (!iov_equal(iov, iovcnt, c->part + c->part_map.rl + c->part_pos, n)) {
		give_up(c, fd, "the rest of a torn head differs from what was torn");
		return false;
	}
	ssize_t r = part_pump(c, fd, c->part_pos, n, flags, false);
	if (r < 0) {
		int err = errno;
		if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR)
			go_passthrough(c, "send failed mid-head");
		errno = err;
		*ret = -1;
		return true;
	}
	if (c->part_pos == c->part_map.ol) {
		part_end(c);
		handoff_fin_if_due(c, fd);
	}
	*ret = r;
	return true;
}

/* Send head bytes held from earlier calls (the program was told they went
 * out), unchanged.  Returns 0, or -1 with errno when the send failed (the
 * connection is then unpoolable).  Caller holds c->lock. */
static int flush_held(struct kp_conn *c, int fd, int flags)
{
	int r = 0;
	if (c->req_mode == KP_REQ_HEAD_PART) {
		/* a torn head: what the program was told went out and the
		 * server lacks (part_debt); the rest is the program's to send */
		size_t debt = part_debt(c), sent = 0;
		if (fd >= 0 && debt) {
			r = send_all(c, fd, c->part + c->part_k, debt, flags | MSG_NOSIGNAL, false,
				     &sent) < 0 ? -1 : 0;
			c->part_k += sent;
			if (r < 0)
				unpool(c, "sending held request bytes failed");
		}
		c->req_mode = c->part_next;
		return r;
	}
	if (fd >= 0 && c->req_mode == KP_REQ_HEAD && c->held_len) {
		size_t sent;
		r = send_all(c, fd, c->held, c->held_len, flags | MSG_NOSIGNAL, false, &sent) < 0 ? -1 : 0;
		if (r < 0)
			unpool(c, "sending held request bytes failed");
		c->held_len = 0;
	}
	return r;
}

/* Step aside in the middle of things: bytes we held from an unfinished head
 * were promised to the program as sent, so they go out first; and if a
 * rewritten request is still waiting for its response, nobody will close
 * the connection for the program: let the quiet period end it (lost).
 * fd < 0: no held bytes can be pending here.  Caller holds c->lock. */
static void give_up(struct kp_conn *c, int fd, const char *why)
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

/* The program reaches past TLS to its socket (sendfile, splice, stdio: kTLS
 * at most): nothing we can follow.  True when c carries TLS. */
static bool tls_bypassed(struct kp_conn *c, int fd)
{
	if (!__atomic_load_n(&c->tls, __ATOMIC_ACQUIRE))
		return false;
	if (conn_lock(c, fd)) {
		unpool(c, "TLS bytes written past OpenSSL");
		kp_unlock(&c->lock);
	}
	return true;
}

bool kp_send_bypass(struct kp_conn *c, int fd, size_t *len)
{
	if (c == KP_POOLED || tls_bypassed(c, fd))
		return true;
	int saved = errno;
	if (!conn_lock(c, fd))
		return true;
	if (c->state == KP_ACTIVE && c->req_mode == KP_REQ_HEAD && *len &&
	    ((c->eof_owed && !c->n_reqs) || after_close(c))) {
		/* as the write path (send_intercept): after the owed EOF the
		 * first send is taken, our FIN goes out and later ones meet the
		 * kernel's EPIPE; after a close request, taken and not sent */
		if (c->eof_owed && !c->n_reqs) {
			finished_forget(-1, c);
			KP_REAL(shutdown)(fd, SHUT_WR);
			go_passthrough(c, "a send after the owed EOF");
		}
		kp_debug("fd %d: %zu bytes sent past the write path after a close: not sent", fd, *len);
		kp_unlock(&c->lock);
		errno = saved;
		return false;
	}
	if (c->state == KP_ACTIVE && c->req_mode == KP_REQ_BODY && c->n_reqs &&
	    c->reqs[c->n_reqs - 1].rewritten && c->req_body.kind == FRM_BODY_LENGTH &&
	    c->req_body.left < *len && c->req_body.left)
		*len = (size_t)c->req_body.left; /* the rest would be after_close */
	if (c->state == KP_ACTIVE && ((c->req_mode == KP_REQ_HEAD && c->held_len) ||
				      c->req_mode == KP_REQ_HEAD_PART)) {
		give_up(c, fd, "a send we cannot see into follows a held head");
	} else if (c->first == KP_FIRST_SENT) {
		/* zero-copy bytes the copy cannot hold: no replay for this one */
		c->first = KP_FIRST_DONE;
		kp_debug("fd %d: request bytes by sendfile/splice: not replayable", fd);
	} else {
		unvouch(c, fd, "a request we cannot see into");
	}
	kp_unlock(&c->lock);
	errno = saved;
	return true;
}

static void first_seen(struct kp_conn *c);

/* A read no wrapper sees (AIO's) of a response under way: the framing is
 * given up, and the EOF we owe can never reach that read; so, as for
 * stdio's reads (kp_note_fdopen), the server's must: with the request we
 * rewrote complete, our FIN goes out and the server closes once it has
 * answered.  Caller holds c->lock. */
static void unseen_read_fin(struct kp_conn *c, int fd)
{
	bool rewritten = false;
	for (unsigned i = 0; i < c->n_reqs; i++)
		rewritten |= c->reqs[i].rewritten;
	bool whole = c->req_mode == KP_REQ_HEAD && !c->held_len;
	give_up(c, fd, "a read we cannot see");
	if (rewritten && whole && !c->shut_how && KP_REAL(shutdown)(fd, SHUT_WR) == 0)
		__atomic_store_n(&c->fin_for_server, true, __ATOMIC_RELEASE);
}

void kp_aio_before(struct kp_conn *c, int fd, bool write)
{
	if (c == KP_POOLED || tls_bypassed(c, fd))
		return;
	size_t any = 1;
	if (write)
		kp_send_bypass(c, fd, &any); /* a drop needs the FIN below anyway */
	int saved = errno;
	if (!conn_lock(c, fd))
		return;
	bool owed = __atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE);
	/* (bytes that would begin a request: a body of the program's own
	 * request goes on as any unseen body) */
	if (write && (owed || (after_close(c) && c->req_mode == KP_REQ_HEAD && !c->held_len))) {
		/* glibc's helper thread writes with its internal write, which
		 * no wrapper sees: the bytes cannot be taken and dropped as a
		 * write of the program's is.  Our FIN goes out now, so that
		 * they never reach the server: the helper's write fails with
		 * EPIPE (its thread blocks every signal: no SIGPIPE) where
		 * the program alone would have had its first write accepted
		 * and its next one fail (docs/replay.md, "Nothing added") */
		finished_forget(-1, c);
		KP_REAL(shutdown)(fd, SHUT_WR);
		go_passthrough(c, "aio write after a request that asked to close");
	} else if (!write && owed) {
		/* the helper's read would wait for the server's idle timeout:
		 * the kernel answers it with our EOF (bytes already waiting,
		 * a server's idle 408, come first) */
		finished_forget(-1, c);
		KP_REAL(shutdown)(fd, SHUT_RD);
		go_passthrough(c, "aio read after the owed EOF");
	} else if (c->state == KP_ACTIVE) {
		/* an exchange we cannot follow: never pooled; a response read
		 * unseen cannot be framed */
		if (write)
			unpool(c, "aio write");
		else
			unseen_read_fin(c, fd);
	}
	if (!write)
		first_seen(c);
	kp_unlock(&c->lock);
	errno = saved;
}

void kp_note_fdopen(struct kp_conn *c, int fd, bool read_only, bool write_only)
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
	bool rewritten = false;
	for (unsigned i = 0; i < c->n_reqs; i++)
		rewritten |= c->reqs[i].rewritten;
	unvouch(c, fd, "stdio");
	flush_held(c, fd, 0);
	go_passthrough(c, "fdopen: stdio reads go past us");
	/* Our EOF cannot reach stdio's reads, so the server's must: it closes
	 * after answering once it sees our FIN.  Only for a stream that will
	 * not write: a shut-down socket cannot send. */
	if (rewritten && read_only && KP_REAL(shutdown)(fd, SHUT_WR) == 0)
		__atomic_store_n(&c->fin_for_server, true, __ATOMIC_RELEASE);
	kp_unlock(&c->lock);
	errno = saved;
}

/* Parse a request head of which the first `seen` bytes were already
 * found unfinished.  Until the new bytes complete a line, nothing new can
 * be judged: a head trickling in a byte per write costs a parse per line,
 * not per byte. */
static long head_parse(const char *buf, size_t len, size_t seen, struct frm_req_head *h)
{
	if (seen && len <= FRM_MAX_HEAD && !memchr(buf + seen, '\n', len - seen))
		return 0;
	return frm_req_parse_head(buf, len, h);
}

static bool queue_request(struct kp_conn *c, const struct frm_req_head *h, bool rewritten)
{
	if (c->n_reqs == KP_MAX_PIPELINE)
		return false;
	struct kp_request *r = &c->reqs[c->n_reqs++];
	r->method = (uint8_t)h->method;
	r->app_close = h->app_close;
	r->rewritten = rewritten;
	if (h->upgrade || h->method == FRM_M_CONNECT || h->doubt)
		unpool(c, "an upgrade, CONNECT or doubtful request");
	if (h->conn_bound) /* the server may take the connection as this login's */
		unpool(c, "NTLM, Negotiate or Kerberos credentials in the request");
	frm_body_init(&c->req_body, h->body_kind, h->body_len);
	/* Content-Length: 0 is as bodiless as no length at all */
	c->req_mode = c->req_body.done || h->body_kind == FRM_BODY_NONE ? KP_REQ_HEAD : KP_REQ_BODY;
	return true;
}

/* Account for n request bytes at byte offset off of iov that went out
 * unchanged: body bytes, and heads that began mid-write.  Caller holds lock. */
void account_sent(struct kp_conn *c, const struct iovec *iov, int iovcnt, size_t off, size_t n)
{
	int i = 0;
	while (i < iovcnt && off >= iov[i].iov_len)
		off -= iov[i++].iov_len;
	while (n && i < iovcnt && c->state == KP_ACTIVE) {
		const char *p = (const char *)iov[i].iov_base + off;
		size_t l = iov[i].iov_len - off;
		if (l > n)
			l = n;
		if (!l) {
			i++;
			off = 0;
			continue;
		}
		size_t used = l;
		if (c->req_mode == KP_REQ_BODY) {
			long u = frm_body_feed(&c->req_body, p, l);
			if (u < 0) {
				give_up(c, -1, "malformed request body");
				return;
			}
			used = (size_t)u;
			if (c->req_body.done)
				c->req_mode = KP_REQ_HEAD_SENT;
		} else {
			/* a head that went out as it was: learn its facts only (and
			 * never send these bytes again: they are gone) */
			c->req_mode = KP_REQ_HEAD_SENT;
			struct iovec one = { (void *)p, l };
			size_t before = c->held_len;
			struct frm_req_head h;
			if (held_append(c, &one, 1, 0, FRM_MAX_HEAD + 1) < 0) {
				give_up(c, -1, "out of memory");
				return;
			}
			long hl = head_parse(c->held, c->held_len, before, &h);
			if (hl < 0 || (hl > 0 && !queue_request(c, &h, false))) {
				give_up(c, -1, "unparsable request");
				return;
			}
			if (hl > 0) {
				used = (size_t)hl - before;
				c->held_len = 0;
			}
		}
		off += used;
		n -= used;
		if (off == iov[i].iov_len) {
			i++;
			off = 0;
		}
	}
	/* at a boundary after sent bytes: the next write starts a held head */
	if (c->req_mode == KP_REQ_HEAD_SENT && !c->held_len)
		c->req_mode = KP_REQ_HEAD;
}

/* How many bytes of iov from byte off belong to the body b is in: a copy
 * of its framer runs over them (pure).  SIZE_MAX when the body does not
 * end within them, or is malformed (account_sent gives up on it then). */
size_t body_span(struct frm_body b, const struct iovec *iov, int iovcnt, size_t off)
{
	size_t n = 0;
	for (int i = 0; i < iovcnt; i++) {
		size_t l = iov[i].iov_len;
		if (off >= l) {
			off -= l;
			continue;
		}
		const char *p = (const char *)iov[i].iov_base + off;
		l -= off;
		off = 0;
		if (b.done)
			return n;
		long u = frm_body_feed(&b, p, l);
		if (u < 0)
			return SIZE_MAX;
		n += (size_t)u;
		if ((size_t)u < l)
			return n;
	}
	return b.done && n ? n : SIZE_MAX;
}

/* Do request bytes follow, within this call, the request whose head ends
 * at byte off of iov (beyond its own body)? */
static bool bytes_follow(const struct frm_req_head *h, const struct iovec *iov, int iovcnt,
			 size_t off)
{
	struct frm_body b;
	frm_body_init(&b, h->body_kind, h->body_len);
	size_t n = body_span(b, iov, iovcnt, off);
	return n != SIZE_MAX && off + n < iov_total(iov, iovcnt);
}

/* A request that asked the server to close (and that we rewrote) is still
 * waiting for its response.  Without us the server would answer it and
 * close, never reading what the program writes after it (RFC 9112 9.6:
 * such a client is wrong, but the server must see what it would have
 * seen): those bytes are taken from the program and not sent. */
bool after_close(const struct kp_conn *c)
{
	for (unsigned i = 0; i < c->n_reqs; i++)
		if (c->reqs[i].rewritten)
			return true;
	return false;
}

/* The body of a rewritten close request ends inside this write and more
 * bytes follow it: only the body goes out (after_close: the server would
 * never have read the rest), and the program is told all were taken.  A
 * short send is reported as such (the program offers the rest again).
 * Returns false when the body does not end here: the real call as it is.
 * Caller holds c->lock. */
static bool send_body_end(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt, int flags,
			  ssize_t *ret)
{
	size_t n = body_span(c->req_body, iov, iovcnt, 0), total = iov_total(iov, iovcnt);
	if (n == SIZE_MAX || n >= total)
		return false;
	struct iovec small[16], *v = small;
	size_t v_cap = 0;
	if (iovcnt > 16 && !(v = kp_wbuf_grow(NULL, &v_cap, (size_t)iovcnt * sizeof(*v))))
		return false;
	int k = 0;
	for (size_t left = n; left && k < iovcnt; k++) {
		v[k] = iov[k];
		if (v[k].iov_len > left)
			v[k].iov_len = left;
		left -= v[k].iov_len;
	}
	struct msghdr m = { .msg_iov = v, .msg_iovlen = (size_t)k };
	ssize_t r;
	do
		r = conn_sendmsg(c, fd, &m, flags);
	while (r < 0 && errno == EINTR);
	int err = errno;
	if (v != small)
		kp_wbuf_free(v, v_cap);
	if (r < 0) {
		if (err != EAGAIN && err != EWOULDBLOCK)
			unpool(c, "a send failed");
		*ret = -1;
		errno = err;
		return true;
	}
	account_sent(c, iov, iovcnt, 0, (size_t)r);
	if ((size_t)r < n) {
		*ret = r;
		return true;
	}
	kp_debug("fd %d: %zu bytes written after a request that asked to close: "
		 "not sent (the server would have closed without reading them)",
		 fd, total - n);
	*ret = (ssize_t)total;
	return true;
}

/* The socket is the program's fd 0 when it writes a head: stdin's FILE
 * (fgets, scanf, getchar) may read it with libc's internal read, past us,
 * so our EOF after a rewritten response could never reach it: the head is
 * sent as written (the server's own close ends the response). */
static inline bool stdin_reads(const struct kp_conn *c)
{
	return kp_fd_conn(0) == c;
}

/* The socket took only part of a head just parsed (part_begin done): the
 * request is queued now (its response is framed as any other), the program
 * is told which of its bytes went out, and the head's rest follows with
 * the program's next write (part_continue).  A reused connection's replay
 * copy is dropped: this request is not sent again.  Unlocks c->lock. */
static bool torn_head(struct kp_conn *c, int fd, const struct frm_req_head *h, bool rewritten, bool keep_copy,
		      size_t replay_mark, size_t mine, int flags, int saved, ssize_t *ret)
{
	c->held_len = 0;
	if (keep_copy)
		c->replay_len = replay_mark;
	if (c->first != KP_FIRST_DONE)
		first_seen(c);
	/* (a rewrite needs room in the queue: a head that finds none maps 1:1) */
	bool queued = queue_request(c, h, rewritten);
	if (rewritten && queued)
		kp_count(rewritten);
	c->part_next = c->req_mode;
	c->req_mode = KP_REQ_HEAD_PART;
	kp_debug("fd %d: torn head: %zu of %zu bytes went out", fd, c->part_k, c->part_map.rl);
	ssize_t r = part_pump(c, fd, c->part_pos, mine, flags, true);
	if (r < 0)
		saved = errno; /* EAGAIN or EINTR: none of this call's bytes went */
	else if (c->part_pos == c->part_map.ol)
		part_end(c); /* (never: the head was torn) */
	if (!queued) /* what held bytes the program was told of go out first */
		give_up(c, fd, "too many pipelined requests");
	*ret = r;
	kp_unlock(&c->lock);
	errno = saved;
	return true;
}

static bool send_intercept(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt, int flags,
			   ssize_t *ret)
{
	if (!conn_lock(c, fd))
		return false;
	if (c->eof_written) {
		/* TLS, written after the owed EOF already (send_intercept
		 * below): the SSL layer reports what a close_notify gives */
		unpool(c, "a write after the owed EOF");
		kp_unlock(&c->lock);
		*ret = -1;
		errno = EPIPE;
		return true;
	}
	/* the body of the first request on a reused connection: it joins the
	 * copy a replay would send */
	if (c->state == KP_ACTIVE && c->req_mode == KP_REQ_BODY && c->first == KP_FIRST_SENT)
		return first_body_send(c, fd, iov, iovcnt, flags, ret);
	int saved = errno;
	if (c->fin_for_server && !c->shut_how) {
		/* as a socket whose server closed takes them: 0 bytes, and
		 * the first write (its reset would fail the next); after our
		 * FIN the kernel would say EPIPE at once (docs/replay.md,
		 * "Nothing added") */
		size_t n = iov_total(iov, iovcnt);
		if (n)
			__atomic_store_n(&c->fin_for_server, false, __ATOMIC_RELEASE);
		kp_debug("fd %d: %zu bytes written after our FIN: taken, not sent", fd, n);
		*ret = (ssize_t)n;
		kp_unlock(&c->lock);
		errno = saved;
		return true;
	}
	if (c->state == KP_ACTIVE && c->req_mode == KP_REQ_HEAD_PART && c->eof_owed && !c->n_reqs)
		/* the server answered the torn head and we owe the program its
		 * close: the rest is written after it (the checks below) */
		c->req_mode = KP_REQ_HEAD;
	if (c->state == KP_ACTIVE && c->req_mode == KP_REQ_HEAD_PART) {
		bool taken = part_continue(c, fd, iov, iovcnt, flags, ret);
		int err = errno;
		kp_unlock(&c->lock);
		errno = taken && *ret < 0 ? err : saved;
		return taken;
	}
	if (c->state != KP_ACTIVE || c->req_mode != KP_REQ_HEAD) {
		bool taken = c->state == KP_ACTIVE && c->req_mode == KP_REQ_BODY && c->n_reqs &&
			     c->reqs[c->n_reqs - 1].rewritten &&
			     send_body_end(c, fd, iov, iovcnt, flags, ret);
		int err = errno;
		kp_unlock(&c->lock);
		errno = taken && *ret < 0 ? err : saved;
		return taken;
	}
	if (c->shut_how) {
		/* writing after shutdown: the kernel's answer (EPIPE), for real */
		KP_REAL(shutdown)(fd, c->shut_how - 1);
		go_passthrough(c, "write after shutdown");
		kp_unlock(&c->lock);
		errno = saved;
		return false;
	}
	if (c->so.n_pending)
		conn_flush_opts(c, fd);
	size_t total = iov_total(iov, iovcnt);
	if (c->eof_owed && !c->n_reqs && !total) {
		/* a socket the server has closed takes 0 bytes; ours may have
		 * sent our FIN meanwhile (a fork handed it off), after which
		 * the kernel would answer EPIPE and SIGPIPE */
		*ret = 0;
		kp_unlock(&c->lock);
		errno = saved;
		return true;
	}
	if (c->eof_owed && !c->n_reqs && total) {
		/* The program asked to close and was answered: without us the
		 * server has closed, and these bytes must never reach it
		 * (docs/replay.md, "Nothing added").  A closed server's client
		 * sees its first write accepted (the server's TCP answers it
		 * with a reset) and the next ones fail with EPIPE (and SIGPIPE):
		 * so this one is taken and dropped, our FIN goes out, and later
		 * writes meet the kernel's own EPIPE and signal. */
		finished_forget(-1, c);
		KP_REAL(shutdown)(fd, SHUT_WR);
		if (c->tls) { /* later writes: a TLS error, not the socket's */
			c->eof_written = true;
			/* our FIN went out: never parked, never another's */
			unpool(c, "a write after the owed EOF");
		} else {
			go_passthrough(c, "a write after the owed EOF");
		}
		kp_debug("fd %d: %zu bytes written after the EOF we owe: not sent", fd, total);
		*ret = (ssize_t)total;
		kp_unlock(&c->lock);
		errno = saved;
		return true;
	}
	if (total && after_close(c)) {
		kp_debug("fd %d: %zu bytes written after a request that asked to close: "
			 "not sent (the server would have closed without reading them)",
			 fd, total);
		*ret = (ssize_t)total;
		kp_unlock(&c->lock);
		errno = saved;
		return true;
	}
	size_t old_held = c->held_len;
	const char *data;
	size_t dlen;
	struct frm_req_head h;
	if (!total)
		goto pass;
	if (!old_held && iovcnt == 1) {
		data = iov[0].iov_base;
		dlen = total;
	} else {
		if (held_append(c, iov, iovcnt, 0, FRM_MAX_HEAD + 1) < 0)
			goto pass_flush;
		data = c->held;
		dlen = c->held_len;
	}
	long hl = head_parse(data, dlen, old_held, &h);
	if (hl < 0) {
		c->held_len = old_held; /* the program's bytes go out as they are */
		unvouch(c, fd, "not an HTTP request");
		go_passthrough(c, dlen && (uint8_t)data[0] == 0x16 ? "TLS" : "not an HTTP request");
		goto pass_flush;
	}
	if (hl == 0) {
		if (data != c->held && held_append(c, iov, iovcnt, 0, total) < 0)
			goto pass_flush;
		kp_debug("fd %d: holding %zu bytes of a request head", fd, c->held_len);
		*ret = (ssize_t)total;
		kp_unlock(&c->lock);
		errno = saved;
		return true;
	}

	/* The head is whole: rewrite, send all of it, then the rest of the call. */
	size_t mine = (size_t)hl - old_held; /* the program's bytes in the head */
	/* First use of a reused connection: keep a copy, or go fresh. */
	bool keep_copy = false;
	int send_flags = flags;
	if (c->first != KP_FIRST_DONE) {
		keep_copy = first_request_plan(c, fd, &h, total - mine);
		if (keep_copy)
			send_flags |= MSG_NOSIGNAL; /* a dead socket is ours to handle */
	}
	char small[2048], *out = small;
	size_t out_cap = sizeof(small);
	long outlen = 0;
	bool may_rewrite = !h.upgrade && !h.doubt && !h.conn_bound && h.method != FRM_M_CONNECT &&
			   !c->handed_off && c->n_reqs < KP_MAX_PIPELINE && !stdin_reads(c);
	/* More requests pipelined behind one that asks to close, in the same
	 * write: the server must get the close and execute nothing after it,
	 * exactly as without us; so no rewrite, and no reuse. */
	if (may_rewrite && h.app_close && bytes_follow(&h, iov, iovcnt, mine)) {
		kp_debug("fd %d: not rewritten: requests follow one that asks to close", fd);
		may_rewrite = false;
	}
	/* a rewrite adds one header line, or 5 bytes per "close" token */
	if (may_rewrite && (size_t)hl + 64 + (size_t)hl / 2 > out_cap) {
		size_t cap = 0;
		out = kp_wbuf_grow(NULL, &cap, (size_t)hl + 64 + (size_t)hl / 2);
		if (out)
			out_cap = cap;
		else
			out = small, may_rewrite = false;
	}
	/* an io_submit we cannot see could read where we owe the EOF
	 * (docs/replay.md "Kernel AIO"): owe none */
	if (may_rewrite && h.app_close && kp_aio_unseen()) {
		kp_debug("fd %d: not rewritten: a kernel AIO library makes its system calls unseen", fd);
		may_rewrite = false;
	}
	/* TLS: the EOF we would owe shows a close_notify; only where this
	 * destination was seen to send one (docs/tls.md "Ragged closes") */
	if (may_rewrite && h.app_close && c->tls && !kp_tls_closes_clean(&c->key)) {
		kp_debug("fd %d: not rewritten: not known how the server ends a TLS connection", fd);
		may_rewrite = false;
	}
	if (may_rewrite)
		outlen = frm_req_rewrite_head(data, &h, out, out_cap);
	const char *head = outlen > 0 ? out : data;
	size_t headlen = outlen > 0 ? (size_t)outlen : (size_t)hl;
	/* The head and the rest of this call (body bytes) in one sendmsg, as
	 * the program's one call would have been: two sends would let Nagle
	 * hold the second behind the server's delayed ACK (40 ms a request,
	 * seen with Perl's LWP). */
	struct iovec v[17]; /* only v[0, nv) is read: no zeroing of the rest */
	v[0] = (struct iovec){ (void *)head, headlen };
	int nv = 1;
	size_t off = mine;
	for (int i = 0; i < iovcnt && nv < 17; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		v[nv].iov_base = (char *)iov[i].iov_base + off;
		v[nv].iov_len = iov[i].iov_len - off;
		nv++;
		off = 0;
	}
	struct msghdr m = { .msg_iov = v, .msg_iovlen = (size_t)nv };
	size_t replay_mark = c->replay_len;
	if (keep_copy && !replay_keep(c, head, headlen)) {
		keep_copy = false;
		c->first = KP_FIRST_DONE;
	}
	ssize_t r;
	for (;;) {
		/* EINTR here: a handler without SA_RESTART (the kernel restarts
		 * the others itself) ran before a byte went; the program's own
		 * send would say EINTR.  (TLS: the engine's record is under way,
		 * kp_tls_xmit finishes it) */
		do
			r = conn_sendmsg(c, fd, &m, send_flags);
		while (r < 0 && errno == EINTR && c->tls);
		/* the pooled socket was dead before our request got out: a fresh
		 * one (once), and the request goes there */
		if (r < 0 && keep_copy && c->first == KP_FIRST_UNSENT &&
		    (errno == EPIPE || errno == ECONNRESET)) {
			uint64_t now = kp_now_ms();
			pool_note_dead(&c->key, now - c->parked_ms, c->served_at_checkout, now);
			int err = errno;
			if (swap_fresh(c, fd, false) == 0) {
				kp_count(replayed); /* none of it went out: any method */
				if (c->first_plan == KP_PLAN_PROVE)
					kp_count(replayed_unacked);
				keep_copy = false;
				c->replay_len = 0;
				send_flags = flags;
				continue;
			}
			errno = err;
		}
		break;
	}
	/* the program's own send would have raised SIGPIPE here */
	bool held_back = r < 0 && errno == EPIPE && (send_flags & ~flags & MSG_NOSIGNAL);
	size_t sent = 0, body_sent = 0;
	ssize_t sr = 0;
	if (r >= 0 && (size_t)r >= headlen) {
		sent = headlen;
		body_sent = (size_t)r - headlen;
	} else if (r > 0 && !c->tls &&
		   part_begin(c, head, headlen, data, (size_t)hl, (size_t)r, old_held)) {
		/* the socket took part of the head: nothing waits (part_pump) */
		if (out != small)
			kp_wbuf_free(out, out_cap);
		return torn_head(c, fd, &h, outlen > 0, keep_copy, replay_mark, mine,
				 flags, saved, ret);
	} else if (r > 0) {
		/* no memory to keep the head: the rest of it, waited for */
		size_t more;
		sent = (size_t)r;
		sr = send_all(c, fd, head + sent, headlen - sent, flags, false, &more);
		sent += more;
	} else {
		sr = -1; /* EAGAIN, EINTR: nothing went, the program is told so */
	}
	if (out != small)
		kp_wbuf_free(out, out_cap);
	if (sr < 0) {
		int err = errno;
		if (held_back)
			sigpipe_as_kernel(flags); /* our MSG_NOSIGNAL kept it back */
		if (keep_copy)
			c->replay_len = replay_mark;
		if (!sent && (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)) {
			/* nothing went out: the program will offer this call's
			 * bytes again; what earlier calls gave us stays held */
			c->held_len = old_held;
		} else {
			/* a dead connection, or a torn head: finished either way */
			c->held_len = 0;
			go_passthrough(c, sent ? "send failed mid-head" : "send failed");
		}
		kp_unlock(&c->lock);
		errno = err;
		*ret = -1;
		return true;
	}
	c->held_len = 0;
	if (keep_copy && c->first == KP_FIRST_UNSENT)
		c->first = KP_FIRST_SENT;
	if (!queue_request(c, &h, outlen > 0)) {
		go_passthrough(c, "too many pipelined requests");
		*ret = (ssize_t)mine;
		kp_unlock(&c->lock);
		errno = saved;
		return true;
	}
	if (outlen > 0) {
		kp_count(rewritten);
		kp_debug("fd %d: request rewritten to keep-alive", fd);
	}
	*ret = (ssize_t)mine;
	/* body bytes that went with the head join the copy */
	if (body_sent && keep_copy && c->first == KP_FIRST_SENT &&
	    !replay_keep_iov(c, iov, iovcnt, mine, body_sent))
		c->first = KP_FIRST_DONE;
	if (body_sent) {
		account_sent(c, iov, iovcnt, mine, body_sent);
		*ret += (ssize_t)body_sent;
	}
	handoff_fin_if_due(c, fd);
	kp_unlock(&c->lock);
	errno = saved;
	return true;

pass_flush:
	/* bytes we held from earlier calls must go out first, unchanged */
	if (flush_held(c, fd, flags) < 0) {
		int err = errno;
		go_passthrough(c, "send failed");
		kp_unlock(&c->lock);
		errno = err;
		*ret = -1;
		return true;
	}
	go_passthrough(c, "gave up on the request");
pass:
	kp_unlock(&c->lock);
	errno = saved;
	return false;
}

bool kp_send_intercept(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt, int flags,
		       ssize_t *ret)
{
	if (c == KP_POOLED)
		return false;
	raw_settle(c, fd);
	struct kp_tls *t = __atomic_load_n(&c->tls, __ATOMIC_ACQUIRE);
	void *hs = kp_tls_handshaking;
	if (t && !__atomic_load_n(&c->tls_pending, __ATOMIC_ACQUIRE))
		return false; /* ciphertext: the SSL_* wrappers frame its plaintext */
	if (t && hs) {
		/* A handshake's first write on a pooled TLS connection, through a
		 * BIO of the program's own (curl): it tells us the fd.  Nothing
		 * goes out; the decision waits for the program's next call, as
		 * curl loads its trust store only after its first SSL_connect. */
		kp_tls_defer(hs, fd);
		*ret = -1;
		errno = EAGAIN;
		return true;
	}
	if (t || hs) {
		/* a fresh connection's handshake (the fd of a BIO of the
		 * program's own), or plain bytes on a pooled TLS connection */
		int saved = errno;
		switch (kp_conn_tls_start(fd, hs)) {
		case KP_TLS_HANDED: /* nothing may go out: the handshake is over */
			*ret = -1;
			errno = EAGAIN;
			return true;
		case KP_TLS_FRESH:
			errno = saved;
			return false;
		}
		errno = saved;
	}
	return send_intercept(c, fd, iov, iovcnt, flags, ret);
}

static void send_done(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt, ssize_t ret)
{
	int saved = errno;
	if (!conn_lock(c, fd))
		return;
	if (ret < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
		unpool(c, "a send failed");
	if (ret > 0)
		c->tx += (uint64_t)ret;
	if (ret > 0 && c->state == KP_ACTIVE)
		account_sent(c, iov, iovcnt, 0, (size_t)ret);
	handoff_fin_if_due(c, fd);
	kp_unlock(&c->lock);
	errno = saved;
}

void kp_send_done(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt, ssize_t ret)
{
	if (c == KP_POOLED || __atomic_load_n(&c->tls, __ATOMIC_ACQUIRE))
		return;
	send_done(c, fd, iov, iovcnt, ret);
}

void kp_sendfile_done(struct kp_conn *c, int out_fd, ssize_t ret)
{
	if (c == KP_POOLED || ret == 0 || tls_bypassed(c, out_fd))
		return;
	int saved = errno;
	if (!conn_lock(c, out_fd))
		return;
	if (ret > 0)
		c->tx += (uint64_t)ret;
	if (ret < 0) {
		if (errno != EAGAIN && errno != EINTR)
			unpool(c, "sendfile failed");
	} else if (c->state == KP_ACTIVE) {
		/* zero-copy: we never see the bytes, so only a Content-Length body
		 * can be followed (by arithmetic) */
		if (c->req_mode == KP_REQ_BODY && c->req_body.kind == FRM_BODY_LENGTH &&
		    (uint64_t)ret <= c->req_body.left) {
			c->req_body.left -= (uint64_t)ret;
			if (!c->req_body.left)
				c->req_mode = KP_REQ_HEAD;
		} else {
			give_up(c, out_fd, "sendfile outside a Content-Length body");
		}
	}
	handoff_fin_if_due(c, out_fd);
	kp_unlock(&c->lock);
	errno = saved;
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

void kp_conn_waits(struct kp_conn *c, int fd)
{
	if (!kp_conn_holds(c) || kp_reentered())
		return;
	int saved = errno;
	if (conn_lock(c, fd)) {
		if (c->state == KP_ACTIVE && ((c->req_mode == KP_REQ_HEAD && c->held_len) ||
					      (c->req_mode == KP_REQ_HEAD_PART && part_debt(c))))
			give_up(c, fd, "the program waits with a request head unfinished");
		kp_unlock(&c->lock);
	}
	errno = saved;
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
 * its last byte we show EOF (and really close at close()). */
static bool lost_quiet(struct kp_conn *c, int fd)
{
	for (;;) {
		int ms = kp_conn_wait_ms(c);
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		if (ms < 0)
			return false;
		if (ms == 0) /* quiet long enough, unless bytes wait unread */
			return KP_REAL(poll)(&pfd, 1, 0) == 0;
		if (c->nonblock)
			return false; /* the program waits in poll: kp_conn_wait_ms */
		if (KP_REAL(poll)(&pfd, 1, ms) != 0)
			return false; /* data, or an error the real read will report */
	}
}

static bool recv_intercept(struct kp_conn *c, int fd, ssize_t *ret)
{
	if (__atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE)) {
		kp_count(eofs);
		*ret = 0;
		return true;
	}
	if (c->lost) {
		int saved = errno;
		if (lost_quiet(c, fd)) {
			__atomic_store_n(&c->eof_owed, true, __ATOMIC_RELEASE);
			kp_count(eofs);
			kp_debug("fd %d: framing lost; EOF after %llu ms of quiet", fd,
				 (unsigned long long)kp_cfg.quiet_ms);
			*ret = 0;
			errno = saved;
			return true;
		}
		errno = saved;
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
static void raw_settle(struct kp_conn *c, int fd)
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
	raw_settle(c, fd);
	if (__atomic_load_n(&c->tls, __ATOMIC_ACQUIRE))
		return false;
	if (iov && extra_into(c, fd, iov, iovcnt, flags, ret))
		return true;
	kp_conn_waits(c, fd);
	return recv_intercept(c, fd, ret);
}

/* The program may have read response bytes, an EOF or an error where we
 * could not see: a replay (or a fresh socket swapped in) after them would
 * add to what it already has (docs/replay.md, "Reads we cannot follow").
 * Caller holds c->lock. */
static void first_seen(struct kp_conn *c)
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
			give_up(c, fd, "response read unseen");
		c->last_rx_ms = kp_now_ms();
	}
	kp_unlock(&c->lock);
	errno = saved;
}

bool kp_unseen_write(struct kp_conn *c, int fd, size_t len)
{
	if (c == KP_POOLED || !len)
		return false;
	if (!kp_send_bypass(c, fd, &len))
		return true;
	int saved = errno;
	if (conn_lock(c, fd)) {
		if (c->state == KP_ACTIVE)
			unpool(c, "a write we cannot see");
		kp_unlock(&c->lock);
	}
	errno = saved;
	return false;
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
			__atomic_store_n(&c->server_closing,
					 c->resp.server_close || (done.app_close && !done.rewritten),
					 __ATOMIC_RELEASE);
			if (done.app_close && !done.rewritten) {
				/* its "close" reached the server (pipelined behind a head
				 * we rewrote, or not rewritable): the server closes */
				unpool(c, "the request's close reached the server");
			} else if (done.app_close && !c->resp.server_close) {
				/* the program expects the server's FIN now */
				__atomic_store_n(&c->eof_owed, true, __ATOMIC_RELEASE);
				if (n || c->n_reqs)
					unpool(c, "bytes or requests after the response owed EOF");
				else if (c->refs == 1 && parkable(c) && !c->tls && c->nonblock)
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
			give_up(c, fd, "unparsable response");
			return 0;
		}
	}
	return 0;
}

/* A peek shows the program bytes it will read again: they get the mask
 * the read will give them (the program never sees keep-alive), from a copy
 * of the framer; the read frames them for real.  The mask lies in the
 * head, which the first event ends.  Caller holds c->lock. */
static char *iov_byte(const struct iovec *iov, int iovcnt, size_t pos)
{
	for (int i = 0; i < iovcnt; i++) {
		if (pos < iov[i].iov_len)
			return (char *)iov[i].iov_base + pos;
		pos -= iov[i].iov_len;
	}
	return NULL;
}

/*
 * Show the program FRM_CLOSE_LINE at offset k of the n bytes its call
 * returned in iov (docs/replay.md, "A closing answer"): the bytes from k
 * on move up by its length; those that no longer fit go to extra (at most
 * the line's length, since n <= the buffer), to be read first next time.
 * The same bytes whatever the read sizes: a recv(1) loop reads the line a
 * byte at a time.  Returns the count the call now returns.
 */
static size_t close_line_in(const struct iovec *iov, int iovcnt, size_t n, size_t k, char *extra,
			    uint8_t *extra_len)
{
	static const char line[] = FRM_CLOSE_LINE;
	const size_t L = FRM_CLOSE_LINE_LEN;
	size_t cap = iov_total(iov, iovcnt), total = n + L;
	size_t out = total < cap ? total : cap;
#define STREAM_AT(j) ((j) < k ? *iov_byte(iov, iovcnt, (j)) \
		      : (j) < k + L ? line[(j) - k] : *iov_byte(iov, iovcnt, (j) - L))
	for (size_t j = out; j < total; j++) /* before anything moves */
		extra[j - out] = STREAM_AT(j);
#undef STREAM_AT
	__atomic_store_n(extra_len, (uint8_t)(total - out), __ATOMIC_RELEASE);
	if (out > k + L) {
		if (iovcnt == 1) {
			memmove((char *)iov[0].iov_base + k + L, (char *)iov[0].iov_base + k,
				out - k - L);
		} else {
			for (size_t j = out; j-- > k + L;)
				*iov_byte(iov, iovcnt, j) = *iov_byte(iov, iovcnt, j - L);
		}
	}
	for (size_t j = k; j < k + L && j < out; j++)
		*iov_byte(iov, iovcnt, j) = line[j - k];
	return out;
}

/* A peek's bytes get, from a copy of the framer, the mask and the close
 * line the read will give them; what the line pushes past the buffer is
 * not shown (the read shows it next).  Returns the peek's new count. */
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
				return close_line_in(iov, iovcnt, n, off + done, extra, &extra_len);
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

static bool recv_done(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt, ssize_t *retp,
		      int flags)
{
	ssize_t ret = *retp;
	int saved = errno;
	if (!conn_lock(c, fd))
		return false;
	/* response bytes before any request we saw (one written where we
	 * cannot see): the socket is never swapped under them any more */
	if (ret > 0 && c->first == KP_FIRST_UNSENT)
		c->first = KP_FIRST_DONE;
	if (c->first == KP_FIRST_SENT && c->state == KP_ACTIVE && !c->shut_how &&
	    iov_total(iov, iovcnt) > 0) { /* a read of 0 bytes returns 0: no EOF */
		bool again = false;
		if (ret == 0 || (ret < 0 && (errno == ECONNRESET || errno == EPIPE)))
			again = replay(c, fd, ret == 0 ? KP_DIED_EOF : KP_DIED_RESET);
		else if (ret > 0 && answered_408(iov, iovcnt, ret))
			again = replay(c, fd, KP_DIED_408);
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
				*retp = (ssize_t)close_line_in(iov, iovcnt, (size_t)*retp, ins,
							       c->rx_extra, &c->rx_extra_len);
		}
	}
	kp_unlock(&c->lock);
	errno = saved;
	return false;
}

bool kp_recv_done(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt, ssize_t *ret,
		  int flags)
{
	if (c == KP_POOLED || __atomic_load_n(&c->tls, __ATOMIC_ACQUIRE))
		return false; /* ciphertext */
	bool again = recv_done(c, fd, iov, iovcnt, ret, flags);
	if (!again && kp_replay_interrupted) {
		/* a signal ended the replay: the program's call says so */
		kp_replay_interrupted = false;
		*ret = -1;
		errno = EINTR;
	}
	return again;
}

/* ------------------------------------------------------------ HTTPS */

int kp_conn_tls_start(int fd, void *ssl)
{
	struct kp_conn *c = kp_fd_conn(fd);
	if (!c || c == KP_POOLED || !conn_lock(c, fd))
		return KP_TLS_NONE;
	int saved = errno, r = KP_TLS_NONE;
	if (c->state != KP_ACTIVE)
		goto out;
	if (c->tls && !c->tls_pending) {
		/* a second SSL on a socket whose TLS we follow: no longer ours */
		if (ssl && ssl != c->tls_ssl)
			unpool(c, "a second SSL on the socket");
		goto out;
	}
	if (c->tls) {
		if (ssl && kp_tls_handout(c->tls, ssl, fd) == 0) {
			c->tls_pending = false;
			c->tls_handed = true;
			c->tls_ssl = ssl;
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

bool kp_conn_tls_send(struct kp_conn *c, int fd, const void *buf, size_t n, ssize_t *ret)
{
	struct iovec iov = { (void *)buf, n };
	return send_intercept(c, fd, &iov, 1, 0, ret);
}

void kp_conn_tls_send_done(struct kp_conn *c, int fd, const void *buf, size_t n, ssize_t ret)
{
	struct iovec iov = { (void *)buf, n };
	send_done(c, fd, &iov, 1, ret);
}

bool kp_conn_tls_eof(struct kp_conn *c, int fd, bool pending)
{
	ssize_t r;
	if (__atomic_load_n(&c->eof_owed, __ATOMIC_ACQUIRE) || (!pending && c->lost))
		return recv_intercept(c, fd, &r);
	return false;
}

bool kp_conn_tls_recv_done(struct kp_conn *c, int fd, void *buf, size_t n, ssize_t *ret, int flags)
{
	struct iovec iov = { buf, n };
	return recv_done(c, fd, &iov, 1, ret, flags);
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
 * show the EOF we owe, and would wait for the server's idle timeout (75 s
 * with nginx, forever with a server that has none).  So when such a
 * connection leaves our hands, the server is made to close as it would
 * have without us: our FIN (shutdown(SHUT_WR)) once the request is whole,
 * and the server answers, then closes.  Whoever reads sees the response,
 * then EOF.  Such a connection is never pooled, its later requests are not
 * rewritten, and its first request is not replayed (the reader may be the
 * child, which holds the old socket).
 */

/* Our FIN, now.  Caller holds c->lock. */
static void handoff_fin(struct kp_conn *c, int fd)
{
	c->fin_due = false;
	if (KP_REAL(shutdown)(fd, SHUT_WR) == 0)
		__atomic_store_n(&c->fin_for_server, true, __ATOMIC_RELEASE);
	if (c->fin_for_server)
		kp_debug("fd %d: handed off with an exchange we rewrote: FIN sent, the server closes", fd);
}

/* The server's first word on a reused connection decides whether its
 * request must be replayed; the child about to read it cannot replay.  A
 * connection the server had closed idle answers our request with a reset
 * within a round trip; one that took the request answers when it has
 * worked, which may be long: so wait only as long as the replay rule waits
 * for a reset (kp_replay_settle_ms: a few smoothed RTTs, 10 ms at least),
 * never for the server's work - fork(), system() and exec must not wait on
 * the server (docs/replay.md).  A death seen in that time is replayed now,
 * under the same fd, before the fd leaves; later, the reader sees what the
 * server did.  Caller holds c->lock. */
static void handoff_verdict(struct kp_conn *c, int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct kp_tcp_view v;
	int bound = (int)kp_replay_settle_ms(kp_tcp_view(fd, &v) == 0 ? v.srtt_us : 0);
	uint64_t end = kp_now_ms() + (uint64_t)bound;
	int r;
	do {
		uint64_t now = kp_now_ms();
		r = KP_REAL(poll)(&p, 1, now >= end ? 0 : (int)(end - now));
	} while (r < 0 && errno == EINTR);
	if (r > 0 && ready_settle(c, fd))
		kp_debug("fd %d: replayed before leaving our hands", fd);
}

/* Whatever else happens, the socket may have another owner now: it can
 * never change owner again (one_owner), and once it has left nothing of
 * it is rewritten or replayed (the other process may read what the
 * server says).  Caller holds c->lock. */
static void handoff_locked(struct kp_conn *c, int fd, const char *why)
{
	if (!c->shared)
		kp_debug("fd %d: may have another owner from now on (%s)", fd, why);
	c->shared = true; /* one_owner() says no for the rest of its life */
	if (c->handed_off)
		return;
	bool owed = !c->tls && (c->state == KP_ACTIVE || c->lost) && (c->eof_owed || c->lost);
	for (unsigned i = 0; !c->tls && c->state == KP_ACTIVE && i < c->n_reqs; i++)
		owed |= c->reqs[i].rewritten;
	/* the server's word on a reused connection's first request: a replay
	 * is still ours to make, under the same fd, before it leaves (only
	 * where the reader must be made to see the server's close anyway) */
	if (owed && c->first == KP_FIRST_SENT && c->state == KP_ACTIVE)
		handoff_verdict(c, fd);
	c->handed_off = true;
	c->first = KP_FIRST_DONE;
	if (!owed)
		return; /* nothing of ours to owe: the program's own requests speak */
	kp_debug("fd %d: leaves our hands (%s)", fd, why);
	c->fin_due = true;
	handoff_fin_if_due(c, fd);
}

/* Our FIN once the request being written is whole (a FIN now would cut
 * off the rest of its head or body).  Caller holds c->lock. */
static void handoff_fin_if_due(struct kp_conn *c, int fd)
{
	if (c->fin_due && (c->state != KP_ACTIVE || (c->req_mode == KP_REQ_HEAD && !c->held_len)))
		handoff_fin(c, fd);
}

void kp_conn_handoff_fd(int fd, const char *why)
{
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return (void)kp_conn_raw_fd(fd);
	struct kp_conn *c = kp_fd_conn(fd);
	if (!c || c == KP_POOLED)
		return;
	int saved = errno;
	if (conn_lock(c, fd)) {
		handoff_locked(c, fd, why);
		kp_unlock(&c->lock);
	}
	errno = saved;
}

void kp_conn_handoff_all(bool inherited_only, const char *why)
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
		/* a TCP socket not connected yet: a connection made on it
		 * later would have another holder too */
		if (!c)
			kp_fl_or(fd, KP_FD_SHARED);
		else
			kp_conn_handoff_fd(fd, why);
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
		kp_conn_handoff_fd(fd, "passed in SCM_RIGHTS");
	else if (kp_fd_valid(fd) && (kp_fl(fd) & KP_FD_TCP))
		kp_fl_or(fd, KP_FD_SHARED);
	return true;
}

/* ------------------------------------------------------------ credentials */

/* kp_conn_cred_change without a lock: nothing made before changes hands
 * again, in this process (the pool is emptied lazily: its sockets fail
 * pooled_one_owner). */
static void cred_change_raw(void)
{
	__atomic_store_n(&divided, true, __ATOMIC_RELAXED);
	__atomic_add_fetch(&cred_epoch, 1, __ATOMIC_ACQ_REL);
}

void kp_conn_cred_change(bool one_thread)
{
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return cred_change_raw();
	int saved = errno;
	if (one_thread && !__libc_single_threaded && !__atomic_load_n(&divided, __ATOMIC_RELAXED)) {
		__atomic_store_n(&divided, true, __ATOMIC_RELAXED);
		kp_debug("a thread changed its own identity or namespace: no more pooling");
	}
	__atomic_add_fetch(&cred_epoch, 1, __ATOMIC_ACQ_REL);
	/* the broker is per user, checked when we dial it: the simple sound
	 * answer is not to share any more from a process that changed hands */
	kp_broker_disable();
	kp_tls_forget_sessions();
	unsigned n = pool_drain();
	/* sockets made and not connected yet: their socket() was the old
	 * identity's (its uid stays on the socket) */
	int high = kp_fd_high();
	for (int fd = 0; fd <= high; fd++)
		if (!kp_fd_conn(fd) && (kp_fl(fd) & KP_FD_TCP))
			kp_fl_or(fd, KP_FD_SHARED);
	if (n)
		kp_debug("credentials change: %u pooled connections closed", n);
	errno = saved;
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
	if (kp_reentered()) {
		fork_inside = true;
		return;
	}
	/* the child may read any of them (and exec what reads them) */
	kp_conn_handoff_all(false, "fork");
	kp_lock(&free_lock);
	kp_lock(&finished_lock);
	kp_sockopts_before_fork();
	kp_watch_before_fork();
	pool_before_fork();
	kp_tls_before_fork(); /* after the pool's: the pool's close takes it */
	kp_lock(&twin_lock);
	kp_limits_before_fork(); /* the child copies the program's limit */
}

void kp_conn_after_fork_parent(void)
{
	if (fork_inside) {
		fork_inside = false;
		return;
	}
	kp_limits_after_fork_parent();
	kp_unlock(&twin_lock);
	kp_tls_after_fork_parent();
	pool_after_fork_parent();
	kp_watch_after_fork_parent();
	kp_sockopts_after_fork_parent();
	kp_unlock(&finished_lock);
	kp_unlock(&free_lock);
}

void kp_conn_after_fork_child(void)
{
	if (fork_inside) {
		fork_inside = false;
		__atomic_store_n(&kp_fdtab_len, 0, __ATOMIC_RELEASE);
		return;
	}
	kp_tls_after_fork_child();
	/* The child's copies of tracked fds are the parent's connections: the
	 * child uses them raw, and never parks them.  Its copies of pooled
	 * sockets are closed (the parent's stay open). */
	/* recycled objects may be locked by threads the child does not have */
	free_conns = NULL;
	kp_mutex_init(&free_lock);
	kp_mutex_init(&finished_lock);
	kp_sockopts_after_fork_child();
	kp_watch_after_fork_child();
	__atomic_store_n(&n_finished, 0, __ATOMIC_RELAXED);
	kp_fdtab_after_fork_child();
	pool_after_fork_child();
	/* the twins too: a child holding a copy would keep the parent's
	 * socket open after the parent closed it */
	for (unsigned i = 0; i < n_twins; i++)
		KP_REAL(close)(twins[i].fd);
	n_twins = 0;
	kp_mutex_init(&twin_lock);
	kp_limits_after_fork_child();
	/* the locks kp_conn_before_fork took are new, not released */
	kp_inside = 0;
}

/* ------------------------------------------------------------ exit */

/* A finished connection the program never closed (the response complete,
 * nothing owed but an EOF): as idle as a closed one.  Park a copy; the
 * program's own fd dies with the process.  Only sockets still connected
 * to their key's destination: a close we never saw (a raw syscall) may
 * have left the number to a file. */
static void park_unclosed(void)
{
	for (unsigned fd = 0; fd < kp_fdtab_len; fd++) {
		struct kp_conn *c = kp_fd_conn((int)fd);
		if (!c || c == KP_POOLED || !conn_lock(c, (int)fd))
			continue;
		if (!c->tls && c->refs == 1 && parkable(c) &&
		    !kp_broker_check_own((int)fd, &c->key) && park((int)fd, c, false, 0) >= 0) {
			c->poolable = false; /* a second exit path must not park it again */
			kp_count(parked);
			kp_debug("fd %d: parked at exit, never closed", fd);
		}
		kp_unlock(&c->lock);
	}
}

/* The process is exiting: its idle plain-HTTP connections go to the
 * broker, oldest first (the broker's stack then has the newest on top),
 * so the next process finds them.  TLS ones stay: their state dies with
 * us (and OpenSSL may be torn down already: leave it alone). */
void kp_conn_exit(void)
{
	if (!kp_broker_enabled())
		return;
	park_unclosed();
	if (!pool_size())
		return;
	static int fds[256];
	static struct leaving {
		int fd;
		struct pool_key key;
		struct pool_meta meta;
	} out[256];
	size_t n = pool_fds(fds, sizeof(fds) / sizeof(fds[0])), m = 0;
	for (size_t i = 0; i < n; i++)
		if (!kp_tls_is_parked(fds[i]) && pool_take_fd(fds[i], &out[m].key, &out[m].meta) == 0)
			out[m++].fd = fds[i];
	/* insertion sort by park time (at most 256) */
	for (size_t i = 1; i < m; i++)
		for (size_t j = i; j > 0 && out[j - 1].meta.parked_ms > out[j].meta.parked_ms; j--) {
			struct leaving t = out[j];
			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	int link = -1;
	for (size_t i = 0; i < m; i++) {
		/* sent or not, our copy goes: we are exiting */
		kp_broker_put(&link, &out[i].key, out[i].fd, &out[i].meta);
		kp_fd_swap(out[i].fd, NULL);
		KP_REAL(close)(out[i].fd);
	}
	kp_broker_close(link);
}
