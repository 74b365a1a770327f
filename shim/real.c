/*
 * real.c - bind the real libc functions once.
 */
#include "real.h"

#include <dlfcn.h>
#include <pthread.h>

struct kp_real_table kp_real;

static pthread_once_t bind_once = PTHREAD_ONCE_INIT;

static void bind_all(void)
{
	/* dlsym returns void *; the cast through the field's type is the POSIX way */
#define KP_REAL_BIND(ret, name, args) *(void **)&kp_real.name = dlsym(RTLD_NEXT, #name);
	KP_REAL_FUNCS(KP_REAL_BIND)
#undef KP_REAL_BIND
}

void kp_real_bind(void)
{
	pthread_once(&bind_once, bind_all);
}
