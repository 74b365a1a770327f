/*
 * tls_real.c - bind the real libssl 3 and libcrypto 3 functions, lazily.
 */
#include "tls_real.h"
#include "dl_real.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdbool.h>

#include "config.h"
#include "tls.h"
/* the table's fields, not the names mapped onto it */
#define KP_TLS_CRYPTO_NAMES
#include "tls_crypto.h"

struct kp_ssl_table kp_ssl;

uintptr_t kp_libssl_lo, kp_libssl_hi;

static pthread_once_t bind_once = PTHREAD_ONCE_INIT;

/* the executable segment of the object loaded at t->base */
struct text {
	void *base;
	uintptr_t lo, hi;
};
static int find_text(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct text *t = arg;
	if ((void *)info->dlpi_addr != t->base)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			t->lo = info->dlpi_addr + ph->p_vaddr;
			t->hi = t->lo + ph->p_memsz;
			return 1;
		}
	}
	return 1;
}

bool kp_text_of(const void *fn, uintptr_t *lo, uintptr_t *hi)
{
	Dl_info di;
	struct text t = { 0 };
	if (dladdr(fn, &di) && di.dli_fbase) {
		t.base = di.dli_fbase;
		dl_iterate_phdr(find_text, &t);
	}
	*lo = t.lo;
	*hi = t.hi;
	return t.hi && (uintptr_t)fn - t.lo < t.hi - t.lo;
}
static bool bound_all;

#define OSSL_VERSION "OPENSSL_3.0.0"

/* libc's dlopen, not our export (hooks_dl.c): nothing below the hooks
 * calls the library's own wrappers (docs/structure.md).  glibc's dlopen
 * reads its caller's address for the namespace: this file's either way. */
static void *real_dlopen(const char *soname, int flags)
{
	void *(*f)(const char *, int);
	*(void **)&f = kp_dl_sym(RTLD_NEXT, "dlopen");
	return f ? f(soname, flags) : NULL;
}

/* RTLD_NEXT first (libssl in the global scope: curl, Ruby); else the copy
 * that is loaded, in whatever scope (CPython loads _ssl RTLD_LOCAL). */
static void *find(const char *name, const char *soname, void **handle)
{
	void *p = kp_dl_vsym(RTLD_NEXT, name, OSSL_VERSION);
	if (p)
		return p;
	if (!*handle)
		*handle = real_dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
	return *handle ? kp_dl_vsym(*handle, name, OSSL_VERSION) : NULL;
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
	/* the record layer's libcrypto (tls_crypto.h), from the same copy */
#define KP_TLS_BIND(name)                                                         \
	*(void **)&tlsrec_crypto.name = find(#name, "libcrypto.so.3", &crypto);     \
	ok = ok && tlsrec_crypto.name;
	KP_RECORD_CRYPTO_FUNCS(KP_TLS_BIND)
#undef KP_TLS_BIND
	uintptr_t lo = 0, hi = 0;
	if (kp_ssl.SSL_read && kp_text_of(*(void **)&kp_ssl.SSL_read, &lo, &hi)) {
		kp_libssl_lo = lo;
		kp_libssl_hi = hi;
	}
	bound_all = ok && kp_libssl_hi;
	if (!ok)
		kp_warn("libssl 3 functions missing: HTTPS connections are left alone");
}

bool kp_ssl_bind(void)
{
	pthread_once(&bind_once, bind_all);
	return bound_all;
}

bool kp_tls_linked;

void kp_tls_start(void)
{
	if (!kp_cfg.tls_across)
		return;
	void *h = real_dlopen("libssl.so.3", RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return;
	__atomic_store_n(&kp_tls_linked, kp_ssl_bind(), __ATOMIC_RELEASE);
	dlclose(h);
}
