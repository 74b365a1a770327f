/* tls_import.c - the foreign engine over a socket (tls_import.h). */
#include "tls_import.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "fdtable.h"
#include "real.h"
#include "tls_real.h"

/* Through the program's BIO b: what its own SSL's record layer would have
 * made of the call's answer (> 0 bytes, 0 the end, else a retry or an
 * error). */
static long bio_answer(void *b, int n)
{
	if (n > 0)
		return n;
	if (kp_ssl.BIO_test_flags(b, BIO_FLAGS_SHOULD_RETRY))
		return TLSF_IO_RETRY;
	return n == 0 ? 0 : TLSF_IO_ERROR;
}

/* As OpenSSL's socket BIO: read(2) and write(2), EAGAIN and EINTR a retry
 * (BIO_sock_should_retry), errno left as the call set it. */
static long sock_recv(void *ctx, uint8_t *buf, size_t cap)
{
	const struct kp_import *im = ctx;
	if (im->rbio) {
		long r = bio_answer(im->rbio, kp_ssl.BIO_read(im->rbio, buf, cap > INT_MAX ? INT_MAX : (int)cap));
		return r == 0 && !kp_ssl.BIO_ctrl(im->rbio, BIO_CTRL_EOF, 0, NULL) ? TLSF_IO_EOF_UNSAID : r;
	}
	ssize_t n = kp_real.read(im->fd, buf, cap);
	if (n >= 0)
		return (long)n;
	return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? TLSF_IO_RETRY : TLSF_IO_ERROR;
}

static long sock_send(void *ctx, const uint8_t *buf, size_t len)
{
	struct kp_import *im = ctx;
	if (im->wbio) {
		long w = bio_answer(im->wbio, kp_ssl.BIO_write(im->wbio, buf, len > INT_MAX ? INT_MAX : (int)len));
		if (w > 0)
			im->written += (uint64_t)w;
		return w == 0 ? TLSF_IO_ERROR : w;
	}
	/* (no SIGPIPE: a socket BIO's write() raises it, and the program's
	 * call does, as kp_tls_quiet has it for an engine of ours).  Once the
	 * library stepped aside for a seccomp filter, only the call the
	 * program's own SSL makes, write(2), whose EPIPE raises the signal
	 * itself (docs/owner.md "A sandbox"; kp_tls_io then raises none) */
	ssize_t n = __atomic_load_n(&kp_fdtab_aside, __ATOMIC_ACQUIRE) ? kp_real.write(im->fd, buf, len)
									: kp_real.send(im->fd, buf, len, MSG_NOSIGNAL);
	if (n > 0) {
		im->written += (uint64_t)n;
		return (long)n;
	}
	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? TLSF_IO_RETRY
										     : TLSF_IO_ERROR;
}

static void msg_free(unsigned char *msg, size_t len)
{
	if (msg)
		kp_ssl.OPENSSL_cleanse(msg, len);
	free(msg);
}

struct kp_import *kp_tls_import(unsigned char *msg, size_t len, int fd, uint64_t options, uint32_t mode,
				const char **why)
{
	struct kp_import *im = calloc(1, sizeof(*im));
	if (!im) {
		*why = "no memory";
		msg_free(msg, len);
		return NULL;
	}
	im->msg = msg;
	im->len = len;
	im->fd = fd;
	if (tlsx_decode(msg, len, &im->st, why) < 0) {
		kp_tls_import_free(im);
		return NULL;
	}
	struct tlsf_io io = { sock_recv, sock_send, im };
	if (tlsf_import(&im->f, &im->st, &io, options, mode) < 0) {
		*why = "a state the foreign engine does not carry";
		kp_tls_import_free(im);
		return NULL;
	}
	return im;
}

void kp_tls_import_through(struct tlsf *f, void *rbio, void *wbio)
{
	struct kp_import *im = (struct kp_import *)((char *)f - offsetof(struct kp_import, f));
	im->rbio = rbio;
	im->wbio = wbio;
}

void kp_tls_import_free(struct kp_import *im)
{
	if (!im)
		return;
	tlsf_wipe(&im->f);
	tlsx_wipe(&im->st);
	msg_free(im->msg, im->len);
	kp_ssl.OPENSSL_cleanse(im, sizeof(*im));
	free(im);
}
