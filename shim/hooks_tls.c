/*
 * hooks_tls.c - exported wrappers for libssl 3's client path.
 *
 * Exported under the version OPENSSL_3.0.0 (shim/exports.map): a program
 * linked against another libssl (1.1) binds its own, never these.  Each
 * wrapper binds the real functions on first use (tls_real.c); until the
 * shim follows a TLS connection (kp_tls_used) each is one load and a call.
 *
 * Routed: every call that reads the connection's state is answered by the
 * engine when the program's SSL was handed a pooled connection (tls.h).
 * A getter missed here would answer with a fresh SSL's defaults, so the
 * list covers what Ruby's openssl, CPython's _ssl and libcurl import, and
 * the rest of libssl's connection getters.
 */
#include <dlfcn.h>
#include <errno.h>

#include <openssl/conf.h>
#include <openssl/engine.h>
#include <openssl/provider.h>
#include <openssl/rand.h>

#include "config.h"
#include "dl_real.h"
#include "tls.h"
#include "tls_capture.h"
#include "tls_real.h"

#define KP_EXPORT __attribute__((visibility("default")))

/* no real function at all: libssl without a symbol it exports (cannot
 * happen with libssl 3, whose callers reach us) */
#define MISSING(name) (!kp_ssl.name && !(kp_ssl_bind(), kp_ssl.name))

/* A call libssl makes to its own exported function (through the PLT):
 * straight to the real one.  Decided by the caller's address, not by a
 * flag of ours: the program's callbacks run inside our real calls, and
 * their SSL_* calls are the program's. */
#define INTERNAL() kp_from_libssl(__builtin_return_address(0))

/* ret name(const SSL *s, ...): answered by the engine; mutators (mut)
 * refused on an SSL whose connection went to the pool */
#define ROUTED_AS(ret, name, params, args, mut)                      \
	KP_EXPORT ret name params                                    \
	{                                                            \
		if (MISSING(name))                                   \
			return (ret)0;                               \
		SSL *e = INTERNAL() ? (SSL *)s : kp_tls_route(s, mut); \
		if (!e)                                              \
			return (ret)0;                               \
		return kp_ssl.name args;                             \
	}
#define ROUTED(ret, name, params, args) ROUTED_AS(ret, name, params, args, false)
#define MUTATOR(ret, name, params, args) ROUTED_AS(ret, name, params, args, true)

#define ROUTED_VOID(name, params, ...)                               \
	KP_EXPORT void name params                                   \
	{                                                            \
		if (MISSING(name))                                   \
			return;                                      \
		kp_ssl.name(INTERNAL() ? (SSL *)s : kp_tls_route(s, false), \
			    __VA_ARGS__);                            \
	}

/* what the program reads of its peer: a fresh handshake in its place must
 * show the same (kp_tls_peer_seen) */
#define PEER_SEEN(s) (INTERNAL() ? (void)0 : kp_tls_peer_seen(s))
#define PEER_ROUTED(ret, name, params, args) \
	KP_EXPORT ret name params                 \
	{                                         \
		if (MISSING(name))                \
			return (ret)0;            \
		PEER_SEEN(s);                     \
		SSL *e = INTERNAL() ? (SSL *)s : kp_tls_route(s, false); \
		return e ? kp_ssl.name args : (ret)0; \
	}
/* a handed-out SSL's peer certificate is its own object (kp_tls_peer_own) */
#define PEER_OWN(name, up)                                                 \
	KP_EXPORT X509 *name(const SSL *s)                                 \
	{                                                                  \
		if (MISSING(name))                                         \
			return NULL;                                       \
		PEER_SEEN(s);                                              \
		X509 *own;                                                 \
		if (!INTERNAL() && kp_tls_peer_own(s, &own))               \
			return !up || kp_ssl.X509_up_ref(own) ? own : NULL; \
		SSL *e = INTERNAL() ? (SSL *)s : kp_tls_route(s, false);   \
		return e ? kp_ssl.name(e) : NULL;                          \
	}
PEER_OWN(SSL_get1_peer_certificate, true)
PEER_OWN(SSL_get0_peer_certificate, false)
/* what the program's own full handshake would have read, for a handed-out
 * SSL or a session of ours resumed (docs/tls.md "What a full handshake
 * shows") */
#define FULL_SHOWN(ret, name, cmd, params, args)                           \
	KP_EXPORT ret name params                                          \
	{                                                                  \
		if (MISSING(name))                                         \
			return (ret)0;                                     \
		ret shown;                                                 \
		long r;                                                    \
		if (cmd == KP_PEER_CHAIN)                                  \
			PEER_SEEN(s);                                      \
		if (!INTERNAL() && kp_tls_peer_full(s, cmd, &shown, &r))  \
			return shown;                                      \
		SSL *e = INTERNAL() ? (SSL *)s : kp_tls_route(s, false);   \
		return e ? kp_ssl.name args : (ret)0;                      \
	}
FULL_SHOWN(STACK_OF(X509) *, SSL_get_peer_cert_chain, KP_PEER_CHAIN, (const SSL *s), (e))
/* answered by the foreign engine on a connection from another process
 * (kp_tls_foreign), else routed */
#define FOREIGN(ret, name, q, member, params, fargs, args)                          \
	KP_EXPORT ret name params                                                  \
	{                                                                          \
		if (MISSING(name))                                                 \
			return (ret)0;                                             \
		struct kp_fq_args fa = fargs;                                      \
		union kp_fq_ret fr;                                                \
		if (!INTERNAL() && kp_tls_foreign(s, q, &fa, &fr))                 \
			return (ret)fr.member;                                     \
		SSL *e = INTERNAL() ? (SSL *)s : kp_tls_route(s, false);           \
		if (!e)                                                            \
			return (ret)0;                                             \
		return kp_ssl.name args;                                           \
	}
#define NO_ARGS ((struct kp_fq_args){ 0 })
KP_EXPORT void SSL_get0_alpn_selected(const SSL *s, const unsigned char **d, unsigned int *l)
{
	if (MISSING(SSL_get0_alpn_selected))
		return;
	struct kp_fq_args fa = { .data = d, .len = l };
	union kp_fq_ret fr;
	if (!INTERNAL() && kp_tls_foreign(s, KP_FQ_ALPN, &fa, &fr))
		return;
	kp_ssl.SSL_get0_alpn_selected(INTERNAL() ? (SSL *)s : kp_tls_route(s, false), d, l);
}
ROUTED_VOID(SSL_get0_next_proto_negotiated, (const SSL *s, const unsigned char **d, unsigned *l), d, l)
/* The program changes a session (its first argument): none is made from
 * it for another SSL (kp_tls_session_changes, docs/tls.md "The
 * program's own objects") */
#define SESSION_SETTER(ret, name, params, args)                         \
	KP_EXPORT ret name params                                      \
	{                                                              \
		if (MISSING(name))                                     \
			return (ret)0;                                 \
		if (!INTERNAL())                                       \
			kp_tls_session_changes(s);                     \
		return kp_ssl.name args;                               \
	}
SESSION_SETTER(int, SSL_SESSION_set1_id_context, (SSL_SESSION *s, const unsigned char *c, unsigned int n), (s, c, n))
SESSION_SETTER(int, SSL_SESSION_set1_id, (SSL_SESSION *s, const unsigned char *id, unsigned int n), (s, id, n))
SESSION_SETTER(long, SSL_SESSION_set_time, (SSL_SESSION *s, long t), (s, t))
SESSION_SETTER(long, SSL_SESSION_set_timeout, (SSL_SESSION *s, long t), (s, t))
SESSION_SETTER(int, SSL_SESSION_set_protocol_version, (SSL_SESSION *s, int v), (s, v))
SESSION_SETTER(int, SSL_SESSION_set1_hostname, (SSL_SESSION *s, const char *n), (s, n))
SESSION_SETTER(int, SSL_SESSION_set1_alpn_selected, (SSL_SESSION *s, const unsigned char *a, size_t n), (s, a, n))
SESSION_SETTER(int, SSL_SESSION_set_cipher, (SSL_SESSION *s, const SSL_CIPHER *c), (s, c))
SESSION_SETTER(int, SSL_SESSION_set1_master_key, (SSL_SESSION *s, const unsigned char *k, size_t n), (s, k, n))
SESSION_SETTER(int, SSL_SESSION_set_max_early_data, (SSL_SESSION *s, uint32_t n), (s, n))
SESSION_SETTER(int, SSL_SESSION_set1_ticket_appdata, (SSL_SESSION *s, const void *d, size_t n), (s, d, n))
SESSION_SETTER(int, SSL_SESSION_set_ex_data, (SSL_SESSION *s, int i, void *d), (s, i, d))

/* a handed-out SSL reads a session of its own (kp_tls_session) */
KP_EXPORT SSL_SESSION *SSL_get_session(const SSL *s)
{
	if (MISSING(SSL_get_session))
		return NULL;
	PEER_SEEN(s);
	SSL_SESSION *sess;
	if (!INTERNAL() && kp_tls_session(s, &sess))
		return sess;
	SSL *e = INTERNAL() ? (SSL *)s : kp_tls_route(s, false);
	return e ? kp_ssl.SSL_get_session(e) : NULL;
}

KP_EXPORT SSL_SESSION *SSL_get1_session(SSL *s)
{
	if (MISSING(SSL_get1_session))
		return NULL;
	PEER_SEEN(s);
	SSL_SESSION *sess;
	if (!INTERNAL() && kp_tls_session(s, &sess))
		return sess && kp_ssl.SSL_SESSION_up_ref(sess) ? sess : NULL;
	SSL *e = INTERNAL() ? (SSL *)s : kp_tls_route(s, false);
	return e ? kp_ssl.SSL_get1_session(e) : NULL;
}
ROUTED(const SSL_CIPHER *, SSL_get_current_cipher, (const SSL *s), (e))
FOREIGN(const SSL_CIPHER *, SSL_get_pending_cipher, KP_FQ_PENDING_CIPHER, p, (const SSL *s), NO_ARGS, (e))
ROUTED(const COMP_METHOD *, SSL_get_current_compression, (const SSL *s), (e))
ROUTED(const COMP_METHOD *, SSL_get_current_expansion, (const SSL *s), (e))
ROUTED(STACK_OF(SSL_CIPHER) *, SSL_get_client_ciphers, (const SSL *s), (e))
FULL_SHOWN(STACK_OF(X509_NAME) *, SSL_get_client_CA_list, KP_CLIENT_CA, (const SSL *s), (e))
FULL_SHOWN(const STACK_OF(X509_NAME) *, SSL_get0_peer_CA_list, KP_PEER_CA, (const SSL *s), (e))
/* The Finished messages.  A resumption shown as the full handshake the
 * program's own would have been (SSL_session_reused 0 where the handshake
 * resumed: a session of ours, docs/tls.md "Sessions") had the server's
 * Finished first, which RFC 5929's tls-unique takes; a program told
 * "full" takes its own (CPython's get_channel_binding): the two answered
 * swapped, so that its binding is the one the server computed. */
static size_t finished(const SSL *s, void *buf, size_t n, bool peer)
{
	struct kp_fq_args fa = { .buf = buf, .n = n };
	union kp_fq_ret fr;
	if (!INTERNAL())
		kp_tls_finished_seen(s); /* a fresh handshake in its place is refused */
	if (!INTERNAL() && kp_tls_foreign(s, peer ? KP_FQ_PEER_FINISHED : KP_FQ_FINISHED, &fa, &fr))
		return fr.z;
	SSL *e = INTERNAL() ? (SSL *)s : kp_tls_route(s, false);
	if (!e)
		return 0;
	if (!INTERNAL() && kp_tls_session_ours(s) && kp_ssl.SSL_session_reused(e))
		peer = !peer;
	return peer ? kp_ssl.SSL_get_peer_finished(e, buf, n) : kp_ssl.SSL_get_finished(e, buf, n);
}
KP_EXPORT size_t SSL_get_finished(const SSL *s, void *buf, size_t n)
{
	return MISSING(SSL_get_finished) ? 0 : finished(s, buf, n, false);
}
KP_EXPORT size_t SSL_get_peer_finished(const SSL *s, void *buf, size_t n)
{
	return MISSING(SSL_get_peer_finished) ? 0 : finished(s, buf, n, true);
}
FOREIGN(const char *, SSL_get_version, KP_FQ_VERSION_STR, s, (const SSL *s), NO_ARGS, (e))
FOREIGN(int, SSL_version, KP_FQ_VERSION, i, (const SSL *s), NO_ARGS, (e))
FOREIGN(int, SSL_client_version, KP_FQ_CLIENT_VERSION, i, (const SSL *s), NO_ARGS, (e))
FOREIGN(int, SSL_is_init_finished, KP_FQ_INIT_FINISHED, i, (const SSL *s), NO_ARGS, (e))
FOREIGN(int, SSL_in_init, KP_FQ_IN_INIT, i, (const SSL *s), NO_ARGS, (e))
FOREIGN(int, SSL_in_before, KP_FQ_IN_BEFORE, i, (const SSL *s), NO_ARGS, (e))
FOREIGN(OSSL_HANDSHAKE_STATE, SSL_get_state, KP_FQ_STATE, i, (const SSL *s), NO_ARGS, (e))
FOREIGN(const char *, SSL_state_string, KP_FQ_STATE_STR, s, (const SSL *s), NO_ARGS, (e))
FOREIGN(const char *, SSL_state_string_long, KP_FQ_STATE_STR_LONG, s, (const SSL *s), NO_ARGS, (e))
FOREIGN(const char *, SSL_get_servername, KP_FQ_SERVERNAME, s, (const SSL *s, const int type),
	((struct kp_fq_args){ .type = type }), (e, type))
FOREIGN(int, SSL_get_servername_type, KP_FQ_SERVERNAME_TYPE, i, (const SSL *s), NO_ARGS, (e))
ROUTED(char *, SSL_get_shared_ciphers, (const SSL *s, char *buf, int size), (e, buf, size))
FOREIGN(size_t, SSL_get_client_random, KP_FQ_CLIENT_RANDOM, z, (const SSL *s, unsigned char *out, size_t n),
	((struct kp_fq_args){ .buf = out, .n = n }), (e, out, n))
FOREIGN(size_t, SSL_get_server_random, KP_FQ_SERVER_RANDOM, z, (const SSL *s, unsigned char *out, size_t n),
	((struct kp_fq_args){ .buf = out, .n = n }), (e, out, n))
FOREIGN(int, SSL_export_keying_material, KP_FQ_EKM, i,
	(SSL *s, unsigned char *out, size_t olen, const char *label, size_t llen, const unsigned char *ctx,
	 size_t clen, int use_ctx),
	((struct kp_fq_args){ .buf = out, .n = olen, .label = label, .llen = llen, .ctx = ctx, .clen = clen,
			     .use_ctx = use_ctx }),
	(e, out, olen, label, llen, ctx, clen, use_ctx))
/* an ex_data index of an SSL, a context or a session with a callback the
 * program made: SSL_free or SSL_CTX_free must run it then, with the
 * object's data, which an engine that keeps the object cannot do, and our
 * own objects must not run it; such a program's SSLs are not followed
 * (docs/tls.md "The first owner's SSL").  libcrypto's, bound here: a
 * program without libssl calls it too. */
KP_EXPORT int CRYPTO_get_ex_new_index(int class_index, long argl, void *argp, CRYPTO_EX_new *new_func,
				      CRYPTO_EX_dup *dup_func, CRYPTO_EX_free *free_func)
{
	static int (*real)(int, long, void *, CRYPTO_EX_new *, CRYPTO_EX_dup *, CRYPTO_EX_free *);
	if (!real)
		*(void **)&real = kp_dl_vsym(RTLD_NEXT, "CRYPTO_get_ex_new_index", "OPENSSL_3.0.0");
	if (!real) {
		/* libcrypto loaded RTLD_LOCAL (CPython's _ssl): not in the
		 * global scope RTLD_NEXT searches */
		void *h = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_NOLOAD);
		if (h)
			*(void **)&real = kp_dl_vsym(h, "CRYPTO_get_ex_new_index", "OPENSSL_3.0.0");
	}
	if (!real)
		return -1;
	/* an SSL's, a context's or a session's: the library keeps a pooled
	 * connection's context and sessions past the program's free, copies
	 * sessions and makes objects of its own, each of which would run the
	 * program's callbacks at other times or on other objects */
	/* (and an X509_STORE_CTX's: our check of a peer chain, verify_as,
	 * makes and frees one) */
	if ((class_index == CRYPTO_EX_INDEX_SSL || class_index == CRYPTO_EX_INDEX_SSL_CTX ||
	     class_index == CRYPTO_EX_INDEX_SSL_SESSION || class_index == CRYPTO_EX_INDEX_X509_STORE_CTX) &&
	    (new_func || free_func || dup_func))
		__atomic_store_n(&kp_tls_ssl_ex_funcs, true, __ATOMIC_RELEASE);
	int idx = real(class_index, argl, argp, new_func, dup_func, free_func);
	if (class_index == CRYPTO_EX_INDEX_SSL_SESSION)
		kp_tls_session_index(idx);
	return idx;
}

/* libcrypto's real function name (not ours), found as
 * CRYPTO_get_ex_new_index finds its own */
static void *crypto_real(const char *name)
{
	void *p = dlvsym(RTLD_NEXT, name, "OPENSSL_3.0.0");
	if (!p) {
		void *h = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_NOLOAD);
		if (h)
			p = dlvsym(h, name, "OPENSSL_3.0.0");
	}
	return p;
}

/* A call libcrypto or libssl makes itself (libssl's set-and-restore of
 * the thread's default library context, the configuration loaded at
 * start, cleanup at exit): not a change of the program's.  (A program's
 * own call that loads a configuration counts once, at its outer call.) */
static bool from_openssl(const void *ra, void *real)
{
	if (kp_from_libssl(ra))
		return true;
	/* libcrypto's code, found once (two dladdr at each call were 4.5M
	 * instructions of the 13M a handed curl adds: its engines' start-up
	 * calls a setter per engine, docs/cost.md "A hand-out across
	 * processes") */
	static uintptr_t lo, hi;
	uintptr_t h = __atomic_load_n(&hi, __ATOMIC_ACQUIRE), l;
	if (!h) {
		if (!kp_text_of(real, &l, &h))
			return false; /* (no object holds it: not from libcrypto) */
		__atomic_store_n(&lo, l, __ATOMIC_RELAXED);
		__atomic_store_n(&hi, h, __ATOMIC_RELEASE);
	}
	l = __atomic_load_n(&lo, __ATOMIC_RELAXED);
	if ((uintptr_t)real - l >= h - l) { /* (a real of another object's) */
		Dl_info a, b;
		return dladdr(ra, &a) && dladdr(real, &b) && a.dli_fbase == b.dli_fbase;
	}
	return (uintptr_t)ra - l < h - l;
}

/* > 0 inside OPENSSL_init_crypto (whoever called it): a configuration it
 * loads (its once-only OPENSSL_INIT_LOAD_CONFIG, OPENSSL_config) runs the
 * setters below from inside libcrypto, and counts (docs/tls.md
 * "Process-wide state") */
static __thread int in_init_crypto;
/* ... of them, those made with no settings: the default configuration's
 * load, the same in every process of the same environment */
static __thread int in_init_default;
static void trace_fold(const char *s)
{
	uint64_t old = __atomic_load_n(&kp_tls_crypto_trace, __ATOMIC_ACQUIRE), now;
	do {
		now = old;
		for (const char *c = s; *c; c++)
			now = (now ^ (uint8_t)*c) * 0x100000001b3ull; /* FNV-1a */
		now = (now ^ 0xff) * 0x100000001b3ull; /* the end of s */
	} while (!__atomic_compare_exchange_n(&kp_tls_crypto_trace, &old, now, false, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
}

/* The engines ENGINE_register_all_complete registers: every one in the
 * list, each known by its id (ENGINE_add refuses a second of an id). */
static void trace_engines(void)
{
	static ENGINE *(*first)(void), *(*next)(ENGINE *);
	static const char *(*id_of)(const ENGINE *);
	static int (*drop)(ENGINE *);
	if (!first) {
		*(void **)&id_of = crypto_real("ENGINE_get_id");
		*(void **)&next = crypto_real("ENGINE_get_next");
		*(void **)&drop = crypto_real("ENGINE_free");
		*(void **)&first = crypto_real("ENGINE_get_first");
	}
	if (!first || !next || !id_of || !drop) {
		__atomic_add_fetch(&kp_tls_crypto_odd, 1, __ATOMIC_ACQ_REL);
		return;
	}
	for (ENGINE *e = first(); e; e = next(e)) { /* next releases e */
		const char *id = id_of(e);
		trace_fold(id ? id : "");
	}
}

/* A setter's call: part of the default configuration's load, or an
 * ENGINE_register_all_complete (no argument of the program's: what it
 * does is the engine list's), goes into the trace another process
 * compares; any other is odd (kp_tls_crypto_odd). */
static void crypto_note(const char *name)
{
	bool in_default = in_init_crypto && in_init_crypto == in_init_default;
	bool all_engines = !strcmp(name, "ENGINE_register_all_complete");
	if (!in_default && !all_engines) {
		__atomic_add_fetch(&kp_tls_crypto_odd, 1, __ATOMIC_ACQ_REL);
		return;
	}
	trace_fold(name);
	if (all_engines && !in_default)
		trace_engines();
}

/* Process-wide crypto state: what a handshake made from now on may fetch
 * (providers, default properties), draw (RAND) or run on (engines).  Each
 * setter bumps kp_tls_crypto_gen, before and after the real call (a
 * handshake on another thread meanwhile gets a generation of its own): a
 * connection made under another generation is not handed out, since the
 * program's own handshake might fail where it worked (docs/tls.md
 * "Process-wide state").  Whatever the library context: one of the
 * program's own declines anyway. */
#define CRYPTO_SETTER(ret, name, params, args)                                  \
	KP_EXPORT ret name params                                              \
	{                                                                      \
		static ret(*real) params;                                      \
		if (!real)                                                     \
			*(void **)&real = crypto_real(#name);                  \
		if (!real)                                                     \
			return (ret)0;                                         \
		if (!in_init_crypto &&                                         \
		    from_openssl(__builtin_return_address(0), *(void **)&real)) \
			return real args;                                      \
		__atomic_add_fetch(&kp_tls_crypto_gen, 1, __ATOMIC_ACQ_REL);   \
		crypto_note(#name);                                            \
		kp_debug("%s: process-wide crypto state changes", #name);      \
		ret r = real args;                                             \
		__atomic_add_fetch(&kp_tls_crypto_gen, 1, __ATOMIC_ACQ_REL);   \
		return r;                                                      \
	}
CRYPTO_SETTER(int, EVP_set_default_properties, (OSSL_LIB_CTX * l, const char *q), (l, q))
CRYPTO_SETTER(int, EVP_default_properties_enable_fips, (OSSL_LIB_CTX * l, int on), (l, on))
CRYPTO_SETTER(OSSL_PROVIDER *, OSSL_PROVIDER_load, (OSSL_LIB_CTX * l, const char *n), (l, n))
CRYPTO_SETTER(OSSL_PROVIDER *, OSSL_PROVIDER_try_load, (OSSL_LIB_CTX * l, const char *n, int f), (l, n, f))
CRYPTO_SETTER(int, OSSL_PROVIDER_unload, (OSSL_PROVIDER * p), (p))
CRYPTO_SETTER(int, OSSL_PROVIDER_add_builtin, (OSSL_LIB_CTX * l, const char *n, OSSL_provider_init_fn *f),
	      (l, n, f))
CRYPTO_SETTER(int, OSSL_LIB_CTX_load_config, (OSSL_LIB_CTX * l, const char *f), (l, f))
CRYPTO_SETTER(OSSL_LIB_CTX *, OSSL_LIB_CTX_set0_default, (OSSL_LIB_CTX * l), (l))
CRYPTO_SETTER(int, CONF_modules_load_file, (const char *f, const char *a, unsigned long fl), (f, a, fl))
CRYPTO_SETTER(int, CONF_modules_load_file_ex, (OSSL_LIB_CTX * l, const char *f, const char *a, unsigned long fl),
	      (l, f, a, fl))
CRYPTO_SETTER(int, CONF_modules_load, (const CONF *c, const char *a, unsigned long fl), (c, a, fl))
CRYPTO_SETTER(int, RAND_set_rand_method, (const RAND_METHOD *m), (m))
CRYPTO_SETTER(int, RAND_set_rand_engine, (ENGINE * e), (e))
CRYPTO_SETTER(int, RAND_set_DRBG_type, (OSSL_LIB_CTX * l, const char *d, const char *q, const char *c,
					const char *cq), (l, d, q, c, cq))
CRYPTO_SETTER(int, RAND_set_seed_source_type, (OSSL_LIB_CTX * l, const char *s, const char *q), (l, s, q))
CRYPTO_SETTER(int, ENGINE_set_default, (ENGINE * e, unsigned int f), (e, f))
CRYPTO_SETTER(int, ENGINE_set_default_string, (ENGINE * e, const char *l), (e, l))
CRYPTO_SETTER(int, ENGINE_set_default_RSA, (ENGINE * e), (e))
CRYPTO_SETTER(int, ENGINE_set_default_DSA, (ENGINE * e), (e))
CRYPTO_SETTER(int, ENGINE_set_default_EC, (ENGINE * e), (e))
CRYPTO_SETTER(int, ENGINE_set_default_DH, (ENGINE * e), (e))
CRYPTO_SETTER(int, ENGINE_set_default_RAND, (ENGINE * e), (e))
CRYPTO_SETTER(int, ENGINE_set_default_ciphers, (ENGINE * e), (e))
CRYPTO_SETTER(int, ENGINE_set_default_digests, (ENGINE * e), (e))
CRYPTO_SETTER(int, ENGINE_set_default_pkey_meths, (ENGINE * e), (e))
CRYPTO_SETTER(int, ENGINE_set_default_pkey_asn1_meths, (ENGINE * e), (e))
CRYPTO_SETTER(int, ENGINE_register_complete, (ENGINE * e), (e))
CRYPTO_SETTER(int, ENGINE_register_all_complete, (void), ())
#define CRYPTO_SETTER_VOID(name, params, args)                                  \
	KP_EXPORT void name params                                             \
	{                                                                      \
		static void(*real) params;                                     \
		if (!real)                                                     \
			*(void **)&real = crypto_real(#name);                  \
		if (!real)                                                     \
			return;                                                \
		if (!in_init_crypto &&                                         \
		    from_openssl(__builtin_return_address(0), *(void **)&real)) \
			return real args;                                      \
		__atomic_add_fetch(&kp_tls_crypto_gen, 1, __ATOMIC_ACQ_REL);   \
		crypto_note(#name);                                            \
		kp_debug("%s: process-wide crypto state changes", #name);      \
		real args;                                                     \
		__atomic_add_fetch(&kp_tls_crypto_gen, 1, __ATOMIC_ACQ_REL);   \
	}
/* a registered engine is a candidate for each algorithm it implements
 * (the engine tables), default or not; unregistered, it no longer is;
 * an engine's methods changed change what it runs */
#define ENGINE_TABLE(what, mtype)                                               \
	CRYPTO_SETTER(int, ENGINE_register_##what, (ENGINE * e), (e))           \
	CRYPTO_SETTER_VOID(ENGINE_unregister_##what, (ENGINE * e), (e))         \
	CRYPTO_SETTER_VOID(ENGINE_register_all_##what, (void), ())              \
	CRYPTO_SETTER(int, ENGINE_set_##what, (ENGINE * e, mtype m), (e, m))
ENGINE_TABLE(RSA, const RSA_METHOD *)
ENGINE_TABLE(DSA, const DSA_METHOD *)
ENGINE_TABLE(EC, const EC_KEY_METHOD *)
ENGINE_TABLE(DH, const DH_METHOD *)
ENGINE_TABLE(RAND, const RAND_METHOD *)
ENGINE_TABLE(ciphers, ENGINE_CIPHERS_PTR)
ENGINE_TABLE(digests, ENGINE_DIGESTS_PTR)
ENGINE_TABLE(pkey_meths, ENGINE_PKEY_METHS_PTR)
ENGINE_TABLE(pkey_asn1_meths, ENGINE_PKEY_ASN1_METHS_PTR)
CRYPTO_SETTER_VOID(ENGINE_set_table_flags, (unsigned int f), (f))
/* legacy key methods a key of an engine's may run on */
CRYPTO_SETTER(int, EVP_PKEY_meth_add0, (const EVP_PKEY_METHOD *m), (m))
CRYPTO_SETTER(int, EVP_PKEY_asn1_add0, (const EVP_PKEY_ASN1_METHOD *m), (m))
CRYPTO_SETTER(int, EVP_PKEY_asn1_add_alias, (int to, int from), (to, from))
/* a failed self-test leaves a (FIPS) provider in its error state */
CRYPTO_SETTER(int, OSSL_PROVIDER_self_test, (const OSSL_PROVIDER *p), (p))
/* unloading configuration modules runs their finish functions */
CRYPTO_SETTER_VOID(CONF_modules_unload, (int all), (all))
CRYPTO_SETTER_VOID(CONF_modules_finish, (void), ())

/* A lookup method of the program's own in a store (X509_LOOKUP_meth_new):
 * its code runs in every verification with the store, as the store's
 * functions do, and such a store declines as they do (docs/tls.md
 * "Callbacks that watch").  libcrypto's own methods (a file, a hashed
 * directory, an OSSL_STORE URI) read what the program's handshake would
 * read at the same moment: our check runs them then. */
KP_EXPORT X509_LOOKUP *X509_STORE_add_lookup(X509_STORE *store, X509_LOOKUP_METHOD *m)
{
	static X509_LOOKUP *(*real)(X509_STORE *, X509_LOOKUP_METHOD *);
	static X509_LOOKUP_METHOD *(*builtin[3])(void);
	static const char *const builtin_name[3] = { "X509_LOOKUP_file", "X509_LOOKUP_hash_dir",
						     "X509_LOOKUP_store" };
	if (!real)
		*(void **)&real = crypto_real("X509_STORE_add_lookup");
	if (!real)
		return NULL;
	X509_LOOKUP *l = real(store, m);
	bool own = l != NULL;
	for (int i = 0; own && i < 3; i++) {
		if (!builtin[i])
			*(void **)&builtin[i] = crypto_real(builtin_name[i]);
		own = !builtin[i] || builtin[i]() != m;
	}
	if (own)
		kp_tls_note_never(store, NEVER_LOOKUP, true);
	return l;
}

KP_EXPORT int OPENSSL_init_crypto(uint64_t opts, const OPENSSL_INIT_SETTINGS *settings)
{
	static int (*real)(uint64_t, const OPENSSL_INIT_SETTINGS *);
	if (!real)
		*(void **)&real = crypto_real("OPENSSL_init_crypto");
	if (!real)
		return 0;
	in_init_crypto++;
	in_init_default += !settings;
	int r = real(opts, settings);
	in_init_default -= !settings;
	in_init_crypto--;
	return r;
}

/* what the program's own full handshake would show, for a handed-out SSL
 * or a session of ours resumed (docs/tls.md "After the handshake") */
KP_EXPORT int SSL_get_peer_signature_type_nid(const SSL *s, int *nid)
{
	if (MISSING(SSL_get_peer_signature_type_nid))
		return 0;
	long r;
	if (!INTERNAL() && nid && kp_tls_peer_full(s, KP_PEER_SIG_TYPE, nid, &r))
		return (int)r;
	SSL *e = INTERNAL() ? (SSL *)s : kp_tls_route(s, false);
	return e ? kp_ssl.SSL_get_peer_signature_type_nid(e, nid) : 0;
}
/* a call that puts the connection back in a handshake: the engine's, and
 * the connection never parked after it (docs/tls.md "Found by the second
 * HTTPS review"); on a connection from another process, before its first
 * read or write its own handshake first, after it libssl's refusal where
 * the state tells it (docs/tls-across.md "What keeps it in the test
 * build"; refuse: a kp_fq, or -1) */
#define HANDSHAKE_AGAIN(name, params, args, refuse)                                  \
	KP_EXPORT int name params                                                    \
	{                                                                            \
		if (MISSING(name))                                                   \
			return 0;                                                    \
		if (INTERNAL())                                                      \
			return kp_ssl.name(s HANDSHAKE_ARGS args);                   \
		kp_tls_foreign_early(s);                                             \
		union kp_fq_ret fr;                                                  \
		if ((int)(refuse) >= 0 && kp_tls_foreign(s, refuse, NULL, &fr))      \
			return 0;                                                    \
		SSL *e = kp_tls_route(s, true);                                      \
		if (!e)                                                              \
			return 0;                                                    \
		kp_tls_after_set(s, KP_AFTER_OTHER, #name " after the handshake"); \
		return kp_ssl.name(e HANDSHAKE_ARGS args);                           \
	}
#define HANDSHAKE_ARGS(...) __VA_OPT__(, ) __VA_ARGS__
HANDSHAKE_AGAIN(SSL_verify_client_post_handshake, (SSL *s), (), KP_FQ_REFUSE_PHA)
/* on a connection from another process, after its first read or write:
 * the foreign engine's (docs/tls-across.md "The hand-out in the library") */
KP_EXPORT int SSL_key_update(SSL *s, int type)
{
	if (MISSING(SSL_key_update))
		return 0;
	if (INTERNAL())
		return kp_ssl.SSL_key_update(s, type);
	kp_tls_foreign_early(s);
	union kp_fq_ret fr;
	if (kp_tls_foreign(s, KP_FQ_KEY_UPDATE, &(struct kp_fq_args){ .type = type }, &fr))
		return fr.i;
	SSL *e = kp_tls_route(s, true);
	if (!e)
		return 0;
	kp_tls_after_set(s, KP_AFTER_OTHER, "SSL_key_update after the handshake");
	return kp_ssl.SSL_key_update(e, type);
}
FOREIGN(int, SSL_get_key_update_type, KP_FQ_KEY_UPDATE_TYPE, i, (const SSL *s), NO_ARGS, (e))
HANDSHAKE_AGAIN(SSL_renegotiate, (SSL *s), (), KP_FQ_REFUSE_RENEGOTIATE)
HANDSHAKE_AGAIN(SSL_renegotiate_abbreviated, (SSL *s), (), KP_FQ_REFUSE_RENEGOTIATE)
ROUTED(int, SSL_renegotiate_pending, (const SSL *s), (e))
ROUTED(int, SSL_get_early_data_status, (const SSL *s), (e))
FOREIGN(int, SSL_want, KP_FQ_WANT, i, (const SSL *s), NO_ARGS, (e))
#define SIGALGS(name, cmd)                                                                         \
	KP_EXPORT int name(SSL *s, int idx, int *sign, int *hash, int *signhash, unsigned char *rsig, \
			   unsigned char *rhash)                                                      \
	{                                                                                          \
		if (MISSING(name))                                                                 \
			return 0;                                                                  \
		struct kp_sigalg_query q = { idx, sign, hash, signhash, rsig, rhash };             \
		long r;                                                                            \
		if (!INTERNAL() && kp_tls_peer_full(s, cmd, &q, &r))                               \
			return (int)r;                                                             \
		SSL *e = INTERNAL() ? s : kp_tls_route(s, false);                                  \
		return e ? kp_ssl.name(e, idx, sign, hash, signhash, rsig, rhash) : 0;             \
	}
SIGALGS(SSL_get_shared_sigalgs, KP_SHARED_SIGALGS)
SIGALGS(SSL_get_sigalgs, KP_SIGALGS)
KP_EXPORT int SSL_get_signature_type_nid(const SSL *s, int *nid)
{
	if (MISSING(SSL_get_signature_type_nid))
		return 0;
	long r;
	if (!INTERNAL() && nid && kp_tls_peer_full(s, KP_OWN_SIG_TYPE, nid, &r))
		return (int)r;
	SSL *e = INTERNAL() ? (SSL *)s : kp_tls_route(s, false);
	return e ? kp_ssl.SSL_get_signature_type_nid(e, nid) : 0;
}
ROUTED(const STACK_OF(SCT) *, SSL_get0_peer_scts, (SSL *s), (e))

/* SSL_ctrl: the commands that read the connection go to the engine, mode
 * changes to both (the engine does the program's I/O), the rest (the
 * program's settings) stay on the program's SSL. */
KP_EXPORT long SSL_ctrl(SSL *s, int cmd, long larg, void *parg)
{
	if (MISSING(SSL_ctrl))
		return 0;
	/* settings are noted also when libssl makes them for the program
	 * (SSL_CONF_cmd, an openssl.cnf section) */
	long r = INTERNAL() ? kp_ssl.SSL_ctrl(s, cmd, larg, parg) : kp_tls_ctrl(s, cmd, larg, parg);
	if (kp_ssl_bind())
		kp_tls_note_ctrl(s, cmd, larg, parg, r);
	return r;
}

/* only noted: the settings that no getter tells (groups, sigalgs), also
 * when libssl makes them (SSL_CONF_cmd, openssl.cnf); a command not in
 * the table (docs/tls.md) */
KP_EXPORT long SSL_CTX_ctrl(SSL_CTX *ctx, int cmd, long larg, void *parg)
{
	if (MISSING(SSL_CTX_ctrl))
		return 0;
	long r = kp_ssl.SSL_CTX_ctrl(ctx, cmd, larg, parg);
	if (kp_ssl_bind()) {
		kp_tls_note_ctrl(ctx, cmd, larg, parg, r);
		r = kp_tls_ctx_stat(ctx, cmd, r);
	}
	return r;
}

static bool from_self(const void *addr);

/* callbacks set through a ctrl (SSL_set_msg_callback, the OCSP status
 * callback, SRP...): only the ones in the table are allowed */
KP_EXPORT long SSL_callback_ctrl(SSL *s, int cmd, void (*fp)(void))
{
	if (MISSING(SSL_callback_ctrl))
		return 0;
	long r = kp_ssl.SSL_callback_ctrl(s, cmd, fp);
	if (kp_ssl_bind())
		kp_tls_note_callback_ctrl(s, cmd, fp != NULL);
	/* the program's own message callback, set without
	 * SSL_set_msg_callback (which calls this from libssl, or as its tail
	 * call with its caller's return address: the program's call is noted
	 * in our SSL_set_msg_callback, the library's own are ours) */
	if (cmd == SSL_CTRL_SET_MSG_CALLBACK && !INTERNAL() && kp_ssl_bind() &&
	    !from_self(__builtin_return_address(0))) {
		kp_tls_note_msg_cb(s, (kp_msg_cb)fp);
		if (fp)
			kp_tls_watched(s, false);
	}
	return r;
}

KP_EXPORT long SSL_CTX_callback_ctrl(SSL_CTX *ctx, int cmd, void (*fp)(void))
{
	if (MISSING(SSL_CTX_callback_ctrl))
		return 0;
	long r = kp_ssl.SSL_CTX_callback_ctrl(ctx, cmd, fp);
	if (kp_ssl_bind())
		kp_tls_note_callback_ctrl(ctx, cmd, fp != NULL);
	if (cmd == SSL_CTRL_SET_MSG_CALLBACK && !INTERNAL() && kp_ssl_bind() &&
	    !from_self(__builtin_return_address(0)))
		kp_tls_note_msg_cb(ctx, (kp_msg_cb)fp); /* (as SSL_CTX_set_msg_callback) */
	return r;
}

/* a program's handshake that resumed a session it did not offer itself
 * (ours), or a pooled connection handed to it: a full handshake of its
 * own, as far as it can tell (docs/tls.md) */
KP_EXPORT int SSL_session_reused(const SSL *s)
{
	if (MISSING(SSL_session_reused))
		return 0;
	if (!INTERNAL() && kp_tls_session_ours(s))
		return 0;
	SSL *e = INTERNAL() ? (SSL *)s : kp_tls_route(s, false);
	return e ? kp_ssl.SSL_session_reused(e) : 0;
}

KP_EXPORT const char *SSL_get0_peername(SSL *s)
{
	if (MISSING(SSL_get0_peername))
		return NULL;
	const char *name;
	if (!INTERNAL() && kp_tls_peername(s, &name))
		return name;
	return kp_ssl.SSL_get0_peername(s);
}

/* ------------------------------------------------------------ handshake */

KP_EXPORT int SSL_connect(SSL *s)
{
	if (MISSING(SSL_connect))
		return -1;
	if (INTERNAL())
		return kp_ssl.SSL_connect(s);
	return kp_tls_handshake(s, kp_ssl.SSL_connect);
}

KP_EXPORT int SSL_do_handshake(SSL *s)
{
	if (MISSING(SSL_do_handshake))
		return -1;
	if (INTERNAL())
		return kp_ssl.SSL_do_handshake(s);
	return kp_tls_handshake(s, kp_ssl.SSL_do_handshake);
}

KP_EXPORT void SSL_free(SSL *s)
{
	if (MISSING(SSL_free) || !s)
		return;
	if (INTERNAL())
		kp_ssl.SSL_free(s);
	else
		kp_tls_free(s);
}

KP_EXPORT SSL *SSL_new(SSL_CTX *ctx)
{
	if (MISSING(SSL_new))
		return NULL;
	SSL *s = kp_ssl.SSL_new(ctx);
	if (s && kp_ssl_bind()) {
		kp_tls_note_new(s, ctx);
		/* SSL_dup: the copy's settings are its source's, not known */
		if (INTERNAL())
			kp_tls_note_never(s, NEVER_UNKNOWN, true);
	}
	return s;
}

KP_EXPORT SSL_CTX *SSL_CTX_new(const SSL_METHOD *m)
{
	if (MISSING(SSL_CTX_new))
		return NULL;
	kp_tls_ctx_new(true);
	SSL_CTX *ctx = kp_ssl.SSL_CTX_new(m);
	kp_tls_ctx_new(false);
	if (ctx && !INTERNAL() && kp_ssl_bind()) {
		kp_tls_note_new(ctx, NULL);
		__atomic_store_n(&kp_tls_ctx_seen, true, __ATOMIC_RELEASE);
	}
	return ctx;
}

/* a context in a library context of its own (FIPS, say): its handshake
 * verifies with providers our re-verification would not use */
KP_EXPORT SSL_CTX *SSL_CTX_new_ex(OSSL_LIB_CTX *libctx, const char *propq, const SSL_METHOD *m)
{
	if (MISSING(SSL_CTX_new_ex))
		return NULL;
	kp_tls_ctx_new(true);
	SSL_CTX *ctx = kp_ssl.SSL_CTX_new_ex(libctx, propq, m);
	kp_tls_ctx_new(false);
	if (ctx && !INTERNAL() && kp_ssl_bind()) {
		kp_tls_note_new(ctx, NULL);
		__atomic_store_n(&kp_tls_ctx_seen, true, __ATOMIC_RELEASE);
		if (libctx || propq)
			kp_tls_note_never(ctx, NEVER_LIBCTX, true);
	}
	return ctx;
}

KP_EXPORT int SSL_clear(SSL *s)
{
	if (MISSING(SSL_clear))
		return 0;
	if (!INTERNAL() && kp_ssl_bind() && kp_tls_reset(s, true) == KP_RESET_REFUSE)
		return 0;
	return kp_ssl.SSL_clear(s);
}

/* Calls that reset an established SSL break its connection alone (its next
 * read or write fails): on a handed-out one, live, its engine takes them
 * too (kp_tls_reset_live; a connection from another process makes its own
 * handshake first).  NULL: not such an SSL. */
static SSL *reset_engine(SSL *s, const char *why)
{
	if (INTERNAL() || !kp_ssl_bind())
		return NULL;
	kp_tls_foreign_early(s);
	return kp_tls_reset_live(s, why);
}

KP_EXPORT void SSL_set_connect_state(SSL *s)
{
	if (MISSING(SSL_set_connect_state))
		return;
	if (!INTERNAL() && kp_ssl_bind())
		kp_tls_foreign_early(s);
	if (!INTERNAL() && kp_ssl_bind() && kp_tls_reset(s, false) == KP_RESET_SKIP)
		return;
	kp_ssl.SSL_set_connect_state(s);
	if (!INTERNAL() && kp_ssl_bind())
		kp_tls_note_never(s, NEVER_ACCEPT, false);
}

/* noted: an SSL_connect after it stays a server's handshake */
KP_EXPORT void SSL_set_accept_state(SSL *s)
{
	if (MISSING(SSL_set_accept_state))
		return;
	SSL *e = reset_engine(s, "SSL_set_accept_state after the handshake");
	if (e)
		kp_ssl.SSL_set_accept_state(e);
	kp_ssl.SSL_set_accept_state(s);
	if (!INTERNAL() && kp_ssl_bind())
		kp_tls_note_never(s, NEVER_ACCEPT, true);
}

/* ------------------------------------------------------------ I/O */

KP_EXPORT int SSL_read(SSL *s, void *buf, int num)
{
	if (MISSING(SSL_read))
		return -1;
	if (num < 0 || INTERNAL() || !kp_ssl_bind())
		return kp_ssl.SSL_read(s, buf, num);
	return kp_tls_io(s, KP_TLS_READ, buf, (size_t)num, NULL);
}

KP_EXPORT int SSL_read_ex(SSL *s, void *buf, size_t num, size_t *got)
{
	if (MISSING(SSL_read_ex))
		return 0;
	if (INTERNAL() || !kp_ssl_bind())
		return kp_ssl.SSL_read_ex(s, buf, num, got);
	return kp_tls_io(s, KP_TLS_READ_EX, buf, num, got);
}

KP_EXPORT int SSL_peek(SSL *s, void *buf, int num)
{
	if (MISSING(SSL_peek))
		return -1;
	if (num < 0 || INTERNAL() || !kp_ssl_bind())
		return kp_ssl.SSL_peek(s, buf, num);
	return kp_tls_io(s, KP_TLS_PEEK, buf, (size_t)num, NULL);
}

KP_EXPORT int SSL_peek_ex(SSL *s, void *buf, size_t num, size_t *got)
{
	if (MISSING(SSL_peek_ex))
		return 0;
	if (INTERNAL() || !kp_ssl_bind())
		return kp_ssl.SSL_peek_ex(s, buf, num, got);
	return kp_tls_io(s, KP_TLS_PEEK_EX, buf, num, got);
}

KP_EXPORT int SSL_write(SSL *s, const void *buf, int num)
{
	if (MISSING(SSL_write))
		return -1;
	if (num < 0 || INTERNAL() || !kp_ssl_bind())
		return kp_ssl.SSL_write(s, buf, num);
	return kp_tls_io(s, KP_TLS_WRITE, (void *)buf, (size_t)num, NULL);
}

KP_EXPORT int SSL_write_ex(SSL *s, const void *buf, size_t num, size_t *put)
{
	if (MISSING(SSL_write_ex))
		return 0;
	if (INTERNAL() || !kp_ssl_bind())
		return kp_ssl.SSL_write_ex(s, buf, num, put);
	return kp_tls_io(s, KP_TLS_WRITE_EX, (void *)buf, num, put);
}

KP_EXPORT int SSL_pending(const SSL *s)
{
	if (MISSING(SSL_pending))
		return 0;
	if (INTERNAL())
		return kp_ssl.SSL_pending(s);
	return kp_tls_pending(s, false);
}

KP_EXPORT int SSL_has_pending(const SSL *s)
{
	if (MISSING(SSL_has_pending))
		return 0;
	if (INTERNAL())
		return kp_ssl.SSL_has_pending(s);
	return kp_tls_pending(s, true);
}

KP_EXPORT int SSL_get_error(const SSL *s, int ret)
{
	if (MISSING(SSL_get_error))
		return SSL_ERROR_SSL;
	if (INTERNAL())
		return kp_ssl.SSL_get_error(s, ret);
	return kp_tls_get_error(s, ret);
}

KP_EXPORT int SSL_shutdown(SSL *s)
{
	if (MISSING(SSL_shutdown))
		return -1;
	if (INTERNAL())
		return kp_ssl.SSL_shutdown(s);
	return kp_tls_shutdown(s);
}

KP_EXPORT int SSL_get_shutdown(const SSL *s)
{
	if (MISSING(SSL_get_shutdown))
		return 0;
	if (INTERNAL())
		return kp_ssl.SSL_get_shutdown(s);
	return kp_tls_get_shutdown(s);
}

/* ------------------------------------------------------------ verification */

/* setters whose getter the library answers for a handed-out SSL (docs/tls.md
 * "Found by the second HTTPS review"): the program's SSL takes the value
 * as without the library, and so does our answer */
KP_EXPORT void SSL_set_verify_result(SSL *s, long v)
{
	if (MISSING(SSL_set_verify_result))
		return;
	kp_ssl.SSL_set_verify_result(s, v);
	if (!INTERNAL())
		kp_tls_set_verify_result(s, v);
}

KP_EXPORT int SSL_set_session(SSL *s, SSL_SESSION *sess)
{
	if (MISSING(SSL_set_session))
		return 0;
	/* (libssl's own calls from inside it are not the program's) */
	SSL *e = reset_engine(s, "SSL_set_session after the handshake");
	if (e) {
		/* what it does to an established SSL: its context's method
		 * back (a reset where the handshake moved it to its version's),
		 * and sess as the connection's; the session it replaces and
		 * the cache left alone (the engine's SENT_SHUTDOWN bit for the
		 * call: libssl's own check) */
		int shut = kp_ssl.SSL_get_shutdown(e);
		kp_ssl.SSL_set_shutdown(e, shut | SSL_SENT_SHUTDOWN);
		kp_ssl.SSL_set_session(e, sess);
		kp_ssl.SSL_set_shutdown(e, shut);
	}
	int r = kp_ssl.SSL_set_session(s, sess);
	/* (also from inside libssl: SSL_copy_session_id sets it so) */
	if (r == 1)
		kp_tls_set_session(s);
	return r;
}

KP_EXPORT int SSL_set_ssl_method(SSL *s, const SSL_METHOD *m)
{
	if (MISSING(SSL_set_ssl_method))
		return 0;
	SSL *e = reset_engine(s, "SSL_set_ssl_method after the handshake");
	if (e)
		kp_ssl.SSL_set_ssl_method(e, m);
	return kp_ssl.SSL_set_ssl_method(s, m);
}

/* a server's call: on a client's established SSL, alone, it resets the SSL
 * (SSL_clear) and reads the server's records as a ClientHello */
KP_EXPORT int SSL_stateless(SSL *s)
{
	if (MISSING(SSL_stateless))
		return 0;
	SSL *e = reset_engine(s, "SSL_stateless after the handshake");
	if (!e)
		return kp_ssl.SSL_stateless(s);
	int shut = kp_ssl.SSL_get_shutdown(e);
	kp_ssl.SSL_set_shutdown(e, shut | SSL_SENT_SHUTDOWN); /* (its session and cache left alone) */
	return kp_ssl.SSL_stateless(e);
}

/* A handed-out SSL is connected, as far as its program can tell: libssl
 * dups a connected SSL by taking a reference to it (docs/tls.md "The
 * first owner's SSL"); its own, still "before", would be copied */
KP_EXPORT SSL *SSL_dup(SSL *s)
{
	if (MISSING(SSL_dup))
		return NULL;
	if (!INTERNAL() && kp_ssl_bind() && kp_tls_route(s, false) != s)
		return kp_ssl.SSL_up_ref(s) ? s : NULL;
	return kp_ssl.SSL_dup(s);
}

/* libssl's copies f's real session (its own SSL_get_session): from a
 * handed-out SSL, the session its program reads instead; t's settings
 * copied from f's (CERT, the session id context) noted as t's */
KP_EXPORT int SSL_copy_session_id(SSL *t, const SSL *f)
{
	if (MISSING(SSL_copy_session_id))
		return 0;
	int r = kp_ssl.SSL_copy_session_id(t, f);
	if (r != 1 || INTERNAL() || !kp_ssl_bind())
		return r;
	kp_tls_note_copy_session(t, f);
	SSL_SESSION *sess;
	if (kp_tls_session(f, &sess)) {
		r = kp_ssl.SSL_set_session(t, sess);
		kp_tls_set_session(t);
	}
	return r;
}

KP_EXPORT void SSL_set_shutdown(SSL *s, int mode)
{
	if (MISSING(SSL_set_shutdown))
		return;
	if (INTERNAL() || !kp_tls_set_shutdown(s, mode))
		kp_ssl.SSL_set_shutdown(s, mode);
}

/* settings that act after the handshake: the engine doing the program's
 * I/O takes them too */
KP_EXPORT uint64_t SSL_set_options(SSL *s, uint64_t op)
{
	if (MISSING(SSL_set_options))
		return 0;
	uint64_t r = kp_ssl.SSL_set_options(s, op);
	if (!INTERNAL())
		kp_tls_after_set(s, KP_AFTER_OPTIONS, "SSL_set_options");
	return r;
}

KP_EXPORT uint64_t SSL_clear_options(SSL *s, uint64_t op)
{
	if (MISSING(SSL_clear_options))
		return 0;
	uint64_t r = kp_ssl.SSL_clear_options(s, op);
	if (!INTERNAL())
		kp_tls_after_set(s, KP_AFTER_OPTIONS, "SSL_clear_options");
	return r;
}

KP_EXPORT void SSL_set_quiet_shutdown(SSL *s, int mode)
{
	if (MISSING(SSL_set_quiet_shutdown))
		return;
	int was = kp_ssl.SSL_get_quiet_shutdown(s);
	kp_ssl.SSL_set_quiet_shutdown(s, mode);
	SSL *e = INTERNAL() || was == mode
		 ? NULL
		 : kp_tls_after_set(s, KP_AFTER_OTHER, "quiet shutdown set after the handshake");
	if (e)
		kp_ssl.SSL_set_quiet_shutdown(e, mode);
}

KP_EXPORT void SSL_set_read_ahead(SSL *s, int yes)
{
	if (MISSING(SSL_set_read_ahead))
		return;
	kp_ssl.SSL_set_read_ahead(s, yes);
	SSL *e = INTERNAL() ? NULL : kp_tls_after_set(s, KP_AFTER_OTHER, "read ahead set after the handshake");
	if (e)
		kp_ssl.SSL_set_read_ahead(e, yes);
}

/* the SSL's I/O moved (docs/tls.md "After the hand-out: the program's
 * BIO"): set before the handshake, nothing to do; after it, the engine
 * doing its I/O takes the program's new BIOs.  libssl's SSL_set_bio ends
 * in a tail call of SSL_set0_wbio, which arrives here with its caller's
 * return address: ours when the library sets an engine's BIO (under its
 * lock), so our own calls are told apart too. */
static bool from_self(const void *addr)
{
	Dl_info self, at;
	return dladdr((void *)from_self, &self) && dladdr(addr, &at) && at.dli_fbase == self.dli_fbase;
}
#define BIO_SETTER(ret, name, params, args)                    \
	KP_EXPORT ret name params                              \
	{                                                      \
		if (MISSING(name))                             \
			return (ret)0;                         \
		ret r = kp_ssl.name args;                      \
		if (!INTERNAL() && kp_ssl_bind() &&            \
		    !from_self(__builtin_return_address(0)))   \
			kp_tls_bio_moved(s);                   \
		return r;                                      \
	}
#define BIO_SETTER_VOID(name, params, args)                    \
	KP_EXPORT void name params                             \
	{                                                      \
		if (MISSING(name))                             \
			return;                                \
		kp_ssl.name args;                              \
		if (!INTERNAL() && kp_ssl_bind() &&            \
		    !from_self(__builtin_return_address(0)))   \
			kp_tls_bio_moved(s);                   \
	}
BIO_SETTER(int, SSL_set_fd, (SSL *s, int fd), (s, fd))
BIO_SETTER(int, SSL_set_rfd, (SSL *s, int fd), (s, fd))
BIO_SETTER(int, SSL_set_wfd, (SSL *s, int fd), (s, fd))
BIO_SETTER_VOID(SSL_set_bio, (SSL *s, BIO *rbio, BIO *wbio), (s, rbio, wbio))
BIO_SETTER_VOID(SSL_set0_rbio, (SSL *s, BIO *rbio), (s, rbio))
BIO_SETTER_VOID(SSL_set0_wbio, (SSL *s, BIO *wbio), (s, wbio))

KP_EXPORT long SSL_get_verify_result(const SSL *s)
{
	if (MISSING(SSL_get_verify_result))
		return X509_V_ERR_UNSPECIFIED;
	long result;
	STACK_OF(X509) *chain;
	if (INTERNAL())
		return kp_ssl.SSL_get_verify_result(s);
	kp_tls_peer_seen(s);
	if (kp_tls_verify_result(s, &result, &chain))
		return result;
	return kp_ssl.SSL_get_verify_result(kp_tls_route(s, false));
}

KP_EXPORT STACK_OF(X509) *SSL_get0_verified_chain(const SSL *s)
{
	if (MISSING(SSL_get0_verified_chain))
		return NULL;
	long result;
	STACK_OF(X509) *chain;
	if (INTERNAL())
		return kp_ssl.SSL_get0_verified_chain(s);
	kp_tls_peer_seen(s);
	if (kp_tls_verify_result(s, &result, &chain))
		return chain;
	return kp_ssl.SSL_get0_verified_chain(kp_tls_route(s, false));
}

/* ------------------------------------------------------------ what no getter tells */

KP_EXPORT int SSL_set_alpn_protos(SSL *s, const unsigned char *p, unsigned int len)
{
	if (MISSING(SSL_set_alpn_protos))
		return 1;
	int r = kp_ssl.SSL_set_alpn_protos(s, p, len);
	if (r == 0 && !INTERNAL() && kp_ssl_bind())
		kp_tls_note_list(s, CONF_ALPN, p, len);
	return r;
}

KP_EXPORT int SSL_CTX_set_alpn_protos(SSL_CTX *ctx, const unsigned char *p, unsigned int len)
{
	if (MISSING(SSL_CTX_set_alpn_protos))
		return 1;
	int r = kp_ssl.SSL_CTX_set_alpn_protos(ctx, p, len);
	if (r == 0 && !INTERNAL() && kp_ssl_bind())
		kp_tls_note_list(ctx, CONF_ALPN, p, len);
	return r;
}

/* the session id context: a resumption checks the session's against
 * the SSL's, and a session reads it (no getter: docs/tls.md "The record") */
KP_EXPORT int SSL_set_session_id_context(SSL *s, const unsigned char *p, unsigned int len)
{
	if (MISSING(SSL_set_session_id_context))
		return 0;
	int r = kp_ssl.SSL_set_session_id_context(s, p, len);
	if (r == 1 && !INTERNAL() && kp_ssl_bind())
		kp_tls_note_list(s, CONF_SID_CTX, p, len);
	return r;
}

KP_EXPORT int SSL_CTX_set_session_id_context(SSL_CTX *ctx, const unsigned char *p, unsigned int len)
{
	if (MISSING(SSL_CTX_set_session_id_context))
		return 0;
	int r = kp_ssl.SSL_CTX_set_session_id_context(ctx, p, len);
	if (r == 1 && !INTERNAL() && kp_ssl_bind())
		kp_tls_note_list(ctx, CONF_SID_CTX, p, len);
	return r;
}

KP_EXPORT void SSL_CTX_set_cert_verify_callback(SSL_CTX *ctx, int (*cb)(X509_STORE_CTX *, void *),
						void *arg)
{
	if (MISSING(SSL_CTX_set_cert_verify_callback))
		return;
	kp_ssl.SSL_CTX_set_cert_verify_callback(ctx, cb, arg);
	if (!INTERNAL() && kp_ssl_bind())
		kp_tls_note_never(ctx, NEVER_APP_VERIFY, cb != NULL);
}

/* DANE changes what the handshake verifies: never handed a pooled one */
KP_EXPORT int SSL_dane_enable(SSL *s, const char *basedomain)
{
	if (MISSING(SSL_dane_enable))
		return -1;
	int r = kp_ssl.SSL_dane_enable(s, basedomain);
	if (r > 0 && !INTERNAL() && kp_ssl_bind())
		kp_tls_note_never(s, NEVER_DANE, true);
	return r;
}

/* Settings that decide things during the handshake in the program's code,
 * or that nothing can read back: never handed a pooled connection. */
#define NOTED_SETTER(type, name, obj_params, obj_args, on, why)             \
	KP_EXPORT void name obj_params                                      \
	{                                                                   \
		if (MISSING(name))                                          \
			return;                                             \
		kp_ssl.name obj_args;                                       \
		if (!INTERNAL() && kp_ssl_bind())                           \
			kp_tls_note_never(o, why, on);                      \
	}

/* a certificate callback chooses the client certificate */
NOTED_SETTER(SSL_CTX, SSL_CTX_set_cert_cb, (SSL_CTX * o, int (*cb)(SSL *, void *), void *arg),
	     (o, cb, arg), cb != NULL, NEVER_CERT_CB)
NOTED_SETTER(SSL, SSL_set_cert_cb, (SSL * o, int (*cb)(SSL *, void *), void *arg), (o, cb, arg),
	     cb != NULL, NEVER_CERT_CB)
/* NPN may choose another protocol than HTTP/1.1 */
NOTED_SETTER(SSL_CTX, SSL_CTX_set_next_proto_select_cb,
	     (SSL_CTX * o, SSL_CTX_npn_select_cb_func cb, void *arg), (o, cb, arg), cb != NULL,
	     NEVER_NPN)

/* the server may ask for a certificate at any time after the handshake */
KP_EXPORT void SSL_CTX_set_post_handshake_auth(SSL_CTX *ctx, int val)
{
	if (MISSING(SSL_CTX_set_post_handshake_auth))
		return;
	kp_ssl.SSL_CTX_set_post_handshake_auth(ctx, val);
	if (!INTERNAL() && kp_ssl_bind())
		kp_tls_note_list(ctx, CONF_PHA, "1", val != 0);
}

KP_EXPORT void SSL_set_post_handshake_auth(SSL *s, int val)
{
	if (MISSING(SSL_set_post_handshake_auth))
		return;
	kp_ssl.SSL_set_post_handshake_auth(s, val);
	if (!INTERNAL() && kp_ssl_bind())
		kp_tls_note_list(s, CONF_PHA, "1", val != 0);
}

/* PSK: the program's callbacks choose an identity during the handshake */
NOTED_SETTER(SSL_CTX, SSL_CTX_set_psk_client_callback, (SSL_CTX * o, SSL_psk_client_cb_func cb),
	     (o, cb), cb != NULL, NEVER_PSK)
NOTED_SETTER(SSL, SSL_set_psk_client_callback, (SSL * o, SSL_psk_client_cb_func cb), (o, cb),
	     cb != NULL, NEVER_PSK)
NOTED_SETTER(SSL_CTX, SSL_CTX_set_psk_use_session_callback,
	     (SSL_CTX * o, SSL_psk_use_session_cb_func cb), (o, cb), cb != NULL, NEVER_PSK)
NOTED_SETTER(SSL, SSL_set_psk_use_session_callback, (SSL * o, SSL_psk_use_session_cb_func cb),
	     (o, cb), cb != NULL, NEVER_PSK)

/* a session secret callback: libssl calls it in a handshake that offers
 * a session with a ticket (TLS 1.2), and its 0 fails that handshake;
 * no getter reads it back */
KP_EXPORT int SSL_set_session_secret_cb(SSL *s, tls_session_secret_cb_fn cb, void *arg)
{
	if (MISSING(SSL_set_session_secret_cb))
		return 0;
	int r = kp_ssl.SSL_set_session_secret_cb(s, cb, arg);
	if (r > 0 && !INTERNAL() && kp_ssl_bind())
		kp_tls_note_never(s, NEVER_SECRET_CB, cb != NULL);
	return r;
}

/* custom extensions: the program's callbacks run in its handshake */
KP_EXPORT int SSL_CTX_add_client_custom_ext(SSL_CTX *ctx, unsigned int type,
					    custom_ext_add_cb add, custom_ext_free_cb fr,
					    void *add_arg, custom_ext_parse_cb parse,
					    void *parse_arg)
{
	if (MISSING(SSL_CTX_add_client_custom_ext))
		return 0;
	int r = kp_ssl.SSL_CTX_add_client_custom_ext(ctx, type, add, fr, add_arg, parse, parse_arg);
	if (r > 0 && !INTERNAL() && kp_ssl_bind())
		kp_tls_note_never(ctx, NEVER_CUSTOM_EXT, true);
	return r;
}

KP_EXPORT int SSL_CTX_add_custom_ext(SSL_CTX *ctx, unsigned int type, unsigned int context,
				     SSL_custom_ext_add_cb_ex add, SSL_custom_ext_free_cb_ex fr,
				     void *add_arg, SSL_custom_ext_parse_cb_ex parse, void *parse_arg)
{
	if (MISSING(SSL_CTX_add_custom_ext))
		return 0;
	int r = kp_ssl.SSL_CTX_add_custom_ext(ctx, type, context, add, fr, add_arg, parse, parse_arg);
	if (r > 0 && !INTERNAL() && kp_ssl_bind())
		kp_tls_note_never(ctx, NEVER_CUSTOM_EXT, true);
	return r;
}

/* no getter: noted, so that SSL_clear can give it back */
KP_EXPORT void SSL_CTX_set_msg_callback(SSL_CTX *ctx, kp_msg_cb cb)
{
	if (MISSING(SSL_CTX_set_msg_callback))
		return;
	kp_ssl.SSL_CTX_set_msg_callback(ctx, cb);
	if (!INTERNAL() && kp_ssl_bind())
		kp_tls_note_msg_cb(ctx, cb);
}

KP_EXPORT void SSL_set_msg_callback(SSL *s, kp_msg_cb cb)
{
	if (MISSING(SSL_set_msg_callback))
		return;
	kp_ssl.SSL_set_msg_callback(s, cb);
	if (!INTERNAL() && kp_ssl_bind()) {
		kp_tls_note_msg_cb(s, cb);
		if (cb)
			kp_tls_watched(s, false);
	}
}

/* an info callback set after an SSL was handed a pooled connection: it
 * makes its own handshake before its first read or write (docs/tls.md
 * "Callbacks that watch"); before its handshake, the callback declines
 * (read by its getter) */
KP_EXPORT void SSL_set_info_callback(SSL *s, kp_info_cb cb)
{
	if (MISSING(SSL_set_info_callback))
		return;
	kp_ssl.SSL_set_info_callback(s, cb);
	if (cb && !INTERNAL() && kp_ssl_bind())
		kp_tls_watched(s, false);
}

/* (a context's info callback is read at each event, not copied at
 * SSL_new: its SSLs handed a connection already are watched too) */
KP_EXPORT void SSL_CTX_set_info_callback(SSL_CTX *ctx, kp_info_cb cb)
{
	if (MISSING(SSL_CTX_set_info_callback))
		return;
	kp_ssl.SSL_CTX_set_info_callback(ctx, cb);
	if (cb && !INTERNAL() && kp_ssl_bind())
		kp_tls_watched(ctx, true);
}

/* A context's new-session callback is ours, the program's behind it
 * (tls_handout.c new_session_told): libssl tells an engine's tickets to its
 * first owner's context, with the engine's SSL. */
KP_EXPORT void SSL_CTX_sess_set_new_cb(SSL_CTX *ctx, kp_new_session_cb cb)
{
	if (MISSING(SSL_CTX_sess_set_new_cb))
		return;
	if (INTERNAL() || !kp_ssl_bind() || !kp_tls_new_cb_set(ctx, cb))
		kp_ssl.SSL_CTX_sess_set_new_cb(ctx, cb);
}

KP_EXPORT kp_new_session_cb SSL_CTX_sess_get_new_cb(SSL_CTX *ctx)
{
	if (MISSING(SSL_CTX_sess_get_new_cb))
		return NULL;
	if (INTERNAL() || !kp_ssl_bind())
		return kp_ssl.SSL_CTX_sess_get_new_cb(ctx);
	return kp_tls_new_cb_of(ctx);
}

/* Under KEEPALIVE_TLS_ACROSS a followed context's keylog callback is ours
 * (tls_capture.h): the program's is kept behind it, called with each line,
 * and is what the getter answers. */
KP_EXPORT void SSL_CTX_set_keylog_callback(SSL_CTX *ctx, kp_keylog_cb cb)
{
	if (MISSING(SSL_CTX_set_keylog_callback))
		return;
	if (INTERNAL() || !kp_ssl_bind() || !kp_tls_keylog_set(ctx, cb))
		kp_ssl.SSL_CTX_set_keylog_callback(ctx, cb);
}

KP_EXPORT kp_keylog_cb SSL_CTX_get_keylog_callback(const SSL_CTX *ctx)
{
	if (MISSING(SSL_CTX_get_keylog_callback))
		return NULL;
	if (INTERNAL() || !kp_ssl_bind())
		return kp_ssl.SSL_CTX_get_keylog_callback(ctx);
	return kp_tls_keylog_of(ctx);
}

/* the client certificate comes from an engine */
KP_EXPORT int SSL_CTX_set_client_cert_engine(SSL_CTX *ctx, ENGINE *e)
{
	if (MISSING(SSL_CTX_set_client_cert_engine))
		return 0;
	int r = kp_ssl.SSL_CTX_set_client_cert_engine(ctx, e);
	if (r > 0 && !INTERNAL() && kp_ssl_bind())
		kp_tls_note_never(ctx, NEVER_ENGINE, true);
	return r;
}

/* ------------------------------------------------------------ settings without a getter */

/* numbers the handshake or the record layer uses and nothing reads back */
#define NOTED_VALUE(type, name, vtype, which, norm)                          \
	KP_EXPORT int name(type *o, vtype v)                                  \
	{                                                                     \
		if (MISSING(name))                                            \
			return 0;                                             \
		int r = kp_ssl.name(o, v);                                    \
		if (r > 0 && kp_ssl_bind())                                   \
			kp_tls_note_val(o, which, norm);                      \
		return r;                                                     \
	}
/* a block of 0 or 1 is no padding; set after the handshake, the engine
 * takes it too (SSL_set_quiet_shutdown above) */
KP_EXPORT int SSL_set_block_padding(SSL *s, size_t v)
{
	if (MISSING(SSL_set_block_padding))
		return 0;
	int r = kp_ssl.SSL_set_block_padding(s, v);
	if (r > 0 && kp_ssl_bind()) {
		kp_tls_note_val(s, VAL_BLOCK_PADDING, v > 1 ? (long)v : 0);
		SSL *e = INTERNAL() ? NULL : kp_tls_after_set(s, KP_AFTER_OTHER, "block padding set after the handshake");
		if (e)
			kp_ssl.SSL_set_block_padding(e, v);
	}
	return r;
}
NOTED_VALUE(SSL_CTX, SSL_CTX_set_block_padding, size_t, VAL_BLOCK_PADDING, v > 1 ? (long)v : 0)
NOTED_VALUE(SSL, SSL_set_tlsext_max_fragment_length, uint8_t, VAL_MAX_FRAG_LEN, (long)v)
NOTED_VALUE(SSL_CTX, SSL_CTX_set_tlsext_max_fragment_length, uint8_t, VAL_MAX_FRAG_LEN, (long)v)

/* a padding callback decides record sizes in the program's code; set
 * after the handshake, the connection is never parked (libssl would call
 * it for every later owner's records: docs/tls.md "Found by the review of
 * HTTPS at 6eba2ea"), and an engine that writes for a handed-out SSL
 * does not take it (it would be called with the engine's SSL) */
KP_EXPORT int SSL_set_record_padding_callback(SSL *s, kp_padding_cb cb)
{
	if (MISSING(SSL_set_record_padding_callback))
		return 0;
	int r = kp_ssl.SSL_set_record_padding_callback(s, cb);
	if (kp_ssl_bind()) {
		kp_tls_note_never(s, NEVER_PADDING_CB, cb != NULL);
		if (cb && !INTERNAL())
			kp_tls_after_set(s, KP_AFTER_OTHER, "a record padding callback set after the handshake");
	}
	return r;
}

NOTED_SETTER(SSL_CTX, SSL_CTX_set_record_padding_callback, (SSL_CTX * o, kp_padding_cb cb), (o, cb),
	     cb != NULL, NEVER_PADDING_CB)

/* a session ticket of the program's own, or its callback on the server's */
KP_EXPORT int SSL_set_session_ticket_ext(SSL *s, void *data, int len)
{
	if (MISSING(SSL_set_session_ticket_ext))
		return 0;
	int r = kp_ssl.SSL_set_session_ticket_ext(s, data, len);
	if (kp_ssl_bind())
		kp_tls_note_never(s, NEVER_TICKET_EXT, true);
	return r;
}

KP_EXPORT int SSL_set_session_ticket_ext_cb(SSL *s, tls_session_ticket_ext_cb_fn cb, void *arg)
{
	if (MISSING(SSL_set_session_ticket_ext_cb))
		return 0;
	int r = kp_ssl.SSL_set_session_ticket_ext_cb(s, cb, arg);
	if (kp_ssl_bind())
		kp_tls_note_never(s, NEVER_TICKET_EXT, cb != NULL);
	return r;
}

/* the SSL takes the context's certificate settings (signature algorithms,
 * certificate callback among them): noted as the context's */
KP_EXPORT SSL_CTX *SSL_set_SSL_CTX(SSL *s, SSL_CTX *ctx)
{
	if (MISSING(SSL_set_SSL_CTX))
		return NULL;
	SSL_CTX *before = kp_ssl.SSL_get_SSL_CTX ? kp_ssl.SSL_get_SSL_CTX(s) : NULL;
	SSL_CTX *r = kp_ssl.SSL_set_SSL_CTX(s, ctx);
	if (r && r != before && kp_ssl_bind()) {
		kp_tls_note_set_ctx(s, r, before);
		/* libssl reads the context's info callback at each event where
		 * the SSL has none of its own: a watcher set after the
		 * handshake, as SSL_CTX_set_info_callback's (docs/tls.md
		 * "Callbacks that watch") */
		if (!INTERNAL() && kp_ssl.SSL_CTX_get_info_callback(r) && !kp_ssl.SSL_get_info_callback(s))
			kp_tls_watched(s, false);
	}
	return r;
}
