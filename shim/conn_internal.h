/*
 * conn_internal.h - what the files of one connection's life share, and
 * nothing outside them sees, by the file that defines each name: conn.c
 * (connect and hand-out, close, the read side, TLS, hand-off, fork),
 * send.c (the program's writes), conn_replay.c (the first use of a reused
 * connection: fresh connections and replay), wire.c (a request's bytes
 * out), hidden.c (pool ops, twins, objects, the finished list, park,
 * the exit's hand of the pool to the broker) and
 * conn_opts.c (the program's socket options carried onto a pooled
 * socket).  docs/structure.md has the order they call one another in.
 * The wrappers' interface is conn.h.  Every name here is hidden (never exported),
 * declarations included, so that calls and loads go direct.
 */
#ifndef KEEPALIVE_CONN_INTERNAL_H
#define KEEPALIVE_CONN_INTERNAL_H

#include "iov.h"
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "conn.h"
#include "fdtable.h"

#pragma GCC visibility push(hidden)

/* ------------------------------------------------------------ for all of them */

/* Lock c, unless its holder is in a call that may block (c->busy):
 * then c is marked raw (never pooled, given up at our next call on it:
 * a call went past us) and false says "make the kernel's call" (docs/hold.md
 * "Never wait on a busy connection"). */
static inline bool conn_lock_any(struct kp_conn *c)
{
	if (__builtin_expect(kp_lock_unless(&c->lock, &c->busy), 1))
		return true;
	__atomic_store_n(&c->raw, true, __ATOMIC_RELEASE);
	return false;
}

/* Lock c for work on fd; false (not locked) when fd no longer holds c:
 * the program closed it meanwhile, in another thread; or when c is busy
 * (conn_lock_any). */
static inline bool conn_lock(struct kp_conn *c, int fd)
{
	if (__builtin_expect(!kp_lock_unless(&c->lock, &c->busy), 0)) {
		if (kp_fd_conn(fd) == c) /* (a stale pointer's object is another's) */
			__atomic_store_n(&c->raw, true, __ATOMIC_RELEASE);
		return false;
	}
	if (kp_fd_conn(fd) == c)
		return true;
	kp_unlock(&c->lock);
	return false;
}

/* The holder of c->lock is about to make a call that may block, or call
 * libssl (whose BIO reaches our wrappers with the inside mark cleared,
 * kp_lock.h KP_OUTSIDE): from now until busy_end every other call on c
 * steps aside rather than wait (conn_lock_any), and waiters already
 * queued on the lock are woken to see it.  Nests. */
static inline void busy_begin(struct kp_conn *c)
{
	if (__atomic_add_fetch(&c->busy, 1, __ATOMIC_ACQ_REL) == 1)
		kp_mutex_wake_all(&c->lock);
}

static inline void busy_end(struct kp_conn *c)
{
	__atomic_sub_fetch(&c->busy, 1, __ATOMIC_ACQ_REL);
}

/* Run call with c busy (busy_begin); its value. */
#define BUSY(c, call)                             \
	({                                        \
		busy_begin(c);                    \
		__typeof__(call) busy_r_ = (call); \
		int busy_e_ = errno;              \
		busy_end(c);                      \
		errno = busy_e_;                  \
		busy_r_;                          \
	})

/* c->held_len and c->req_mode change under c->lock; kp_conn_holds reads
 * them without (a hint): stored atomically, so that read is no data race
 * (ThreadSanitizer saw one on held_len). */
static inline void held_set(struct kp_conn *c, size_t n)
{
	__atomic_store_n(&c->held_len, n, __ATOMIC_RELEASE);
}

static inline void mode_set(struct kp_conn *c, uint8_t mode)
{
	__atomic_store_n(&c->req_mode, mode, __ATOMIC_RELEASE);
}

/* The connection may no longer be parked.  The first reason is kept for
 * the debug line of its real close (settle_last). */
static inline void unpool(struct kp_conn *c, const char *why)
{
	if (!c->unpooled)
		c->unpooled = why;
	c->poolable = false;
}

/* ------------------------------------------------------------ what they share of types */

/* The record a parked socket carries (pool_meta.tag). */
struct kp_tag {
	uint8_t nonblock;
	uint8_t n_opts;
	struct kp_sockopt opts[KP_MAX_OPTS]; /* what is set on the socket now */
	uint32_t cred_epoch; /* hidden.c one_owner: the credentials it was made under */
};

_Static_assert(sizeof(struct kp_tag) <= POOL_TAG_MAX, "the tag travels in pool_meta");

/* How a reused connection was seen to die under its first request: what
 * the kernel answered the program's call (docs/replay.md). */
enum kp_died {
	KP_DIED_EOF,        /* a read returned 0 (TLS: the SSL layer's EOF) */
	KP_DIED_RESET,      /* a read failed: ECONNRESET (or EPIPE) */
	KP_DIED_408,        /* a read returned a 408 before any response */
	KP_DIED_SEND_EPIPE, /* a send into the body failed with EPIPE */
	KP_DIED_SEND_RESET, /* ... with ECONNRESET */
};

/* ------------------------------------------------------------ conn_held.c */

/* Put pooled socket p in the program's fd, as if connect() had just
 * succeeded on the program's own socket: 0, or -1 (fd untouched unless
 * the dup3 succeeded). */
int adopt_pooled(int fd, int p, struct kp_conn *c, const struct pool_meta *meta, bool local);
/* c is now the pooled connection meta describes */
void handed_record(struct kp_conn *c, const struct pool_meta *meta, uint64_t now);
/* connect()'s TLS hand-out across processes (docs/tls-across.md "The
 * hand-out at connect()"): after a miss in the process's pool and the
 * broker's plain one, under KEEPALIVE_TLS_ACROSS, a TLS connection to
 * c's key taken from the broker under any name (kp_held_take: h, its
 * socket p) is put under fd as a pooled one (what connect() answers is
 * handed_answer's, as for any pooled socket), its state held on c.  0:
 * handed; -1: not (fd untouched, p closed, h given back or wiped). */
int held_hand_out(int fd, struct kp_conn *c, struct kp_held *h, int p, uint64_t now);
/* The program's first use of fd while c holds a TLS state: ssl its
 * SSL_connect (NULL: plain bytes).  True: handed to ssl; false: the state
 * went back (or was wiped), fd has a fresh connection where one could be
 * made.  c locked. */
bool held_start(struct kp_conn *c, int fd, void *ssl);
/* The program set socket options on c (before connect() or since): a
 * socket of another process's TLS state with them must not go back to
 * the broker (the next program would be handed them: kp_held_back). */
static inline bool held_opts_set(const struct kp_conn *c)
{
	return c->so.n_opts || !c->poolable;
}

/* ------------------------------------------------------------ conn.c */

void first_seen(struct kp_conn *c);
bool tls_bypassed(struct kp_conn *c, int fd);
void handoff_fin_if_due(struct kp_conn *c, int fd);
void owed_close_fin(struct kp_conn *c, int fd);
void raw_settle(struct kp_conn *c, int fd);

/* ------------------------------------------------------------ conn_replay.c */

int swap_fresh(struct kp_conn *c, int fd, bool repark);
void first_request_fresh(struct kp_conn *c, int fd, const char *why);
void unvouch(struct kp_conn *c, int fd, const char *why);
bool replay(struct kp_conn *c, int fd, enum kp_died how);
bool replay_shut_ok(const struct kp_conn *c);
bool first_shut_wr(struct kp_conn *c, int fd);
void close_replay(struct kp_conn *c, int fd);
/* replay()'s decision alone: may the request go again (the method, or the
 * proof)?  On no, the connection is given up as replay() gives it up. */
bool replay_decide(struct kp_conn *c, int fd, enum kp_died how);
bool replay_keep(struct kp_conn *c, const char *p, size_t n);
bool replay_keep_iov(struct kp_conn *c, const struct iovec *iov, int iovcnt, size_t off,
		     size_t n);

/* docs/replay.md "Before the first request": a read's end the program
 * alone would not meet (a fresh connection now under fd: make the read
 * again), and a hand-off's fresh connection */
bool read_unseen_end(struct kp_conn *c, int fd);

/* The calling thread, as a value unique among the live ones (the address
 * of a thread-local) */
const void *kp_this_thread(void);
/* c's TLS state t (a pooled one, or another process's) is the program's
 * SSL's now, read through by this thread.  t is published last: a
 * lock-free reader of c->tls finds the rest set.  c locked. */
static inline void conn_tls_handed(struct kp_conn *c, void *ssl, struct kp_tls *t)
{
	c->tls_ssl = ssl;
	c->tls_handed = true;
	c->tls_thread = kp_this_thread();
	c->tls_pending = false;
	__atomic_store_n(&c->tls, t, __ATOMIC_RELEASE);
}
void handoff_fresh(struct kp_conn *c, int fd);
/* The program's call in this thread has MSG_DONTWAIT: it waits for
 * nothing, the fresh connection it may need included (as on an
 * O_NONBLOCK socket: docs/replay.md "The program's bounds").  Set by the
 * read and the send around what may swap before the first request. */
extern __thread bool kp_call_nowait;
/* the program's call is a write (send.c): a non-blocking one's replay
 * sends what fits, the rest before its next write (replay_cut) */
extern __thread bool kp_call_write;
bool first_request_plan(struct kp_conn *c, int fd, const struct frm_req_head *h,
			size_t extra);

bool first_body_send(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt,
		     int flags, ssize_t *ret);

bool answered_408(const struct iovec *iov, int iovcnt, ssize_t ret);
void sigpipe_as_kernel(int flags);
/* a signal interrupted the replay's fresh connect in this thread: the
 * program's call is to fail with EINTR (kp_recv_done) */
extern __thread bool kp_replay_interrupted;
/* The rest of a replay's copy a signal cut (replay_rest): sent now, at
 * the program's next read or wait on fd.  True: cut again where the
 * program's call ends (errno EINTR). */
bool kp_replay_rest(struct kp_conn *c, int fd);
/* The rest of the copy before a program's write: 0, or -1 with errno
 * EINTR or EAGAIN (nothing of the program's may go).  Lock held. */
int replay_rest_first(struct kp_conn *c, int fd, int flags);

bool ready_settle(struct kp_conn *c, int fd);
void give_up(struct kp_conn *c, int fd, const char *why);
/* give_up for a response the framer refuses (conn_replay.c) */
void lost_response(struct kp_conn *c, int fd);
/* give_up for a read no wrapper sees, and our FIN where that read needs
 * the server's close.  Caller holds c->lock. */
void unseen_read_fin(struct kp_conn *c, int fd);
/* A read on c, lost (give_up): whether its quiet period has passed (show
 * EOF).  False: the real read goes on, unless *err is set: the read's own
 * bound (SO_RCVTIMEO, a signal) ran out first and the call fails with it.
 * Takes no lock. */
bool lost_quiet(struct kp_conn *c, int fd, int flags, int *err);
void account_sent(struct kp_conn *c, const struct iovec *iov, int iovcnt, size_t off, size_t n);

/* ------------------------------------------------------------ wire.c */

void tx_watch_start(struct kp_conn *c, int fd);
ssize_t conn_sendmsg(struct kp_conn *c, int fd, const struct msghdr *m, int flags);
ssize_t send_all(struct kp_conn *c, int fd, const char *buf, size_t len, int flags, bool cut,
		 size_t *sent);

/* Learn what n bytes of iov from off, written as they were, were: NULL, or
 * why the connection must be given up (account_sent: give_up). */
const char *wire_account(struct kp_conn *c, const struct iovec *iov, int iovcnt, size_t off, size_t n);

size_t body_span(struct frm_body b, const struct iovec *iov, int iovcnt, size_t off);
bool after_close(const struct kp_conn *c);
void after_close_drop(int fd, size_t n);
int flush_held(struct kp_conn *c, int fd, int flags);
long head_parse(const char *buf, size_t len, size_t seen, struct frm_req_head *h);
int held_append(struct kp_conn *c, const struct iovec *iov, int n, size_t off, size_t max);
bool part_begin(struct kp_conn *c, const char *r, size_t rl, const char *o, size_t ol, size_t k, size_t pos);
size_t part_debt(const struct kp_conn *c);
const char *part_end(struct kp_conn *c);
bool held_fits(const struct kp_conn *c, int fd, int flags);
bool held_dead(const struct kp_conn *c, int fd);
bool tls_stage_push(struct kp_conn *c, const struct iovec *v, int nv, size_t ol, ssize_t *r);
void tls_part_begin(struct kp_conn *c, size_t rl, size_t headlen, const char *data, size_t hl, size_t k,
		    size_t pos);

ssize_t part_pump(struct kp_conn *c, int fd, size_t pos0, size_t n, int flags, bool sent_once);
bool queue_request(struct kp_conn *c, const struct frm_req_head *h, bool rewritten);

/* ------------------------------------------------------------ hidden.c */

int pool_alive_fd(int fd);
void twin_drop(struct kp_conn *c);
struct kp_conn *conn_new(void);
void conn_unref(struct kp_conn *c);
int park(int fd, struct kp_conn *c, bool close_fd, uint64_t parked_ms);
/* reset what a previous owner left (c->lock held), before
 * the first request byte or a getsockopt(); unpools when it cannot */
void conn_flush_opts(struct kp_conn *c, int fd);

void conn_free(struct kp_conn *c);
/* an orphan's last read ended: free it (once) */
void conn_free_orphan(struct kp_conn *c);
/* The closes that came while c was busy (busy_unrefs), dropped now that
 * its busy call is over; the caller holds no lock of c's. */
void conn_reap(struct kp_conn *c);
extern uint32_t cred_epoch;
extern bool divided;
void finished_add(int fd, struct kp_conn *c);
void finished_forget(int fd, const struct kp_conn *c);
void go_passthrough(struct kp_conn *c, const char *why);
bool one_owner(const struct kp_conn *c);
bool parkable(const struct kp_conn *c);
/* The program took fd's pending error (conn.h kp_conn_dead_seen), from
 * inside a wrapper's marks (kp_enter). */
bool dead_seen(struct kp_conn *c, int fd);

/* a read is under way on c (conn.h kp_read_begin): never parked now
 * (unpooled).  Caller holds c->lock. */
bool read_under_way(struct kp_conn *c);
/* wire.c: FRM_CLOSE_LINE shown at offset k of the n bytes a read returned
 * in iov (docs/replay.md "A closing answer"), what no longer fits to
 * extra; the count the read now returns */
size_t kp_close_line_in(const struct iovec *iov, int iovcnt, size_t n, size_t k, char *extra, uint8_t *extra_len);
bool pooled_one_owner(const struct kp_tag *tag);
const char *resp_why(const struct frm_resp *r);
bool take_finished(const struct pool_key *key);
/* Could a connect() be handed a pooled connection (one pooled, or
 * finished, or a broker to ask)?  Cheap: loads and a branch. */
bool handout_possible(void);
bool twin_forget_fd(int fd);
bool twin_keep(struct kp_conn *c, int p);
/* the pool's share of the fd budget has room for one more hidden fd
 * (pooled sockets, twins, TLS sockets kept to learn their end) */
bool hidden_room(void);
int hidden_close(int hidden);
/* every hidden fd closed: pooled sockets, twins, TLS learners; how many */
unsigned hidden_drain_all(void);
/* The process whose fd table ours describes (kp_conn_init, a fork's
 * child anew): a call made with another pid is a vfork child's, whose
 * fds are its own table's (conn_replay.c handoff_fresh) */
extern pid_t kp_conn_pid;
void conn_note_dead(const struct kp_conn *c, uint64_t idle_end_ms);
void hidden_lock_objects(void);
void hidden_unlock_objects(void);
void hidden_lock_twins(void);
void hidden_unlock_twins(void);
void hidden_child_objects(void);
void hidden_child_twins(void);

#pragma GCC visibility pop

#endif
