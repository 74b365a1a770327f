/*
 * dl_real.h - the dynamic linker's lookups, unwrapped.  The library exports
 * dlsym (hooks_dl.c, docs/tls.md "BIO_f_ssl"); its own lookups go to the
 * real one through here (docs/structure.md: no object calls our exports).
 */
#ifndef KP_DL_REAL_H
#define KP_DL_REAL_H

#include <stdbool.h>

/* glibc's dlsym; RTLD_NEXT from here is the object after ours */
void *kp_dl_sym(void *handle, const char *name);
/* glibc's dlvsym (the library exports its own: hooks_dl.c) */
void *kp_dl_vsym(void *handle, const char *name, const char *version);
/* glibc's dlopen, called from our library */
void *kp_dl_open(const char *file, int mode);
/* the address of glibc's dlsym (NULL: none) */
void *kp_dl_real_dlsym(void);
/* name is a function that sees past a hand-out (the BIO_f_ssl family,
 * the BIO counters, the randoms, the exporter, what shows a session) */
bool kp_dl_sees_past(const char *name);
/* name shows a session's ticket or master key, or its bytes
 * (i2d_SSL_SESSION): a session of ours is not offered either */
bool kp_dl_shows_session(const char *name);
/* dlsym was asked for name: notes those */
void kp_dl_note_name(const char *name);
/* fn runs at each dlsym of the program, before the lookup (set by our
 * constructor: shim/aio_scan.c's rescan) */
void kp_dl_watch(void (*fn)(void));
/* fn runs at each dlopen of the program, before the real one and after
 * the lookup watcher (shim/aio_scan.c: what it opens is not seen yet) */
void kp_dl_watch_open(void (*fn)(void));
void kp_dlopen_note(void);
/* one of those was looked up with dlsym */
int kp_dl_ssl_bio_named(void);
/* ... one that shows a session */
int kp_dl_session_named(void);

#endif
