/*
 * fuzz_tls_foreign.c - libFuzzer harness for the foreign engine
 * (shim/tls_foreign.c): a server (a peer of ours, tls_record.c) sends what
 * the input says, in pieces, the socket blocks, ends or fails where it
 * says, and the program's calls (reads, peeks, writes, shutdowns) come in
 * between.
 *
 * Input: [0] control: bits 0-1 the cipher (0 AES-128-GCM, 1 AES-256-GCM,
 * 2 and 3 ChaCha20-Poly1305), bit 2 TLS 1.2, bit 3
 * SSL_OP_IGNORE_UNEXPECTED_EOF, bit 4 SSL_MODE_AUTO_RETRY, bit 5
 * SSL_MODE_ENABLE_PARTIAL_WRITE, bit 6 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER,
 * bit 7 SSL_OP_NO_RENEGOTIATION; then events, each [op][arg] (op's low 4
 * bits; arg one byte, or two big-endian where a length):
 *   0 data (arg16 % 2^14+1 bytes)   1 NewSessionTicket (arg bytes)
 *   2 KeyUpdate (arg & 1: requested) 3 alert (level 1 + (arg & 1), arg >> 1)
 *   4 raw bytes (arg of the input)  5 release arg more bytes (0: all)
 *   6 EOF (arg & 1) or error        7 SSL_read(arg16)   8 SSL_peek(arg16)
 *   9 SSL_write(arg16; arg16 bit 15: from another buffer)
 *   10 SSL_shutdown                 11 the socket takes arg * 64 more bytes (255: any)
 *   12 a handshake record of arg input bytes (HelloRequest, garbage)
 *   13 an empty data record         14 hold: new bytes wait for a release
 *
 * abort() unless: the data the program reads (and peeks) is exactly the
 * server's data in order; SSL_get_error is one of OpenSSL's for the
 * answer; the shutdown bits are OpenSSL's two; whenever the engine
 * stands between records (nothing half read, alive, no forged bytes
 * sent), its receiving sequence number and key are the server's after the
 * last record it consumed; and what the server opens of the program's
 * writes is a prefix of what the program wrote.
 */
#include "fuzz.h"
#include "tls_foreign.h"

#include <stdbool.h>

#define WIRE (1 << 20)
#define MAX_RECS 4096

/* the bytes both sides send: period 4096, so that the bytes from
 * pattern + k % 4096 on are the stream's from k on */
static uint8_t pattern[1 << 16];

struct wire {
	uint8_t buf[WIRE];
	size_t len, off, visible;
	bool hold, eof, error;
	size_t room; /* (size_t)-1: any */
};

struct run {
	struct wire down, up;
	struct tlsf f;
	struct kp_tls_dir peer_tx, peer_rx;
	struct tlsrec_reader peer_rd;
	uint8_t peer_hs[1 << 14];
	/* the server's data, and what the program read of it */
	uint8_t sent[WIRE];
	size_t sent_len, read_len;
	/* where each record the server sealed ends, and the server's keys after it */
	size_t rec_end[MAX_RECS];
	uint64_t rec_seq[MAX_RECS];
	uint8_t rec_key[MAX_RECS][32];
	size_t nrec;
	bool forged; /* raw bytes went on the wire: record ends are void */
	bool peer_done; /* the server read the program's close_notify or an alert */
	/* the program's writes: how far acknowledged, what the server opened */
	size_t written, opened;
	size_t offered; /* the furthest byte a write call was given */
	uint8_t other[1 << 16]; /* the same bytes at another address */
};

static long w_read(void *ctx, uint8_t *buf, size_t cap)
{
	struct wire *w = &((struct run *)ctx)->down;
	if (w->off < w->visible) {
		size_t n = w->visible - w->off < cap ? w->visible - w->off : cap;
		memcpy(buf, w->buf + w->off, n);
		w->off += n;
		return (long)n;
	}
	if (w->error)
		return TLSF_IO_ERROR;
	if (w->eof && w->visible == w->len)
		return 0;
	return TLSF_IO_RETRY;
}

static long w_write(void *ctx, const uint8_t *buf, size_t len)
{
	struct wire *w = &((struct run *)ctx)->up;
	if (w->room == 0)
		return TLSF_IO_RETRY;
	size_t n = w->room < len ? w->room : len;
	if (n > WIRE - w->len)
		return TLSF_IO_ERROR;
	memcpy(w->buf + w->len, buf, n);
	w->len += n;
	if (w->room != (size_t)-1)
		w->room -= n;
	return (long)n;
}

static void down_put(struct run *u, const uint8_t *p, size_t n)
{
	struct wire *w = &u->down;
	if (n > WIRE - w->len)
		n = WIRE - w->len;
	memcpy(w->buf + w->len, p, n);
	w->len += n;
	if (!w->hold)
		w->visible = w->len;
}

/* the server seals a record; its keys after it are remembered */
static void peer_seal(struct run *u, uint8_t type, const uint8_t *p, size_t n)
{
	static uint8_t rec[TLSREC_MAX_SEALED];
	if (u->down.len + TLSREC_MAX_SEALED > WIRE || u->nrec == MAX_RECS)
		return;
	int len = tlsrec_seal(&u->peer_tx, type, p, n, rec, sizeof(rec));
	if (len <= 0)
		return;
	down_put(u, rec, (size_t)len);
	if (type == TLSREC_CT_DATA) {
		memcpy(u->sent + u->sent_len, p, n);
		u->sent_len += n;
	}
	if (type == TLSREC_CT_HANDSHAKE && n == 5 && p[0] == 24)
		tlsrec_key_update(&u->peer_tx);
	u->rec_end[u->nrec] = u->down.len;
	u->rec_seq[u->nrec] = tlsrec_seq(&u->peer_tx);
	memcpy(u->rec_key[u->nrec], u->peer_tx.key, 32);
	u->nrec++;
}

static void init(struct run *u, uint8_t ctl)
{
	static const uint16_t ciphers[4] = {TLSREC_AES_GCM_128, TLSREC_AES_GCM_256, TLSREC_CHACHA20_POLY1305,
					    TLSREC_CHACHA20_POLY1305};
	uint16_t cipher = ciphers[ctl & 3];
	struct tlsx_state st;
	uint8_t cs[48], ss[48];

	memset(&st, 0, sizeof(st));
	for (int i = 0; i < 48; i++) {
		cs[i] = (uint8_t)(i * 13 + 5);
		ss[i] = (uint8_t)(i * 7 + 1);
	}
	st.cipher = cipher;
	/* (the suite as the message carries it: the cipher's) */
	static const uint16_t suites12[4] = {0xc02b, 0xc030, 0xcca9, 0xcca8}, suites13[4] = {0x1301, 0x1302, 0x1303,
											     0x1303};
	st.suite = ctl & 4 ? suites12[ctl & 3] : suites13[ctl & 3];
	if (ctl & 4) {
		st.version = TLSREC_V12;
		tlsrec_init12(&st.tx, &st.rx, cipher, cs, 48, ss, ss + 16, 1);
		st.exporter_len = 48;
	} else {
		st.version = TLSREC_V13;
		size_t h = tlsrec_hash_len(cipher);
		tlsrec_init13(&st.tx, cipher, cs, h, 0);
		tlsrec_init13(&st.rx, cipher, ss, h, 0);
		st.exporter_len = (uint8_t)h;
	}
	u->peer_tx = st.rx;
	u->peer_rx = st.tx;
	tlsrec_reader_init(&u->peer_rd, &u->peer_rx, u->peer_hs, sizeof(u->peer_hs));
	struct tlsf_io io = {w_read, w_write, u};
	uint64_t opts = (ctl & 8 ? TLSF_OP_IGNORE_UNEXPECTED_EOF : 0) | (ctl & 0x80 ? TLSF_OP_NO_RENEGOTIATION : 0);
	uint32_t mode = (ctl & 0x10 ? TLSF_MODE_AUTO_RETRY : 0) | (ctl & 0x20 ? TLSF_MODE_ENABLE_PARTIAL_WRITE : 0) |
			(ctl & 0x40 ? TLSF_MODE_ACCEPT_MOVING_WRITE_BUFFER : 0);
	INVARIANT(tlsf_import(&u->f, &st, &io, opts, mode) == 0, "import");
	u->down.room = u->up.room = (size_t)-1;
}

/* the server opens what the program wrote: a prefix of its bytes */
static void peer_reads(struct run *u)
{
	while (!u->peer_done) {
		size_t used;
		struct tlsrec_ev ev;
		int rc = tlsrec_read(&u->peer_rd, u->up.buf + u->up.off, u->up.len - u->up.off, &used, &ev);
		/* the server may refuse an alert of ours (1.2's no_renegotiation
		 * warning), never a record's protection */
		INVARIANT(rc != -TLSREC_AD_BAD_RECORD_MAC, "the server could not open what ours sealed");
		if (rc < 0) {
			u->peer_done = true;
			break;
		}
		u->up.off += used;
		if (ev.what == TLSREC_EV_MORE)
			break;
		if (ev.what == TLSREC_EV_DATA) {
			INVARIANT(u->opened + ev.len <= u->offered, "bytes the program never wrote");
			for (size_t i = 0; i < ev.len; i++)
				INVARIANT(ev.data[i] == pattern[(u->opened + i) % 4096], "written byte %zu",
					  u->opened + i);
			u->opened += ev.len;
		}
		u->peer_done = ev.what == TLSREC_EV_CLOSE || ev.what == TLSREC_EV_ALERT;
	}
}

static void check_between_records(struct run *u)
{
	struct tlsf *f = &u->f;
	if (u->forged || f->failed || f->in_len || f->rd.hs_len != f->rd.hs_done || u->down.off == 0)
		return;
	for (size_t i = 0; i < u->nrec; i++)
		if (u->rec_end[i] == u->down.off) {
			INVARIANT(tlsrec_seq(&f->rx) == u->rec_seq[i], "rx seq %llu, server's %llu",
				  (unsigned long long)tlsrec_seq(&f->rx), (unsigned long long)u->rec_seq[i]);
			INVARIANT(!memcmp(f->rx.key, u->rec_key[i], 32), "rx key");
			return;
		}
}

static void program_call(struct run *u, int op, size_t n)
{
	static uint8_t buf[1 << 16];
	struct tlsf *f = &u->f;
	int ret;

	if (op == 7 || op == 8) {
		n &= 0x7fff;
		ret = op == 7 ? tlsf_read(f, buf, (int)n) : tlsf_peek(f, buf, (int)n);
		INVARIANT(ret <= (int)n, "read %d of %zu", ret, n);
		if (ret > 0) {
			INVARIANT(u->read_len + (size_t)ret <= u->sent_len, "data never sent");
			INVARIANT(!memcmp(buf, u->sent + u->read_len, (size_t)ret), "data not as sent");
			if (op == 7)
				u->read_len += (size_t)ret;
		}
	} else if (op == 9) {
		const uint8_t *src = (n & 0x8000 ? u->other : pattern) + u->written % 4096;
		n &= 0x7fff;
		if (n > sizeof(pattern) - 4096)
			n = sizeof(pattern) - 4096;
		if (u->written + n > u->offered)
			u->offered = u->written + n;
		ret = tlsf_write(f, src, (int)n);
		INVARIANT(ret <= (int)n, "wrote %d of %zu", ret, n);
		if (ret > 0)
			u->written += (size_t)ret;
	} else {
		ret = tlsf_shutdown(f);
		INVARIANT(ret >= -1 && ret <= 1, "shutdown %d", ret);
	}
	int err = tlsf_get_error(f, ret);
	INVARIANT(err == TLSF_ERROR_NONE ? ret > 0 : ret <= 0, "error %d for %d", err, ret);
	INVARIANT(err == 0 || err == 1 || err == 2 || err == 3 || err == 5 || err == 6, "error %d", err);
	INVARIANT((tlsf_get_shutdown(f) & ~3) == 0, "shutdown bits");
	INVARIANT(tlsf_pending(f) >= 0 && (size_t)tlsf_pending(f) <= u->sent_len - u->read_len, "pending");
	check_between_records(u);
	peer_reads(u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct run u;

	if (size < 1)
		return 0;
	if (!pattern[1])
		for (size_t i = 0; i < sizeof(pattern); i++)
			pattern[i] = (uint8_t)((i % 4096) * 31 + 7);
	memset(&u, 0, sizeof(u));
	init(&u, data[0]);
	/* the other buffer holds the same bytes: a write from it is the same
	 * write at another address (ACCEPT_MOVING_WRITE_BUFFER's case) */
	memcpy(u.other, pattern, sizeof(u.other));
	size_t i = 1;
	int calls = 0;
	while (i + 1 < size && calls < 4000) {
		int op = data[i] & 15;
		size_t arg = data[i + 1];
		i += 2;
		if ((op == 0 || op == 7 || op == 8 || op == 9) && i < size)
			arg = arg << 8 | data[i++];
		calls++;
		switch (op) {
		case 0: {
			size_t n = arg % (TLSREC_MAX_PLAIN + 1);
			uint8_t *p = (uint8_t *)fz_copy(pattern + (u.sent_len % 4096), n);
			peer_seal(&u, TLSREC_CT_DATA, p, n);
			free(p);
			break;
		}
		case 1: {
			uint8_t msg[4 + 255];
			msg[0] = 4;
			msg[1] = 0;
			msg[2] = 0;
			msg[3] = (uint8_t)arg;
			for (size_t k = 0; k < arg; k++)
				msg[4 + k] = (uint8_t)k;
			peer_seal(&u, TLSREC_CT_HANDSHAKE, msg, 4 + arg);
			break;
		}
		case 2: {
			uint8_t msg[5] = {24, 0, 0, 1, (uint8_t)(arg & 1)};
			if (u.peer_tx.version == TLSREC_V13)
				peer_seal(&u, TLSREC_CT_HANDSHAKE, msg, 5);
			break;
		}
		case 3: {
			uint8_t msg[2] = {(uint8_t)(1 + (arg & 1)), (uint8_t)(arg >> 1)};
			peer_seal(&u, TLSREC_CT_ALERT, msg, 2);
			break;
		}
		case 4: {
			size_t n = arg < size - i ? arg : size - i;
			down_put(&u, data + i, n);
			i += n;
			u.forged = u.forged || n > 0;
			break;
		}
		case 5:
			u.down.visible = arg == 0 || u.down.visible + arg > u.down.len ? u.down.len : u.down.visible + arg;
			if (arg == 0)
				u.down.hold = false;
			break;
		case 6:
			if (arg & 1)
				u.down.eof = true;
			else
				u.down.error = true;
			break;
		case 7:
		case 8:
		case 9:
		case 10:
			program_call(&u, op, arg);
			break;
		case 11:
			u.up.room = arg == 255 ? (size_t)-1 : arg * 64;
			break;
		case 12: {
			size_t n = arg < size - i ? arg : size - i;
			peer_seal(&u, TLSREC_CT_HANDSHAKE, data + i, n);
			i += n;
			break;
		}
		case 13:
			peer_seal(&u, TLSREC_CT_DATA, pattern, 0);
			break;
		case 14:
			u.down.hold = true;
			break;
		case 15: {
			/* the state passed on (tlsf_export) to a new engine in
			 * place, as the next process imports it: only at rest,
			 * and everything after holds as before */
			struct tlsx_state st;
			const char *why = NULL;
			if (tlsf_export(&u.f, &st, &why) == 0) {
				INVARIANT(!u.f.app_len && !u.f.in_len && u.f.out_off == u.f.out_len && !u.f.failed,
					  "exported not at rest");
				struct tlsf_io io = u.f.io;
				uint64_t opts = u.f.options;
				uint32_t mode = u.f.mode;
				INVARIANT(tlsf_import(&u.f, &st, &io, opts, mode) == 0, "re-import");
				tlsx_wipe(&st);
			} else {
				INVARIANT(why != NULL, "refused without a reason");
			}
			break;
		}
		default:
			break;
		}
	}
	tlsf_wipe(&u.f);
	return 0;
}
