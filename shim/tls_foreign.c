/*
 * tls_foreign.c - the foreign engine (docs/tls-across.md "Step 2: the
 * foreign engine, built"): an imported TLS client connection answering the
 * program's SSL_* calls as OpenSSL 3.0 answers them, over tls_record.c.
 *
 * The model of OpenSSL kept here, each where OpenSSL keeps it:
 * - rwstate and the BIO's retry flag (SSL_want, SSL_get_error's
 *   WANT_READ / WANT_WRITE), the error a call raised (SSL_get_error's
 *   SSL), nothing raised and no retry (SYSCALL);
 * - the read side takes one record at a time, the header then exactly the
 *   body (no read-ahead); the application data of one record at most per
 *   SSL_read;
 * - the write side's wnum / wpend_tot / wpend_buf (ssl3_write_bytes): a
 *   record sealed and not all sent is sent first by the next SSL_write,
 *   which must pass the same buffer (or ACCEPT_MOVING_WRITE_BUFFER) and at
 *   least as many bytes, else SSL_R_BAD_WRITE_RETRY;
 * - a fatal error puts OpenSSL's state machine in its error state: every
 *   later read or write returns -1 and raises nothing.
 */
#include "tls_foreign.h"

#include <string.h>

#include "tls_crypto.h"


#define RW_NOTHING TLSF_RW_NOTHING
#define RW_READING TLSF_RW_READING
#define RW_WRITING TLSF_RW_WRITING

#define ALERT_WARNING 1
#define ALERT_FATAL 2
#define R_SHUTDOWN_WHILE_IN_INIT 407

/* ------------------------------------------------------------ import */

int tlsf_import(struct tlsf *f, const struct tlsx_state *st, const struct tlsf_io *io, uint64_t options,
		uint32_t mode)
{
	memset(f, 0, sizeof(*f));
	if ((st->version != TLSREC_V12 && st->version != TLSREC_V13) || !tlsrec_key_len(st->cipher) ||
	    st->tx.version != st->version || st->rx.version != st->version || st->tx.cipher != st->cipher ||
	    st->rx.cipher != st->cipher)
		return TLSREC_E_UNSUPPORTED;
	f->io = *io;
	f->version = st->version;
	f->cipher = st->cipher;
	f->options = options;
	f->mode = mode;
	f->st = *st;
	f->tx = st->tx;
	f->rx = st->rx;
	tlsrec_reader_init(&f->rd, &f->rx, f->hs, sizeof(f->hs));
	f->err_reason = -1;
	return 0;
}

int tlsf_export(const struct tlsf *f, struct tlsx_state *out, const char **why)
{
	*why = f->failed			      ? "a fatal error"
	       : f->shutdown			      ? "shut down"
	       : f->app_len || f->in_len	      ? "data or a record read in part"
	       : f->out_len != f->out_off	      ? "bytes sealed and not sent"
	       : f->wnum || f->wpend_tot	      ? "a write in progress"
	       : f->key_update_owed || f->alert_owed ? "a KeyUpdate or an alert owed"
	       : f->rd.hs_len != f->rd.hs_done       ? "a handshake message in part"
	       : f->rd.warnings || f->rd.empty       ? "warnings or empty records counted in a row"
						     : NULL;
	if (*why)
		return -1;
	*out = f->st;
	out->tx = f->tx;
	out->rx = f->rx;
	if (f->key_updates_rx)
		out->flags &= (uint8_t)~TLSX_RX_UPDATE_PENDING;
	return 0;
}

void tlsf_set_options(struct tlsf *f, uint64_t options)
{
	f->options = options;
}

void tlsf_set_mode(struct tlsf *f, uint32_t mode)
{
	f->mode = mode;
}

/* ------------------------------------------------------------ state of a call */

/* what a call starts from: the error queue empty (the test's programs
 * clear it); rwstate and the BIO's retry flag stay until something
 * resets them, as in OpenSSL (SSL_shutdown after a blocked write says
 * WANT_WRITE without writing) */
static void call_begins(struct tlsf *f)
{
	f->err_reason = -1;
	f->err_syscall = false;
}

static int raise_error(struct tlsf *f, int reason)
{
	f->err_reason = reason;
	return -1;
}

/* send what is sealed: 1 all gone, -1 not (the socket would block:
 * WANT_WRITE; or failed: SYSCALL); rwstate WRITING while writing, as
 * OpenSSL leaves it after a write that did not finish */
static int flush(struct tlsf *f)
{
	while (f->out_off < f->out_len) {
		f->rwstate = RW_WRITING;
		f->io_retry = false; /* BIO_clear_retry_flags */
		long n = f->io.send(f->io.ctx, f->out + f->out_off, f->out_len - f->out_off);
		if (n > 0) {
			f->out_off += (size_t)n;
			continue;
		}
		if (n == TLSF_IO_RETRY)
			f->io_retry = true;
		else
			f->err_syscall = true;
		return -1;
	}
	f->out_off = f->out_len = 0;
	f->rwstate = RW_NOTHING;
	return 1;
}

/* seal a record after what is already waiting in out */
static int seal_out(struct tlsf *f, uint8_t type, const uint8_t *p, size_t len)
{
	if (f->out_off && f->out_off == f->out_len)
		f->out_off = f->out_len = 0;
	if (f->out_off) {
		memmove(f->out, f->out + f->out_off, f->out_len - f->out_off);
		f->out_len -= f->out_off;
		f->out_off = 0;
	}
	int n = tlsrec_seal(&f->tx, type, p, len, f->out + f->out_len, sizeof(f->out) - f->out_len);
	if (n < 0)
		return n;
	f->out_len += (size_t)n;
	return n;
}

/* an alert of ours (ssl3_send_alert): sealed now, sent now if it can go;
 * none but close_notify once our close_notify was sent */
static void send_alert(struct tlsf *f, uint8_t level, uint8_t desc)
{
	const uint8_t msg[2] = {level, desc};

	if ((f->shutdown & TLSF_SENT_SHUTDOWN) && desc != TLSREC_AD_CLOSE_NOTIFY)
		return;
	if (seal_out(f, TLSREC_CT_ALERT, msg, sizeof(msg)) < 0)
		return;
	f->alert_owed = true;
	if (f->wpend_tot == 0 && flush(f) > 0)
		f->alert_owed = false;
}

/* SSLfatal: the alert sent (when there is one), the reason raised, the
 * state machine in its error state */
static int fatal(struct tlsf *f, int alert, int reason)
{
	bool again = f->failed; /* ossl_statem_send_fatal: "once is enough" */

	f->failed = true;
	if (alert >= 0 && !again)
		send_alert(f, ALERT_FATAL, (uint8_t)alert);
	f->err_reason = reason;
	return -1;
}

/* a reader's error: the alert OpenSSL sends for it, and its reason where
 * the reader knows OpenSSL's (a record's header and tag; the others raise
 * TLSF_R_OTHER: same SSL_get_error, another reason code) */
static int reader_failed(struct tlsf *f, int rc)
{
	int alert = TLSREC_ALERT_OF(rc);

	f->in_len = 0; /* the record is gone: SSL_has_pending says 0 */
	if (alert < 0)
		return fatal(f, TLSREC_AD_INTERNAL_ERROR, TLSF_R_OTHER);
	return fatal(f, alert, f->rd.reason ? f->rd.reason : TLSF_R_OTHER);
}

/* ------------------------------------------------------------ reading */

/* the peer's EOF where a record was wanted (ssl3_read_n): a close_notify
 * under SSL_OP_IGNORE_UNEXPECTED_EOF (SSL_set_shutdown: the bits become
 * RECEIVED alone), else fatal with decode_error; the call returns 0 */
static int on_eof(struct tlsf *f)
{
	if (f->options & TLSF_OP_IGNORE_UNEXPECTED_EOF) {
		f->shutdown = TLSF_RECEIVED_SHUTDOWN;
		f->warn_alert = TLSREC_AD_CLOSE_NOTIFY;
	} else {
		fatal(f, TLSREC_AD_DECODE_ERROR, TLSF_R_UNEXPECTED_EOF_WHILE_READING);
	}
	return 0;
}

/* The next thing the peer sent: 1 and *ev, or what the call returns (-1
 * WANT_READ / SYSCALL / fatal, 0 at the EOF). */
static int next_event(struct tlsf *f, struct tlsrec_ev *ev)
{
	for (;;) {
		size_t used;
		int rc = tlsrec_read(&f->rd, f->in, f->in_len, &used, ev);
		if (rc < 0)
			return reader_failed(f, rc);
		if (used)
			f->in_len = 0; /* one record at a time: used is all of in */
		if (ev->what != TLSREC_EV_MORE)
			return 1;
		if (ev->need <= f->in_len || ev->need > sizeof(f->in))
			return fatal(f, TLSREC_AD_INTERNAL_ERROR, TLSF_R_OTHER);
		f->rwstate = RW_READING;
		f->io_retry = false;
		long n = f->io.recv(f->io.ctx, f->in + f->in_len, ev->need - f->in_len);
		if (n > 0) {
			f->in_len += (size_t)n > ev->need - f->in_len ? ev->need - f->in_len : (size_t)n;
			continue;
		}
		if (n == TLSF_IO_RETRY) {
			f->io_retry = true;
			return -1;
		}
		if (n == 0)
			return on_eof(f);
		if (n == TLSF_IO_EOF_UNSAID)
			return 0;
		f->err_syscall = true;
		return -1;
	}
}

/* A NewSessionTicket, a KeyUpdate, a HelloRequest: 1 to read on, or -1
 * WANT_READ (SSL_MODE_AUTO_RETRY off: OpenSSL returns after a
 * non-application record when nothing more was read ahead) */
static int on_post_handshake(struct tlsf *f, const struct tlsrec_ev *ev, bool keep)
{
	switch (ev->what) {
	case TLSREC_EV_TICKET:
		/* after our close_notify (keep false) thrown away, uncounted */
		f->tickets += keep;
		if (keep && ev->len <= sizeof(f->ticket)) {
			memcpy(f->ticket, ev->data, ev->len);
			f->ticket_len = ev->len;
		}
		break;
	case TLSREC_EV_KEY_UPDATE:
		f->key_updates_rx++;
		/* tls_process_key_update: ours then asks for none (whatever
		 * the program's SSL_key_update asked) */
		if (ev->update_requested) { /* (after our close_notify: never sent) */
			f->key_update_owed = true;
			f->key_update_requested = false;
		}
		break;
	case TLSREC_EV_RENEGOTIATE:
		/* tls_process_hello_req: refused with a warning under
		 * SSL_OP_NO_RENEGOTIATION; a program that would renegotiate
		 * is never handed a foreign connection */
		if (!(f->options & TLSF_OP_NO_RENEGOTIATION))
			return fatal(f, TLSREC_AD_INTERNAL_ERROR, TLSF_R_OTHER);
		if (keep)
			send_alert(f, ALERT_WARNING, TLSREC_AD_NO_RENEGOTIATION);
		break;
	default:
		break;
	}
	if (!(f->mode & TLSF_MODE_AUTO_RETRY) && f->rd.hs_done == f->rd.hs_len) {
		f->rwstate = RW_READING;
		f->io_retry = true;
		return -1;
	}
	return 1;
}

/* Our KeyUpdate (owed) sealed under the sending keys, which it moves on,
 * and queued behind what waits to go out; 0, or -1 (fatal). */
static int key_update_queue(struct tlsf *f)
{
	uint8_t rec[64];
	int n = tlsrec_seal_key_update(&f->tx, f->key_update_requested, rec, sizeof(rec));
	if (n < 0)
		return fatal(f, TLSREC_AD_INTERNAL_ERROR, TLSF_R_OTHER);
	if (f->out_off == f->out_len)
		f->out_off = f->out_len = 0;
	memcpy(f->out + f->out_len, rec, (size_t)n);
	f->out_len += (size_t)n;
	f->key_update_owed = false;
	f->key_updates_tx++;
	return 0;
}

/* OpenSSL's state machine run while in init after SSL_key_update
 * (handshake_func): our KeyUpdate sealed (once) and sent; 1, or -1 (the
 * socket would block or failed: WANT_WRITE, SYSCALL) */
static int key_update_send(struct tlsf *f)
{
	if (f->key_update_owed && key_update_queue(f) < 0)
		return -1;
	if (f->out_off < f->out_len && flush(f) < 0)
		return -1;
	f->alert_owed = false;
	f->in_init = false;
	return 1;
}

/* ssl3_read_bytes for application data: 1 with *readbytes, or what the
 * call returns */
static int read_internal(struct tlsf *f, uint8_t *buf, size_t num, bool peek, size_t *readbytes)
{
	struct tlsrec_ev ev;

	/* (*readbytes set only with data: libssl leaves the caller's value
	 * on every other return) */
	call_begins(f);
	if (f->shutdown & TLSF_RECEIVED_SHUTDOWN) {
		f->rwstate = RW_NOTHING;
		return 0;
	}
	if (f->failed)
		return -1;
	/* ssl3_read_bytes: the state machine first while in init (our
	 * KeyUpdate of SSL_key_update) */
	if (f->in_init && key_update_send(f) < 0)
		return -1;
	for (;;) {
		if (f->app_len) {
			if (num == 0)
				return 0;
			size_t n = num < f->app_len ? num : f->app_len;
			memcpy(buf, f->app, n);
			if (!peek) {
				f->app += n;
				f->app_len -= n;
			}
			*readbytes = n;
			f->rwstate = RW_NOTHING;
			return 1;
		}
		int rc = next_event(f, &ev);
		if (rc <= 0)
			return rc;
		switch (ev.what) {
		case TLSREC_EV_DATA:
			f->app = ev.data; /* valid until the reader's next call: after it is given */
			f->app_len = ev.len;
			continue; /* an empty record: OpenSSL reads on */
		case TLSREC_EV_CLOSE:
			f->shutdown |= TLSF_RECEIVED_SHUTDOWN;
			f->warn_alert = TLSREC_AD_CLOSE_NOTIFY;
			f->rwstate = RW_NOTHING;
			return 0;
		case TLSREC_EV_ALERT:
			/* SSLfatal_data(SSL_AD_NO_ALERT, ...): nothing sent */
			f->shutdown |= TLSF_RECEIVED_SHUTDOWN;
			f->rwstate = RW_NOTHING;
			fatal(f, -1, TLSF_R_ALERT_OFFSET + ev.alert);
			return 0;
		case TLSREC_EV_TICKET:
		case TLSREC_EV_KEY_UPDATE:
		case TLSREC_EV_RENEGOTIATE:
			rc = on_post_handshake(f, &ev, true);
			if (rc <= 0)
				return rc;
			continue;
		default:
			continue;
		}
	}
}

static int read_int(struct tlsf *f, void *buf, int num, bool peek)
{
	size_t readbytes;

	if (num < 0) {
		call_begins(f);
		return raise_error(f, TLSF_R_BAD_LENGTH);
	}
	int rc = read_internal(f, buf, (size_t)num, peek, &readbytes);
	return rc > 0 ? (int)readbytes : rc;
}

int tlsf_read(struct tlsf *f, void *buf, int num)
{
	return read_int(f, buf, num, false);
}

int tlsf_peek(struct tlsf *f, void *buf, int num)
{
	return read_int(f, buf, num, true);
}

int tlsf_read_ex(struct tlsf *f, void *buf, size_t num, size_t *readbytes)
{
	int rc = read_internal(f, buf, num, false, readbytes);
	return rc > 0 ? 1 : 0;
}

int tlsf_peek_ex(struct tlsf *f, void *buf, size_t num, size_t *readbytes)
{
	int rc = read_internal(f, buf, num, true, readbytes);
	return rc > 0 ? 1 : 0;
}

int tlsf_pending(const struct tlsf *f)
{
	return (int)f->app_len;
}

/* SSL_has_pending: data opened and not given, or bytes of a record read
 * from the socket and not yet processed (OpenSSL's read buffer: the bytes
 * of a read it has not finished, so not a whole header alone, which
 * ssl3_read_n has handed on: RECORD_LAYER_read_pending is 0 while the
 * body is awaited) */
int tlsf_has_pending(const struct tlsf *f)
{
	return f->app_len > 0 || (f->in_len > 0 && f->in_len != TLSREC_HEADER);
}

/* ------------------------------------------------------------ writing */

/* ssl3_write_bytes for application data: 1 with *written, or what the
 * call returns */
static int write_internal(struct tlsf *f, const uint8_t *buf, size_t len, size_t *written)
{
	*written = 0;
	call_begins(f);
	f->rwstate = RW_NOTHING;
	if (f->shutdown & TLSF_SENT_SHUTDOWN)
		return raise_error(f, TLSF_R_PROTOCOL_IS_SHUTDOWN);
	size_t tot = f->wnum;
	if (len < f->wnum || (f->wpend_tot && len < f->wnum + f->wpend_tot))
		return fatal(f, TLSREC_AD_INTERNAL_ERROR, TLSF_R_BAD_LENGTH);
	f->wnum = 0;
	if (f->failed)
		return -1;
	/* what is owed before new data: an alert or our KeyUpdate not all
	 * sent, the KeyUpdate the peer asked for (the state machine runs
	 * first when no data record is half sent) */
	if (f->wpend_tot == 0) {
		if (f->key_update_owed && f->version == TLSREC_V13) {
			if (key_update_queue(f) < 0)
				return -1;
			f->in_init = true; /* ssl3_write_bytes: until it is sent */
		}
		if (f->out_off < f->out_len && flush(f) < 0) {
			f->wnum = tot;
			return -1;
		}
		f->alert_owed = false;
		f->in_init = false;
	} else {
		if ((!(f->mode & TLSF_MODE_ACCEPT_MOVING_WRITE_BUFFER) && f->wpend_buf != buf + tot))
			return fatal(f, TLSREC_AD_INTERNAL_ERROR, TLSF_R_BAD_WRITE_RETRY);
		if (flush(f) < 0) {
			f->wnum = tot;
			return -1;
		}
		tot += f->wpend_tot;
		f->wpend_tot = 0;
		f->alert_owed = false;
	}
	if (tot == len) {
		*written = tot;
		return 1;
	}
	for (;;) {
		size_t n = len - tot, frag = n < TLSREC_MAX_PLAIN ? n : TLSREC_MAX_PLAIN;
		if (seal_out(f, TLSREC_CT_DATA, buf + tot, frag) < 0)
			return fatal(f, TLSREC_AD_INTERNAL_ERROR, TLSF_R_OTHER);
		f->wpend_buf = buf + tot;
		f->wpend_tot = frag;
		if (flush(f) < 0) {
			f->wnum = tot;
			return -1;
		}
		f->wpend_tot = 0;
		if (frag == n || (f->mode & TLSF_MODE_ENABLE_PARTIAL_WRITE)) {
			*written = tot + frag;
			return 1;
		}
		tot += frag;
	}
}

int tlsf_write(struct tlsf *f, const void *buf, int num)
{
	size_t written;

	if (num < 0) {
		call_begins(f);
		return raise_error(f, TLSF_R_BAD_LENGTH);
	}
	int rc = write_internal(f, buf, (size_t)num, &written);
	return rc > 0 ? (int)written : rc;
}

int tlsf_write_ex(struct tlsf *f, const void *buf, size_t num, size_t *written)
{
	int rc = write_internal(f, buf, num, written);
	return rc > 0 ? 1 : 0;
}

/* ------------------------------------------------------------ shutdown */

/* ssl3_read_bytes(type 0) of ssl3_shutdown waiting for the peer's
 * close_notify: application data (given or not) is a fatal error
 * (SSL_R_APPLICATION_DATA_AFTER_CLOSE_NOTIFY, no alert: ours was sent),
 * post-handshake messages are thrown away */
static void read_for_shutdown(struct tlsf *f)
{
	struct tlsrec_ev ev;

	if (f->failed)
		return;
	for (;;) {
		if (f->app_len) {
			f->app_len = 0;
			f->rwstate = RW_NOTHING;
			fatal(f, TLSREC_AD_UNEXPECTED_MESSAGE, TLSF_R_APPLICATION_DATA_AFTER_CLOSE_NOTIFY);
			return;
		}
		if (next_event(f, &ev) <= 0)
			return;
		switch (ev.what) {
		case TLSREC_EV_DATA:
			if (ev.len == 0)
				continue;
			f->rwstate = RW_NOTHING;
			fatal(f, TLSREC_AD_UNEXPECTED_MESSAGE, TLSF_R_APPLICATION_DATA_AFTER_CLOSE_NOTIFY);
			return;
		case TLSREC_EV_CLOSE:
			f->shutdown |= TLSF_RECEIVED_SHUTDOWN;
			f->warn_alert = TLSREC_AD_CLOSE_NOTIFY;
			f->rwstate = RW_NOTHING;
			return;
		case TLSREC_EV_ALERT:
			f->shutdown |= TLSF_RECEIVED_SHUTDOWN;
			f->rwstate = RW_NOTHING;
			fatal(f, -1, TLSF_R_ALERT_OFFSET + ev.alert);
			return;
		case TLSREC_EV_TICKET:
		case TLSREC_EV_KEY_UPDATE:
		case TLSREC_EV_RENEGOTIATE:
			if (on_post_handshake(f, &ev, false) <= 0)
				return;
			continue;
		default:
			continue;
		}
	}
}

int tlsf_shutdown(struct tlsf *f)
{
	call_begins(f);
	if (f->failed || f->in_init)
		return raise_error(f, R_SHUTDOWN_WHILE_IN_INIT);
	if (!(f->shutdown & TLSF_SENT_SHUTDOWN)) {
		f->shutdown |= TLSF_SENT_SHUTDOWN;
		send_alert(f, ALERT_WARNING, TLSREC_AD_CLOSE_NOTIFY);
		if (f->alert_owed)
			return -1;
	} else if (f->alert_owed) {
		/* ssl3_dispatch_alert while a data record is half sent:
		 * ssl3_write_pending sees another type and buffer */
		if (f->wpend_tot)
			return fatal(f, TLSREC_AD_INTERNAL_ERROR, TLSF_R_BAD_WRITE_RETRY);
		if (flush(f) < 0)
			return -1;
		f->alert_owed = false;
	} else if (!(f->shutdown & TLSF_RECEIVED_SHUTDOWN)) {
		read_for_shutdown(f);
		if (!(f->shutdown & TLSF_RECEIVED_SHUTDOWN))
			return -1;
	}
	return f->shutdown == (TLSF_SENT_SHUTDOWN | TLSF_RECEIVED_SHUTDOWN) && !f->alert_owed ? 1 : 0;
}

int tlsf_seal_goodbye(struct tlsf *f, uint8_t *out, size_t cap)
{
	if (f->failed || f->in_init || f->shutdown || f->alert_owed || f->wpend_tot || f->out_off < f->out_len)
		return -1;
	int n = tlsrec_seal_close_notify(&f->tx, out, cap);
	if (n > 0)
		f->shutdown |= TLSF_SENT_SHUTDOWN;
	return n;
}

int tlsf_get_shutdown(const struct tlsf *f)
{
	return f->shutdown;
}

void tlsf_set_shutdown(struct tlsf *f, int mode)
{
	f->shutdown = mode;
}

int tlsf_get_error(const struct tlsf *f, int ret)
{
	if (ret > 0)
		return TLSF_ERROR_NONE;
	if (f->err_reason >= 0)
		return TLSF_ERROR_SSL;
	if (f->io_retry && f->rwstate == RW_READING)
		return TLSF_ERROR_WANT_READ;
	if (f->io_retry && f->rwstate == RW_WRITING)
		return TLSF_ERROR_WANT_WRITE;
	/* OpenSSL 3.0 asks this whatever ret is: a write after the peer's
	 * close_notify (or fatal alert: warn_alert stays 0) that failed
	 * for another reason says ZERO_RETURN */
	if ((f->shutdown & TLSF_RECEIVED_SHUTDOWN) && f->warn_alert == TLSREC_AD_CLOSE_NOTIFY)
		return TLSF_ERROR_ZERO_RETURN;
	return TLSF_ERROR_SYSCALL;
}

int tlsf_last_reason(const struct tlsf *f)
{
	return f->err_reason;
}

int tlsf_want(const struct tlsf *f)
{
	return f->rwstate == RW_WRITING ? 2 : f->rwstate == RW_READING ? 3 : 1;
}

/* ------------------------------------------------------------ SSL_key_update */

#define R_WRONG_SSL_VERSION 266
#define R_INVALID_KEY_UPDATE_TYPE 120
#define R_STILL_IN_INIT 121

int tlsf_key_update(struct tlsf *f, int type)
{
	call_begins(f);
	int why = f->version != TLSREC_V13	 ? R_WRONG_SSL_VERSION
		  : type != 0 && type != 1 ? R_INVALID_KEY_UPDATE_TYPE
		  : f->failed || f->in_init ? R_STILL_IN_INIT /* !SSL_is_init_finished */
		  : f->wpend_tot	     ? TLSF_R_BAD_WRITE_RETRY
					     : 0;
	if (why) {
		raise_error(f, why);
		return 0;
	}
	f->key_update_owed = true;
	f->key_update_requested = type == 1;
	f->in_init = true;
	return 1;
}

int tlsf_key_update_type(const struct tlsf *f)
{
	return f->key_update_owed ? f->key_update_requested : -1;
}

int tlsf_do_handshake(struct tlsf *f)
{
	call_begins(f);
	if (!f->in_init)
		return 1;
	if (f->failed)
		return -1;
	return key_update_send(f);
}

int tlsf_in_init(const struct tlsf *f)
{
	return f->in_init || f->failed; /* (ossl_statem_fatal: in init) */
}

/* ------------------------------------------------------------ exporter */

static const EVP_MD *md_of(uint16_t cipher)
{
	return tlsrec_hash_len(cipher) == 48 ? EVP_sha384() : EVP_sha256();
}

/* HKDF-Expand-Label(secret, label, context, out_len) (RFC 8446 7.1) */
static int expand_label(const EVP_MD *md, const uint8_t *secret, size_t secret_len, const char *label,
			size_t llen, const uint8_t *ctx, size_t ctx_len, uint8_t *out, size_t out_len)
{
	uint8_t info[2 + 1 + 255 + 1 + 64];

	if (llen > 255 - 6 || ctx_len > 64 || out_len > 0xffff)
		return -1;
	size_t n = 0;
	info[n++] = (uint8_t)(out_len >> 8);
	info[n++] = (uint8_t)out_len;
	info[n++] = (uint8_t)(6 + llen);
	memcpy(info + n, "tls13 ", 6);
	memcpy(info + n + 6, label, llen);
	n += 6 + llen;
	info[n++] = (uint8_t)ctx_len;
	memcpy(info + n, ctx, ctx_len);
	n += ctx_len;

	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	EVP_KDF_CTX *kctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
	int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY;
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode),
		OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)EVP_MD_get0_name(md), 0),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)secret, secret_len),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, n),
		OSSL_PARAM_construct_end(),
	};
	int ok = kctx && EVP_KDF_derive(kctx, out, out_len, params) > 0;
	EVP_KDF_CTX_free(kctx);
	EVP_KDF_free(kdf);
	return ok ? 0 : -1;
}

/* RFC 8446 7.5: HKDF-Expand-Label(Derive-Secret(exporter, label, ""),
 * "exporter", Hash(context), length); OpenSSL hashes an empty context
 * when the program gave none */
static int export13(struct tlsf *f, uint8_t *out, size_t olen, const char *label, size_t llen,
		    const uint8_t *context, size_t contextlen, int use_context)
{
	const EVP_MD *md = md_of(f->cipher);
	uint8_t empty_hash[64], ctx_hash[64], secret[64];
	unsigned hlen = 0, elen = 0;

	if (!use_context)
		contextlen = 0;
	if (!EVP_Digest(context ? context : (const uint8_t *)"", contextlen, ctx_hash, &hlen, md, NULL) ||
	    !EVP_Digest("", 0, empty_hash, &elen, md, NULL))
		return 0;
	int rc = expand_label(md, f->st.exporter, f->st.exporter_len, label, llen, empty_hash, elen, secret, hlen);
	if (rc == 0)
		rc = expand_label(md, secret, hlen, "exporter", 8, ctx_hash, hlen, out, olen);
	OPENSSL_cleanse(secret, sizeof(secret));
	return rc == 0;
}

/* RFC 5705: PRF(master, label, client_random + server_random [+ length +
 * context]); OpenSSL refuses the labels of the key schedule */
static int export12(struct tlsf *f, uint8_t *out, size_t olen, const char *label, size_t llen,
		    const uint8_t *context, size_t contextlen, int use_context)
{
	static const char *const reserved[] = {"client finished", "server finished", "master secret",
					       "extended master secret", "key expansion"};
	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
		size_t rl = strlen(reserved[i]);
		if (llen >= rl && memcmp(label, reserved[i], rl) == 0) {
			f->err_reason = TLSF_R_TLS_ILLEGAL_EXPORTER_LABEL;
			return 0;
		}
	}
	if (contextlen > 0xffff || llen > 1024 || contextlen > 4096)
		return 0;
	uint8_t seed[1024 + 64 + 2 + 4096];
	size_t n = 0;
	memcpy(seed, label, llen);
	n += llen;
	memcpy(seed + n, f->st.client_random, 32);
	memcpy(seed + n + 32, f->st.server_random, 32);
	n += 64;
	if (use_context) {
		seed[n++] = (uint8_t)(contextlen >> 8);
		seed[n++] = (uint8_t)contextlen;
		if (contextlen)
			memcpy(seed + n, context, contextlen);
		n += contextlen;
	}
	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "TLS1-PRF", NULL);
	EVP_KDF_CTX *kctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST,
						 (char *)EVP_MD_get0_name(md_of(f->cipher)), 0),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SECRET, (void *)f->st.exporter,
						  f->st.exporter_len),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SEED, seed, n),
		OSSL_PARAM_construct_end(),
	};
	int ok = kctx && EVP_KDF_derive(kctx, out, olen, params) > 0;
	EVP_KDF_CTX_free(kctx);
	EVP_KDF_free(kdf);
	return ok;
}

int tlsf_export_keying_material(struct tlsf *f, uint8_t *out, size_t olen, const char *label, size_t llen,
				const uint8_t *context, size_t contextlen, int use_context)
{
	call_begins(f);
	if (f->version == TLSREC_V13)
		return export13(f, out, olen, label, llen, context, contextlen, use_context);
	return export12(f, out, olen, label, llen, context, contextlen, use_context);
}

/* ------------------------------------------------------------ getters */

int tlsf_version(const struct tlsf *f)
{
	return f->version;
}

const char *tlsf_version_string(const struct tlsf *f)
{
	return f->version == TLSREC_V13 ? "TLSv1.3" : "TLSv1.2";
}

/* the suite the message carries (TLS 1.2: its key exchange and
 * authentication, which the kTLS cipher does not say) */
uint16_t tlsf_cipher_id(const struct tlsf *f)
{
	return f->st.suite;
}

const char *tlsf_cipher_name(const struct tlsf *f)
{
	switch (tlsf_cipher_id(f)) {
	case 0x1301: return "TLS_AES_128_GCM_SHA256";
	case 0x1302: return "TLS_AES_256_GCM_SHA384";
	case 0x1303: return "TLS_CHACHA20_POLY1305_SHA256";
	case 0xc02b: return "ECDHE-ECDSA-AES128-GCM-SHA256";
	case 0xc02f: return "ECDHE-RSA-AES128-GCM-SHA256";
	case 0xc02c: return "ECDHE-ECDSA-AES256-GCM-SHA384";
	case 0xc030: return "ECDHE-RSA-AES256-GCM-SHA384";
	case 0xcca9: return "ECDHE-ECDSA-CHACHA20-POLY1305";
	case 0xcca8: return "ECDHE-RSA-CHACHA20-POLY1305";
	}
	return "(NONE)";
}

void tlsf_alpn(const struct tlsf *f, const uint8_t **data, unsigned *len)
{
	*data = f->st.alpn.len ? f->st.alpn.p : NULL;
	*len = f->st.alpn.len;
}

size_t tlsf_servername(const struct tlsf *f, char *out, size_t cap)
{
	if (!f->st.sni.len || cap == 0)
		return 0;
	size_t n = f->st.sni.len < cap - 1 ? f->st.sni.len : cap - 1;
	memcpy(out, f->st.sni.p, n);
	out[n] = 0;
	return f->st.sni.len;
}

static size_t copy_out(const uint8_t *src, size_t len, void *buf, size_t count)
{
	memcpy(buf, src, count < len ? count : len);
	return len;
}

size_t tlsf_finished(const struct tlsf *f, void *buf, size_t count)
{
	return copy_out(f->st.finished, f->st.finished_len, buf, count);
}

size_t tlsf_peer_finished(const struct tlsf *f, void *buf, size_t count)
{
	return copy_out(f->st.peer_finished, f->st.peer_finished_len, buf, count);
}

/* SSL_get_client_random: outlen 0 asks for the length */
size_t tlsf_client_random(const struct tlsf *f, uint8_t *out, size_t outlen)
{
	if (outlen == 0)
		return 32;
	return copy_out(f->st.client_random, 32, out, outlen) > outlen ? outlen : 32;
}

size_t tlsf_server_random(const struct tlsf *f, uint8_t *out, size_t outlen)
{
	if (outlen == 0)
		return 32;
	return copy_out(f->st.server_random, 32, out, outlen) > outlen ? outlen : 32;
}

size_t tlsf_ticket(const struct tlsf *f, const uint8_t **msg)
{
	*msg = f->ticket;
	return f->ticket_len;
}

void tlsf_wipe(struct tlsf *f)
{
	tlsrec_wipe(&f->tx);
	tlsrec_wipe(&f->rx);
	tlsrec_reader_wipe(&f->rd);
	tlsx_wipe(&f->st);
	OPENSSL_cleanse(f->in, sizeof(f->in));
	OPENSSL_cleanse(f->out, sizeof(f->out));
	OPENSSL_cleanse(f->ticket, sizeof(f->ticket));
	f->in_len = f->out_len = f->out_off = f->app_len = f->ticket_len = 0;
	f->app = NULL;
}
