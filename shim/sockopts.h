/*
 * sockopts.h - the program's socket options, carried onto a pooled socket
 * (docs/design.md §1, connect()).  A service below the connection core:
 * it works on a struct kp_sockopts (embedded in each connection) and
 * answers with verdicts; the core (conn_opts.c) holds the locks and
 * decides what a verdict means for the connection.  Prefix: kp_sockopts_.
 */
#ifndef KEEPALIVE_SOCKOPTS_H
#define KEEPALIVE_SOCKOPTS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define KP_MAX_OPTS 8
struct kp_sockopt {
	uint8_t level; /* index into kp_opt_levels */
	uint8_t name;
	uint8_t len;
	bool late;     /* not one we carry: set on a handed-out connection, kept
	                  only for a fresh one made under the program's fd */
	uint8_t val[17];
};

/* the levels a struct kp_sockopt's level indexes */
extern const int kp_opt_levels[];

struct kp_sockopts {
	/* what the program set (to carry over to a pooled socket) */
	struct kp_sockopt opts[KP_MAX_OPTS];
	uint8_t n_opts;
	/* options a previous owner left on a reused socket that this owner
	 * has not set (yet): reset to the default before the first request
	 * goes out, unless the program sets the very same value first (Ruby
	 * sets TCP_NODELAY right after connect: then no syscall at all) */
	struct kp_sockopt pending[KP_MAX_OPTS];
	uint8_t n_pending;
};

enum kp_opt_verdict {
	KP_OPT_KEPT,      /* recorded (or harmless to drop): carried */
	KP_OPT_ROUTES,    /* changes the route: the socket must never be pooled */
	KP_OPT_UNCARRIED, /* cannot be carried: the connection must not be */
};

/* An option we do not carry (kp_sockopt_carried false), set on a handed-out
 * connection: recorded (late) for a fresh connection made later under the
 * program's fd (a replay, a request we do not follow), which applies it
 * before its connect, where it can (docs/replay.md "Options set on a
 * handed-out connection").  False when it cannot be recorded (a level we
 * do not know, too long a value, no room); _fits: whether it could be. */
bool kp_sockopts_record_late(struct kp_sockopts *s, int level, int name, const void *val,
			     socklen_t len);
bool kp_sockopts_late_fits(const struct kp_sockopts *s, int level, int name, socklen_t len);

/* Does this option change the route (SO_MARK, SO_BINDTODEVICE, ...)? */
bool kp_sockopt_routes(int level, int name);
/* Is this an option we can carry onto a pooled socket (its value aside)? */
bool kp_sockopt_carried(int level, int name);

/* The program set an option on its socket. */
enum kp_opt_verdict kp_sockopts_record(struct kp_sockopts *s, int level, int name,
				       const void *val, socklen_t len);

/* Give the pooled socket `pooled` the options of s (the program's fresh
 * socket `fresh`); what only the previous owner (prev) had set becomes
 * pending, reset lazily.  Returns 0, or -1 (the socket cannot be made the
 * program's: not to be handed out). */
int kp_sockopts_transfer(struct kp_sockopts *s, int fresh, int pooled,
			 const struct kp_sockopt *prev, unsigned n_prev);

/* Reset the pending options on fd.  Returns false when one could not be
 * reset (the connection must not be pooled again). */
bool kp_sockopts_flush(struct kp_sockopts *s, int fd);

/* The program sets an option that is pending: it owns it now.  Returns
 * whether the socket already holds exactly that value (the call can be
 * answered without a syscall); *verdict says how recording it went. */
bool kp_sockopts_claim(struct kp_sockopts *s, int level, int name, const void *val,
		       socklen_t len, enum kp_opt_verdict *verdict);

/* The open file description's own state, beyond the socket and its
 * options (docs/hold.md "What the description carries"): the status
 * flags other than O_NONBLOCK (O_ASYNC, O_APPEND, O_NOATIME), the owner of
 * its signals (F_SETOWN, F_SETOWN_EX, SIOCSPGRP, FIOSETOWN) and their
 * signal (F_SETSIG), asked of the kernel (a program may set them through
 * syscall()).  Is fd's description without any?  False when unknown. */
bool kp_desc_plain(int fd);
/* Make fd's description plain (O_NONBLOCK kept): a parked socket signals
 * no one.  Returns 0, or -1 (not to be parked). */
int kp_desc_clear(int fd);
/* Give socket `to` the state of from's description (owner, signal, then
 * the flags, O_ASYNC last: no signal to a half-made owner).  Returns 0,
 * or -1 (to is not to be put under the program's fd). */
int kp_desc_carry(int from, int to);

/* fork(): the defaults' lock, taken and released in the connection
 * core's fork order */
void kp_sockopts_before_fork(void);
void kp_sockopts_after_fork_parent(void);
void kp_sockopts_after_fork_child(void);

#endif
