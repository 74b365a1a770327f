/*
 * tls_held.c - a TLS connection's state taken from the broker at the
 * program's connect() and held on its connection until its first
 * SSL_connect (docs/tls-across.md "The hand-out at connect()"): taken by
 * destination alone (the broker's TGET for any name), its socket put under
 * the program's fd by conn.c as a pooled one; claimed through the gate at
 * the handshake (kp_tls_across_claim), or given back to the broker
 * unchanged with its socket, or wiped.  The state (the export message:
 * traffic keys, sequence numbers) lives in a mapping of its own, never in
 * malloc's heap (connect() may run in a signal handler that interrupted
 * malloc), out of core dumps (MADV_DONTDUMP) and zero in a forked child
 * (MADV_WIPEONFORK); wiped on every path.  The connection's lock is held
 * by every caller.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/sockios.h>

#include "broker_client.h"
#include "broker_proto.h"
#include "config.h"
#include "real.h"
#include "replay.h"
#include "sockopts.h"
#include "tls.h"
#include "tls_held.h"

struct kp_held {
	size_t map_len;
	size_t len;               /* the export message's bytes, at msg */
	size_t tail;              /* then the close_notify its last process
				     sealed (docs/tls.md "The close_notify owed") */
	uint8_t name[BK_SESS_NAME]; /* the configuration it was made under */
	struct pool_meta meta;    /* its record, as the broker gave it */
	uint64_t received, acked; /* the socket's counts when taken */
	pid_t pid;
	unsigned forks;           /* kp_held_forks when taken */
	bool tainted;             /* shared since: never given back */
	int fl;                   /* the socket's file status flags when taken */
	unsigned char msg[];
};

unsigned kp_held_forks;

/* The socket shows nothing but the broker's bytes ever used it since v0:
 * established, nothing read or written by anyone (the kernel's counts),
 * nothing waiting either way (the server said nothing). */
static bool socket_untouched(int sock, const struct kp_held *h)
{
	struct kp_tcp_view v;
	int inq = -1, outq = -1;
	return kp_tcp_view(sock, &v) == 0 && v.acked_ok && v.state == TCP_ESTABLISHED && v.received == h->received &&
	       v.acked == h->acked && KP_REAL(ioctl)(sock, FIONREAD, &inq) == 0 && inq == 0 &&
	       KP_REAL(ioctl)(sock, SIOCOUTQ, &outq) == 0 && outq == 0;
}

struct kp_held *kp_held_take(const struct pool_key *key, int *sock)
{
	*sock = -1;
	if (!kp_tls_across_at_connect())
		return NULL;
	size_t map_len = (sizeof(struct kp_held) + BK_TLS_MAX + 4095) & ~(size_t)4095;
	struct kp_held *h = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (h == MAP_FAILED)
		return NULL;
	/* (advice only: a kernel without it still gets the wipe before fork) */
	madvise(h, map_len, MADV_DONTDUMP);
	madvise(h, map_len, MADV_WIPEONFORK);
	h->map_len = map_len;
	int p = kp_broker_tls_get_any(key, h->name, &h->meta, h->msg, BK_TLS_MAX, &h->len, &h->tail);
	struct kp_tcp_view v;
	int inq = -1;
	if (p >= 0 && (kp_tcp_view(p, &v) < 0 || !v.acked_ok || KP_REAL(ioctl)(p, FIONREAD, &inq) < 0 || inq)) {
		/* its counts unreadable, or the server spoke: never handed */
		KP_REAL(close)(p);
		p = -1;
	}
	if (p < 0) {
		kp_held_free(h);
		return NULL;
	}
	h->fl = KP_REAL(fcntl)(p, F_GETFL);
	h->received = v.received;
	h->acked = v.acked;
	h->pid = getpid();
	h->forks = __atomic_load_n(&kp_held_forks, __ATOMIC_ACQUIRE);
	*sock = p;
	return h;
}

void kp_held_free(struct kp_held *h)
{
	if (!h)
		return;
	size_t map_len = h->map_len;
	explicit_bzero(h, map_len);
	munmap(h, map_len);
}

/* sock's open file description as the take found it: no O_ASYNC, owner
 * or signal of the program's (kp_desc_clear), O_NONBLOCK as it was (what
 * the broker's record of the socket says, which the next adopter reads:
 * adopt_pooled).  The program's own, set between its connect() and a
 * handshake it never made, would reach the next program (a SIGIO to an
 * owner, a blocking program's socket non-blocking). */
static bool desc_as_taken(int sock, const struct kp_held *h)
{
	if (h->fl < 0 || kp_desc_clear(sock) < 0)
		return false;
	int fl = KP_REAL(fcntl)(sock, F_GETFL);
	if (fl < 0)
		return false;
	return !(fl & O_NONBLOCK) == !(h->fl & O_NONBLOCK) ||
	       KP_REAL(fcntl)(sock, F_SETFL, (fl & ~O_NONBLOCK) | (h->fl & O_NONBLOCK)) == 0;
}

const struct pool_meta *kp_held_meta(const struct kp_held *h)
{
	return &h->meta;
}

void kp_held_taint(struct kp_held *h)
{
	if (h)
		h->tainted = true;
}

struct kp_tls *kp_held_claim(struct kp_held *h, void *ssl, const struct pool_key *key, int fd, const char **why)
{
	/* the server said nothing since the take (its idle close, a stray
	 * byte): as kp_held_take found it, else the program's own handshake */
	struct kp_tcp_view v;
	int inq = -1;
	if (kp_tcp_view(fd, &v) < 0 || v.state != TCP_ESTABLISHED || v.received != h->received ||
	    KP_REAL(ioctl)(fd, FIONREAD, &inq) < 0 || inq) {
		*why = "its server spoke or closed since connect()";
		return NULL;
	}
	unsigned char *copy = malloc(h->len); /* the import's to keep (and wipe) */
	if (!copy) {
		*why = "no memory";
		return NULL;
	}
	memcpy(copy, h->msg, h->len);
	return kp_tls_across_claim(ssl, key, fd, h->name, copy, h->len, why);
}

bool kp_held_back(struct kp_held *h, int sock, const struct pool_key *key, bool owner, bool as_taken)
{
	const char *why = NULL;
	long left = 0;
	if (!owner || h->tainted || h->pid != getpid() ||
	    h->forks != __atomic_load_n(&kp_held_forks, __ATOMIC_ACQUIRE))
		why = "it may have had another owner";
	else if (!as_taken)
		why = "the program changed its socket's options or flags";
	else if (!desc_as_taken(sock, h))
		why = "its flags could not be set back";
	else if (!socket_untouched(sock, h))
		why = "its socket was used, or its server spoke";
	else if ((left = kp_tls_across_left(h->msg, h->len)) < 2)
		why = "its session ends";
	else if (kp_broker_tls_put(key, h->name, (uint32_t)(left - 1), sock, &h->meta, h->msg, h->len,
				   h->msg + h->len, h->tail) < 0)
		why = "the broker did not take it";
	/* it ends here, its stream as its last process left it: that
	 * process's close_notify owed goes out first (never waiting, never a
	 * signal), as the broker would have written it */
	if (why && owner && !h->tainted && as_taken && h->tail && socket_untouched(sock, h))
		(void)KP_REAL(send)(sock, h->msg + h->len, h->tail, MSG_DONTWAIT | MSG_NOSIGNAL);
	kp_across_note("across: a connection taken at connect() %s%s", why ? "not given back: " : "given back to the broker",
		       why ? why : "");
	kp_held_free(h);
	return !why;
}
