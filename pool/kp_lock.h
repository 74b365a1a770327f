/*
 * kp_lock.h - every lock of the library is taken through kp_lock(), which
 * counts on this thread how deep it is inside a locked region of ours
 * (docs/binding.md, "Signal handlers inside our locks").
 *
 * A signal handler runs on the thread it interrupted.  If that thread held
 * one of our locks and the handler calls a wrapper that takes the same
 * lock (connect() on an HTTP port, close(), a read or write on one of our
 * connections, poll(), dup(), fork()...), the handler waits for a lock
 * only the thread it interrupted can release: a deadlock.  So every
 * wrapper that may take a lock asks kp_reentered() first and, when this
 * thread is inside, makes the kernel's call (fail open): one TLS load
 * (initial-exec: a %fs-relative load, no __tls_get_addr) on the tracked
 * path only; an untracked fd never reaches it.
 *
 * The locks, in the order they may be taken (a lock is only ever taken
 * while holding those above it):
 *   c->lock                       a connection (conn.c, send.c, wire.c,
 *                                 hidden.c, conn_replay.c, conn_opts.c,
 *                                 tls_calls.c); held across a call that
 *                                 may block only with c->busy up, and
 *                                 then never waited for (kp_lock_unless)
 *   free_lock, finished_lock      hidden.c (objects, the finished take-over)
 *   defaults_lock                 sockopts.c
 *   watch.c lock                  the readiness watch
 *   pool.c lock                   the pool (never across an injected op)
 *   tls_lock                      the tls_*.c files (tls_conf.c; the
 *                                 pool's close takes it)
 *   twin_lock                     hidden.c
 *   link_lock                     broker_client.c (trylock only)
 *   mem_lock                      kp_mem.c (the pool's objects; a leaf)
 *   rl_lock                       fdlimit.c (the fd limit's raise; trylock
 *                                 only, but from the program's limit calls)
 * kp_conn_before_fork takes them in this order and holds them across
 * fork(), but link_lock and mem_lock, which the child makes anew.  Apart
 * from this list: three pthread_once guards (real.c, tls_engine.c,
 * tls_real.c), each run once, taking none of these.
 */
#ifndef KEEPALIVE_KP_LOCK_H
#define KEEPALIVE_KP_LOCK_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

/* The lock itself.  Every request takes about a dozen of them, never
 * contended in a single-threaded program: pthread_mutex_lock and unlock
 * cost 50-55 instructions a pair there (its type and owner checks),
 * which was a tenth of what the library adds per request
 * (docs/cost.md).  On x86-64 it is the classic three-state futex lock
 * (0 free, 1 held, 2 held with waiters: Drepper, "Futexes Are Tricky"):
 * a compare-and-swap to take it and an exchange to give it back, a
 * futex call only when another thread waits.  The futex call is the
 * instruction itself: the libc syscall() is ours to interpose. */
#if defined(__x86_64__) && defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>

typedef struct {
	int word;
} kp_mutex_t;
#define KP_MUTEX_INITIALIZER { 0 }

static inline void kp_futex(int *word, int op, int val)
{
	long ret;
	register long r10 __asm__("r10") = 0; /* no timeout */
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"((long)SYS_futex), "D"(word), "S"((long)op), "d"((long)val), "r"(r10)
			 : "rcx", "r11", "memory");
	(void)ret;
}

static inline void kp_mutex_init(kp_mutex_t *m)
{
	__atomic_store_n(&m->word, 0, __ATOMIC_RELAXED);
}

static inline void kp_mutex_acquire(kp_mutex_t *m)
{
	int c = 0;
	if (__builtin_expect(__atomic_compare_exchange_n(&m->word, &c, 1, false, __ATOMIC_ACQUIRE,
							 __ATOMIC_RELAXED), 1))
		return;
	if (c != 2)
		c = __atomic_exchange_n(&m->word, 2, __ATOMIC_ACQUIRE);
	while (c != 0) {
		kp_futex(&m->word, FUTEX_WAIT_PRIVATE, 2);
		c = __atomic_exchange_n(&m->word, 2, __ATOMIC_ACQUIRE);
	}
}

/* 0, or EBUSY as pthread_mutex_trylock */
static inline int kp_mutex_tryacquire(kp_mutex_t *m)
{
	int c = 0;
	return __atomic_compare_exchange_n(&m->word, &c, 1, false, __ATOMIC_ACQUIRE,
					   __ATOMIC_RELAXED) ? 0 : EBUSY;
}

static inline void kp_mutex_release(kp_mutex_t *m)
{
	if (__builtin_expect(__atomic_exchange_n(&m->word, 0, __ATOMIC_RELEASE) != 1, 0))
		kp_futex(&m->word, FUTEX_WAKE_PRIVATE, 1);
}

/* kp_mutex_acquire, unless *busy is (or becomes) nonzero while another
 * holds m: false then, m not taken.  The waiter looks at *busy at least
 * every 10 ms (a wake that kp_mutex_wake_all sends between its look and
 * its sleep is not lost for longer). */
static inline bool kp_mutex_acquire_unless(kp_mutex_t *m, const unsigned *busy)
{
	int c = 0;
	if (__builtin_expect(__atomic_compare_exchange_n(&m->word, &c, 1, false, __ATOMIC_ACQUIRE,
							 __ATOMIC_RELAXED), 1))
		return true;
	for (;;) {
		if (__atomic_load_n(busy, __ATOMIC_ACQUIRE))
			return false;
		if (__atomic_exchange_n(&m->word, 2, __ATOMIC_ACQUIRE) == 0)
			return true;
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		long ret;
		register long r10 __asm__("r10") = (long)&ts;
		__asm__ volatile("syscall"
				 : "=a"(ret)
				 : "0"((long)SYS_futex), "D"(&m->word), "S"((long)FUTEX_WAIT_PRIVATE),
				   "d"(2L), "r"(r10)
				 : "rcx", "r11", "memory");
		(void)ret;
	}
}

/* Wake every waiter of m (held by the caller): they look at busy again.
 * Only when one waits (2): no system call on the uncontended path. */
static inline void kp_mutex_wake_all(kp_mutex_t *m)
{
	if (__atomic_load_n(&m->word, __ATOMIC_ACQUIRE) == 2)
		kp_futex(&m->word, FUTEX_WAKE_PRIVATE, 1 << 30);
}
#else
typedef pthread_mutex_t kp_mutex_t;
#define KP_MUTEX_INITIALIZER PTHREAD_MUTEX_INITIALIZER
static inline void kp_mutex_init(kp_mutex_t *m) { pthread_mutex_init(m, NULL); }
static inline void kp_mutex_acquire(kp_mutex_t *m) { pthread_mutex_lock(m); }
static inline int kp_mutex_tryacquire(kp_mutex_t *m) { return pthread_mutex_trylock(m); }
static inline void kp_mutex_release(kp_mutex_t *m) { pthread_mutex_unlock(m); }
static inline bool kp_mutex_acquire_unless(kp_mutex_t *m, const unsigned *busy)
{
	for (;;) {
		if (pthread_mutex_trylock(m) == 0)
			return true;
		if (__atomic_load_n(busy, __ATOMIC_ACQUIRE))
			return false;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (pthread_mutex_timedlock(m, &ts) == 0)
			return true;
	}
}
static inline void kp_mutex_wake_all(kp_mutex_t *m) { (void)m; }
#endif

/* How deep this thread is inside a locked region (or a connect()/close()
 * of ours): defined in kp_mem.c, the lowest layer that locks. */
extern __thread unsigned kp_inside __attribute__((tls_model("initial-exec"), visibility("hidden")));
/* How deep this thread is inside a call of ours into libssl (KP_OUTSIDE):
 * a read its BIO makes then is ours, not the program's (conn.c
 * tls_waits).  Left raised by a jump out of such a call, it only keeps
 * that thread's reads from counting as the program's. */
extern __thread unsigned kp_outside __attribute__((tls_model("initial-exec"), visibility("hidden")));

/* A whole call of ours (connect(), close(), the slow halves of the read
 * and write families) counts in the high half of kp_inside, a lock in the
 * low half: one load still asks "inside?".  A call left by a jump out of
 * a signal handler (siglongjmp past a blocking read of ours) never comes
 * back to kp_call_leave; with no lock of ours held its count is dropped by
 * the jump itself (hooks_jump.c), or the thread would step aside for good
 * (docs/binding.md "A jump out of a handler"). */
#define KP_INSIDE_CALL 0x10000u
#define KP_INSIDE_LOCKS (KP_INSIDE_CALL - 1)

static inline void kp_call_enter(void)
{
	kp_inside += KP_INSIDE_CALL;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static inline void kp_call_leave(void)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	/* (0 already when a jump dropped the count under a handler that
	 * then returned into the call: hooks_jump.c) */
	if (__builtin_expect(kp_inside >= KP_INSIDE_CALL, 1))
		kp_inside -= KP_INSIDE_CALL;
}

static inline void kp_enter(void)
{
	kp_inside++;
	/* the count is written before anything a handler could find held */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static inline void kp_leave(void)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	kp_inside--;
}

static inline void kp_lock(kp_mutex_t *m)
{
	kp_enter();
	kp_mutex_acquire(m);
}

/* kp_lock, unless another call holds m across a call that may block
 * (*busy: a connection's send, docs/hold.md "Never wait on a busy
 * connection"): false then, not locked, not counted. */
static inline bool kp_lock_unless(kp_mutex_t *m, const unsigned *busy)
{
	kp_enter();
	if (kp_mutex_acquire_unless(m, busy))
		return true;
	kp_leave();
	return false;
}

/* 0 (locked, counted) or EBUSY (not counted) */
static inline int kp_trylock(kp_mutex_t *m)
{
	kp_enter();
	int r = kp_mutex_tryacquire(m);
	if (r)
		kp_leave();
	return r;
}

static inline void kp_unlock(kp_mutex_t *m)
{
	kp_mutex_release(m);
	kp_leave();
}

/* This thread is inside one of our locked regions: a wrapper called now
 * runs in a signal handler that interrupted us, and must make the
 * kernel's call without taking any lock of ours. */
static inline bool kp_reentered(void)
{
	return __builtin_expect(__atomic_load_n(&kp_inside, __ATOMIC_RELAXED) != 0, 0);
}

/* A call of ours into libssl whose BIO calls our wrappers back by design
 * (the engine's SSL_write_ex reaches send(), a handshake read()): that
 * nested wrapper runs as the program's call would, not as a handler's
 * (it takes no lock its caller holds: it never could, that would have
 * deadlocked without any signal).  Made under a connection's lock, it
 * runs with that connection busy (shim/conn_internal.h BUSY): a signal
 * handler that interrupts inside it steps aside on that connection
 * (kp_lock_unless) instead of waiting for its own thread's lock
 * (docs/binding.md). */
#define KP_OUTSIDE(call)                                  \
	({                                                \
		unsigned outer_ = kp_inside;              \
		kp_inside = 0;                            \
		kp_outside++;                             \
		__atomic_signal_fence(__ATOMIC_SEQ_CST);  \
		__typeof__(call) r_ = (call);             \
		__atomic_signal_fence(__ATOMIC_SEQ_CST);  \
		kp_outside--;                             \
		kp_inside = outer_;                       \
		r_;                                       \
	})

#endif
