/*
 * conn.h - one connection's life: fresh or reused -> in use -> EOF owed ->
 * parked or closed.  The exported wrappers (hooks_*.c) call these only for
 * fds the table says are ours.  Prefix: kp_.
 */
#ifndef KEEPALIVE_CONN_H
#define KEEPALIVE_CONN_H

#include "clock.h"
#include "sockopts.h"
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "fdtable.h"
#include "framer.h"
#include "headmap.h"
#include "sigwait.h"
#include "kp_lock.h"
#include "pool.h"

enum kp_conn_state {
	KP_PRECONNECT = 0, /* a TCP socket whose options we are recording */
	KP_ACTIVE,         /* connected through us; we frame both directions */
	KP_PASSTHROUGH,    /* we stepped aside for good; never pooled */
};

enum kp_req_mode {
	KP_REQ_HEAD = 0, /* at a request boundary: hold bytes until the head is whole */
	KP_REQ_BODY,     /* inside a request body: bytes go straight through */
	KP_REQ_HEAD_SENT, /* a head began mid-write: already sent, parse for facts */
	KP_REQ_HEAD_PART, /* the socket took part of a head (docs/hold.md, "A head
	                     the socket took in part"): part, part_map */
};


#define KP_MAX_PIPELINE 8
struct kp_request {
	uint8_t method;  /* enum frm_method */
	bool app_close;  /* the program expects the server to close after it */
	bool rewritten;  /* we changed its Connection header */
	bool body;       /* it had a body (Content-Length above 0, chunked) */
};

/* The first request on a connection taken from the pool (docs/design.md §4): the
 * server may have closed it while it sat idle, and the program, believing
 * its connect() fresh, will not retry. */
enum kp_first {
	KP_FIRST_DONE = 0, /* a fresh connection, or the reused one answered */
	KP_FIRST_UNSENT,   /* reused; nothing sent yet: a request that may not
	                      ride it goes on a fresh connection instead
	                      (replay.h kp_replay_plan) */
	KP_FIRST_SENT,     /* reused; a request went out (copy in replay) and
	                      no response byte came yet: EOF, reset or a 408
	                      now means "replay on a fresh connection" if
	                      first_plan and TCP's count allow (replay.h) */
};

/* Connection objects are never freed, only recycled (hidden.c conn_new):
 * a wrapper racing with a close of the same fd may still hold the pointer,
 * so it locks the object and checks the table still maps its fd to it. */
struct kp_conn {
	kp_mutex_t lock;
	/* > 0 while the holder of lock is in a call that may block (a send
	 * the server may never read, a fresh connect or handshake, a call
	 * into libssl whose BIO calls our wrappers): any other call on the
	 * connection, from another thread or a signal handler on this one,
	 * steps aside (conn_lock: raw) instead of waiting for lock
	 * (docs/hold.md "Never wait on a busy connection").  Written by
	 * the holder only; kept across conn_new's clearing */
	unsigned busy;
	/* references dropped (closes) while busy, to be dropped by the
	 * busy call when it is over (conn_reap) */
	unsigned busy_unrefs;
	/* the program's reads under way on the connection's socket (the
	 * read family's wrappers, kp_read_begin/kp_read_end): while > 0 a
	 * close does not park the socket (the kernel keeps it for those
	 * reads) and the object is not freed (orphan: the last read's end
	 * frees it), so each read ends with its own framing state
	 * (docs/hold.md "A read under way when another thread closes").
	 * Both kept across conn_new's clearing (a racing reader may count
	 * on a recycled object for a moment: kp_read_begin) */
	unsigned inflight;
	bool orphan;
	/* fresh connections put under the program's fds in place of the
	 * socket it had (swap_fresh), ever: a read that began before one
	 * may have met the socket it replaced (kp_read_swaps).  Kept across
	 * conn_new's clearing, as inflight */
	unsigned swaps;
	struct kp_conn *next_free;
	int refs;            /* fds sharing it (dup family) */
	int twin;            /* reused: the pooled socket's hidden fd, kept
	                        open (CLOEXEC, marked KP_POOLED) while the
	                        program uses the socket, so that parking it
	                        again needs no dup and handing it out no close;
	                        -1: none.  Written under hidden.c's twin_lock */
	uint8_t state;       /* enum kp_conn_state */
	bool reused;         /* came from the pool */
	bool connect_owed;   /* connect() answered EINPROGRESS for a pooled
	                        connection: the next connect() answers 0 */
	bool poolable;       /* nothing has happened that forbids parking */
	/* an option that changes what a rewrite or a held piece would show:
	 * SO_RCVLOWAT above 1 (its read waits past our EOF for the server's
	 * close), SO_ZEROCOPY and SO_TIMESTAMPING (the kernel counts sends
	 * one by one): no rewrite, no held piece (docs/hold.md "Options we
	 * cannot carry") */
	bool no_rewrite;
	const char *unpooled; /* why poolable went false first (a literal) */
	bool eof_owed;       /* the final response is complete: reads return 0 */
	bool eof_written;    /* TLS: the program wrote after that EOF; its
	                        later writes fail as after a close_notify */
	bool lost;           /* framing lost after a rewrite: see kp_conn_wait_ms */
	bool server_closing; /* the last response ends the connection (its
	                        request's close reached the server, or it
	                        said close): TLS learns how it ends */
	uint32_t close_kind; /* the User-Agent hash of the last request that
	                        asked to close: how a TLS server ends is
	                        learnt per kind (docs/tls.md "Ragged closes") */
	bool resp_started;   /* resp is framing a response to reqs[0] */
	bool nonblock;       /* O_NONBLOCK of the open file description */
	int8_t shut_how;     /* a shutdown() we answered without the kernel:
	                        its how + 1, made real if the program writes */
	bool handed_off;     /* its fd left our hands (fork, exec, spawn):
	                        never pooled, never rewritten again */
	bool fin_due;        /* handed off mid-request: our FIN goes out when
	                        the request is whole */
	bool fin_at_end;     /* handed off by inheritance with its answer
	                        outstanding: our FIN goes out when our framing
	                        reaches the answer's end (docs/replay.md) */
	bool fin_for_server; /* our FIN went out in place of the close the
	                        program asked the server for, and the program
	                        has written nothing since: its writes must be
	                        answered as by a socket the server closed
	                        (0 bytes taken, the first write taken unsent;
	                        atomic) */
	bool shared;         /* another process may hold its socket: it
	                        crossed a fork, spawn or exec, or an
	                        SCM_RIGHTS message (it can never change
	                        owner) */
	bool raw;            /* a call went past us (a signal handler that
	                        interrupted our locks, kp_lock.h): never pooled,
	                        given up at our next call (atomic) */
	uint32_t cred_epoch; /* the process's credentials when it was made
	                        (kp_conn_cred_change): another identity's
	                        connection can never change owner */
	/* Bytes written behind our back (stdio's own flushes: kp_stdio_watch):
	 * what this socket took from us since tx_watch began, and the
	 * kernel's count of bytes written to it then (bytes_acked + SIOCOUTQ) */
	bool tx_watch;
	uint64_t tx, tx0, tx_kernel0;
	struct pool_key key;

	uint8_t first;       /* enum kp_first */
	uint64_t parked_ms;  /* reused: when it had been parked */
	uint64_t sent_ms;    /* reused: when it was handed out (its first request
	                        follows at once, as a rule) */
	uint32_t served_at_checkout;
	char *replay;        /* KP_FIRST_SENT: the bytes of that request */
	size_t replay_len, replay_cap;
	/* a replay over TLS whose fresh handshake was still under way when
	 * the program's call ended: its copy goes at the program's next call
	 * on the SSL (kp_conn_tls_replay_step), replay_off of it sent so far */
	bool replay_async;
	/* plain: a signal ended the program's call while the copy waited
	 * for room on the fresh connection: the rest from replay_off goes
	 * at the program's next read or wait (kp_replay_rest) */
	bool replay_rest;
	size_t replay_off;
	uint8_t first_plan;  /* enum kp_first_plan of that request */
	/* the fresh connection a first request had to take was refused (the
	 * server's answer: alone the program's connect() failed so): its
	 * send fails with this errno, nothing of it goes out */
	int fresh_refused;
	bool acked_known;    /* acked_at_first holds the kernel's count */
	uint64_t acked_at_first; /* tcpi_bytes_acked just before its first byte */
	/* tcpi_bytes_received then (the FIN counts one), and whether the
	 * server's FIN was in already (CLOSE_WAIT): a FIN since shows as
	 * received_at_first + 1 with no response byte (fin_came_first) */
	uint64_t received_at_first;
	bool fin_before_first;
	/* bytes of a 408 the program's read took under the first request
	 * (plain): with them, TCP's count tells whether a FIN followed the
	 * answer without taking a reset's error (settle_facts) */
	uint32_t first_read_len;

	/* request side */
	uint8_t req_mode;    /* enum kp_req_mode */
	struct frm_body req_body;
	char *held;          /* head bytes not yet sent (KP_REQ_HEAD), or already
	                        sent but not yet parsed (KP_REQ_HEAD_SENT) */
	size_t held_len, held_cap;
	/* KP_REQ_HEAD_PART: part holds R (the head as sent) then O (the
	 * program's); the server has R[0, part_k), the program was told
	 * O[0, part_pos) went out; part_next: the mode after the head */
	char *part;
	size_t part_cap, part_k, part_pos;
	struct kp_headmap part_map;
	uint8_t part_next;
	/* TLS (docs/hold.md "HTTPS"): R is the head then the body bytes of
	 * the write that completed it (part_body of them, accounted when the
	 * head is whole); part_pend: the engine began a record for R[part_k,
	 * part_k + part_pend) and must be called again with just that (0:
	 * none), part_err the errno it left.  Plain: part_t0, when the send
	 * that tore the head began (a send that ran to SO_SNDTIMEO) */
	size_t part_body, part_pend;
	int part_err;
	uint64_t part_t0;
	struct kp_request reqs[KP_MAX_PIPELINE]; /* awaiting responses, oldest first */
	unsigned n_reqs;

	/* response side */
	struct frm_resp resp;
	uint32_t served;     /* responses completed on this TCP connection */
	uint32_t quickacked; /* served + 1 when response served + 1 was given
	                        its quick ACK (docs/cost.md "A response in two
	                        writes") */
	/* the program's writes since it last read response bytes (at most
	 * 255), and whether it set TCP_NODELAY or TCP_CORK itself: on a
	 * reused connection a write that follows another is pushed past
	 * Nagle (docs/cost.md "A request in two writes") */
	uint8_t writes_since_rx;
	bool nagle_own;
	int32_t ka_timeout, ka_max;
	uint64_t last_rx_ms; /* when the program last read response bytes */
	uint64_t lost_ms;    /* when lost was set (or the response bytes it
	                        was set on arrived) */
	/* The head of a response to a request we rewrote from close gets
	 * FRM_CLOSE_LINE (docs/replay.md): the bytes it pushed past the
	 * program's buffer, shown first at its next read */
	char rx_extra[FRM_CLOSE_LINE_LEN];
	uint8_t rx_extra_len;

	/* socket options the program set, and those a previous owner left
	 * (sockopts.h) */
	struct kp_sockopts so;

	/* HTTPS (tls.h): the TLS connection this socket carries.  The socket
	 * wrappers read it without the lock and leave its ciphertext alone;
	 * the SSL_* wrappers frame its plaintext with the fields above. */
	struct kp_tls *tls;
	void *tls_ssl;       /* the program's SSL speaking through tls */
	bool tls_pending;    /* tls came from the pool; no handshake yet */
	bool tls_handed;     /* tls_ssl speaks through a pooled engine */
	/* a TLS state from the broker, its socket under fd since connect(),
	 * not imported until the program's first SSL_connect (tls_held.h) */
	struct kp_held *tls_held;
	bool tls_held_asked; /* the broker was asked for one (at connect(),
	                        or at the program's SSL_connect) */
	/* the thread of the last call of tls_ssl's we saw (its SSL_connect,
	 * its reads): the only one whose poll may make its handshake
	 * (kp_this_thread; conn_replay.c tls_ready_settle) */
	const void *tls_thread;
	/* a TLS 1.2 handshake of the program's resumed a session of ours:
	 * its first write is pushed (kp_conn_tls_resumed) */
	bool tls_push_first;
};

/* A read of the program's on fd, whose table entry was c, begins: it is
 * counted on c.  False when fd no longer holds c (closed, maybe made
 * again, by another thread between the table's load and the count): the
 * call is made again from the table.  Seq-cst with the close's swap of
 * the table and its load of the count (conn_free): one of them sees the
 * other. */
void kp_read_last(struct kp_conn *c);
static inline void kp_read_end(struct kp_conn *c)
{
	if (__atomic_sub_fetch(&c->inflight, 1, __ATOMIC_SEQ_CST) == 0 &&
	    __builtin_expect(__atomic_load_n(&c->orphan, __ATOMIC_SEQ_CST), 0))
		kp_read_last(c);
}

/* c->swaps when this thread's read began: an EOF or a reset it meets
 * after a swap may be the replaced socket's (conn_replay.c
 * read_unseen_end) */
extern __thread unsigned kp_read_swaps;

static inline bool kp_read_begin(struct kp_conn *c, int fd)
{
	__atomic_add_fetch(&c->inflight, 1, __ATOMIC_SEQ_CST);
	kp_read_swaps = __atomic_load_n(&c->swaps, __ATOMIC_ACQUIRE);
	if (__builtin_expect(__atomic_load_n(&kp_fdtab[fd], __ATOMIC_SEQ_CST) == c, 1))
		return true;
	kp_read_end(c);
	return false;
}

/* Called from the constructor. */
void kp_conn_init(void);
/* From the destructor: idle connections go to the broker, if any. */
void kp_conn_exit(void);


/* The program's fd budget (RLIMIT_NOFILE), read at start-up and again
 * when it changed (the program's setrlimit/prlimit, or a park that finds
 * its numbers beyond the limit, an EMFILE): size the pool's share and
 * place it (docs/limits.md); a changed limit drops every pooled socket
 * first. */
void kp_conn_fd_limits(bool changed);
/* The same at start-up, from the limit the fd table was sized from. */
struct rlimit;
void kp_conn_fd_limits_from(const struct rlimit *rl);

/* An fd-making call of the program failed: when errno is EMFILE or ENFILE
 * and the pool held sockets, they are closed and true says "make the call
 * again" (fail open: never an EMFILE the program would not have had
 * without us).  errno is kept. */
bool kp_fds_short(void);

/* A copy of fd at a hidden number (fdlimit.c kp_fd_hide), planned again
 * once when the limit changed behind us.  -1 when none can be made now. */
int kp_fd_hide_planned(int fd);

/* The hidden fds that hold our sockets (the pool's idle ones and the
 * twins of connections in use): up to cap into fds, sorted ascending;
 * returns the count.  kp_hidden_count(): how many there are. */
size_t kp_hidden_fds(int *fds, size_t cap);
size_t kp_hidden_count(void);

/* A connection object for fd, a TCP socket not connected yet (its options
 * are recorded, its dups counted): NULL when out of memory. */
struct kp_conn *kp_conn_track(int fd);

/* connect(): returns what the program's connect() returns. */
int kp_connect(int fd, const struct sockaddr *addr, socklen_t len);

/* close(fd) for a tracked fd (c != NULL, maybe KP_POOLED). */
int kp_close(int fd, struct kp_conn *c);

/* Drop fd's entry without closing fd.  may_park: fd still holds our socket
 * and is about to be replaced (dup2/dup3 onto it), so the connection may be
 * parked from it.  Without: the socket is already gone (closed behind our
 * back, e.g. by fclose() or syscall()) and fd may be someone else's now. */
void kp_forget_fd(int fd, bool may_park);

/* A new fd (dup of oldfd) shares c. */
void kp_dup_to(struct kp_conn *c, int oldfd, int newfd);

/* setsockopt() on a TCP socket: record what the program set. */
void kp_note_sockopt(int fd, int level, int name, const void *val, socklen_t len);

/* setsockopt() on a reused connection: true when the socket already holds
 * exactly that value (left by its previous owner), so the call can be
 * answered without a syscall (and it is recorded as the program's). */
/* Before the program's setsockopt on c (conn_opts.c): an option we
 * cannot carry on a handed-out connection not yet used moves fd to a
 * fresh connection first. */
void kp_sockopt_before(struct kp_conn *c, int fd, int level, int name, const void *val, socklen_t len);
bool kp_sockopt_already(struct kp_conn *c, int fd, int level, int name, const void *val, socklen_t len);

/* getsockopt() on a reused connection: settle the previous owner's
 * options first, so the program reads its own socket's values. */
void kp_before_getsockopt(struct kp_conn *c, int fd);

/* getpeername() said ENOTCONN, or getsockopt(SO_ERROR) an error, on a
 * tracked fd: if it is a reused connection whose first request has not
 * gone out, the socket was reset while it sat in the pool (between the
 * probe at hand-out and the first byte): a fresh connection takes its place
 * under fd and true says "ask again".  errno is kept. */
bool kp_conn_dead_seen(struct kp_conn *c, int fd);

/* The program changed O_NONBLOCK (fcntl F_SETFL, ioctl FIONBIO). */
void kp_note_nonblock(int fd, bool on);

/* A send the write path does not intercept (sendfile, splice, sendmmsg,
 * sendto/sendmsg with an address or ancillary data) of *len bytes is about
 * to go out: head bytes still held go first.  Returns false when none of
 * them may reach the server (written after the EOF we owe, or after a
 * request that asked to close: docs/replay.md "Nothing added"): the
 * caller takes them without sending, as the write path does.  Else *len
 * may be lowered to where a rewritten close request's body ends (a short
 * send: the program offers the rest again, and that is not sent). */
bool kp_send_bypass(struct kp_conn *c, int fd, size_t *len);

/*
 * A request head that stdio wrote goes out at once, like any other:
 * nothing is held waiting for the program's next call, which may never
 * come where a wrapper sees it (docs/hold.md).  Where stdio may read the
 * response past us, nothing is rewritten or the server is made to close:
 * the socket is fd 0 as the head is written (never rewritten), a FILE
 * made on it before connect() (never ours: KP_FD_STDIO), fdopen for
 * reading or a dup onto fd 0 after (kp_note_fdopen: our FIN).
 */
/* A FILE writes to fd (or may: fdopen, a dup onto 0, 1 or 2): stdio's own
 * flushes (exit, setvbuf, fseek, the wide calls...) can reach the socket
 * unseen, so from now on its byte count is checked against the kernel's
 * before the connection is parked. */
void kp_stdio_watch(struct kp_conn *c, int fd);

/* aio_read/aio_write (and lio_listio) on a tracked fd are about to hand
 * it to glibc's helper thread, whose reads and writes no wrapper sees:
 * after a request that asked to close, the kernel is made to answer them
 * as the server's close would (docs/replay.md, "Nothing added"); else the
 * connection is never pooled (and a response read there is not framed). */
void kp_aio_before(struct kp_conn *c, int fd, bool write);

/* fdopen() of a tracked fd: stdio's reads will go past us (its writes
 * do not: a write_only stream changes nothing). */
void kp_note_fdopen(struct kp_conn *c, int fd, bool write_only);

/* shutdown() of a tracked connection.  Returns true when the call is
 * answered (0) without reaching the kernel: the exchange is complete or
 * its end is owed by us anyway, so the server needs no FIN (docs/design.md §1). */
bool kp_shutdown(struct kp_conn *c, int fd, int how);

/*
 * SIGPIPE inside the program's SSL call (docs/replay.md "The program's
 * signals").  While kp_tls_quiet is set (this thread is in the program's
 * SSL_read/SSL_write on a connection of ours whose BIO is of a known
 * kind), the engine's socket writes go out with MSG_NOSIGNAL
 * (hooks_io.c), and kp_tls_epipe notes that one met EPIPE, or that the
 * library answered the EPIPE a socket would have; at the call's end the
 * program's BIO decides whether the kernel would have raised SIGPIPE.
 */
extern __thread bool kp_tls_quiet;
extern __thread bool kp_tls_epipe;

/*
 * Write side.  kp_send_intercept() handles the call itself when the bytes
 * begin a request head (they may need rewriting); it returns true with the
 * program's result in *ret.  Otherwise the wrapper makes the real call and
 * reports it with kp_send_done() (which keeps errno).
 */
bool kp_send_intercept(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt, int flags,
		       ssize_t *ret);
void kp_send_done(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt, ssize_t ret,
		  int flags);
/* sendfile() or splice(): n body bytes went out unseen */
void kp_sendfile_done(struct kp_conn *c, int out_fd, ssize_t ret);

/* Must the write path see c's next bytes, even zero-copy ones?  A reused
 * plain connection whose first request is not answered yet (its death is
 * replayed from the copy, which holds the bytes), or a replay's copy
 * not all sent (its rest goes before the program's bytes).  A hint, read
 * unlocked: the write path decides under the lock (docs/replay.md
 * "Zero-copy sends on a reused connection"). */
static inline bool kp_conn_copying(const struct kp_conn *c)
{
	return c && c != KP_POOLED && !__atomic_load_n(&c->tls, __ATOMIC_ACQUIRE) &&
	       (__atomic_load_n(&c->first, __ATOMIC_RELAXED) != KP_FIRST_DONE ||
		__atomic_load_n(&c->replay_rest, __ATOMIC_ACQUIRE));
}

/*
 * Read side.  kp_recv_intercept() answers the read itself (the synthetic
 * EOF); otherwise the wrapper reads and reports with kp_recv_done().
 * kp_recv_done() returns true when the wrapper must make the same real
 * call again (and forget this one's result): the first request on a
 * reused connection met the server's close and went out again on a fresh
 * connection, now under fd.  It may shorten *ret: the read ends where a
 * response after which we owe EOF ends when the server's idle 408 follows
 * it (conn.c idle_408).
 */
bool kp_recv_intercept(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt, int flags,
		       ssize_t *ret);
/* The bytes a close line pushed past an earlier read (up to cap into buf,
 * kept for a peek): how many; 0 when none wait. */
size_t kp_recv_extra(struct kp_conn *c, int fd, char *buf, size_t cap, bool peek);
/* recv(MSG_PEEK|MSG_WAITALL): does the socket's queue hold the end of an
 * answer after which we owe the program an EOF (a request rewritten from
 * close)?  Alone the server's close would follow it, and the kernel's
 * wait end there.  *queued: the bytes queued (SIOCINQ).  True also when
 * we cannot tell for lack of memory (the wait ends: never past the EOF). */
bool kp_conn_peek_ends(struct kp_conn *c, int fd, size_t *queued);
/* A read of at most n of the bytes the program would read next (a peek
 * showed n: the mask, the close line) that stops where the framing needs
 * a read to end: at the end of an answer (the EOF we owe comes after it,
 * not inside the same call) and at the close line we show (the read keeps
 * what it pushes past in rx_extra).  raw: n bytes of scratch, which get
 * the queue's first bytes.  *as_sent: the take lies in a body, so raw's
 * first bytes taken are the program's as the kernel holds them (the
 * kernel's splice may give them; kp_recv_done frames them from raw).
 * splice()'s read (hooks_io.c splice_read, docs/replay.md "splice() from
 * a connection"). */
size_t kp_conn_peek_take(struct kp_conn *c, int fd, char *raw, size_t n, bool *as_sent);
/* *ret also becomes -1 with EINTR when a signal ended the replay the
 * call met (docs/replay.md, "The program's bounds"). */
bool kp_recv_done(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt, ssize_t *ret,
		  int flags);

/* A read we could not follow (splice, preadv2 with flags we do not
 * route, kernel AIO) returned n (-1: its error in errno): the framing is
 * lost, and nothing is replayed after what the program may have read. */
void kp_recv_unseen(struct kp_conn *c, int fd, ssize_t n);
/* len bytes are about to be written where no wrapper sees them (a kernel
 * AIO iocb, wide-character stdio).  True: they must not reach the server
 * (the first write after the owed EOF: our FIN is out; a request after
 * one that asked to close), and the caller sends them nowhere; false:
 * they go out, and the connection is never pooled. */
bool kp_unseen_write(struct kp_conn *c, int fd, size_t len);

/* Readiness the kernel reports for fd (any event): when fd's connection is
 * a reused one that died under (or before) its first request, replay it on
 * a fresh connection now, as the program's read would.  True: fd holds the
 * fresh connection; ask the kernel again (its readiness is the program's). */
bool kp_conn_ready_settle(struct kp_conn *c, int fd);

/* As kp_conn_ready_settle, for a report of readable alone: settled only
 * where TCP's state says the server's FIN (or reset) came, not a
 * response (one TCP_INFO: docs/replay.md "Readable, and the FIN"). */
bool kp_conn_read_settle(struct kp_conn *c, int fd);

/* Readiness reported for fd while c holds a TLS state from another
 * process, not yet the program's SSL's (conn_held.c): bytes the server
 * sent there, or its end, are no program's (alone its fresh connection
 * would report nothing), so fd gets a fresh connection now, the state
 * going back, as at a read there.  True: ask the kernel again. */
bool kp_conn_held_settle(struct kp_conn *c, int fd);

/* The program is about to observe fd's state before reading its answer
 * (getsockopt SO_ERROR or TCP_INFO, getpeername, ioctl FIONREAD or
 * SIOCOUTQ): a reused connection its server ended under (or before) its
 * first request is settled first, as its read would settle it (replayed
 * where the rule allows), so the kernel's answer that follows is the
 * fresh socket's; where it may not be replayed, the dead socket is left
 * untouched and its pending error is the program's to take (docs/replay.md
 * "What the program observes").  One load on a settled connection. */
void kp_conn_observe(struct kp_conn *c, int fd);

/* kp_wait_left_ms, KP_NOT_WAITING: sigwait.h */

/* fd is readable for a close line's bytes only (conn.h rx_extra), no EOF
 * owed yet: readable, not hung up (no POLLRDHUP) */
bool kp_conn_data_only(int fd);

/* The program reads or waits for reading on c while a request head it
 * has not finished is held (send.c: head_collect): no HTTP server answers
 * an unfinished head, so the protocol is not HTTP, or the program waits for
 * something else: the bytes go out as written and we step aside
 * (docs/hold.md).  First the rest of a replay's copy a signal cut
 * (kp_replay_rest; docs/hold.md "Signals during the library's waits"). */
void kp_conn_waits(struct kp_conn *c, int fd);
/* c holds an unfinished head (no lock: a hint for kp_conn_waits) */
bool kp_conn_holds(const struct kp_conn *c);
/* c's TLS engine holds the close_notify its program's SSL_shutdown was
 * told it sent: a wait for input sends it (kp_conn_waits).  Takes only
 * tls_lock. */
bool kp_conn_tls_owes_notify(struct kp_conn *c);

/* Readiness the kernel cannot know of: 0 when the fd must report readable
 * now (EOF owed), n > 0 when it will in n ms (framing lost, quiet period
 * running), -1 when it is up to the kernel. */
int kp_conn_wait_ms(struct kp_conn *c);

/*
 * HTTPS.  kp_conn_tls_start(): the program's ssl begins its handshake on
 * fd (or, ssl NULL, plain bytes go out on it): a pooled TLS connection
 * behind fd is handed to ssl, or put back and fd gets a fresh connection;
 * a fresh connection gets ssl as its engine.  Returns what happened.
 */
enum kp_tls_start { KP_TLS_NONE = 0, KP_TLS_FRESH, KP_TLS_HANDED };
int kp_conn_tls_start(int fd, void *ssl);
/* ssl, handed the pooled connection on fd, makes its own handshake on a
 * fresh connection after all, while nothing was sent on it (a callback
 * that watches set after the hand-out, watched: docs/tls.md "Callbacks
 * that watch", then never pooled; or AUTO_RETRY cleared).  0 when the
 * fresh connection was made. */
int kp_conn_tls_remake(int fd, void *ssl, bool watched);
/* a callback that watches set on the SSL of fd's connection after it
 * carried the program's bytes: never pooled, no later request rewritten
 * (its callbacks see the server's end as their own) */
void kp_conn_tls_watched(int fd);

/* The plaintext side, fed by the SSL_* wrappers: the same framing as the
 * socket calls above, the bytes going through c->tls. */
bool kp_conn_tls_send(struct kp_conn *c, int fd, const void *buf, size_t n, ssize_t *ret);

/* A replay waiting for its fresh TLS handshake (replay_async): take it
 * one step on, never waiting.  1 nothing waits (any more), 0 the socket
 * is wanted (the program's SSL says so), -1 failed (the SSL says why).
 * To be called before every read or write of the program's SSL on c. */
int kp_conn_tls_replay_step(struct kp_conn *c, int fd);
/* A signal cut the fresh handshake of a replay in this thread's call
 * (kp_tls_wait_cut): the program's call ends now, its SSL saying WANT_READ
 * or WANT_WRITE with errno EINTR, as OpenSSL tells a blocking handshake the
 * kernel's EINTR; the step waits for its next call.  Clears the mark. */
bool kp_conn_replay_cut(void);
void kp_conn_tls_send_done(struct kp_conn *c, int fd, const void *buf, size_t n, ssize_t ret);
/* The program's TLS 1.2 handshake on fd resumed a session we offered: its
 * client Finished went last, unacknowledged, so Nagle would hold the
 * first request behind the server's delayed ACK (~40 ms) where after its
 * own full handshake (the server's Finished last) it goes at once: the
 * first write after it is pushed, the program's TCP_NODELAY as it was. */
void kp_conn_tls_resumed(int fd);
/* plaintext a close line pushed past the program's last read (conn.h
 * rx_extra) is read first: kp_recv_extra() */
/* true: the read is answered with a clean TLS EOF (owed, or lost framing
 * gone quiet; pending: plaintext already buffered in the engine) */
bool kp_conn_tls_eof(struct kp_conn *c, int fd, bool pending);
/* *ret: bytes, 0 for the server's close_notify or EOF, -1 with errno
 * (EAGAIN for WANT_READ/WANT_WRITE); it may change as for kp_recv_done
 * (a close line shown, the read ended before an idle 408).  True: read
 * again (replayed on a fresh connection). */
bool kp_conn_tls_recv_done(struct kp_conn *c, int fd, void *buf, size_t n, ssize_t *ret, int flags);
/* SSL_shutdown(): true when the exchange is complete (or its end owed), so
 * no close_notify is needed and the connection may be parked */
bool kp_conn_tls_at_end(struct kp_conn *c, int fd);
/* something the shim cannot follow happened on the TLS connection */
void kp_conn_tls_spoil(struct kp_conn *c, int fd, const char *why);
/* The end the server sent on c closes a connection it was asked to end:
 * how it ended (close_notify or not) is what an owed EOF must show
 * (docs/tls.md "Ragged closes") */
bool kp_conn_tls_server_closing(struct kp_conn *c, int fd);

/*
 * The program's fds leave our hands: another process may read them, and
 * its copy of the library cannot owe the EOF of a request we rewrote.
 * kp_conn_handoff_all(): every tracked fd (inherited_only: those without
 * FD_CLOEXEC, as exec keeps them); kp_conn_handoff_fd(): one (dup2 onto a
 * child's stdin in a vfork child).  Safe in a vfork child: only the
 * connection objects (shared memory, locked) and the sockets change.
 */
enum kp_handoff {
	KP_HANDOFF_INHERIT, /* the socket is merely inherited (fork, exec,
	                       spawn, system): the one reading it is most
	                       likely still a copy of ours */
	KP_HANDOFF_READER,  /* moved where another reads it past us (onto a
	                       child's stdio, spawn file actions, SCM_RIGHTS) */
};
/* Before exec: this image's TLS connections end as at its exit (hidden.c). */
void kp_conn_tls_leave_at_exec(void);
void kp_conn_handoff_all(bool inherited_only, enum kp_handoff how, const char *why);
void kp_conn_handoff_fd(int fd, enum kp_handoff how, const char *why);
/* A forked child's copy of a socket whose answer its parent's framing
 * owes (KP_FD_FIN_OWED), conn_child.c: dup2/dup3/F_DUPFD of oldfd onto
 * newfd; a read of, a wait on, an exec or spawn with fd (our FIN, once);
 * and, from kp_conn_after_fork_child, the marking of the child's copies
 * before its table is forgotten and their objects after. */
void kp_fin_owed_onto(int oldfd, int newfd);
void kp_fin_owed_now(int fd, const char *why);
void kp_fin_owed_child_write(int fd);
bool kp_fin_owed_tls_write(int fd);
void kp_fin_owed_child_mark(int fd, const struct kp_conn *c);
void kp_fin_owed_child_track(void);
/* exec: the copies the next image keeps, as one environment entry in buf
 * (false: none); in the new image's constructor, that entry taken */
bool kp_fin_owed_env(char *buf, size_t cap);
void kp_fin_owed_from_env(void);

/* fd is about to be passed to another process (SCM_RIGHTS): it may
 * have two owners from now on.  False when fd is a hidden fd of ours (not
 * the program's: the call must fail with EBADF). */
bool kp_conn_passing_fd(int fd);

/* A signal handler that interrupted one of our locked paths (kp_lock.h)
 * makes the kernel's call on fd, whose connection is c (NULL: none): no
 * lock is taken, c is marked raw (never pooled again, given up at the
 * next call of ours on it).  False when fd is a hidden fd of ours (the
 * caller answers EBADF). */
bool kp_conn_raw(struct kp_conn *c);
/* The same for a read: true when c owes the program an EOF (the read
 * answers 0, and c stays as it was). */
bool kp_conn_raw_eof(struct kp_conn *c);
/* The same for a write of iov: when c owes the program an EOF these bytes
 * must never reach the server: taken and dropped (the count returned),
 * our FIN sent, as kp_send_intercept does; else -1 (make the call). */
ssize_t kp_conn_raw_write(struct kp_conn *c, int fd, const struct iovec *iov, int iovcnt);
/* the same for an fd passed in an SCM_RIGHTS message */
bool kp_conn_raw_fd(int fd);
/* kp_forget_fd, the same way (a number the kernel handed out anew) */
void kp_forget_fd_raw(int fd);

/* The process's credentials or namespaces change (setuid and the rest,
 * setgroups, capset, unshare, setns): before and after the call.  Nothing
 * made under the old ones changes owner again: the pool is emptied (real
 * closes), connections in use and sockets not yet connected are never
 * parked, the broker is left alone for the rest of the process.
 * one_thread: the call changes the calling thread only (capset,
 * setfsuid, unshare, setns, a raw syscall): with other threads running,
 * nothing is ever pooled again in this process. */
void kp_conn_cred_change(bool one_thread);

/* A task of its own on our memory (clone(CLONE_VM) without CLONE_THREAD,
 * or in other namespaces), whose credential and namespace changes are its
 * own: as kp_conn_cred_change, and nothing is ever pooled again in this
 * process, whatever the thread count (docs/owner.md "A task of its own on
 * our memory"). */
void kp_conn_divide(const char *why);

/* Flags of clone() that start the child in new namespaces. */
#define KP_CLONE_NEW_ANY                                                                   \
	(CLONE_NEWNET | CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | \
	 CLONE_NEWCGROUP)


/* The process installs a seccomp filter or enters strict mode
 * (conn_sandbox.c): before the call, everything owed is settled with our
 * own calls while they are allowed; after it, installed: the library
 * steps aside for good (docs/owner.md "A sandbox"). */
void kp_conn_sandbox_before(void);
void kp_conn_sandbox_after(bool installed);
/* An io_uring set up: every followed connection settled as before a
 * sandbox, the library going on (conn_sandbox.c). */
void kp_conn_settle_all(const char *why);

/* fork(): prepare, parent and child handlers. */
void kp_conn_before_fork(void);
void kp_conn_after_fork_parent(void);
void kp_conn_after_fork_child(void);

#endif
