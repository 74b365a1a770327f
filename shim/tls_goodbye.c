/* tls_goodbye.c - the last records a process sends on a connection it
 * lets go: our KeyUpdate before its state leaves for another process
 * (state_key_update), and the close_notify a program's SSL_shutdown was
 * told it sent, when the library ends the connection (docs/tls.md "The
 * close_notify owed").
 *
 * At a request boundary the program's SSL_shutdown is answered without
 * our close_notify going out, so that the connection can be parked
 * (kp_tls_shutdown).  Alone the server reads that close_notify before the
 * TCP FIN; a connection the library ends later (dropped from the pool,
 * pushed out, at exit, after a failed export) ended with the FIN alone, a
 * truncation to a server that tells them apart.  So the engine notes the
 * alert owed (notify_owed, cleared when another SSL is handed the
 * connection) and it goes out here, without waiting and without a signal
 * (MSG_DONTWAIT | MSG_NOSIGNAL): never through the engine's socket BIO,
 * whose write() could raise SIGPIPE in the program.
 */
#include "tls_internal.h"

#include <sys/socket.h>

#include "tls_export.h"
#include "tls_foreign.h"
#include "tls_import.h"
#include "tls_record.h"

/* The alert through a memory BIO of ours, then onto fd; the SSL's own
 * writing BIO put back after (a first owner's SSL the program still holds
 * keeps its BIO).  Caller holds no lock of ours; nobody else writes s. */
static bool openssl_goodbye(SSL *s, int fd)
{
	if (kp_ssl.SSL_has_pending(s) || kp_ssl.SSL_get_shutdown(s) || !kp_ssl.SSL_is_init_finished(s))
		return false;
	BIO *wb = kp_ssl.BIO_new(kp_ssl.BIO_s_mem()), *old = kp_ssl.SSL_get_wbio(s);
	if (!wb || !old || !kp_ssl.BIO_up_ref(old)) {
		if (wb)
			kp_ssl.BIO_free(wb);
		return false;
	}
	int saved = errno;
	kp_ssl.ERR_set_mark();
	kp_ssl.SSL_set0_wbio(s, wb); /* (drops the SSL's reference to old: ours holds it) */
	char rec[128];
	int n = KP_OUTSIDE(kp_ssl.SSL_shutdown(s)) >= 0 ? kp_ssl.BIO_read(wb, rec, sizeof(rec)) : 0;
	kp_ssl.SSL_set0_wbio(s, old); /* (frees wb; our reference to old is the SSL's) */
	kp_ssl.ERR_pop_to_mark();
	bool sent = n > 0 && kp_real.send(fd, rec, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) == n;
	if (sent)
		kp_debug("fd %d: the close_notify owed sent as the connection ends", fd);
	errno = saved;
	return sent;
}

/* The same from the record layer of a connection taken from another
 * process (tls_foreign.c), the program's SSL answered by it. */
static bool foreign_goodbye(struct tlsf *f, int fd)
{
	uint8_t rec[64];
	int saved = errno, n = tlsf_seal_goodbye(f, rec, sizeof(rec));
	bool sent = n > 0 && kp_real.send(fd, rec, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) == n;
	if (sent)
		kp_debug("fd %d: the close_notify owed sent as the connection ends", fd);
	kp_ssl.OPENSSL_cleanse(rec, sizeof(rec));
	errno = saved;
	return sent;
}

bool kp_tls_goodbye(struct kp_tls *e, int fd)
{
	if (!e || !__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return false;
	kp_lock(&tls_lock);
	/* ours alone (its program's SSL freed), or its first owner's SSL
	 * still held and speaking through a socket BIO (on fd, or on the
	 * program's number where fd is our copy of the socket: kp_tls_park),
	 * or one SSL it was handed to still held (its SSL_shutdown made the
	 * debt): no other SSL answered by it */
	struct handle *h = handle_find(e->ssl), *user = NULL;
	for (struct handle *x = h ? NULL : handles; x && !user; x = x->hh.next)
		if (x->e == e)
			user = x;
	int close_flag;
	bool go = e->notify_owed && !e->dead && !e->foreign &&
		  (e->im ? !h && e->refs == (user ? 2 : 1)
		   : h	 ? h->e == e && e->refs == 2 && !e->own_bio && prog_socket_bio(e->ssl, &close_flag) >= 0
			 : e->own_bio && e->refs == (user ? 2 : 1));
	e->notify_owed = false;
	kp_unlock(&tls_lock);
	if (go && e->im) /* a connection taken from another process: its records are ours */
		return foreign_goodbye(&e->im->f, fd);
	return go && openssl_goodbye(e->ssl, fd);
}

bool kp_tls_notify_owed(struct kp_tls *e)
{
	if (!e || !__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return false;
	kp_lock(&tls_lock);
	bool owed = e->notify_owed;
	kp_unlock(&tls_lock);
	return owed;
}

void kp_tls_owe_notify(struct kp_tls *e)
{
	if (!e || !__atomic_load_n(&kp_tls_used, __ATOMIC_ACQUIRE))
		return;
	kp_lock(&tls_lock);
	if (!e->dead && !e->foreign)
		e->notify_owed = true;
	kp_unlock(&tls_lock);
}

size_t goodbye_seal(struct kp_tls *e, const unsigned char *msg, size_t len, uint8_t rec[BK_TAIL_MAX])
{
	kp_lock(&tls_lock);
	bool owed = e->notify_owed;
	e->notify_owed = false;
	kp_unlock(&tls_lock);
	struct tlsx_state st;
	const char *why = NULL;
	int n = owed && tlsx_decode(msg, len, &st, &why) == 0 ? tlsrec_seal_close_notify(&st.tx, rec, BK_TAIL_MAX)
							       : -1;
	if (owed)
		tlsx_wipe(&st);
	return n > 0 ? (size_t)n : 0;
}

void goodbye_send(int fd, const uint8_t *rec, size_t n)
{
	int saved = errno;
	if (n && kp_real.send(fd, rec, n, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)n)
		kp_debug("fd %d: the close_notify owed sent as the connection ends", fd);
	errno = saved;
}

/* The KeyUpdate before a TLS 1.3 state leaves the process
 * (docs/tls-across.md "Left" 2): ours, asking the server's
 * (update_requested), sealed under the exported sending keys and written
 * to the parked socket, the state then re-made with the sending direction
 * moved on and the receiving one marked TLSX_RX_UPDATE_PENDING: the
 * receiving process never holds the keys of what went before in our
 * direction, and in the server's once its answer comes.  Not through the
 * parked SSL (its BIO may still name the program's closed fd).  Returns
 * the new message (*len bytes), msg wiped and freed either way; NULL when
 * the state must not go (the KeyUpdate not written whole: the connection
 * is spent).  TLS 1.2 has none: msg as it is. */
unsigned char *state_key_update(unsigned char *msg, size_t *len, int fd)
{
	struct tlsx_state st;
	const char *why = NULL;
	unsigned char rec[64], *out = NULL;
	size_t old_len = *len;
	if (tlsx_decode(msg, old_len, &st, &why) == 0 && st.version < TLS1_3_VERSION)
		return msg;
	int n = why ? -1 : tlsrec_seal_key_update(&st.tx, true, rec, sizeof(rec));
	if (n > 0 && kp_real.send(fd, rec, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) == n) {
		st.flags |= TLSX_RX_UPDATE_PENDING;
		size_t cap = tlsx_encoded_len(&st);
		if (cap <= TLSX_MAX && (out = malloc(cap)) && tlsx_encode(&st, out, cap, &why) < 0) {
			kp_ssl.OPENSSL_cleanse(out, cap);
			free(out);
			out = NULL;
		}
		*len = cap;
	}
	tlsx_wipe(&st);
	kp_ssl.OPENSSL_cleanse(rec, sizeof(rec));
	kp_ssl.OPENSSL_cleanse(msg, old_len); /* st pointed into it until here */
	free(msg);
	return out;
}
