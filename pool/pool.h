/*
 * pool.h - idle connections by destination.  Knows sockets and numbers,
 * never HTTP.  Prefix: pool_.
 *
 * The interface is what an out-of-process pool (a daemon that holds the
 * sockets and passes them over a Unix socket with SCM_RIGHTS) would offer
 * too: check in an fd with a key and a small fixed-size record, check out
 * an fd for a key.  The shim never looks inside the pool.
 *
 * The in-process implementation (pool.c) makes no syscall of its own: the
 * caller injects close() and the liveness probe, so the policy can be unit
 * tested with fake sockets.
 */
#ifndef KEEPALIVE_POOL_H
#define KEEPALIVE_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* A destination.  Zero the whole struct before filling it (it is hashed
 * as bytes).  Sockets whose route depends on more than this (bound local
 * address, SO_MARK, SO_BINDTODEVICE) must not be pooled at all. */
struct pool_key {
	uint16_t family; /* AF_INET or AF_INET6 */
	uint16_t port;   /* host byte order */
	uint32_t scope;  /* IPv6 scope id */
	uint8_t addr[16];
	/* network namespace (inode of /proc/PID/ns/net): the broker's pool
	 * serves many processes, and the same address in another namespace is
	 * another server.  0 in the in-process pool. */
	uint64_t netns;
};

/* The key of the destination addr names (AF_INET or AF_INET6, len long
 * enough; netns 0): true, or false for any other address. */
bool pool_key_from_sockaddr(const struct sockaddr *addr, socklen_t len, struct pool_key *key);

/* The address key names, in ss: its length. */
socklen_t pool_key_to_sockaddr(const struct pool_key *key, struct sockaddr_storage *ss);

/* The same destination (family, address, port, IPv6 scope), whatever the
 * network namespace. */
bool pool_key_same_peer(const struct pool_key *a, const struct pool_key *b);

#define POOL_TAG_MAX 192

/* What travels with a parked socket. */
struct pool_meta {
	uint32_t requests;   /* requests already served on this connection */
	int32_t ka_timeout;  /* server's Keep-Alive: timeout=N (s), -1 unknown */
	int32_t ka_max;      /* server's Keep-Alive: max=M, -1 unknown */
	uint64_t parked_ms;  /* when it went idle: set by pool_checkin (to now,
	                        or kept when given: a socket handed back unused) */
	uint16_t tag_len;
	uint8_t tag[POOL_TAG_MAX]; /* opaque to the pool (the shim keeps the
	                              socket options the last owner set) */
};

struct pool_config {
	uint64_t idle_ms;        /* never hand out a socket idle longer */
	unsigned max_per_dest;   /* idle sockets per destination */
	unsigned max_total;      /* idle sockets in all */
	uint64_t unprobed_ms;    /* hand out a socket parked less than this
	                            long ago without the liveness probe (the
	                            caller replays a request a dead one fails,
	                            and probes before one it may not); 0:
	                            probe every socket */
};

struct pool_ops {
	int (*close)(int fd);
	/* 1 if the idle socket is still usable (nothing to read, no EOF, no
	 * error), 0 if not. Must not block. */
	int (*alive)(int fd);
	/* Optional: a live socket the caps push out (not an expired or dead
	 * one).  Returns 0 when it took fd (the library hands it to the
	 * broker), -1 to have it closed. */
	int (*evicted)(int fd, const struct pool_key *key, const struct pool_meta *meta);
};

/* (Re)initialise an empty pool.  Not thread-safe against other calls. */
void pool_init(const struct pool_config *cfg, const struct pool_ops *ops);

/* Park fd under key.  Returns 0 when parked (the pool owns fd now), -1
 * when refused (the caller still owns fd and must close it): pool
 * disabled, the server's max reached.  May evict (close) older sockets. */
int pool_checkin(const struct pool_key *key, int fd, const struct pool_meta *meta,
		 uint64_t now_ms);

/* Take the newest live idle socket for key.  Returns its fd (the caller
 * owns it now) with its record in *meta, or -1 when there is none.  Closes
 * expired and dead sockets on the way.  A socket parked less than
 * unprobed_ms ago is taken as live without the probe. */
int pool_checkout(const struct pool_key *key, uint64_t now_ms, struct pool_meta *meta);

/* A socket handed out by pool_checkout() turned out dead when first used
 * (the server had closed it: EOF, reset, or a 408 before our request was
 * answered), idle_ms after it was parked, having served `requests`.  The
 * pool learns from it (see pool.c, "Expiry that learns").  The liveness
 * probe's own failures at checkout are learnt from without this call. */
void pool_note_dead(const struct pool_key *key, uint64_t idle_ms, uint32_t requests,
		    uint64_t now_ms);

/* A socket handed out by pool_checkout() was killed under its first
 * request, and the request could not be sent again: the program met an
 * error a fresh connection would not have given it.  Learnt at once, so
 * that it does not happen twice: a request limit of `requests` (the count
 * the socket had served), unless sockets that had served as many were
 * seen to answer again (then pool_note_dead's idle learning is the
 * explanation). */
void pool_note_killed(const struct pool_key *key, uint32_t requests, uint64_t now_ms);

/* A socket handed out by pool_checkout() answered its first request:
 * evidence for the learning (pool.c). */
void pool_note_alive(const struct pool_key *key, uint64_t idle_ms, uint32_t requests,
		     uint64_t now_ms);

/* What the pool has learnt of key: the idle age it no longer keeps
 * sockets past (0: nothing learnt) and the requests a socket may have
 * served and still be parked (0: no limit learnt).  For tests and logs. */
void pool_learnt(const struct pool_key *key, uint64_t now_ms, uint64_t *idle_cap_ms,
		 uint32_t *max_requests);

/* Is fd one of the pool's idle sockets?  If so and take is true, remove
 * it without closing it (the program is about to close or replace that fd
 * number itself). */
bool pool_owns_fd(int fd, bool take);

/* Remove the idle socket fd from the pool without closing it, and give
 * its key and record.  Returns 0, or -1 when fd is not pooled. */
int pool_take_fd(int fd, struct pool_key *key, struct pool_meta *meta);

/* One idle socket, as pool_list() shows it. */
struct pool_entry {
	int fd;
	struct pool_key key;
	struct pool_meta meta;
	uint64_t expires_ms;
};

/* Copy up to cap idle sockets' entries into out, oldest first; returns
 * the count.  For a status display. */
size_t pool_list(struct pool_entry *out, size_t cap);

/* The earliest expiry of any idle socket (for a timer), or UINT64_MAX
 * when the pool is empty. */
uint64_t pool_next_expiry(void);

/* Close everything that expired by now_ms.  Returns the number closed. */
unsigned pool_expire(uint64_t now_ms);

/* Copy up to cap pooled fds into fds (sorted ascending); returns count. */
size_t pool_fds(int *fds, size_t cap);

/* fork(): the lock is held across it (pool_before_fork in the prepare
 * handler, released in the parent), so the child sees whole lists; the
 * child's sockets are the parent's: it closes its copies and forgets them. */
void pool_before_fork(void);
void pool_after_fork_parent(void);
void pool_after_fork_child(void);

/*
 * The pool's share of the program's fd table (RLIMIT_NOFILE soft limit
 * `soft`): *cap idle sockets at most (a sixteenth of the table, never more
 * than max_total: 2 of 32, 4 of 64, 64 of 1024), parked from fd number
 * *base up: the top of the table, which a program allocating lowest-first
 * reaches last (one spare number, so that parking the newest while the
 * oldest is evicted still finds a place), or 1024 for a table of 2048 or
 * more (out of select()'s FD_SETSIZE).  Pure policy.
 */
void pool_fd_plan(uint64_t soft, unsigned max_total, unsigned *cap, int *base);

/* Set the cap on idle sockets in all; the oldest beyond it are closed.
 * Returns how many were. */
unsigned pool_set_max_total(unsigned max_total);

/* Close every idle socket (the program is out of fds).  Returns how many. */
unsigned pool_drain(void);

/* Number of idle sockets. */
size_t pool_size(void);

/* When may a socket parked at parked_ms with meta be handed out last?
 * (pure policy, exposed for tests) */
uint64_t pool_expiry(const struct pool_config *cfg, const struct pool_meta *meta,
		     uint64_t parked_ms);

#endif
