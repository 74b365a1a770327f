/*
 * watch.h - which epoll sets watch which of our connections.
 *
 * epoll reports the data the program registered, not the fd, and a
 * connection that owes its EOF has nothing left in the kernel to wake an
 * epoll set: so we remember what epoll_ctl() registered for tracked fds
 * and report the owed EOF ourselves.  And when a connection's socket is
 * replaced under the program's fd (a replay on a fresh connection, see
 * conn_replay.c swap_fresh), the kernel drops the old socket's
 * registrations: they are made again on the new one.  Prefix: kp_watch_.
 */
#ifndef KEEPALIVE_WATCH_H
#define KEEPALIVE_WATCH_H

#include <stdbool.h>
#include <sys/epoll.h>

/* Registrations held: epoll_wait's whole fast path is a load of this. */
extern __attribute__((visibility("hidden"))) unsigned kp_watch_count;

/* epoll_ctl(epfd, op, fd, ev) succeeded on fd, a connection of ours or a
 * TCP socket that may become one (registered before its connect()). */
void kp_watch_ctl(int epfd, int op, int fd, const struct epoll_event *ev);

/* fd (tracked) is being closed or replaced by another file. */
void kp_watch_forget_fd(int fd);

/* The epoll set epfd is closed. */
void kp_watch_forget_epfd(int epfd);
/* The program is about to close epfd: its records of our sockets move to a
 * hidden copy of the set (it may live on through another fd). */
void kp_watch_close_epfd(int epfd);
/* The library steps aside (a seccomp filter: conn_sandbox.c): every
 * record goes, our hidden copies of sets closed. */
void kp_watch_drop_all(void);

/* fd is about to be replaced by another file (dup3 onto it): take its
 * registrations out of the kernel's sets first, or epoll would go on
 * reporting the old socket (still open elsewhere) under the program's data.
 * kp_watch_renew() puts them back. */
void kp_watch_detach(int fd);

/* fd now holds a new socket (dup3 onto it): register it again wherever
 * the old one was registered. */
void kp_watch_renew(int fd);

/*
 * Fold our readiness into an epoll_wait result: append (or OR into the
 * entry with the same data) an EPOLLIN for every connection registered in
 * epfd that owes its EOF now.  evs may be NULL (max 0) to look only.
 * Returns the new count; *due_ms gets when our next decision falls due (0
 * now, -1 never).  due(fd, &data_only) says that for one registered fd,
 * in the same terms, and whether only data waits there (no EOF owed yet:
 * no RDHUP to report): the connection layer's answer, asked through a
 * callback so that this file stays below it.
 */
typedef int kp_watch_due_fn(int fd, bool *data_only);
int kp_watch_fold(int epfd, struct epoll_event *evs, int n, int max, kp_watch_due_fn *due,
		  int *due_ms);

/* Which registered fds of ours the events evs[0..n) of epfd stand for
 * (epoll reports the program's data, not the fd).  Fills up to cap hits;
 * returns their number. */
struct kp_watch_hit {
	int fd;
	int index; /* in evs */
};
int kp_watch_hits(int epfd, const struct epoll_event *evs, int n, struct kp_watch_hit *hits,
		  int cap);

/* fork(): the lock is held across it */
void kp_watch_before_fork(void);
void kp_watch_after_fork_parent(void);
void kp_watch_after_fork_child(void);

#endif
