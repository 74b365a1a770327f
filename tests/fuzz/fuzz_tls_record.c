/*
 * fuzz_tls_record.c - libFuzzer harness for the record layer's reader
 * (shim/tls_record.c: tlsrec_read over tlsrec_frame and tlsrec_open, the
 * handshake-message assembly, alerts, KeyUpdate) and the wire counter
 * (tlsrec_count): what a hostile or broken server could send on a
 * connection ours carries.
 *
 * Input: a 1-byte control header, then the body.
 *   [0]  bits 0-1: the cipher (0 AES-128-GCM, 1 AES-256-GCM, 2 and 3
 *        ChaCha20-Poly1305); bit 2: TLS 1.2 (else 1.3); bit 3: sealed
 *        mode (else raw); bits 4-7: the split stride (how many bytes the
 *        reader is given more at a time, 0: all at once)
 *   raw:    the body is the byte stream as it came off the socket (any
 *           record of it fails its tag: this drives the framer, the
 *           limits and the error paths);
 *   sealed: the body is a list of records to seal as the peer would,
 *           each [content type - 20 (low 2 bits)][length, 2 bytes
 *           big-endian, at most 2^14][the content]; they are sealed one at
 *           a time, each fed to the reader before the next is sealed, and
 *           the peer's keys follow a KeyUpdate the reader reports (so the
 *           fuzzer reaches everything after a successful open).
 *
 * abort() unless: the reader reads only the bytes given (ASan: each piece
 * in a buffer of its own size); consumes only whole records (used is 0 or
 * a record's length, never more than given) and asks for more only with a
 * need above what it has, up to a whole record's maximum; an error is an
 * alert number (never one of the caller's errors: the reader's buffers
 * are its own) and ends the connection; data is at most 2^14 bytes and, in
 * sealed mode, exactly what was sealed as data; a ticket is one whole
 * NewSessionTicket message; the receiving sequence number moves by one per
 * record consumed (back to 0 at a KeyUpdate); and the counter, fed the same
 * raw bytes, counts the records the framer delimits, void exactly where
 * the framer refuses a header.
 */
#include "fuzz.h"
#include "tls_record.h"

#include <stdbool.h>

static uint8_t hs[1 << 12];

struct run {
	struct tlsrec_reader r;
	struct kp_tls_dir rx, peer; /* the peer's sending keys: what rx opens */
	uint64_t records;           /* consumed under the current keys */
	uint64_t seq0;
	bool dead;
};

static void init(struct run *u, uint8_t ctl)
{
	static const uint16_t ciphers[4] = {TLSREC_AES_GCM_128, TLSREC_AES_GCM_256, TLSREC_CHACHA20_POLY1305,
					    TLSREC_CHACHA20_POLY1305};
	uint16_t cipher = ciphers[ctl & 3];
	uint8_t secret[48], cr[32], sr[32];

	for (int i = 0; i < 48; i++)
		secret[i] = (uint8_t)(i * 13 + 5);
	memset(cr, 3, 32);
	memset(sr, 4, 32);
	memset(u, 0, sizeof(*u));
	u->seq0 = 3;
	if (ctl & 4) {
		struct kp_tls_dir client;
		INVARIANT(tlsrec_init12(&client, &u->rx, cipher, secret, 48, cr, sr, u->seq0) == 0, "init12");
	} else {
		INVARIANT(tlsrec_init13(&u->rx, cipher, secret, tlsrec_hash_len(cipher), u->seq0) == 0, "init13");
	}
	u->peer = u->rx;
	tlsrec_reader_init(&u->r, &u->rx, hs, sizeof(hs));
}

/* feed the reader stream[0..len) in pieces of `stride` more bytes, until
 * it needs more than there is; *used_all: the bytes it consumed; the
 * events through check (sealed mode: what was sealed) */
static void feed(struct run *u, const uint8_t *stream, size_t len, size_t stride, const uint8_t *sealed_data,
		 size_t sealed_len, bool sealed_is_data, size_t *used_all)
{
	size_t off = 0, avail = stride ? stride : len;
	*used_all = 0;
	while (!u->dead) {
		if (avail > len - off)
			avail = len - off;
		uint8_t *piece = (uint8_t *)fz_copy(stream + off, avail);
		struct tlsrec_ev ev;
		size_t used;
		uint64_t seq = tlsrec_seq(&u->rx);
		int rc = tlsrec_read(&u->r, piece, avail, &used, &ev);
		free(piece);
		INVARIANT(used <= avail, "used %zu of %zu", used, avail);
		if (rc < 0) {
			/* the connection is dead: what was consumed no longer matters */
			INVARIANT(rc > -256, "rc %d", rc);
			u->dead = true;
			break;
		}
		INVARIANT(rc == 0, "rc %d", rc);
		if (used) {
			size_t need;
			INVARIANT(tlsrec_frame(u->rx.version, stream + off, avail, &need) == (int)used, "a whole record");
			INVARIANT(ev.what == TLSREC_EV_KEY_UPDATE ? tlsrec_seq(&u->rx) == 0 : tlsrec_seq(&u->rx) == seq + 1,
				  "seq %llu after %llu", (unsigned long long)tlsrec_seq(&u->rx), (unsigned long long)seq);
		} else if (ev.what != TLSREC_EV_MORE) {
			INVARIANT(ev.what == TLSREC_EV_TICKET || ev.what == TLSREC_EV_KEY_UPDATE ||
					  ev.what == TLSREC_EV_RENEGOTIATE,
				  "event %d without a record", ev.what);
			INVARIANT(ev.what == TLSREC_EV_KEY_UPDATE ? tlsrec_seq(&u->rx) == 0 : tlsrec_seq(&u->rx) == seq,
				  "seq moved without a record");
		}
		switch (ev.what) {
		case TLSREC_EV_MORE:
			INVARIANT(ev.need > avail && ev.need <= TLSREC_HEADER + TLSREC_MAX_BODY_12, "need %zu", ev.need);
			if (off + avail == len) {
				*used_all = off;
				return;
			}
			avail = stride ? avail + stride : len - off;
			continue;
		case TLSREC_EV_DATA:
			INVARIANT(ev.len <= TLSREC_MAX_PLAIN, "data %zu", ev.len);
			if (sealed_data)
				INVARIANT(sealed_is_data && ev.len == sealed_len && !memcmp(ev.data, sealed_data, ev.len),
					  "not what was sealed");
			break;
		case TLSREC_EV_TICKET:
			INVARIANT(ev.len >= 4 && ev.data[0] == 4 &&
					  ev.len == 4 + ((size_t)ev.data[1] << 16 | (size_t)ev.data[2] << 8 | ev.data[3]),
				  "ticket");
			break;
		case TLSREC_EV_KEY_UPDATE:
			INVARIANT(u->rx.version == TLSREC_V13, "KeyUpdate in 1.2");
			tlsrec_key_update(&u->peer);
			INVARIANT(!memcmp(u->peer.key, u->rx.key, sizeof(u->rx.key)), "keys");
			break;
		case TLSREC_EV_RENEGOTIATE:
			INVARIANT(u->rx.version == TLSREC_V12, "HelloRequest in 1.3");
			break;
		case TLSREC_EV_ALERT:
		case TLSREC_EV_CLOSE:
		case TLSREC_EV_NONE:
			break;
		}
		off += used;
		if (used)
			avail = stride ? stride : len - off;
	}
	*used_all = off;
}

/* what the counter takes for a record: a TLS 1.2 header (tlsrec_frame)
 * of one of the four content types */
static int frame_counted(const uint8_t *p, size_t len, size_t *need)
{
	if (len >= TLSREC_HEADER && (p[0] < TLSREC_CT_CCS || p[0] > TLSREC_CT_DATA))
		return -1;
	return tlsrec_frame(TLSREC_V12, p, len, need);
}

static void raw(struct run *u, const uint8_t *body, size_t len, size_t stride)
{
	size_t used;
	feed(u, body, len, stride, NULL, 0, false, &used);

	/* the counter against the framer on the same bytes */
	struct tlsrec_counter c = {0};
	size_t split = len / 2;
	tlsrec_count(&c, body, split);
	tlsrec_count(&c, body + split, len - split);
	uint64_t frames = 0;
	size_t off = 0, need;
	int f;
	while ((f = frame_counted(body + off, len - off, &need)) > 0) {
		off += (size_t)f;
		frames++;
	}
	INVARIANT(c.records == frames, "counted %llu, framed %llu", (unsigned long long)c.records,
		  (unsigned long long)frames);
	INVARIANT(c.bad == (f < 0), "bad %d, frame %d", c.bad, f);
	INVARIANT(c.bad || tlsrec_count_at_boundary(&c) == (off == len), "boundary");
}

static void sealed(struct run *u, const uint8_t *body, size_t len, size_t stride)
{
	static uint8_t rec[TLSREC_MAX_SEALED];
	size_t off = 0;
	/* bytes a record left unread (a partial message's record is
	 * consumed: the reader keeps nothing of the stream) */
	while (!u->dead && len - off >= 3) {
		uint8_t type = (uint8_t)(TLSREC_CT_CCS + (body[off] & 3));
		size_t clen = (size_t)body[off + 1] << 8 | body[off + 2];
		off += 3;
		if (clen > len - off)
			clen = len - off;
		if (clen > TLSREC_MAX_PLAIN)
			clen = TLSREC_MAX_PLAIN;
		int n = tlsrec_seal(&u->peer, type, body + off, clen, rec, sizeof(rec));
		INVARIANT(n > 0, "seal %d", n);
		size_t used;
		feed(u, rec, (size_t)n, stride, body + off, clen, type == TLSREC_CT_DATA, &used);
		INVARIANT(u->dead || used == (size_t)n, "a sealed record left unread: %zu of %d", used, n);
		off += clen;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct run *u;

	if (size < 1)
		return 0;
	u = malloc(sizeof(*u));
	if (!u)
		abort();
	init(u, data[0]);
	size_t stride = data[0] >> 4;
	if (data[0] & 8)
		sealed(u, data + 1, size - 1, stride);
	else
		raw(u, data + 1, size - 1, stride);
	tlsrec_reader_wipe(&u->r);
	tlsrec_wipe(&u->rx);
	tlsrec_wipe(&u->peer);
	free(u);
	return 0;
}
