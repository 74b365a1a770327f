/*
 * dl_real.c - see dl_real.h.  glibc's dlsym is found with dlvsym, which
 * the library does not wrap.
 */
#include <dlfcn.h>
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

void kp_dl_note_name(const char *name)
{
	static const char *const names[] = { "BIO_f_ssl", "BIO_new_ssl", "BIO_new_ssl_connect",
					     "BIO_new_buffer_ssl_connect" };
	if (!name || strncmp(name, "BIO_", 4))
		return;
	for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
		if (!strcmp(name, names[i]))
			__atomic_store_n(&ssl_bio_named, 1, __ATOMIC_RELEASE);
}

int kp_dl_ssl_bio_named(void)
{
	return __atomic_load_n(&ssl_bio_named, __ATOMIC_ACQUIRE);
}
