/*
 * dl_real.c - see dl_real.h.  glibc's dlsym is found with glibc's dlvsym,
 * bound under a version our own dlvsym does not answer.  Never built with a sanitizer (Makefile): our
 * dlsym runs this before the sanitizers' runtimes are set up.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>

#include "dl_real.h"

static void *real_dlsym;
static int ssl_bio_named;
static int session_named;

/* glibc's dlvsym, under its first version: the library exports dlvsym as
 * GLIBC_2.34 (shim/exports.map; hooks_dl.c), which a reference to
 * GLIBC_2.2.5 never binds to, so the dynamic linker takes libc's (the
 * same function) for ours */
extern void *kp_glibc_dlvsym(void *, const char *, const char *);
__asm__(".symver kp_glibc_dlvsym, dlvsym@GLIBC_2.2.5");

void *kp_dl_vsym(void *handle, const char *name, const char *version)
{
	return kp_glibc_dlvsym(handle, name, version);
}

void *kp_dl_real_dlsym(void)
{
	void *p = __atomic_load_n(&real_dlsym, __ATOMIC_ACQUIRE);
	if (!p) {
		p = kp_dl_vsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
		if (!p)
			p = kp_dl_vsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
		__atomic_store_n(&real_dlsym, p, __ATOMIC_RELEASE);
	}
	return p;
}

void *kp_dl_sym(void *handle, const char *name)
{
	void *(*f)(void *, const char *);
	*(void **)&f = kp_dl_real_dlsym();
	return f ? f(handle, name) : NULL;
}

void *kp_dl_open(const char *file, int mode)
{
	void *(*f)(const char *, int);
	*(void **)&f = kp_dl_sym(RTLD_NEXT, "dlopen");
	return f ? f(file, mode) : NULL;
}

/* The functions that see past a hand-out (docs/tls.md "BIO_f_ssl"): the
 * SSL BIO filter reads the program's SSL from inside libssl; the BIO
 * counters count what the program's own BIO carried (0 on a handed-out
 * SSL), and a BIO callback set on it would see no traffic.  And what a
 * fresh handshake would make new (docs/tls.md "The first owner's
 * handshake values"): the randoms, the keying-material exporter, and what
 * shows a session (kp_dl_shows_session) of a handed-out connection are
 * its first owner's.  (Info callbacks set after the handshake are not
 * here: the programs and tests that import their setters set them before
 * it, which declines already; nor SSL_get_finished, which CPython
 * imports: docs/tls.md.  i2d_SSL_SESSION is, but CPython's _ssl, which
 * imports it to copy a session and shows no byte of it, is told apart by
 * the caller: shim/tls_handout.c.) */
/* (no libc string calls: the sanitizers' runtimes intercept them, and
 * their dlsym lookups come here before they are set up) */
static bool same(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

/* What shows a session's ticket or master key (or carries them out whole,
 * i2d_SSL_SESSION), which a hand-out shares with its first owner's and a
 * session of ours resumed with the session it came from, where the
 * program's own full handshake makes them new (docs/tls.md "What a session
 * shows") */
bool kp_dl_shows_session(const char *name)
{
	static const char *const ssl[] = { "SSL_SESSION_get_master_key", "SSL_SESSION_get0_ticket",
					   "SSL_SESSION_print_keylog", "SSL_SESSION_print", "SSL_SESSION_print_fp" };
	static const char *const pem[] = { "PEM_write_SSL_SESSION", "PEM_write_bio_SSL_SESSION" };
	if (!name || name[0] == 0 || name[1] == 0 || name[2] == 0 || name[3] != '_')
		return false;
	if (name[0] == 'i')
		return same(name, "i2d_SSL_SESSION");
	const char *const *list = name[0] == 'P' && name[1] == 'E' && name[2] == 'M' ? pem
				  : name[0] == 'S' && name[1] == 'S' && name[2] == 'L' ? ssl
											  : NULL;
	size_t n = list == pem ? sizeof(pem) / sizeof(*pem) : sizeof(ssl) / sizeof(*ssl);
	for (size_t i = 0; list && i < n; i++)
		if (same(name, list[i]))
			return true;
	return false;
}

bool kp_dl_sees_past(const char *name)
{
	static const char *const bio[] = { "BIO_f_ssl",	      "BIO_new_ssl",
					   "BIO_new_ssl_connect", "BIO_new_buffer_ssl_connect",
					   "BIO_number_read",	      "BIO_number_written",
					   "BIO_set_callback",	      "BIO_set_callback_ex" };
	/* (the method and the list of suites it supports: a handshake moves
	 * the SSL to its version's method, which a handed-out SSL, having made
	 * none, never reaches, docs/tls.md "The first owner's handshake values";
	 * SSL_sendfile writes through the kernel's TLS, which a handed-out
	 * SSL's handshake never set up: not wrapped) */
	static const char *const ssl[] = { "SSL_get_client_random",	 "SSL_get_server_random",
					   "SSL_export_keying_material", "SSL_export_keying_material_early",
					   "SSL_get_ssl_method",	 "SSL_get1_supported_ciphers",
					   "SSL_sendfile" };
	if (kp_dl_shows_session(name))
		return true;
	if (!name || name[0] == 0 || name[1] == 0 || name[2] == 0 || name[3] != '_')
		return false;
	if (name[0] == 'B' && name[1] == 'I' && name[2] == 'O') {
		for (size_t i = 0; i < sizeof(bio) / sizeof(*bio); i++)
			if (same(name, bio[i]))
				return true;
	} else if (name[0] == 'S' && name[1] == 'S' && name[2] == 'L') {
		for (size_t i = 0; i < sizeof(ssl) / sizeof(*ssl); i++)
			if (same(name, ssl[i]))
				return true;
	}
	return false;
}

void kp_dl_note_name(const char *name)
{
	if (kp_dl_shows_session(name))
		__atomic_store_n(&session_named, 1, __ATOMIC_RELEASE);
	if (kp_dl_sees_past(name))
		__atomic_store_n(&ssl_bio_named, 1, __ATOMIC_RELEASE);
}

int kp_dl_ssl_bio_named(void)
{
	return __atomic_load_n(&ssl_bio_named, __ATOMIC_ACQUIRE);
}

int kp_dl_session_named(void)
{
	return __atomic_load_n(&session_named, __ATOMIC_ACQUIRE);
}

static void (*on_lookup)(void);
static void (*on_open)(void);

void kp_dl_watch(void (*fn)(void))
{
	__atomic_store_n(&on_lookup, fn, __ATOMIC_RELEASE);
}

void kp_dl_watch_open(void (*fn)(void))
{
	__atomic_store_n(&on_open, fn, __ATOMIC_RELEASE);
}

/* the program calls dlopen (shim/hooks_dl.c, before the tail jump to the
 * real one): the watcher looks at what earlier calls opened, then hears
 * of this one */
void kp_dlopen_note(void)
{
	void (*fn)(void) = __atomic_load_n(&on_lookup, __ATOMIC_ACQUIRE);
	if (fn)
		fn();
	fn = __atomic_load_n(&on_open, __ATOMIC_ACQUIRE);
	if (fn)
		fn();
}

/* called by our dlsym (shim/hooks_dl.c) with the program's name: notes
 * it, lets the watcher look (only once our constructor set one: the
 * sanitizers' runtimes call dlsym before they are set up), answers the
 * real dlsym for the tail jump */
__attribute__((used, visibility("hidden"))) void *kp_dlsym_note(const char *name)
{
	kp_dl_note_name(name);
	void (*fn)(void) = __atomic_load_n(&on_lookup, __ATOMIC_ACQUIRE);
	if (fn)
		fn();
	return kp_dl_real_dlsym();
}

/* the same for our dlvsym: answers glibc's dlvsym */
__attribute__((used, visibility("hidden"))) void *kp_dlvsym_note(const char *name)
{
	kp_dl_note_name(name);
	void (*fn)(void) = __atomic_load_n(&on_lookup, __ATOMIC_ACQUIRE);
	if (fn)
		fn();
	return (void *)kp_glibc_dlvsym;
}
