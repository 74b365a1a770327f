/*
 * sigwait.h - the library's own waits inside a program's blocking call
 * (a MSG_WAITALL read's pieces, the quiet period of a lost framing, a
 * replay's fresh connect, proof and copy, send_all on a blocking socket),
 * ended by a signal where, and only where, the kernel's call would have
 * been: a handler without SA_RESTART ran, or any handler for a call the
 * kernel never restarts (signal(7); the caller knows which it stands
 * for).  Base layer (real.h, clock.h).  docs/hold.md "Signals during
 * the library's waits".
 */
#ifndef KEEPALIVE_SIGWAIT_H
#define KEEPALIVE_SIGWAIT_H

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/socket.h>

struct kp_sigwait {
	sigset_t old;	/* the program's mask: back at kp_sigwait_end */
	sigset_t wait;	/* the mask of our waits: old, plus held when mixed */
	sigset_t held;	/* its unblocked signals whose handlers lack SA_RESTART */
	bool mixed;	/* held, and some other handler restarts: slices */
	bool restarts;	/* after EINTR: every handler that ran has SA_RESTART */
};

/* What is left (ms, -1: no limit) of the poll/select/epoll call whose
 * readiness is being settled in this thread: a replay's fresh connect waits
 * no longer (docs/replay.md).  KP_NOT_WAITING outside such a call. */
#define KP_NOT_WAITING (-2)
extern __attribute__((visibility("hidden"))) __thread int kp_wait_left_ms;
/* Which of the program's timeouts bounds the call we act in: SO_RCVTIMEO
 * in a read, SO_SNDTIMEO in a send (a replay sets it). */
extern __attribute__((visibility("hidden"))) __thread int kp_call_timeo;

/* The program's call in this thread (on fd) is one the kernel restarts
 * after a handler with SA_RESTART: not its poll/select/epoll, and no
 * kp_call_timeo set on fd (signal(7)). */
bool kp_call_restarts(int fd);

/* Block every signal of the calling thread (none runs between two of our
 * waits, where no call of ours is in the kernel to be cut) and take the
 * program's dispositions: one sigaction() per signal, on the way to a
 * wait only. */
void kp_sigwait_begin(struct kp_sigwait *w);

/* poll under the program's own mask: > 0 ready, 0 ms passed (ms < 0:
 * none), -1 with errno; EINTR: a handler of the program's ran, and
 * w->restarts says whether all that ran have SA_RESTART (the kernel's
 * restartable call would go on: the caller waits again). */
int kp_sigwait_poll(struct kp_sigwait *w, struct pollfd *p, nfds_t n, int ms);

/* After a plain poll of ours inside the program's call returned EINTR:
 * would the handler that ran have ended that call?  Read from the
 * dispositions then (only after an EINTR: no cost before): true when
 * every unblocked handler lacks SA_RESTART; false when all have it, and
 * where they are mixed (which one ran is not known: the wait goes on, as
 * before).  errno kept. */
bool kp_eintr_ends_call(void);

/* The program's blocking connect of fd to addr, cut by a handler in a
 * wait of ours before the kernel's connect began: begun now as the
 * kernel's would have been, without its wait (O_NONBLOCK on the
 * description for the one call, its flags back after).  Returns the
 * kernel's answer: 0 (connected at once: loopback), -1 with EINPROGRESS
 * (it goes on: the caller says EINTR), or -1 with its error (refused at
 * once); -1 with EINTR where the flags could not be read or set (not
 * begun).  docs/broker.md "A
 * signal in the wait". */
int kp_connect_cut(int fd, const struct sockaddr *addr, socklen_t len);

/* The program's mask back (a signal held since our last wait runs its
 * handler now, as one that came just after the call); errno kept. */
void kp_sigwait_end(struct kp_sigwait *w);

#endif
