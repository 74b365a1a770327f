/*
 * inline_aio_plugin_get - tests/clients/inline_aio_get.c with its AIO
 * library opened by dlopen() at the first io_setup and reached through
 * the pointers the library's constructor registers: no dlsym, no import
 * (build/clients/libinline_aio_plugin.so, next to this program).
 * Usage: inline_aio_plugin_get HOST PORT N
 */
#include <dlfcn.h>
#include <limits.h>
#include <linux/aio_abi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int (*p_setup)(unsigned, aio_context_t *);
static int (*p_submit)(aio_context_t, long, struct iocb **);
static int (*p_getevents)(aio_context_t, long, long, struct io_event *, struct timespec *);

/* called by the plugin's constructor, inside dlopen */
void inline_aio_register(void *setup, void *submit, void *getevents)
{
	*(void **)&p_setup = setup;
	*(void **)&p_submit = submit;
	*(void **)&p_getevents = getevents;
}

static int plugin_setup(unsigned nr, aio_context_t *ctx)
{
	char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 32);
	if (n <= 0)
		return -1;
	path[n] = 0;
	strcpy(strrchr(path, '/') + 1, "libinline_aio_plugin.so");
	if (!dlopen(path, RTLD_NOW | RTLD_LOCAL) || !p_setup)
		return -1;
	return p_setup(nr, ctx);
}

static int plugin_submit(aio_context_t ctx, long n, struct iocb **iocbs)
{
	return p_submit(ctx, n, iocbs);
}

static int plugin_getevents(aio_context_t ctx, long min, long max, struct io_event *ev, struct timespec *t)
{
	return p_getevents(ctx, min, max, ev, t);
}

#define io_setup plugin_setup
#define io_submit plugin_submit
#define io_getevents plugin_getevents
#include "inline_aio_get.c"
