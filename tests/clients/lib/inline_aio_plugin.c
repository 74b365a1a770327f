/*
 * inline_aio_plugin.c - libinline_aio.so as a plugin: opened with dlopen(),
 * its constructor hands its functions to the program that opened it
 * (inline_aio_register, which that program exports), so the program never
 * calls dlsym.  Built as build/clients/libinline_aio_plugin.so for
 * tests/clients/inline_aio_plugin_get.c (docs/replay.md, "Kernel AIO").
 */
#include "inline_aio.c"

void inline_aio_register(void *setup, void *submit, void *getevents);

__attribute__((constructor)) static void plugin_init(void)
{
	inline_aio_register((void *)io_setup, (void *)io_submit, (void *)io_getevents);
}
