/*
 * hidden.c - the connections the program does not see: the pool's ops, the
 * twins (a parked connection's hidden descriptor), the fd budget, the
 * connection objects and the finished list, parking, and the exit's hand
 * of the pool to the broker (docs/owner.md).
 * Below conn.c and conn_replay.c: it calls neither.
 */
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
#include "kp_mem.h"
#include "real.h"
#include "replay.h"
#include "tls.h"
#include "tls_held.h"
#include "watch.h"
#include "wbuf.h"


/* ------------------------------------------------------------ pool ops */

/* A hidden descriptor of ours closed for good, with the TLS connection
 * parked on it: the fd table first, before the number can be reused. */
int hidden_close(int hidden)
{
	kp_fd_swap(hidden, NULL);
	struct kp_tls *t = kp_tls_unpark(hidden);
	if (t) {
		kp_tls_goodbye(t, hidden);
		kp_tls_put(t);
	}
	return KP_REAL(close)(hidden);
}

static int pool_close_fd(int fd)
{
	kp_count(dropped);
	return hidden_close(fd);
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
	/* under KEEPALIVE_TLS_ACROSS a TLS 1.3 one goes with its state */
	if (kp_tls_is_parked(fd) && kp_tls_across_leave(fd, key, meta)) {
		kp_fd_swap(fd, NULL);
		KP_REAL(close)(fd);
		return 0;
	}
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
bool twin_keep(struct kp_conn *c, int p)
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
bool twin_forget_fd(int fd)
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

bool hidden_room(void)
{
	size_t pooled = pool_size();
	kp_lock(&twin_lock);
	bool room = pooled + n_twins + kp_tls_learners() < __atomic_load_n(&twin_cap, __ATOMIC_RELAXED);
	kp_unlock(&twin_lock);
	return room;
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

pid_t kp_conn_pid;

/* Every hand-out is probed (pool_config.unprobed_ms 0), however recently
 * the socket was parked: one recv(MSG_PEEK) a reuse is the price of
 * handing out neither a socket whose server has just gone (the program
 * would meet at its read what a fresh connect() refuses) nor one with a
 * stray response waiting, which would be read as the next request's
 * answer (docs/replay.md, "Hand-out and park"). */
void kp_conn_init(void)
{
	kp_conn_pid = getpid();
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

unsigned hidden_drain_all(void)
{
	return pool_drain() + twins_drain() + kp_tls_learners_drain();
}

bool kp_fds_short(void)
{
	int err = errno;
	if (err != EMFILE && err != ENFILE)
		return false;
	kp_conn_fd_limits(true); /* the program may have changed its limit */
	/* above the limit our fds cost the program none: nothing to give */
	unsigned n = err == EMFILE && kp_limits_above() ? 0 : hidden_drain_all();
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
uint32_t cred_epoch;
/* A thread changed its own identity or namespace (unshare, setns, capset,
 * a raw set*id) while others ran: from now on the process's threads may
 * be different owners, and nothing ever changes owner again. */
bool divided;

/*
 * The one question every park, hand-out and hand-over to the broker asks
 * (docs/owner.md): may this connection change owner?  Only while we know
 * its single owner: we connected it ourselves (kp_connect: a socket whose
 * socket() we saw, of the address's family, never shared before), every
 * duplication of it went through us, it never crossed a fork, spawn,
 * exec or SCM_RIGHTS (shared: for life), and the process's credentials
 * are still those it was made under.  Caller holds c->lock.
 */
bool one_owner(const struct kp_conn *c)
{
	return !c->shared && !__atomic_load_n(&c->raw, __ATOMIC_ACQUIRE) && c->cred_epoch == __atomic_load_n(&cred_epoch, __ATOMIC_ACQUIRE) &&
	       !__atomic_load_n(&divided, __ATOMIC_RELAXED);
}

/* The same question for a socket in the pool: parked by one_owner's
 * leave, under the credentials of its tag. */
bool pooled_one_owner(const struct kp_tag *tag)
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

void finished_forget(int fd, const struct kp_conn *c);

static void conn_free_now(struct kp_conn *c)
{
	twin_drop(c); /* before the program's fd, whose close is then the last */
	finished_forget(-1, c);
	kp_lock(&c->lock);
	if (c->tls) { /* its socket is gone */
		kp_tls_put(c->tls);
		__atomic_store_n(&c->tls, NULL, __ATOMIC_RELEASE);
	}
	kp_held_free(c->tls_held); /* never given back from here */
	c->tls_held = NULL;
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
	held_set(c, 0);
	c->replay_len = 0;
	c->state = KP_PASSTHROUGH;
	kp_unlock(&c->lock);
	kp_lock(&free_lock);
	c->next_free = free_conns;
	free_conns = c;
	kp_unlock(&free_lock);
}

/* The last reference went.  While a read of the program's is under way
 * on the socket (c->inflight) the object stays, orphan, and the last
 * read's end frees it (conn_free_orphan): that read ends with its own
 * framing state, and its socket (the twin of a reused one) stays open for
 * it as the kernel keeps the file for a read under way (docs/hold.md "A
 * read under way when another thread closes").  The orphan mark is
 * stored before the count is read, the count raised before the mark is
 * read (seq-cst, conn.h kp_read_end): one of the two sees the other, and
 * the exchange lets one of them free. */
void conn_free(struct kp_conn *c)
{
	__atomic_store_n(&c->orphan, true, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&c->inflight, __ATOMIC_SEQ_CST))
		return;
	conn_free_orphan(c);
}

void conn_free_orphan(struct kp_conn *c)
{
	if (__atomic_exchange_n(&c->orphan, false, __ATOMIC_SEQ_CST))
		conn_free_now(c);
}

void kp_read_last(struct kp_conn *c)
{
	int saved = errno;
	conn_free_orphan(c);
	errno = saved;
}

/* Drop one fd's reference; the last one frees.  Caller does not hold lock.
 * While c is busy the drop waits for the busy call's end (conn_reap). */
void conn_unref(struct kp_conn *c)
{
	if (!conn_lock_any(c)) {
		__atomic_add_fetch(&c->busy_unrefs, 1, __ATOMIC_ACQ_REL);
		if (!__atomic_load_n(&c->busy, __ATOMIC_ACQUIRE)) /* it ended meanwhile */
			conn_reap(c);
		return;
	}
	int left = --c->refs;
	kp_unlock(&c->lock);
	if (!left)
		conn_free(c);
}

void conn_reap(struct kp_conn *c)
{
	if (__builtin_expect(!__atomic_load_n(&c->busy_unrefs, __ATOMIC_ACQUIRE), 1))
		return;
	for (unsigned n = __atomic_exchange_n(&c->busy_unrefs, 0, __ATOMIC_ACQ_REL); n; n--)
		conn_unref(c);
}


/* why a complete response leaves its connection unreusable */
const char *resp_why(const struct frm_resp *r)
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
void go_passthrough(struct kp_conn *c, const char *why)
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
void finished_add(int fd, struct kp_conn *c)
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
void finished_forget(int fd, const struct kp_conn *c)
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

/* The pool learns that c, pooled, was found dead: idle from its parking
 * to idle_end_ms (0: now), after the requests it had served. */
void conn_note_dead(const struct kp_conn *c, uint64_t idle_end_ms)
{
	uint64_t now = kp_now_ms();
	pool_note_dead(&c->key, (idle_end_ms ? idle_end_ms : now) - c->parked_ms, c->served_at_checkout, now);
}

/* ------------------------------------------------------------ park */

/* Did the socket take bytes that never went through us since the watch
 * began?  A count we cannot read is a doubt: yes.  Caller holds c->lock. */
static bool tx_unseen(struct kp_conn *c, int fd)
{
	if (!c->tx_watch)
		return false;
	int saved = errno;
	uint64_t w;
	bool unseen = kp_tcp_kernel_tx(fd, &w) < 0 || w - c->tx_kernel0 != c->tx - c->tx0;
	errno = saved;
	return unseen;
}

bool parkable(const struct kp_conn *c);

bool handout_possible(void)
{
	return pool_size() || __atomic_load_n(&n_finished, __ATOMIC_ACQUIRE) || kp_broker_enabled();
}

/* Move a finished connection to key into the pool, if there is one.
 * Returns true when one was moved. */
bool take_finished(const struct pool_key *key)
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
	/* (a description with signals or flags stays: the dead socket under
	 * fd would not have them, docs/hold.md "What the description
	 * carries") */
	if (c->eof_owed && c->nonblock && c->refs == 1 && parkable(c) && fdfl >= 0 &&
	    !read_under_way(c) && kp_desc_plain(fd) &&
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


/* A read is under way on c's socket (another thread's, or this one's that
 * the closing handler interrupted): alone the kernel keeps the socket for
 * it.  Parked, it would go to the next connect(), whose answer the read
 * could take: a real close (docs/hold.md "A read under way when another
 * thread closes"). */
bool read_under_way(struct kp_conn *c)
{
	if (!__atomic_load_n(&c->inflight, __ATOMIC_SEQ_CST))
		return false;
	unpool(c, "a read under way in another thread");
	return true;
}

bool parkable(const struct kp_conn *c)
{
	return c->state == KP_ACTIVE && c->poolable && one_owner(c) && !c->n_reqs && c->req_mode == KP_REQ_HEAD &&
	       !c->held_len && !c->resp_started && c->served > 0 &&
	       (c->ka_max < 0 || c->served < (uint32_t)c->ka_max);
}

/* Move the connection behind fd into the pool.  Returns the hidden fd it
 * is parked at (fd then closed if close_fd), -1 when not (fd untouched).
 * parked_ms: when it went idle, for one handed back unused; 0: now. */
static void tls_leave_arm(void);

int park(int fd, struct kp_conn *c, bool close_fd, uint64_t parked_ms)
{
	if (c->tls_held) {
		/* a TLS state from the broker, never used: never parked here; at
		 * the program's close (fd its last holder) it goes back to the
		 * broker (docs/tls-across.md "The hand-out at connect()") */
		if (close_fd)
			kp_held_back(c->tls_held, fd, &c->key, c->refs <= 1 && one_owner(c),
				     !held_opts_set(c));
		else
			kp_held_free(c->tls_held);
		c->tls_held = NULL;
		unpool(c, "a TLS connection from another process, unused");
		return -1;
	}
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
	/* the program's fd is closed, or put on another socket: alone, its
	 * description would signal no one any more; parked, the server's close
	 * would (docs/hold.md "What the description carries") */
	if (!kp_fd_valid(hidden)) {
		KP_REAL(close)(hidden);
		return -1;
	}
	if (kp_desc_clear(hidden) < 0) {
		kp_fd_swap(hidden, NULL); /* a twin's mark */
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
	if (c->tls && !kp_tls_park(c->tls, hidden, c->tls_ssl, &c->key, &meta)) {
		kp_fd_swap(hidden, NULL);
		KP_REAL(close)(hidden);
		return -1;
	}
	if (c->tls)
		tls_leave_arm();
	kp_fd_swap(hidden, KP_POOLED);
	if (pool_checkin(&c->key, hidden, &meta, kp_now_ms()) < 0) {
		__atomic_store_n(&c->tls, NULL, __ATOMIC_RELEASE);
		hidden_close(hidden);
		return -1;
	}
	__atomic_store_n(&c->tls, NULL, __ATOMIC_RELEASE); /* the pool holds it now */
	if (close_fd)
		KP_REAL(close)(fd);
	return hidden;
}

/* ------------------------------------------------------------ fork */

/* kp_conn_before_fork takes these (in the order of kp_lock.h) so that the
 * child finds every structure whole. */
void hidden_lock_objects(void)
{
	kp_lock(&free_lock);
	kp_lock(&finished_lock);
}

void hidden_unlock_objects(void)
{
	kp_unlock(&finished_lock);
	kp_unlock(&free_lock);
}

void hidden_lock_twins(void)
{
	kp_lock(&twin_lock);
}

void hidden_unlock_twins(void)
{
	kp_unlock(&twin_lock);
}

/* In the child: recycled objects may be locked by threads the child does
 * not have; the locks kp_conn_before_fork took are new, not released. */
void hidden_child_objects(void)
{
	free_conns = NULL;
	kp_mutex_init(&free_lock);
	kp_mutex_init(&finished_lock);
	__atomic_store_n(&n_finished, 0, __ATOMIC_RELAXED);
}

/* In the child: its copies of the twins are closed, or it would keep the
 * parent's socket open after the parent closed it. */
void hidden_child_twins(void)
{
	for (unsigned i = 0; i < n_twins; i++)
		KP_REAL(close)(twins[i].fd);
	n_twins = 0;
	kp_mutex_init(&twin_lock);
}

/* ------------------------------------------------------------ exit */

/*
 * The TLS connections parked here end at exit: under KEEPALIVE_TLS_ACROSS
 * they leave with their state (kp_tls_across_leave: TLS 1.3, to the
 * broker), for the next process of a loop (docs/tls-across.md "The
 * hand-out in the library"); the others end with the close_notify their
 * last owner was told it sent (hidden_close: kp_tls_goodbye, docs/tls.md
 * "The close_notify owed").  In an atexit handler registered at the first
 * TLS park, after OpenSSL's own (registered at its initialisation, before
 * any handshake), so that it runs first: the library's destructor comes
 * after OpenSSL is torn down.  Only in the process that registered it (a
 * forked child registers again at its own first park).
 */
static pid_t tls_leave_pid;

static void tls_leave(void)
{
	bool across = kp_cfg.tls_across && kp_broker_enabled();
	static int fds[256];
	struct pool_key key;
	struct pool_meta meta;
	size_t n = pool_fds(fds, sizeof(fds) / sizeof(fds[0]));
	for (size_t i = 0; i < n; i++) {
		if (!kp_tls_is_parked(fds[i]) || pool_take_fd(fds[i], &key, &meta) < 0)
			continue;
		/* taken from the pool: gone either way, as at exit */
		if (!across || !kp_tls_across_leave(fds[i], &key, &meta)) {
			hidden_close(fds[i]);
			continue;
		}
		kp_fd_swap(fds[i], NULL);
		KP_REAL(close)(fds[i]);
	}
	/* and those the program still holds, its SSL_shutdown told its
	 * close_notify went: the FIN the exit makes follows it, as alone */
	int high = kp_fd_high();
	for (int fd = 0; fd <= high; fd++) {
		struct kp_conn *c = kp_fd_conn(fd);
		if (!c || c == KP_POOLED || !__atomic_load_n(&c->tls, __ATOMIC_ACQUIRE) || !conn_lock(c, fd))
			continue;
		if (c->tls && one_owner(c) && kp_tls_goodbye(c->tls, fd))
			unpool(c, "its close_notify sent at exit or exec"); /* (an exec that fails goes on) */
		kp_unlock(&c->lock);
	}
}

static void tls_leave_at_exit(void)
{
	/* (exit() in a handler that interrupted us inside a lock: as kp_fini;
	 * under a seccomp filter, stepped aside, not even getpid: docs/owner.md
	 * "A sandbox") */
	if (__atomic_load_n(&kp_fdtab_aside, __ATOMIC_ACQUIRE) || !kp_fdtab_len ||
	    getpid() != __atomic_load_n(&tls_leave_pid, __ATOMIC_ACQUIRE) || kp_reentered())
		return;
	tls_leave();
}

/* exec ends this image's TLS state as exit does: the parked connections
 * (close-on-exec) and the close_notify owed on those the program holds,
 * whose socket the next image may keep but can never speak TLS on (alone
 * it went at SSL_shutdown).  Not in a vfork child, which shares our
 * memory but not our descriptors: its pid is not the one the library
 * last saw (a forked child's copies are no owner's: one_owner).  If the
 * exec fails, the pool has lost its TLS connections: a cost.  (docs/tls.md
 * "The close_notify owed") */
void kp_conn_tls_leave_at_exec(void)
{
	if (__atomic_load_n(&kp_fdtab_aside, __ATOMIC_ACQUIRE) || !kp_fdtab_len || kp_reentered() ||
	    !__atomic_load_n(&tls_leave_pid, __ATOMIC_ACQUIRE) || getpid() != kp_conn_pid)
		return;
	tls_leave();
}

static void tls_leave_arm(void)
{
	pid_t me = getpid();
	if (__atomic_exchange_n(&tls_leave_pid, me, __ATOMIC_ACQ_REL) != me)
		atexit(tls_leave_at_exit);
}

void kp_tls_exit_arm(void)
{
	if (__atomic_load_n(&tls_leave_pid, __ATOMIC_ACQUIRE) != getpid())
		tls_leave_arm();
}

/* A finished connection the program never closed (the response complete,
 * nothing owed but an EOF): as idle as a closed one.  Park a copy; the
 * program's own fd dies with the process.  Only sockets still connected
 * to their key's destination: a close we never saw (a raw syscall) may
 * have left the number to a file. */
static void park_unclosed(void)
{
	/* (a process that tracked nothing pays one load: the table's whole
	 * length was 180k instructions at every exit of every process under
	 * the wrapper, a shell's subshells included) */
	if (!kp_fd_any_live())
		return;
	int high = kp_fd_high();
	for (int fd = 0; fd <= high; fd++) {
		struct kp_conn *c = kp_fd_conn(fd);
		if (!c || c == KP_POOLED || !conn_lock(c, fd))
			continue;
		if (!c->tls && c->refs == 1 && parkable(c) &&
		    !kp_broker_check_own(fd, &c->key) && park(fd, c, false, 0) >= 0) {
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
