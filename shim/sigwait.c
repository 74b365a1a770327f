/*
 * sigwait.c - waits that end at a signal as the kernel's call would
 * (sigwait.h, docs/hold.md "Signals during the library's waits").
 *
 * A poll cut by a handler says EINTR, never which handler ran, and the
 * answer differs with it: a handler without SA_RESTART ends the kernel's
 * read with EINTR, one with SA_RESTART restarts it.  When the program's
 * unblocked handlers are all of one kind, the kind is the answer.  When
 * they are mixed, the ones without SA_RESTART are held (blocked) during
 * the wait, which goes in slices of SLICE_MS; after each slice, and after
 * each cut by a restarting handler, sigpending() says whether one of the
 * held came, and a ppoll of no fds under the program's own mask runs its
 * handler (the answer EINTR).  Only the mixed case pays: a wake-up every
 * SLICE_MS while it waits, and an EINTR up to SLICE_MS later than the
 * kernel's.  (A signalfd would wake at once, but takes an fd number the
 * program could meet, and fails at its fd limit.)
 */
#include "sigwait.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include "clock.h"
#include "real.h"

#define SLICE_MS 10

__thread int kp_wait_left_ms = KP_NOT_WAITING;
__thread int kp_call_timeo = SO_SNDTIMEO;

bool kp_call_restarts(int fd)
{
	struct timeval tv = { 0, 0 };
	socklen_t l = sizeof(tv);
	return kp_wait_left_ms == KP_NOT_WAITING &&
	       (KP_REAL(getsockopt)(fd, SOL_SOCKET, kp_call_timeo, &tv, &l) < 0 ||
		(!tv.tv_sec && !tv.tv_usec));
}

void kp_sigwait_begin(struct kp_sigwait *w)
{
	sigset_t all;
	sigfillset(&all);
	/* (pthread_sigmask leaves glibc's own signals alone; it fails only
	 * on a bad argument, and then old is the mask as it is) */
	if (pthread_sigmask(SIG_BLOCK, &all, &w->old) != 0)
		pthread_sigmask(SIG_BLOCK, NULL, &w->old);
	sigemptyset(&w->held);
	bool restart = false;
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;
		/* a blocked signal stays pending through our wait as through
		 * the kernel's; SIG_DFL and SIG_IGN run no handler (glibc's
		 * own signals: sigaction refuses them) */
		if (sig == SIGKILL || sig == SIGSTOP || sigismember(&w->old, sig) == 1 ||
		    sigaction(sig, NULL, &sa) < 0 || sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN)
			continue;
		if (sa.sa_flags & SA_RESTART)
			restart = true;
		else
			sigaddset(&w->held, sig);
	}
	w->mixed = restart && !sigisemptyset(&w->held);
	w->wait = w->old;
	if (w->mixed)
		sigorset(&w->wait, &w->old, &w->held);
	w->restarts = true;
}

bool kp_eintr_ends_call(void)
{
	int saved = errno;
	sigset_t mask;
	bool some = false, restart = false;
	if (pthread_sigmask(SIG_BLOCK, NULL, &mask) != 0)
		sigemptyset(&mask);
	for (int sig = 1; sig < NSIG && !restart; sig++) {
		struct sigaction sa;
		if (sig == SIGKILL || sig == SIGSTOP || sigismember(&mask, sig) == 1 ||
		    sigaction(sig, NULL, &sa) < 0 || sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN)
			continue;
		some = true;
		restart = sa.sa_flags & SA_RESTART;
	}
	errno = saved;
	return some && !restart;
}

/* one of the held signals is pending, for the thread or the process */
static bool held_pending(const struct kp_sigwait *w)
{
	sigset_t p;
	if (sigpending(&p) < 0)
		return false;
	sigandset(&p, &p, &w->held);
	return !sigisemptyset(&p);
}

static struct timespec ms_ts(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	return ts;
}

static int mixed_poll(struct kp_sigwait *w, struct pollfd *p, nfds_t n, int ms)
{
	uint64_t end = ms < 0 ? UINT64_MAX : kp_now_ms() + (uint64_t)ms;
	bool cut = false, over = false; /* a restarting handler ran; ms passed */
	for (;;) {
		if (held_pending(w)) {
			/* its handler runs here, under the program's mask
			 * (a ppoll of nothing looks for signals even at 0) */
			struct timespec zero = { 0, 0 };
			if (KP_REAL(ppoll)(NULL, 0, &zero, &w->old) < 0 && errno == EINTR) {
				w->restarts = false;
				return -1;
			}
			/* another thread took it: the wait goes on */
		}
		if (cut) {
			w->restarts = true;
			errno = EINTR;
			return -1;
		}
		if (over)
			return 0;
		uint64_t now = kp_now_ms();
		int slice = now >= end ? 0 : end - now < SLICE_MS ? (int)(end - now) : SLICE_MS;
		struct timespec ts = ms_ts(slice);
		int r = KP_REAL(ppoll)(p, n, &ts, &w->wait);
		if (r > 0 || (r < 0 && errno != EINTR))
			return r; /* (a held signal that came too stays pending) */
		if (r < 0)
			cut = true; /* a held one may have come too: looked at first */
		else
			over = kp_now_ms() >= end;
	}
}

int kp_sigwait_poll(struct kp_sigwait *w, struct pollfd *p, nfds_t n, int ms)
{
	if (w->mixed)
		return mixed_poll(w, p, n, ms);
	struct timespec ts = ms_ts(ms);
	int r = KP_REAL(ppoll)(p, n, ms < 0 ? NULL : &ts, &w->old);
	if (r < 0 && errno == EINTR)
		w->restarts = sigisemptyset(&w->held);
	return r;
}

void kp_sigwait_end(struct kp_sigwait *w)
{
	int saved = errno;
	pthread_sigmask(SIG_SETMASK, &w->old, NULL);
	errno = saved;
}

int kp_connect_cut(int fd, const struct sockaddr *addr, socklen_t len)
{
	int before = errno; /* a success leaves it, as the kernel's connect */
	int fl = KP_REAL(fcntl)(fd, F_GETFL);
	if (fl < 0 || KP_REAL(fcntl)(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		errno = EINTR;
		return -1;
	}
	int r = KP_REAL(connect)(fd, addr, len);
	int err = errno;
	/* on loopback the handshake, or its refusal, is done as the call
	 * returns: alone the blocking connect ended there, and its end (the
	 * kernel's connect again) answers 0 or the error, as alone */
	struct pollfd p = { fd, POLLOUT, 0 };
	if (r < 0 && err == EINPROGRESS && KP_REAL(poll)(&p, 1, 0) == 1) {
		r = KP_REAL(connect)(fd, addr, len);
		err = r < 0 && errno == EALREADY ? EINPROGRESS : errno;
	}
	KP_REAL(fcntl)(fd, F_SETFL, fl);
	errno = r == 0 ? before : err;
	return r;
}
