/*
 * config.h - KEEPALIVE_* settings, the debug log and the exit statistics.
 */
#ifndef KEEPALIVE_CONFIG_H
#define KEEPALIVE_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

/* the version, from debian/changelog's first line (the Makefile passes it) */
#ifndef KP_VERSION
#error "KP_VERSION is undefined: build with make"
#endif

enum kp_log_level { KP_LOG_OFF = 0, KP_LOG_ERROR, KP_LOG_WARN, KP_LOG_INFO, KP_LOG_DEBUG };

struct kp_config {
	bool disabled;            /* KEEPALIVE_DISABLE=1, or a setuid process */
	bool stats;               /* KEEPALIVE_STATS=1 (or KEEPALIVE_STATS_FILE) */
	bool observe;             /* KEEPALIVE_OBSERVE=1: count connects, pool nothing */
	bool tls_across;          /* KEEPALIVE_TLS_ACROSS=1: whole TLS connections through
	                             the broker (docs/tls-across.md "The integration") */
	int log_level;            /* KEEPALIVE_LOG */
	int log_fd;               /* stderr or KEEPALIVE_LOG_FILE */
	uint64_t idle_ms;         /* KEEPALIVE_IDLE_MS: max idle time in the pool */
	unsigned max_idle_per_dest; /* KEEPALIVE_MAX_IDLE_PER_HOST */
	unsigned max_idle_total;  /* KEEPALIVE_MAX_IDLE */
	uint64_t quiet_ms;        /* KEEPALIVE_QUIET_MS: see conn.c, lost framing */
	bool any_method;          /* KEEPALIVE_METHODS=all (default): every method
	                             rides reused connections (replay.h) */
	uint64_t replay_max;      /* KEEPALIVE_REPLAY_MAX: the largest request a
	                             replay copy holds */
	uint8_t ports[65536 / 8]; /* KEEPALIVE_PORTS as a bitmap */
	char broker_path[108];    /* KEEPALIVE_BROKER: the broker's socket, "" none */
	uint64_t broker_timeout_ms; /* KEEPALIVE_BROKER_TIMEOUT_MS: longest wait for it */
};

extern struct kp_config kp_cfg;

/* Read the environment (once, from the constructor). */
void kp_config_load(void);

static inline bool kp_port_enabled(uint16_t port)
{
	return kp_cfg.ports[port >> 3] & (1u << (port & 7));
}

/* Parse a port list such as "80,8080,9000-9010" into bitmap (exposed for
 * tests).  Returns 0, or -1 on a syntax error (bitmap then undefined). */
int kp_parse_ports(const char *s, uint8_t *bitmap);

void kp_log_write(int level, const char *func, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define kp_log(level, ...)                                       \
	do {                                                     \
		if (kp_cfg.log_level >= (level))                 \
			kp_log_write(level, __func__, __VA_ARGS__); \
	} while (0)
#define kp_debug(...) kp_log(KP_LOG_DEBUG, __VA_ARGS__)
#define kp_info(...) kp_log(KP_LOG_INFO, __VA_ARGS__)
#define kp_warn(...) kp_log(KP_LOG_WARN, __VA_ARGS__)

/* Counters printed by KEEPALIVE_STATS=1 at exit. */
#define KP_STATS(X)                                                          \
	X(connects)    /* connect() calls to a pooled port */                \
	X(fresh)       /* ... that made a real TCP connection */             \
	X(reused)      /* ... that got a pooled connection */                \
	X(parked)      /* close() that put a connection in the pool */       \
	X(closed)      /* close() of a tracked connection that was not poolable */ \
	X(dropped)     /* pooled connections closed: expired, dead, evicted */ \
	X(rewritten)   /* requests whose Connection header was rewritten */  \
	X(eofs)        /* synthetic EOFs shown to the program */             \
	X(replayed)    /* requests re-sent on a fresh connection */          \
	X(replayed_unacked) /* ... of those, not idempotent: proved unread by \
	                  TCP (none of their bytes acknowledged) */           \
	X(not_replayed) /* requests a reused connection failed before any    \
	                  response byte, not re-sent: some of their bytes     \
	                  were acknowledged (the program sees the failure) */ \
	X(probed_dead) /* reused connections found dead right before a       \
	                  non-idempotent request's first byte */              \
	X(unvouched)   /* reused connections given back unused: their first  \
	                  request may not be replayed, so it went on a fresh  \
	                  connection */                                       \
	X(passthrough) /* tracked connections the shim stepped aside from */ \
	X(tls_reused)  /* SSL handshakes answered with a pooled TLS connection */ \
	X(tls_declined) /* pooled TLS connections a handshake could not take */ \
	X(tls_resumed) /* cached TLS sessions offered to a fresh handshake */ \
	X(broker_got)  /* connections the broker handed us */                \
	X(broker_gave) /* idle connections handed to the broker */           \
	X(tls_not_shared) /* TLS connections made here: their connection    \
	                     cannot go to another process */                \
	X(tls_resumed_across) /* handshakes that resumed a session another \
	                         process made (through the broker) */

#define KP_STAT_FIELD(name) uint64_t name;
struct kp_stats {
	KP_STATS(KP_STAT_FIELD)
};
#undef KP_STAT_FIELD
extern struct kp_stats kp_stats;

#define kp_count(name) __atomic_add_fetch(&kp_stats.name, 1, __ATOMIC_RELAXED)

void kp_stats_print(void);

#endif
