/*
 * fdlimit.h - where the library's hidden fds live with respect to the
 * program's RLIMIT_NOFILE (docs/limits.md).
 */
#ifndef KEEPALIVE_FDLIMIT_H
#define KEEPALIVE_FDLIMIT_H

#include <stdbool.h>
#include <sys/resource.h>

#include "sys_prlimit.h"

/* A new limit (rl, the program's): may `room` hidden fds live from its
 * soft limit up?  Remembered for kp_fd_hide; true when they may. */
bool kp_limits_plan(const struct rlimit *rl, unsigned room);
/* rl is the limit the plan was made for. */
bool kp_limits_fresh(const struct rlimit *rl);
/* The plan puts hidden fds above the soft limit. */
bool kp_limits_above(void);

/* A close-on-exec copy of fd at a hidden number: above the program's soft
 * limit when the plan says so, else from kp_fd_hidden_base().  -1 when
 * none can be made now (EBUSY: a spawn or a limit call runs; EINVAL: the
 * limit changed behind us, plan again). */
int kp_fd_hide(int fd);

/* The program's getrlimit/setrlimit/prlimit on RLIMIT_NOFILE run between
 * these (true: the lock was taken). */
bool kp_rl_enter(void);
void kp_rl_leave(bool locked);
/* fork, exec and spawn: the child copies the program's limit, never a
 * raised one.  counted (posix_spawn, system, popen: the calling thread
 * comes back): no raise until kp_spawn_leave. */
void kp_spawn_enter(bool counted);
void kp_spawn_leave(void);

/* fork(): the lock is held across it (conn.c kp_conn_before_fork). */
void kp_limits_before_fork(void);
void kp_limits_after_fork_parent(void);
void kp_limits_after_fork_child(void);

/* The program's highest open fd below `below`, hidden fds of ours aside:
 * -1 none, -2 unknown (/proc unreadable and `below` past the probes'
 * bound, fdlimit.c). */
int kp_fd_program_high(int below);

#endif
