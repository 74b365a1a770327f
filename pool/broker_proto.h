/*
 * broker_proto.h - the messages between the library and the broker (the
 * per-user pool process, pool/broker.c).  Prefix: bk_.
 *
 * One message is one SOCK_SEQPACKET datagram of exactly sizeof(struct
 * bk_msg) bytes: the kernel keeps message boundaries, so a client that dies
 * mid-message leaves nothing half-read, and a message of any other length
 * is refused whole.  A connection travels beside its message as one fd
 * (SCM_RIGHTS); the broker never touches the bytes on it.
 *
 * Versioned and fixed-size so it can grow: a new field takes reserved
 * space or a new version; a new request is a new type (a broker that holds
 * TLS connections itself and relays plaintext would add its own).  Both
 * ends run on one machine, so integers are in host order.
 *
 * Decoding is pure (no syscalls): unit-tested in tests/unit.
 */
#ifndef KEEPALIVE_BROKER_PROTO_H
#define KEEPALIVE_BROKER_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "pool.h"

#define BK_MAGIC 0x6b61626bu /* "kbak" */
/* 2: no namespace claim (a peer's word is worth nothing: docs/broker.md),
 * HELLO, and the broker's proof on the first reply of each link */
#define BK_VERSION 2

enum bk_type {
	BK_PUT = 1,   /* client -> broker: park this fd under key (one fd) */
	BK_GET = 2,   /* client -> broker: a connection to key, please */
	BK_REPLY = 3, /* broker -> client: answer to GET or HELLO (one fd if BK_OK) */
	BK_HELLO = 4, /* client -> broker: prove yourself (before a first PUT) */
	/* TLS sessions for resumption (docs/tls-across.md): a struct bk_sess
	 * and opaque bytes follow the message, no fd; key is the destination,
	 * bk_sess.name what the session was made under */
	BK_SPUT = 5,   /* client -> broker: keep these bytes (bk_sess.len > 0) */
	BK_SGET = 6,   /* client -> broker: the bytes kept under key and name */
	BK_SREPLY = 7, /* broker -> client: BK_OK with the bytes, or BK_NONE */
	/* Whole TLS connections (docs/tls-across.md "The broker's TLS
	 * message"): the socket (one fd) and its state, the export message,
	 * as opaque bytes after a struct bk_sess; name what the connection
	 * was made under.  Kept apart from the plain pool (a plain GET never
	 * gets one), handed out once, the bytes wiped when the fd leaves */
	BK_TPUT = 8,   /* client -> broker: keep this fd and its bytes (one fd) */
	BK_TGET = 9,   /* client -> broker: a TLS connection to key under name */
	BK_TREPLY = 10, /* broker -> client: BK_OK with the fd and bytes, or BK_NONE */
};

/* bk_msg.flags of a REPLY */
#define BK_F_PROOF 1u /* the first fd is the broker's listening socket */

enum bk_status {
	BK_OK = 0,   /* an fd is attached */
	BK_NONE = 1, /* nothing pooled for that key */
};

struct bk_msg {
	uint32_t magic;
	uint16_t version;
	uint16_t type;   /* enum bk_type */
	uint32_t status; /* enum bk_status (BK_REPLY), else 0 */
	uint32_t flags;  /* BK_F_* (BK_REPLY), else 0 */
	uint64_t reserved;
	struct pool_key key; /* its netns is 0: each end places fds itself */
	struct pool_meta meta; /* PUT: the connection's record; REPLY: its */
};

_Static_assert(sizeof(struct bk_msg) == 280, "bk_msg is a wire format: change BK_VERSION");

/* After the struct bk_msg of a session message.  A session is the
 * resumption secret: it travels only on a checked link (docs/broker.md),
 * the broker keeps it as opaque bytes, bounded, never on disk. */
#define BK_SESS_NAME 32     /* SHA-256 of what it was made under */
#define BK_SESS_MAX 16384   /* the opaque bytes, at most */
#define BK_S_ONCE 1u        /* single use (a TLS 1.3 ticket): a GET takes it */
/* TGET only: any name (its name field all zero); the TREPLY names the
 * state's own configuration (docs/tls-across.md "The hand-out at
 * connect()"): a flag, never a name value, so no configuration's hash
 * can mean "any" */
#define BK_S_ANY 2u
struct bk_sess {
	uint8_t name[BK_SESS_NAME];
	uint32_t timeout_s; /* SPUT: kept at most this long (> 0), else 0 */
	uint32_t flags;     /* SPUT: BK_S_*, else 0 */
	uint32_t len;       /* the bytes after this header: all the datagram's rest */
	/* TPUT and TREPLY only, else 0: the last tail bytes (< len, at most
	 * BK_TAIL_MAX) are a record the broker writes on the socket if it
	 * ends the connection without handing it on (a sealed close_notify:
	 * docs/tls.md "The close_notify owed"); a TREPLY carries it on, for a
	 * process that gives the state back unused (docs/broker.md) */
	uint32_t tail;
};
#define BK_TAIL_MAX 64
_Static_assert(sizeof(struct bk_sess) == 48, "bk_sess is a wire format");
#define BK_SESS_MSG_MAX (sizeof(struct bk_msg) + sizeof(struct bk_sess) + BK_SESS_MAX)
/* A TLS connection's state (shim/tls_export.h TLSX_MAX), at most; the
 * longest datagram either end may receive */
#define BK_TLS_MAX 65536
#define BK_MSG_MAX (sizeof(struct bk_msg) + sizeof(struct bk_sess) + BK_TLS_MAX)

/* Which end is decoding: a broker accepts PUT and GET, a client REPLY. */
enum bk_side { BK_AT_BROKER, BK_AT_CLIENT };

/* Check len bytes received with nfds descriptors (and the kernel's
 * truncation flags folded into truncated) as a message for side.  Returns
 * 0 with *out filled, or -1 with *why saying what was wrong (a static
 * string for the log). */
int bk_decode(const void *buf, size_t len, unsigned nfds, int truncated, enum bk_side side,
	      struct bk_msg *out, const char **why);

/* Any message: a fixed one (len == sizeof(struct bk_msg)) as bk_decode,
 * *sess zeroed; a session or TLS connection message (SPUT, SGET, TPUT,
 * TGET at the broker, SREPLY, TREPLY at a client) with *sess filled, its
 * bytes at buf + *blob_off, sess->len of them.  Returns 0, or -1 with
 * *why. */
int bk_decode_any(const void *buf, size_t len, unsigned nfds, int truncated, enum bk_side side,
		  struct bk_msg *out, struct bk_sess *sess, size_t *blob_off, const char **why);

/* Fill a message (zeroing what is not given; the key's netns too). */
void bk_encode(struct bk_msg *m, enum bk_type type, enum bk_status status, uint32_t flags,
	       const struct pool_key *key, const struct pool_meta *meta);

/* Attach n descriptors (SCM_RIGHTS) to mh, in ctl: at least
 * CMSG_SPACE(sizeof(int) * n) bytes, aligned for a struct cmsghdr.  n 0
 * attaches none. */
void bk_cmsg_put(struct msghdr *mh, void *ctl, const int *fds, unsigned n);

/* The descriptors received with mh, at most cap of them into fds.  The
 * caller sizes its control buffer for cap descriptors, so the kernel
 * installs no more than that (the rest would be closed with MSG_CTRUNC,
 * which bk_decode refuses).  Returns how many. */
unsigned bk_cmsg_fds(struct msghdr *mh, int *fds, unsigned cap);

#endif
