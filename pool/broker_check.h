/*
 * broker_check.h - the security checks both ends of the broker make
 * (docs/broker.md).  Prefix: bk_.
 *
 * Everything here is decided on a file descriptor, never on a name or on
 * what a peer says: a socket's network namespace (SO_NETNS_COOKIE, or its
 * inode in our own /proc/self/net/ tables where the kernel lacks the
 * cookie), its state and peer, a directory's owner and mode.
 *
 * The calls that the library also exports are injected (struct bk_sys):
 * the library passes its kp_real table's, past its own wrappers; the broker
 * passes libc's.  This file never calls an exported name of the library.
 */
#ifndef KEEPALIVE_BROKER_CHECK_H
#define KEEPALIVE_BROKER_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "pool.h"

/* Debian 12's headers predate it (Linux 5.14) */
#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif

struct bk_sys {
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	int (*getpeername)(int, struct sockaddr *, socklen_t *);
	int (*openat)(int, const char *, int, ...);
	ssize_t (*read)(int, void *, size_t);
	int (*close)(int);
	uid_t euid; /* ours, read once */
};

/* Our own network namespace, as the checks compare it: the cookie of a
 * socket we created, or (kernel without SO_NETNS_COOKIE) "look the socket
 * up in /proc/self/net". */
struct bk_ns {
	uint64_t cookie; /* 0: no cookie on this kernel, use /proc */
	bool known;
};

/* Our namespace from sock, a socket we created ourselves (a socket lives
 * in the namespace of the process that created it).  Returns 0, or -1
 * when sock is not a socket. */
int bk_ns_self(const struct bk_sys *sys, int sock, struct bk_ns *self);

/* Does socket fd live in self's namespace?  family: AF_INET, AF_INET6
 * (TCP) or AF_UNIX: the /proc table to look it up in without the cookie.
 * Returns NULL, or why not (cannot tell is "no"). */
const char *bk_check_ns(const struct bk_sys *sys, int fd, int family, const struct bk_ns *self);

/* A connection that crossed the socket must be what its key says: an
 * established TCP socket in our own network namespace whose peer is the
 * key's destination.  Anything else (a file, a UDP, listening or
 * unconnected socket, one of another namespace, one to another server) is
 * refused.  Returns NULL, or why not; *dead (may be NULL) is set when the
 * only fault is that the connection is no longer established (a server
 * that closed or reset an idle connection: a normal event, not a lie;
 * whatever its namespace, such a socket is never used).  self NULL
 * skips the namespace: for a process's own socket that never left it. */
const char *bk_check_conn(const struct bk_sys *sys, int fd, const struct pool_key *key,
			  const struct bk_ns *self, bool *dead);

/* The broker's proof, checked by a client on the first reply of a link:
 * proof is the broker's listening socket, which must live in our own
 * namespace, listen, and have been listened on by the process our link
 * reached (its SO_PEERCRED pid and uid equal link_cred, the link's).  A broker
 * answering at our path from another namespace has no such socket.
 * Returns NULL, or why not. */
const char *bk_check_proof(const struct bk_sys *sys, const struct ucred *link_cred, int proof,
			   const struct bk_ns *self);

/* Pure: does the text of a /proc/net/{tcp,tcp6,unix} table (len bytes,
 * whole lines) list socket inode ino?  *partial gets the length of an
 * incomplete last line (to be read again with the next chunk).  Returns
 * 1 / 0.  tcp tables: inode is the 10th field; unix: the 7th. */
int bk_table_has_inode(const char *buf, size_t len, int family, uint64_t ino, size_t *partial);

/* The state letter of a /proc/PID/stat line (buf, len bytes): the field
 * after the last ')' (a command name may hold ')' and spaces), or 0 when
 * the line has none. */
char bk_stat_state(const char *buf, size_t len);

/* Is process pid stopped (SIGSTOP, SIGTSTP: 'T'; not a tracer's stop 't',
 * which strace makes at each system call for a moment)?
 * Read from /proc/PID/stat; false when it cannot be (pid 0: a process of
 * another pid namespace). */
bool bk_pid_stopped(const struct bk_sys *sys, pid_t pid);

/* The directory that holds the broker's socket, opened once
 * (O_DIRECTORY|O_NOFOLLOW) and checked on the fd: a directory, ours (the
 * effective uid), no access for group or others; its parent not writable
 * by others unless sticky (a world-writable XDG_RUNTIME_DIR is refused).
 * flags: BK_DIR_CREATE mkdirs the last component (mode 0700) if missing;
 * BK_DIR_PARENT checks the parent (whoever makes files inside must: a
 * client that only connects through the fd need not).  Returns the fd
 * (O_PATH|O_CLOEXEC), or -1 with *why. */
#define BK_DIR_CREATE 1u
#define BK_DIR_PARENT 2u
int bk_open_dir(const struct bk_sys *sys, const char *dir, unsigned flags, const char **why);

/* why, from bk_open_dir or bk_open_sock_dir, says the directory is missing
 * or another user's (not one of ours that is unsafe). */
bool bk_dir_not_ours(const char *why);

/* Same for the directory of sock_path (an absolute path). */
int bk_open_sock_dir(const struct bk_sys *sys, const char *sock_path, unsigned flags, const char **why);

/* Is directory fd a safe place to make files in: not writable by group
 * or others unless sticky, and owned by us or root?  Returns NULL or why. */
const char *bk_check_parent(const struct bk_sys *sys, int fd);

/* The name of sock_path's last component (its base name). */
const char *bk_base(const char *sock_path);

/* "/proc/self/fd/N/NAME" into out (cap bytes): a path through a checked
 * directory fd, never re-resolving the directory's name.  Returns 0, or
 * -1 when it does not fit. */
int bk_fd_path(char *out, size_t cap, int dirfd, const char *name);

#endif
