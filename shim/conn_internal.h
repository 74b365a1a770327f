/*
 * conn_internal.h - what the files of one connection's life share, and
 * nothing outside them sees: conn.c (the life itself: pool ops, twins,
 * objects, hand-out, park, close, the send path, the response feed, TLS,
 * hand-off, fork, exit) and sockopts.c (the program's socket options
 * carried onto a pooled socket).  The wrappers' interface is conn.h.
 * Every name here is hidden (never exported), declarations included, so
 * that calls and loads go direct.
 */
#ifndef KEEPALIVE_CONN_INTERNAL_H
#define KEEPALIVE_CONN_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "conn.h"
#include "fdtable.h"

#pragma GCC visibility push(hidden)

/* ------------------------------------------------------------ objects (conn.c) */

struct kp_conn *conn_new(void);
void conn_unref(struct kp_conn *c);

/* Lock c for work on fd; false (not locked) when fd no longer holds c:
 * the program closed it meanwhile, in another thread. */
static inline bool conn_lock(struct kp_conn *c, int fd)
{
	pthread_mutex_lock(&c->lock);
	if (kp_fd_conn(fd) == c)
		return true;
	pthread_mutex_unlock(&c->lock);
	return false;
}

/* The connection may no longer be parked.  The first reason is kept for
 * the debug line of its real close (settle_last). */
static inline void unpool(struct kp_conn *c, const char *why)
{
	if (!c->unpooled)
		c->unpooled = why;
	c->poolable = false;
}

/* ------------------------------------------------------------ options (sockopts.c) */

/* the levels a struct kp_sockopt's level indexes */
extern const int opt_levels[];

/* The record a parked socket carries (pool_meta.tag). */
struct kp_tag {
	uint8_t nonblock;
	uint8_t n_opts;
	struct kp_sockopt opts[KP_MAX_OPTS]; /* what is set on the socket now */
};

/* at hand-out (adopt_pooled), and before the first request byte */
int opts_transfer(int fresh, int pooled, struct kp_conn *c, const struct kp_tag *prev);
void flush_pending(struct kp_conn *c, int fd);

/* fork(): the defaults' lock, taken and released in kp_conn_*_fork's order */
void kp_sockopts_before_fork(void);
void kp_sockopts_after_fork_parent(void);
void kp_sockopts_after_fork_child(void);

#pragma GCC visibility pop

#endif
