/*
 * dl_real.c - see dl_real.h.  glibc's dlsym is found with dlvsym, which
 * the library does not wrap.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <string.h>

#include "dl_real.h"

static void *real_dlsym;
static int ssl_bio_named;

void *kp_dl_real_dlsym(void)
{
	void *p = __atomic_load_n(&real_dlsym, __ATOMIC_ACQUIRE);
	if (!p) {
		p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
		if (!p)
			p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
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
 * SSL).  (Info callbacks set after the handshake are not here: the
 * programs and tests that import their setters set them before it, which
 * declines already; docs/tls.md.) */
bool kp_dl_sees_past(const char *name)
{
	static const char *const names[] = { "BIO_f_ssl",	  "BIO_new_ssl",
					     "BIO_new_ssl_connect", "BIO_new_buffer_ssl_connect",
					     "BIO_number_read",	  "BIO_number_written" };
	if (!name || strncmp(name, "BIO_", 4))
		return false;
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
		if (!strcmp(name, names[i]))
			return true;
	return false;
}

void kp_dl_note_name(const char *name)
{
	if (kp_dl_sees_past(name))
		__atomic_store_n(&ssl_bio_named, 1, __ATOMIC_RELEASE);
}

int kp_dl_ssl_bio_named(void)
{
	return __atomic_load_n(&ssl_bio_named, __ATOMIC_ACQUIRE);
}
