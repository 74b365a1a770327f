/*
 * broker_check.h - the security checks both ends of the broker make
 * (DESIGN 8).  Prefix: bk_.
 */
#ifndef KEEPALIVE_BROKER_CHECK_H
#define KEEPALIVE_BROKER_CHECK_H

#include <sys/socket.h>

#include "pool.h"

typedef int (*bk_getsockopt_fn)(int, int, int, void *, socklen_t *);

/* A connection that crossed the socket must be what its key says: a
 * connected, established TCP socket whose peer is the key's destination.
 * Anything else (a file, a UDP or listening socket, a socket to another
 * server than claimed) is refused.  gso: getsockopt (the library passes
 * the real one, past its own wrapper).  Returns NULL, or why not. */
const char *bk_check_conn(int fd, const struct pool_key *key, bk_getsockopt_fn gso);

/* The directory of sock_path must be one only we can enter: ours (the
 * effective uid), not a symlink, no access for group or others
 * ($XDG_RUNTIME_DIR is made so, as is a mktemp -d).  Returns NULL, or why
 * not. */
const char *bk_check_dir(const char *sock_path);

#endif
