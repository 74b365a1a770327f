/*
 * tls_held.h - a TLS connection's state taken from the broker at
 * connect(), held on the connection until the program's first SSL_connect
 * (docs/tls-across.md "The hand-out at connect()").  Callers hold the
 * connection's lock.
 */
#ifndef KEEPALIVE_TLS_HELD_H
#define KEEPALIVE_TLS_HELD_H

#include <stdbool.h>

#pragma GCC visibility push(hidden)

struct kp_held;
struct kp_tls;
struct pool_key;
struct pool_meta;

/* Forks seen since start (kp_conn_before_fork, a fork inside our locks
 * too): a state held across one is never given back. */
extern unsigned kp_held_forks;

/* A TLS connection to key from the broker, under any name: its state held
 * (not imported) and in *sock its socket, for the caller to put under the
 * program's fd; NULL: none (the switch off, no broker, no libssl). */
struct kp_held *kp_held_take(const struct pool_key *key, int *sock);
/* The state for ssl's handshake on fd (the socket under it): the gate and
 * the import on a copy (kp_tls_across_claim); h stays the caller's, as it
 * was, either way.  The engine, or NULL with *why. */
struct kp_tls *kp_held_claim(struct kp_held *h, void *ssl, const struct pool_key *key, int fd, const char **why);
/* Give h back to the broker with its socket sock (the caller still closes
 * its copy) when owner (the caller knows the socket has no other holder)
 * and as_taken (no socket option of the program's on sock: the caller's
 * record, held_opts_set) and h was
 * never shared (kp_held_taint, a fork since) and the kernel's counts show
 * no byte read or written on it since the take; h wiped and freed either
 * way.  True: given back. */
bool kp_held_back(struct kp_held *h, int sock, const struct pool_key *key, bool owner, bool as_taken);
/* The socket may have another holder from now on: never given back. */
void kp_held_taint(struct kp_held *h);
/* The record of h's connection, as the broker gave it. */
const struct pool_meta *kp_held_meta(const struct kp_held *h);
/* Wipe and free h (NULL: nothing). */
void kp_held_free(struct kp_held *h);

#pragma GCC visibility pop

#endif
