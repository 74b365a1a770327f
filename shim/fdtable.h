/*
 * fdtable.h - fd -> connection.  The whole fast path of every wrapper is
 * kp_fd_conn(): one bounds check and one array load; NULL means "not ours".
 */
#ifndef KEEPALIVE_FDTABLE_H
#define KEEPALIVE_FDTABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "kp_lock.h"

struct kp_conn;

/* A hidden fd that holds a pooled socket: not the program's. */
#define KP_POOLED ((struct kp_conn *)1)

/* What we learnt of an fd from socket(), bind() and setsockopt(). */
enum {
	KP_FD_TCP = 1,       /* socket(AF_INET[6], SOCK_STREAM) seen */
	KP_FD_NOT_TCP = 2,   /* socket() seen, and it is something else */
	KP_FD_BOUND = 4,     /* bind() before connect: the route is the program's */
	KP_FD_ROUTED = 8,    /* SO_MARK, SO_BINDTODEVICE...: same */
	KP_FD_CONNECTED = 16, /* connected outside the pool: ignore its options */
	/* O_NONBLOCK and FD_CLOEXEC as the program set them, followed from
	 * socket(), fcntl() and ioctl(FIONBIO) so that a pool hit needs no
	 * F_GETFL/F_GETFD; trusted only when KP_FD_TCP says we saw socket() */
	KP_FD_NONBLOCK = 32,
	KP_FD_CLOEXEC = 64,
	KP_FD_EPOLL = 128,   /* an epoll set (its close drops our registrations) */
	KP_FD_INET6 = 256,   /* with KP_FD_TCP: socket(AF_INET6), else AF_INET */
	/* The socket may be held by another process too: it crossed a fork,
	 * an exec or spawn, or an SCM_RIGHTS message before we connected it.
	 * Never a connection of ours (docs/owner.md). */
	KP_FD_SHARED = 512,
	/* A FILE was made on the socket (fdopen) before it was connected:
	 * stdio's reads go past us, so no request on it may be rewritten
	 * (docs/hold.md).  Never a connection of ours. */
	KP_FD_STDIO = 1024,
	/* In a forked child: the parent's connection on this socket owed its
	 * program an answer's end and the server's close (fin_at_end in
	 * conn.c): a move onto stdio sends our FIN (kp_fin_owed_onto). */
	KP_FD_FIN_OWED = 2048,
};
typedef uint16_t kp_fdfl;

/* Hidden: the fast paths then reach them in one instruction each, not
 * through a GOT load (-fvisibility=hidden covers definitions only). */
#define KP_HIDDEN __attribute__((visibility("hidden")))

extern KP_HIDDEN struct kp_conn **kp_fdtab;
extern KP_HIDDEN kp_fdfl *kp_fdflags;
extern KP_HIDDEN unsigned kp_fdtab_len;
/* How many of the program's fds are connections (entries neither NULL nor
 * KP_POOLED).  0: no readiness answer of ours can differ from the
 * kernel's, and poll/select pass straight through without looking at
 * each fd (most programs, and every one that never spoke HTTP). */
extern KP_HIDDEN unsigned kp_fd_live;
/* The lowest fd number ever marked KP_POOLED (INT_MAX: none yet): the
 * program's own low numbers are told from ours by one compare. */
extern KP_HIDDEN int kp_fd_pooled_low;

/* The tracked-fd half of an exported wrapper: kept out of line, so that
 * the wrapper itself is the bounds check, the load, the test and a tail
 * jump to libc (no registers saved for the fd that is not ours). */
#define KP_SLOW __attribute__((noinline))

static inline struct kp_conn *kp_fd_conn(int fd)
{
	if ((unsigned)fd >= kp_fdtab_len)
		return 0;
	return __atomic_load_n(&kp_fdtab[fd], __ATOMIC_ACQUIRE);
}

/* A hidden fd of ours (a pooled socket, a twin): not the program's. */
static inline bool kp_fd_pooled(int fd)
{
	return __builtin_expect(fd >= __atomic_load_n(&kp_fd_pooled_low, __ATOMIC_RELAXED), 0) &&
	       kp_fd_conn(fd) == KP_POOLED;
}

/* On x86-64 a compare with memory and a jump (an x86 load is an acquire):
 * GCC will not fold the load into the compare by itself, and the untracked
 * stdio wrappers are this test and the jump to libc (docs/cost.md). */
static inline bool kp_fd_any_live(void)
{
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
	__asm__ goto("cmpl $0, %0\n\tjne %l[live]" : : "m"(kp_fd_live) : "cc" : live);
	return false;
live:
	return true;
#else
	return __atomic_load_n(&kp_fd_live, __ATOMIC_ACQUIRE) != 0;
#endif
}

static inline bool kp_fd_valid(int fd)
{
	return (unsigned)fd < kp_fdtab_len;
}

/* kp_fdflags[fd], for a valid fd.  Relaxed atomics: threads touch the
 * flags of different fds side by side (and ThreadSanitizer, whose own
 * reporter opens files through our open(), must see no race there). */
static inline kp_fdfl kp_fl(int fd)
{
	return __atomic_load_n(&kp_fdflags[fd], __ATOMIC_RELAXED);
}

/* a number we know something of: a connection, a pooled fd, a flag */
static inline bool kp_fd_known(int fd)
{
	return kp_fd_valid(fd) && (kp_fd_conn(fd) || kp_fl(fd));
}

static inline void kp_fl_set(int fd, kp_fdfl v)
{
	__atomic_store_n(&kp_fdflags[fd], v, __ATOMIC_RELAXED);
}

static inline void kp_fl_or(int fd, kp_fdfl v)
{
	__atomic_fetch_or(&kp_fdflags[fd], v, __ATOMIC_RELAXED);
}

static inline void kp_fl_clear(int fd, kp_fdfl v)
{
	__atomic_fetch_and(&kp_fdflags[fd], (kp_fdfl)~v, __ATOMIC_RELAXED);
}

/* Allocate the table (from the constructor), sized from RLIMIT_NOFILE,
 * which it leaves in *rl (the fd budget is planned from the same read;
 * 1024 when it cannot be read).  Returns 0 or -1. */
struct rlimit;
int kp_fdtab_init(struct rlimit *rl);

/* Set fd's entry; returns the previous one. */
struct kp_conn *kp_fd_swap(int fd, struct kp_conn *c);
/* Clear fd's entry if it still holds c (a connection, not KP_POOLED);
 * true when it did, and the entry's reference is then the caller's to
 * drop.  False: another thread's close took it first. */
bool kp_fd_drop_if(int fd, struct kp_conn *c);

/* The lowest fd number to hide pooled sockets at. */
int kp_fd_hidden_base(void);

/* Move it (RLIMIT_NOFILE changed: hidden.c kp_conn_fd_limits). */
void kp_fd_set_hidden_base(int base);

/* Highest fd ever given a connection or KP_FD_TCP (bounds scans). */
int kp_fd_high(void);
/* fd now has KP_FD_TCP: the scans must reach it */
void kp_fd_note_high(int fd);

/* In a forked child: forget every entry (the connections are the parent's). */
void kp_fdtab_after_fork_child(void);
/* The library steps aside for good (a seccomp filter: conn_sandbox.c):
 * the table's length 0 sends every wrapper to the kernel, no fd counts
 * as a connection (poll, select and stdio pass straight through). */
void kp_fdtab_step_aside(void);
/* ... and that happened: the exit's stats line is not written either */
extern KP_HIDDEN bool kp_fdtab_aside;

#endif
