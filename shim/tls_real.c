/*
 * tls_real.c - bind the real libssl 3 and libcrypto 3 functions, lazily.
 */
#include "tls_real.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>

#include "config.h"

struct kp_ssl_table kp_ssl;

static pthread_once_t bind_once = PTHREAD_ONCE_INIT;
static bool bound_all;

#define OSSL_VERSION "OPENSSL_3.0.0"

/* RTLD_NEXT first (libssl in the global scope: curl, Ruby); else the copy
 * that is loaded, in whatever scope (CPython loads _ssl RTLD_LOCAL). */
static void *find(const char *name, const char *soname, void **handle)
{
	void *p = dlvsym(RTLD_NEXT, name, OSSL_VERSION);
	if (p)
		return p;
	if (!*handle)
		*handle = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
	return *handle ? dlvsym(*handle, name, OSSL_VERSION) : NULL;
}

static void bind_all(void)
{
	void *ssl = NULL, *crypto = NULL;
	bool ok = true;
#define KP_TLS_BIND(ret, name, args)                                         \
	*(void **)&kp_ssl.name = find(#name, "libssl.so.3", &ssl);          \
	ok = ok && kp_ssl.name;
	KP_SSL_FUNCS(KP_TLS_BIND)
#undef KP_TLS_BIND
#define KP_TLS_BIND(ret, name, args)                                         \
	*(void **)&kp_ssl.name = find(#name, "libcrypto.so.3", &crypto);    \
	ok = ok && kp_ssl.name;
	KP_CRYPTO_FUNCS(KP_TLS_BIND)
#undef KP_TLS_BIND
	bound_all = ok;
	if (!ok)
		kp_warn("libssl 3 functions missing: HTTPS connections are left alone");
}

bool kp_ssl_bind(void)
{
	pthread_once(&bind_once, bind_all);
	return bound_all;
}
