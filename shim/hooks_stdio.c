/*
 * hooks_stdio.c - exported wrappers for stdio's output calls (fputc, putc,
 * putchar, fputs, puts, fwrite, the printf family, fflush, __overflow) on
 * a FILE whose fd is one of our connections.
 *
 * stdio writes its buffer with glibc's internal write, which no preload
 * sees: a request written through a FILE would reach the server behind
 * our back.  bash's /dev/tcp is the common case: bash moves the socket
 * onto fd 1 with dup2 and its printf and echo builtins write to the
 * line-buffered stdout (putchar per format character, printf per
 * conversion, fflush at the end).  So on a FILE whose fd is ours the
 * bytes go into the FILE's own buffer as stdio would put them, and every
 * time stdio would write (a newline on a line-buffered stream, a full
 * buffer, an unbuffered stream, fflush) the buffer goes out through the
 * shim's write path instead (framing, the Connection rewrite).  The
 * program sees the same return values, the same ferror(), and the bytes
 * reach the kernel at the same points.  Any other FILE costs the load of
 * its fd number and the fd-table check, then a tail call to libc.
 *
 * What still reaches the socket behind our back (the wide-character
 * calls, exit()'s flush of everything, setvbuf/fseek flushing a pending
 * buffer, an inline putc_unlocked filling a buffer that glibc itself then
 * flushes) is stdio's own: a tracked FILE's buffer is emptied through us
 * before fflush(NULL) and at exit (kp_stdio_drain_all), and hidden.c checks
 * the kernel's byte count before it parks a connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

#include "conn.h"
#include "fdtable.h"
#include "alias.h"
#include "real.h"
#include "stdio_drain.h"

#define KP_EXPORT __attribute__((visibility("default")))

/* glibc's list of open FILEs and its lock (exported since 2.2.5) */
extern FILE *_IO_list_all;
extern void _IO_list_lock(void);
extern void _IO_list_unlock(void);
/* the fortified entry points (declared by <stdio.h> only under
 * _FORTIFY_SOURCE) */
extern int __vsnprintf_chk(char *, size_t, int, size_t, const char *, va_list);
int __vfprintf_chk(FILE *, int, const char *, va_list);
int __vprintf_chk(int, const char *, va_list);
int __fprintf_chk(FILE *, int, const char *, ...);
int __printf_chk(int, const char *, ...);
int __vdprintf_chk(int, int, const char *, va_list);
int __dprintf_chk(int, int, const char *, ...);
size_t _IO_fwrite(const void *, size_t, size_t, FILE *);
int _IO_fputs(const char *, FILE *);
int _IO_puts(const char *);
int _IO_vfprintf(FILE *, const char *, va_list);
int _IO_fprintf(FILE *, const char *, ...);
int _IO_printf(const char *, ...);
extern int __overflow(FILE *, int);
extern int _IO_putc(int, FILE *);

/* glibc's FILE flags (libio.h; the values have been part of the ABI since
 * the libio of the 1990s: struct _IO_FILE is public and the old inline
 * macros read them) */
#define KP_IO_UNBUFFERED 0x0002
#define KP_IO_NO_WRITES 0x0008
#define KP_IO_LINE_BUF 0x0200
#define KP_IO_CURRENTLY_PUTTING 0x0800

/* The connection behind fp's fd, or NULL: the whole fast path. */
static inline struct kp_conn *file_conn(FILE *fp)
{
	if (__builtin_expect(fp == NULL, 0))
		return NULL;
	struct kp_conn *c = kp_fd_conn(fp->_fileno);
	return c == KP_POOLED ? NULL : c;
}

/* The exported wrappers' test: with no connection among the program's
 * fds (kp_fd_live), no FILE can be one of ours, and the call is a load, a
 * branch and a tail jump to libc; else fp's fd is looked up. */
static inline bool stdio_ours(FILE *fp)
{
	return __builtin_expect(kp_fd_any_live(), 0) && file_conn(fp) != NULL;
}

/* The write() wrapper's slow half, for bytes stdio would have written. */
static ssize_t conn_write(int fd, const char *p, size_t n)
{
	struct kp_conn *c = kp_fd_conn(fd);
	if (!c || c == KP_POOLED)
		return KP_REAL(write)(fd, p, n);
	struct iovec iov = { (void *)p, n };
	ssize_t r;
	bool taken = kp_send_intercept(c, fd, &iov, 1, 0, &r);
	if (taken)
		return r;
	r = KP_REAL(write)(fd, p, n);
	kp_send_done(c, fd, &iov, 1, r, 0);
	return r;
}

/* Write n bytes as glibc's _IO_new_file_write does: to the end or the
 * first error (which sets the stream's error flag), EINTR too: a handler
 * without SA_RESTART ends the program's fwrite there, as alone (a retry
 * here made a write to a server that never reads last for ever).  Returns
 * the bytes written, as glibc's: fwrite answers that count after an error,
 * and a program that writes the rest from it must not send any twice. */
static size_t file_write(FILE *fp, const char *p, size_t n)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = conn_write(fp->_fileno, p + done, n - done);
		if (r < 0) {
			fp->_flags |= _IO_ERR_SEEN;
			break;
		}
		done += (size_t)r;
	}
	return done;
}

/* Empty fp's put area through us.  As glibc's new_do_write, the buffer is
 * emptied whatever the outcome. */
static int drain(FILE *fp)
{
	if (!fp->_IO_write_base || fp->_IO_write_ptr <= fp->_IO_write_base)
		return 0;
	size_t n = (size_t)(fp->_IO_write_ptr - fp->_IO_write_base);
	fp->_IO_write_ptr = fp->_IO_write_base;
	return file_write(fp, fp->_IO_write_base, n) == n ? 0 : EOF;
}

/* A line-buffered stream writes up to its last newline and keeps the
 * rest (which a program may yet flush elsewhere, after a dup2). */
static int drain_lines(FILE *fp)
{
	char *base = fp->_IO_write_base, *end = fp->_IO_write_ptr, *nl = end;
	while (nl > base && nl[-1] != '\n')
		nl--;
	if (nl == base)
		return 0;
	size_t rest = (size_t)(end - nl);
	fp->_IO_write_ptr = base;
	int r = file_write(fp, base, (size_t)(nl - base)) == (size_t)(nl - base) ? 0 : EOF;
	memmove(base, nl, rest);
	fp->_IO_write_ptr = base + rest;
	return r;
}

/* fp is ours, byte-oriented and writable: may we keep its buffer? */
static bool byte_stream(FILE *fp)
{
	if (fp->_mode > 0 || (fp->_flags & KP_IO_NO_WRITES))
		return false;
	if (fp->_mode == 0)
		fwide(fp, -1);
	return true;
}

/* fp's put area, made by glibc as its first write would make it: the
 * buffer allocated, the stream in put mode.  __overflow(fp, EOF) on an
 * empty put area does just that and writes nothing. */
static bool put_area(FILE *fp)
{
	if ((fp->_flags & KP_IO_CURRENTLY_PUTTING) && fp->_IO_write_base && fp->_IO_buf_end)
		return true;
	if (KP_REAL(__overflow)(fp, EOF) == EOF)
		return false;
	return (fp->_flags & KP_IO_CURRENTLY_PUTTING) && fp->_IO_write_base && fp->_IO_buf_end;
}

/* Put n bytes on fp (locked, ours) as glibc's xsputn would: into the
 * buffer, which goes out when it is full, at a newline of a line-buffered
 * stream, at once for an unbuffered one; a block at least a buffer long
 * goes straight out.  Returns the bytes taken (n unless an error). */
static size_t put_bytes(FILE *fp, const char *p, size_t n)
{
	if (!put_area(fp))
		return 0;
	size_t size = (size_t)(fp->_IO_buf_end - fp->_IO_buf_base), done = 0;
	/* unbuffered, or a block no smaller than the buffer: what is pending
	 * first, then the block, straight out */
	if ((fp->_flags & KP_IO_UNBUFFERED) || n >= size) {
		if (drain(fp) == EOF)
			return 0;
		return file_write(fp, p, n); /* what went, as glibc's count */
	}
	bool newline = false;
	while (done < n) {
		size_t room = (size_t)(fp->_IO_buf_end - fp->_IO_write_ptr);
		if (room == 0) {
			if (drain(fp) == EOF)
				return done;
			if (fp->_IO_write_ptr >= fp->_IO_buf_end) /* no room at all */
				return done + file_write(fp, p + done, n - done);
			continue;
		}
		size_t k = n - done < room ? n - done : room;
		if ((fp->_flags & KP_IO_LINE_BUF) && memchr(p + done, '\n', k))
			newline = true;
		memcpy(fp->_IO_write_ptr, p + done, k);
		fp->_IO_write_ptr += k;
		done += k;
	}
	if (newline && drain_lines(fp) == EOF)
		return n; /* taken, then lost with the error, as in glibc */
	return n;
}

/* The slow half of every byte-writing wrapper: false means "not ours
 * after all" (a wide or read-only stream); call libc. */
static bool put_locked(FILE *fp, const char *p, size_t n, size_t *taken)
{
	if (!byte_stream(fp))
		return false;
	*taken = put_bytes(fp, p, n);
	return true;
}

static KP_SLOW bool put(FILE *fp, bool lock, const char *p, size_t n, size_t *taken)
{
	int saved = errno;
	struct kp_conn *c = file_conn(fp);
	if (c)
		kp_stdio_watch(c, fp->_fileno);
	if (lock)
		flockfile(fp);
	bool ours = put_locked(fp, p, n, taken);
	if (lock)
		funlockfile(fp);
	if (ours && *taken == n)
		errno = saved;
	return ours;
}

/* ------------------------------------------------------------ characters */

static KP_SLOW int putc_slow(int ch, FILE *fp, bool lock, int (*real)(int, FILE *))
{
	char b = (char)ch;
	size_t taken;
	if (!put(fp, lock, &b, 1, &taken))
		return real(ch, fp);
	return taken == 1 ? (unsigned char)ch : EOF;
}

#define KP_PUTC(name, lock)                                            \
	KP_EXPORT int name(int ch, FILE *fp)                           \
	{                                                              \
		if (stdio_ours(fp))        \
			return putc_slow(ch, fp, lock, KP_REAL(name)); \
		return KP_REAL(name)(ch, fp);                          \
	}

KP_PUTC(fputc, true)
KP_PUTC(putc, true)
KP_PUTC(_IO_putc, true)
KP_PUTC(fputc_unlocked, false)
KP_PUTC(putc_unlocked, false)

KP_EXPORT int putchar(int ch)
{
	return putc(ch, stdout);
}

KP_EXPORT int putchar_unlocked(int ch)
{
	return putc_unlocked(ch, stdout);
}

/* The inline putc_unlocked of <stdio.h> calls it when the buffer is full
 * (or, line-buffered, at every character); unlocked, as glibc's. */
static KP_SLOW int overflow_slow(FILE *fp, int ch)
{
	char b = (char)ch;
	size_t taken;
	if (!put(fp, false, &b, 1, &taken))
		return KP_REAL(__overflow)(fp, ch);
	return taken == 1 ? (unsigned char)ch : EOF;
}

KP_EXPORT int __overflow(FILE *fp, int ch)
{
	if (stdio_ours(fp) && ch != EOF)
		return overflow_slow(fp, ch);
	return KP_REAL(__overflow)(fp, ch);
}

/* ------------------------------------------------------------ strings */

static KP_SLOW int fputs_slow(const char *s, FILE *fp, bool lock)
{
	size_t n = strlen(s), taken;
	if (!put(fp, lock, s, n, &taken))
		return lock ? KP_REAL(fputs)(s, fp) : KP_REAL(fputs_unlocked)(s, fp);
	return taken == n ? 1 : EOF;
}

KP_EXPORT int fputs(const char *s, FILE *fp)
{
	if (stdio_ours(fp))
		return fputs_slow(s, fp, true);
	return KP_REAL(fputs)(s, fp);
}

KP_EXPORT int fputs_unlocked(const char *s, FILE *fp)
{
	if (stdio_ours(fp))
		return fputs_slow(s, fp, false);
	return KP_REAL(fputs_unlocked)(s, fp);
}

static KP_SLOW int puts_slow(const char *s)
{
	FILE *fp = stdout;
	size_t n = strlen(s), taken = 0;
	int saved = errno, r;
	flockfile(fp);
	if (!byte_stream(fp)) {
		funlockfile(fp);
		return KP_REAL(puts)(s);
	}
	/* one put of both, as glibc's puts: a line-buffered stdout writes
	 * the line and its newline together */
	char *line = malloc(n + 1);
	if (line) {
		memcpy(line, s, n);
		line[n] = '\n';
		taken = put_bytes(fp, line, n + 1);
		free(line);
		r = taken == n + 1 ? (int)(n + 1 > INT32_MAX ? INT32_MAX : n + 1) : EOF;
	} else {
		r = put_bytes(fp, s, n) == n && put_bytes(fp, "\n", 1) == 1
			    ? (int)(n + 1 > INT32_MAX ? INT32_MAX : n + 1)
			    : EOF;
	}
	funlockfile(fp);
	if (r != EOF)
		errno = saved;
	return r;
}

KP_EXPORT int puts(const char *s)
{
	if (stdio_ours(stdout))
		return puts_slow(s);
	return KP_REAL(puts)(s);
}

static KP_SLOW size_t fwrite_slow(const void *p, size_t size, size_t nmemb, FILE *fp, bool lock)
{
	size_t n = size * nmemb, taken;
	if (size && n / size != nmemb)
		return lock ? KP_REAL(fwrite)(p, size, nmemb, fp)
			    : KP_REAL(fwrite_unlocked)(p, size, nmemb, fp);
	if (n == 0)
		return 0;
	if (!put(fp, lock, p, n, &taken))
		return lock ? KP_REAL(fwrite)(p, size, nmemb, fp)
			    : KP_REAL(fwrite_unlocked)(p, size, nmemb, fp);
	return taken == n ? nmemb : taken / size;
}

KP_EXPORT size_t fwrite(const void *p, size_t size, size_t nmemb, FILE *fp)
{
	if (stdio_ours(fp))
		return fwrite_slow(p, size, nmemb, fp, true);
	return KP_REAL(fwrite)(p, size, nmemb, fp);
}

#undef fwrite_unlocked /* a macro of <bits/stdio.h> when optimising */
KP_EXPORT size_t fwrite_unlocked(const void *p, size_t size, size_t nmemb, FILE *fp)
{
	if (stdio_ours(fp))
		return fwrite_slow(p, size, nmemb, fp, false);
	return KP_REAL(fwrite_unlocked)(p, size, nmemb, fp);
}

/* ------------------------------------------------------------ printf */

/* Format as the program asked (flag >= 0: the fortified check level),
 * then put the result.  -1 with the real call's errno when formatting
 * fails, which then writes nothing, as glibc's would not either. */
/* fmt formatted into small (its size: sizeof(small) of the caller's
 * array) or, when longer, into memory of malloc's: *n its length (< 0: the
 * formatting failed, errno set); NULL when out of memory. */
static char *format(char *small, size_t cap, int flag, const char *fmt, va_list ap, int *n)
{
	va_list ap2;
	va_copy(ap2, ap);
	char *buf = small;
	*n = flag >= 0 ? __vsnprintf_chk(small, cap, flag, cap, fmt, ap) : vsnprintf(small, cap, fmt, ap);
	if (*n >= (int)cap) {
		buf = malloc((size_t)*n + 1);
		if (buf)
			*n = flag >= 0 ? __vsnprintf_chk(buf, (size_t)*n + 1, flag, (size_t)*n + 1, fmt, ap2)
				       : vsnprintf(buf, (size_t)*n + 1, fmt, ap2);
		else
			errno = ENOMEM;
	}
	va_end(ap2);
	return buf;
}

/* Format as the program asked (flag >= 0: the fortified check level),
 * then put the result.  -1 with the real call's errno when formatting
 * fails, which then writes nothing, as glibc's would not either. */
static KP_SLOW int vprintf_slow(FILE *fp, int flag, const char *fmt, va_list ap)
{
	char small[512];
	int n;
	char *buf = format(small, sizeof(small), flag, fmt, ap, &n);
	if (!buf) {
		fp->_flags |= _IO_ERR_SEEN;
		return -1;
	}
	int r = n;
	if (n > 0) {
		size_t taken;
		if (!put(fp, true, buf, (size_t)n, &taken))
			r = -2; /* not ours: written below by stdio itself */
		else if (taken != (size_t)n)
			r = -1;
	}
	if (r == -2)
		r = KP_REAL(fwrite)(buf, 1, (size_t)n, fp) == (size_t)n ? n : -1;
	if (buf != small)
		free(buf);
	return r;
}

KP_EXPORT int vfprintf(FILE *fp, const char *fmt, va_list ap)
{
	if (stdio_ours(fp))
		return vprintf_slow(fp, -1, fmt, ap);
	return KP_REAL(vfprintf)(fp, fmt, ap);
}

KP_EXPORT int vprintf(const char *fmt, va_list ap)
{
	return vfprintf(stdout, fmt, ap);
}

KP_EXPORT int fprintf(FILE *fp, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfprintf(fp, fmt, ap);
	va_end(ap);
	return r;
}

KP_EXPORT int printf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfprintf(stdout, fmt, ap);
	va_end(ap);
	return r;
}

KP_EXPORT int __vfprintf_chk(FILE *fp, int flag, const char *fmt, va_list ap)
{
	if (stdio_ours(fp))
		return vprintf_slow(fp, flag, fmt, ap);
	return KP_REAL(__vfprintf_chk)(fp, flag, fmt, ap);
}

KP_EXPORT int __vprintf_chk(int flag, const char *fmt, va_list ap)
{
	return __vfprintf_chk(stdout, flag, fmt, ap);
}

KP_EXPORT int __fprintf_chk(FILE *fp, int flag, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = __vfprintf_chk(fp, flag, fmt, ap);
	va_end(ap);
	return r;
}

KP_EXPORT int __printf_chk(int flag, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = __vfprintf_chk(stdout, flag, fmt, ap);
	va_end(ap);
	return r;
}

/* glibc's libio names of the same calls, exported too (a program built
 * against an old libio may bind them) */
KP_EXPORT size_t _IO_fwrite(const void *p, size_t size, size_t nmemb, FILE *fp)
{
	return fwrite(p, size, nmemb, fp);
}

KP_EXPORT int _IO_fputs(const char *s, FILE *fp)
{
	return fputs(s, fp);
}

KP_EXPORT int _IO_puts(const char *s)
{
	return puts(s);
}

KP_EXPORT int _IO_vfprintf(FILE *fp, const char *fmt, va_list ap)
{
	return vfprintf(fp, fmt, ap);
}

KP_EXPORT int _IO_fprintf(FILE *fp, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfprintf(fp, fmt, ap);
	va_end(ap);
	return r;
}

KP_EXPORT int _IO_printf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfprintf(stdout, fmt, ap);
	va_end(ap);
	return r;
}

/* ------------------------------------------------------------ dprintf */

/*
 * dprintf and vdprintf format into a FILE of glibc's own over the fd and
 * flush it with glibc's internal write, past us: after the EOF we owe the
 * bytes reached the server.  On an fd of ours the text is formatted here
 * and written through our write(), as glibc's flush writes it (again until
 * all is taken or a write fails: -1 with its errno), so it is framed,
 * rewritten, or taken and dropped as any write (docs/replay.md "Writes we
 * cannot see").  Any other fd: a load, a test and libc's own.
 */
static KP_SLOW int vdprintf_slow(struct kp_conn *c, int fd, int flag, const char *fmt, va_list ap)
{
	if (c == KP_POOLED) { /* not the program's (docs/owner.md) */
		errno = EBADF;
		return -1;
	}
	char small[512];
	int n;
	char *buf = format(small, sizeof(small), flag, fmt, ap, &n);
	if (!buf)
		return -1;
	int r = n;
	for (size_t done = 0; n > 0 && done < (size_t)n;) {
		ssize_t w = write(fd, buf + done, (size_t)n - done);
		if (w <= 0) {
			r = -1;
			break;
		}
		done += (size_t)w;
	}
	if (buf != small)
		free(buf);
	return r;
}

KP_EXPORT int vdprintf(int fd, const char *fmt, va_list ap)
{
	struct kp_conn *c = kp_fd_conn(fd);
	if (__builtin_expect(c != NULL, 0))
		return vdprintf_slow(c, fd, -1, fmt, ap);
	return KP_REAL(vdprintf)(fd, fmt, ap);
}

KP_EXPORT int dprintf(int fd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vdprintf(fd, fmt, ap);
	va_end(ap);
	return r;
}

KP_EXPORT int __vdprintf_chk(int fd, int flag, const char *fmt, va_list ap)
{
	struct kp_conn *c = kp_fd_conn(fd);
	if (__builtin_expect(c != NULL, 0))
		return vdprintf_slow(c, fd, flag, fmt, ap);
	return KP_REAL(__vdprintf_chk)(fd, flag, fmt, ap);
}

KP_EXPORT int __dprintf_chk(int fd, int flag, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = __vdprintf_chk(fd, flag, fmt, ap);
	va_end(ap);
	return r;
}

/* ------------------------------------------------------------ wide */

/*
 * The wide-character calls convert into the FILE's byte buffer and write
 * it with glibc's internal write, past us; their bytes cannot be framed.
 * Before one on a FILE of ours, the connection decides as for any write
 * we cannot see (kp_unseen_write): bytes that must not reach the server
 * (the first write after the EOF we owe: our FIN is out, the next write
 * meets the kernel's EPIPE) have the call write to /dev/null instead,
 * flushed there before the FILE gets its fd back; anything else goes out
 * and the connection is never pooled (docs/replay.md, "Writes we cannot
 * see").  A byte-oriented FILE refuses a wide call without writing.
 */
struct wide_turn {
	int fd, devnull;
};

static KP_SLOW bool wide_begin(FILE *fp, struct wide_turn *w)
{
	struct kp_conn *c = file_conn(fp);
	int saved = errno;
	if (!c || fwide(fp, 0) < 0 || !kp_unseen_write(c, fp->_fileno, 1)) {
		errno = saved;
		return false;
	}
	w->devnull = KP_REAL(open)("/dev/null", O_WRONLY | O_CLOEXEC);
	errno = saved;
	if (w->devnull < 0)
		return false; /* our FIN is out: the kernel's EPIPE */
	flockfile(fp);
	w->fd = fp->_fileno;
	fp->_fileno = w->devnull;
	return true;
}

static KP_SLOW void wide_end(FILE *fp, struct wide_turn *w)
{
	int saved = errno;
	KP_REAL(fflush)(fp);
	fp->_fileno = w->fd;
	funlockfile(fp);
	KP_REAL(close)(w->devnull);
	errno = saved;
}

#define WIDE_CALL(fp, type, call)                         \
	do {                                              \
		struct wide_turn w_;                      \
		if (!stdio_ours(fp) || !wide_begin(fp, &w_)) \
			return call;                      \
		type r_ = call;                           \
		wide_end(fp, &w_);                        \
		return r_;                                \
	} while (0)

KP_EXPORT wint_t fputwc(wchar_t wc, FILE *fp)
{
	WIDE_CALL(fp, wint_t, KP_REAL(fputwc)(wc, fp));
}

KP_EXPORT wint_t putwc(wchar_t wc, FILE *fp)
{
	WIDE_CALL(fp, wint_t, KP_REAL(putwc)(wc, fp));
}

KP_EXPORT wint_t fputwc_unlocked(wchar_t wc, FILE *fp)
{
	WIDE_CALL(fp, wint_t, KP_REAL(fputwc_unlocked)(wc, fp));
}

KP_EXPORT wint_t putwc_unlocked(wchar_t wc, FILE *fp)
{
	WIDE_CALL(fp, wint_t, KP_REAL(putwc_unlocked)(wc, fp));
}

KP_EXPORT wint_t putwchar(wchar_t wc)
{
	WIDE_CALL(stdout, wint_t, KP_REAL(putwchar)(wc));
}

KP_EXPORT wint_t putwchar_unlocked(wchar_t wc)
{
	WIDE_CALL(stdout, wint_t, KP_REAL(putwchar_unlocked)(wc));
}

KP_EXPORT int fputws(const wchar_t *s, FILE *fp)
{
	WIDE_CALL(fp, int, KP_REAL(fputws)(s, fp));
}

KP_EXPORT int fputws_unlocked(const wchar_t *s, FILE *fp)
{
	WIDE_CALL(fp, int, KP_REAL(fputws_unlocked)(s, fp));
}

KP_EXPORT int vfwprintf(FILE *fp, const wchar_t *fmt, va_list ap)
{
	WIDE_CALL(fp, int, KP_REAL(vfwprintf)(fp, fmt, ap));
}

KP_EXPORT int vwprintf(const wchar_t *fmt, va_list ap)
{
	WIDE_CALL(stdout, int, KP_REAL(vfwprintf)(stdout, fmt, ap));
}

KP_EXPORT int fwprintf(FILE *fp, const wchar_t *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfwprintf(fp, fmt, ap);
	va_end(ap);
	return r;
}

KP_EXPORT int wprintf(const wchar_t *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vfwprintf(stdout, fmt, ap);
	va_end(ap);
	return r;
}

int __vfwprintf_chk(FILE *, int, const wchar_t *, va_list);
int __vwprintf_chk(int, const wchar_t *, va_list);
int __fwprintf_chk(FILE *, int, const wchar_t *, ...);
int __wprintf_chk(int, const wchar_t *, ...);

KP_EXPORT int __vfwprintf_chk(FILE *fp, int flag, const wchar_t *fmt, va_list ap)
{
	WIDE_CALL(fp, int, KP_REAL(__vfwprintf_chk)(fp, flag, fmt, ap));
}

KP_EXPORT int __vwprintf_chk(int flag, const wchar_t *fmt, va_list ap)
{
	WIDE_CALL(stdout, int, KP_REAL(__vfwprintf_chk)(stdout, flag, fmt, ap));
}

KP_EXPORT int __fwprintf_chk(FILE *fp, int flag, const wchar_t *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = __vfwprintf_chk(fp, flag, fmt, ap);
	va_end(ap);
	return r;
}

KP_EXPORT int __wprintf_chk(int flag, const wchar_t *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = __vfwprintf_chk(stdout, flag, fmt, ap);
	va_end(ap);
	return r;
}

/* ------------------------------------------------------------ flush */

static KP_SLOW int fflush_slow(FILE *fp, bool lock)
{
	int saved = errno, r = 0;
	if (lock)
		flockfile(fp);
	if (fp->_mode <= 0 && (fp->_flags & KP_IO_CURRENTLY_PUTTING))
		r = drain(fp);
	if (lock)
		funlockfile(fp);
	if (r == EOF)
		return EOF;
	errno = saved;
	/* the rest (nothing to write now) is glibc's */
	return lock ? KP_REAL(fflush)(fp) : KP_REAL(fflush_unlocked)(fp);
}

void kp_stdio_drain_all(bool at_exit)
{
	/* glibc's own list of open FILEs, under its own lock, then each
	 * FILE's lock: the order its fflush(NULL) takes them in */
	_IO_list_lock();
	for (FILE *fp = (FILE *)_IO_list_all; fp; fp = fp->_chain) {
		if (!file_conn(fp))
			continue;
		if (at_exit) {
			if (ftrylockfile(fp) != 0)
				continue;
		} else {
			flockfile(fp);
		}
		if (fp->_mode <= 0 && (fp->_flags & KP_IO_CURRENTLY_PUTTING))
			drain(fp);
		funlockfile(fp);
	}
	_IO_list_unlock();
}

KP_EXPORT int fflush(FILE *fp)
{
	if (__builtin_expect(fp == NULL, 0) && kp_fd_any_live()) {
		int saved = errno;
		kp_stdio_drain_all(false);
		errno = saved;
		return KP_REAL(fflush)(fp);
	}
	if (stdio_ours(fp))
		return fflush_slow(fp, true);
	return KP_REAL(fflush)(fp);
}

KP_EXPORT int fflush_unlocked(FILE *fp)
{
	if (__builtin_expect(fp == NULL, 0) && kp_fd_any_live()) {
		int saved = errno;
		kp_stdio_drain_all(false);
		errno = saved;
		return KP_REAL(fflush_unlocked)(fp);
	}
	if (stdio_ours(fp))
		return fflush_slow(fp, false);
	return KP_REAL(fflush_unlocked)(fp);
}

/* fclose() flushes inside libc: the buffer goes out through us first. */
bool kp_stdio_before_fclose(FILE *fp)
{
	if (!file_conn(fp))
		return true;
	int saved = errno;
	flockfile(fp);
	if (fp->_mode <= 0 && (fp->_flags & KP_IO_CURRENTLY_PUTTING))
		drain(fp);
	bool clean = __fpending(fp) == 0;
	funlockfile(fp);
	errno = saved;
	return clean;
}

/* glibc's second name of fflush (hooks_conn.c, the names a program binds) */
KP_ALIAS(_IO_fflush, fflush);
