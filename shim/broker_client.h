/*
 * broker_client.h - the library's side of the broker (pool/broker.c, docs/design.md
 * §8): ask it for a connection before dialling, hand it the idle ones at
 * exit.  Everything fails open: no broker, a dead, slow or lying one costs
 * reuse, never a request.  Prefix: kp_broker_.
 */
#ifndef KEEPALIVE_BROKER_CLIENT_H
#define KEEPALIVE_BROKER_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pool.h"

/* From the constructor, after the settings.  The socket's directory and
 * the broker are checked when first needed (a refusal is logged, and the
 * broker is not used). */
void kp_broker_init(void);

/* Is a broker configured (KEEPALIVE_BROKER) and not refused? */
bool kp_broker_enabled(void);
/* Never use the broker again in this process (its credentials changed). */
void kp_broker_disable(void);

/* A pooled connection to key from the broker, checked (an established
 * TCP socket of our own network namespace whose peer is key's
 * destination), with its record in *meta;
 * -1 when there is none or the broker did not answer within
 * KEEPALIVE_BROKER_TIMEOUT_MS. */
int kp_broker_get(const struct pool_key *key, struct pool_meta *meta);
/* The last kp_broker_get on this thread ended its wait at a handler that
 * would have ended the program's connect (kp_eintr_ends_call): a blocking
 * connect begins the kernel's and says EINTR, as alone (kp_connect_cut,
 * docs/broker.md "A signal in the wait"). */
extern __attribute__((visibility("hidden"))) __thread bool kp_broker_cut;

/* Hand the idle connection fd (plain HTTP only: a TLS connection's state
 * cannot leave the process) to the broker, once it has proved itself on
 * the process's one link (opened on first use, kept for the next
 * request; *link and kp_broker_close are kept for the callers and do
 * nothing).  Returns 0 when sent (the caller still closes its fd), -1. */
int kp_broker_put(int *link, const struct pool_key *key, int fd, const struct pool_meta *meta);

void kp_broker_close(int link);

/* TLS sessions (docs/tls-across.md): opaque bytes kept by the broker
 * under key and name (what the session was made under), for at most
 * timeout_s; once: single use (the broker forgets it when it gives it).
 * Sent only to a broker that proved itself.  Returns 0 or -1. */
int kp_broker_sess_put(const struct pool_key *key, const uint8_t name[32], uint32_t timeout_s, bool once,
		       const void *bytes, size_t len);
/* The bytes kept under key and name, copied to out (at most cap): their
 * length, or -1 (none, no broker, no answer in time).  The caller wipes
 * out after use. */
ssize_t kp_broker_sess_get(const struct pool_key *key, const uint8_t name[32], void *out, size_t cap);

/* Whole TLS connections (docs/tls-across.md "The broker's TLS message"):
 * the connection fd with its state (the export message, len bytes,
 * opaque to the broker) under key and name, kept at most timeout_s and
 * handed out once.  tail (tail_len bytes, at most BK_TAIL_MAX, may be 0):
 * a record the broker writes on fd if it ends the connection itself (the
 * close_notify owed).  Sent only to a broker that proved itself.  Returns
 * 0 when sent (the caller still closes its fd and wipes state), -1. */
int kp_broker_tls_put(const struct pool_key *key, const uint8_t name[32], uint32_t timeout_s, int fd,
		      const struct pool_meta *meta, const void *state, size_t len, const void *tail,
		      size_t tail_len);
/* A TLS connection to key under name, checked as kp_broker_get's, its
 * record in *meta and its state copied to out (at most cap bytes, *len of
 * them; the caller wipes them after use), then the tail its last process
 * sealed (its close_notify owed, ignored here: the taker's close decides):
 * the fd, or -1. */
int kp_broker_tls_get(const struct pool_key *key, const uint8_t name[32], struct pool_meta *meta, void *out,
		      size_t cap, size_t *len);
/* The same under any name (BK_S_ANY): the state's own name in name, the
 * tail's length in *tail (its bytes at out + *len), for a state given back
 * unused to carry. */
int kp_broker_tls_get_any(const struct pool_key *key, uint8_t name[32], struct pool_meta *meta, void *out,
			  size_t cap, size_t *len, size_t *tail);

/* Is the process's own socket fd (one that never left it) an established
 * TCP connection to key's destination?  NULL, or why not. */
const char *kp_broker_check_own(int fd, const struct pool_key *key);

#endif
