/*
 * watch.c - epoll registrations of our connections (see watch.h).
 *
 * A short array under one mutex: a program has a handful of connections
 * registered at a time, and only programs with some pay anything.
 */
#include "watch.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "fdlimit.h"
#include "fdtable.h"
#include "real.h"

struct watch {
	int epfd, fd;
	uint32_t events;
	epoll_data_t data;
	bool armed; /* EPOLLONESHOT/EPOLLET: reported once until re-armed */
	bool hidden; /* epfd is our copy of a set the program closed a number of */
};

unsigned kp_watch_count;
static struct watch *watches;
static unsigned n_cap;
static kp_mutex_t lock = KP_MUTEX_INITIALIZER;

/* Caller holds the lock. */
static void drop(unsigned i)
{
	int ep = watches[i].hidden ? watches[i].epfd : -1;
	unsigned n = kp_watch_count - 1;
	watches[i] = watches[n];
	__atomic_store_n(&kp_watch_count, n, __ATOMIC_RELEASE); /* read without the lock */
	if (ep < 0)
		return;
	for (unsigned j = 0; j < n; j++)
		if (watches[j].epfd == ep)
			return;
	kp_fd_swap(ep, NULL); /* our copy's last record: the copy goes */
	KP_REAL(close)(ep);
}

/* Caller holds the lock. */
static struct watch *find(int epfd, int fd)
{
	for (unsigned i = 0; i < kp_watch_count; i++)
		if (watches[i].epfd == epfd && watches[i].fd == fd)
			return &watches[i];
	return NULL;
}

void kp_watch_drop_all(void)
{
	kp_lock(&lock);
	while (kp_watch_count)
		drop(kp_watch_count - 1);
	kp_unlock(&lock);
}

void kp_watch_ctl(int epfd, int op, int fd, const struct epoll_event *ev)
{
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return;
	kp_lock(&lock);
	struct watch *w = find(epfd, fd);
	if (op == EPOLL_CTL_DEL) {
		if (w)
			drop((unsigned)(w - watches));
	} else if (ev) {
		if (!w && op == EPOLL_CTL_ADD) {
			if (kp_watch_count == n_cap) {
				unsigned cap = n_cap ? n_cap * 2 : 16;
				struct watch *nw = realloc(watches, cap * sizeof(*nw));
				if (!nw)
					goto out; /* unwatched: the program waits for the kernel */
				watches = nw;
				n_cap = cap;
			}
			w = &watches[kp_watch_count];
			w->hidden = false; /* (realloc'd memory: every field set here) */
			__atomic_store_n(&kp_watch_count, kp_watch_count + 1, __ATOMIC_RELEASE);
		}
		if (w) {
			w->epfd = epfd;
			w->fd = fd;
			w->events = ev->events;
			w->data = ev->data;
			w->armed = true;
		}
	}
out:
	kp_unlock(&lock);
}

static void forget_if(bool (*match)(const struct watch *, intptr_t), intptr_t v)
{
	if (!__atomic_load_n(&kp_watch_count, __ATOMIC_ACQUIRE))
		return;
	kp_lock(&lock);
	for (unsigned i = 0; i < kp_watch_count;) {
		if (match(&watches[i], v))
			drop(i);
		else
			i++;
	}
	kp_unlock(&lock);
}

static bool by_fd(const struct watch *w, intptr_t fd)
{
	return w->fd == fd;
}

static bool by_epfd(const struct watch *w, intptr_t epfd)
{
	return w->epfd == epfd;
}

void kp_watch_forget_fd(int fd)
{
	forget_if(by_fd, fd);
}

void kp_watch_forget_epfd(int epfd)
{
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return;
	forget_if(by_epfd, epfd);
}

/* The program is about to close epfd, a set our connections are
 * registered in.  The set may live on through another fd of the
 * program's (a dup of it, a fork's copy): its registrations of our
 * sockets must still be removed when they park (a pooled twin keeps the
 * socket's file open, and the set would go on reporting it).  So their
 * records move to a hidden copy of epfd, closed with the last of them
 * (docs/hold.md "epoll through a closed number").  Without a copy to be
 * had: forgotten, as before. */
void kp_watch_close_epfd(int epfd)
{
	if (kp_reentered() || !__atomic_load_n(&kp_watch_count, __ATOMIC_ACQUIRE))
		return;
	kp_lock(&lock);
	bool any = false;
	for (unsigned i = 0; i < kp_watch_count && !any; i++)
		any = watches[i].epfd == epfd && !watches[i].hidden;
	kp_unlock(&lock);
	if (!any)
		return;
	int copy = kp_fd_hide(epfd); /* (its own locks: not under ours) */
	if (copy >= 0 && !kp_fd_valid(copy)) {
		KP_REAL(close)(copy);
		copy = -1;
	}
	if (copy >= 0)
		kp_fd_swap(copy, KP_POOLED); /* refused to the program, as our others */
	kp_lock(&lock);
	bool used = false;
	for (unsigned i = 0; i < kp_watch_count;) {
		struct watch *w = &watches[i];
		if (w->epfd != epfd || w->hidden) {
			i++;
		} else if (copy < 0) {
			drop(i);
		} else {
			w->epfd = copy;
			w->hidden = true;
			used = true;
			i++;
		}
	}
	kp_unlock(&lock);
	if (copy >= 0 && !used) {
		kp_fd_swap(copy, NULL);
		KP_REAL(close)(copy);
	}
}

void kp_watch_detach(int fd)
{
	if (!__atomic_load_n(&kp_watch_count, __ATOMIC_ACQUIRE))
		return;
	kp_lock(&lock);
	for (unsigned i = 0; i < kp_watch_count; i++)
		if (watches[i].fd == fd)
			KP_REAL(epoll_ctl)(watches[i].epfd, EPOLL_CTL_DEL, fd, NULL);
	kp_unlock(&lock);
}

void kp_watch_renew(int fd)
{
	if (!__atomic_load_n(&kp_watch_count, __ATOMIC_ACQUIRE))
		return;
	kp_lock(&lock);
	for (unsigned i = 0; i < kp_watch_count; i++) {
		struct watch *w = &watches[i];
		if (w->fd != fd)
			continue;
		struct epoll_event ev = { .events = w->events, .data = w->data };
		KP_REAL(epoll_ctl)(w->epfd, EPOLL_CTL_ADD, fd, &ev);
		w->armed = true;
	}
	kp_unlock(&lock);
}

int kp_watch_fold(int epfd, struct epoll_event *evs, int n, int max, kp_watch_due_fn *due,
		  int *due_ms)
{
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return *due_ms = -1, n;
	*due_ms = -1;
	kp_lock(&lock);
	for (unsigned i = 0; i < kp_watch_count; i++) {
		struct watch *w = &watches[i];
		uint32_t want = w->events & (EPOLLIN | EPOLLRDNORM | EPOLLRDHUP);
		if (w->epfd != epfd || !want || !w->armed)
			continue;
		bool data_only = false;
		int ms = due(w->fd, &data_only);
		if (data_only)
			want &= ~(uint32_t)EPOLLRDHUP;
		if (ms < 0)
			continue;
		if (*due_ms < 0 || ms < *due_ms)
			*due_ms = ms;
		if (ms > 0 || !evs)
			continue;
		int j = 0;
		while (j < n && evs[j].data.u64 != w->data.u64)
			j++;
		if (j == n) {
			if (n == max)
				continue; /* no room: reported by the next wait */
			evs[n].events = 0;
			evs[n].data = w->data;
			n++;
		}
		evs[j].events |= want;
		if (w->events & (EPOLLONESHOT | EPOLLET))
			w->armed = false;
	}
	kp_unlock(&lock);
	return n;
}

int kp_watch_hits(int epfd, const struct epoll_event *evs, int n, struct kp_watch_hit *hits,
		  int cap)
{
	if (kp_reentered()) /* a signal handler inside our locks (kp_lock.h) */
		return 0;
	int nh = 0;
	kp_lock(&lock);
	for (unsigned i = 0; i < kp_watch_count && nh < cap; i++) {
		const struct watch *w = &watches[i];
		if (w->epfd != epfd)
			continue;
		for (int j = 0; j < n && nh < cap; j++) {
			if (evs[j].data.u64 == w->data.u64) {
				hits[nh].fd = w->fd;
				hits[nh].index = j;
				nh++;
			}
		}
	}
	kp_unlock(&lock);
	return nh;
}

void kp_watch_before_fork(void)
{
	kp_lock(&lock);
}

void kp_watch_after_fork_parent(void)
{
	kp_unlock(&lock);
}

void kp_watch_after_fork_child(void)
{
	for (unsigned i = 0; i < kp_watch_count; i++)
		if (watches[i].hidden) /* (the parent's; a copy closed twice: EBADF) */
			KP_REAL(close)(watches[i].epfd);
	kp_mutex_init(&lock);
	__atomic_store_n(&kp_watch_count, 0, __ATOMIC_RELAXED);
}
