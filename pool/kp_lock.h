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
 *   c->lock                       a connection (conn.c, conn_replay.c,
 *                                 conn_opts.c, tls.c's calls half)
 *   free_lock, finished_lock      conn.c (objects, the finished take-over)
 *   defaults_lock                 sockopts.c
 *   watch.c lock                  the readiness watch
 *   pool.c lock                   the pool (never across an injected op)
 *   tls_lock                      tls.c (the pool's close takes it)
 *   twin_lock                     conn.c
 *   link_lock                     broker_client.c (trylock only)
 *   mem_lock                      kp_mem.c (the pool's objects; a leaf)
 *   rl_lock                       fdlimit.c (the fd limit's raise; trylock
 *                                 only, but from the program's limit calls)
 * kp_conn_before_fork takes them in this order and holds them across
 * fork().
 */
#ifndef KEEPALIVE_KP_LOCK_H
#define KEEPALIVE_KP_LOCK_H

#include <pthread.h>
#include <stdbool.h>

/* How deep this thread is inside a locked region (or a connect()/close()
 * of ours): defined in kp_mem.c, the lowest layer that locks. */
extern __thread unsigned kp_inside __attribute__((tls_model("initial-exec"), visibility("hidden")));

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

static inline void kp_lock(pthread_mutex_t *m)
{
	kp_enter();
	pthread_mutex_lock(m);
}

/* 0 (locked, counted) or pthread_mutex_trylock's error (not counted) */
static inline int kp_trylock(pthread_mutex_t *m)
{
	kp_enter();
	int r = pthread_mutex_trylock(m);
	if (r)
		kp_leave();
	return r;
}

static inline void kp_unlock(pthread_mutex_t *m)
{
	pthread_mutex_unlock(m);
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
 * deadlocked without any signal).  A signal handler that interrupts
 * inside one of these calls is not protected (docs/binding.md). */
#define KP_OUTSIDE(call)                                  \
	({                                                \
		unsigned outer_ = kp_inside;              \
		kp_inside = 0;                            \
		__atomic_signal_fence(__ATOMIC_SEQ_CST);  \
		__typeof__(call) r_ = (call);             \
		__atomic_signal_fence(__ATOMIC_SEQ_CST);  \
		kp_inside = outer_;                       \
		r_;                                       \
	})

#endif
